//! `CycleState`: per-pod, per-cycle scratch data that PreFilter/PreScore plugins compute
//! once and Filter/Score read per node.

use std::any::Any;

/// Data a plugin stores in the cycle state. Cloneable so preemption can simulate
/// removing pods on a copy.
pub trait StateData: Any + Send + Sync {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn StateData>;
    /// Upcast for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Mutable upcast for downcasting.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Scratch data for one scheduling cycle of one pod.
///
/// A handful of entries at most, read once per node per plugin: a small vector with
/// string compares beats hashing here.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(&'static str, Box<dyn StateData>)>,
    skip_filter: Vec<&'static str>,
    skip_score: Vec<&'static str>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            skip_filter: self.skip_filter.clone(),
            skip_score: self.skip_score.clone(),
        }
    }
}

/// Keys are `&'static str` constants: the pointer usually matches, so compare it first.
fn same_key(a: &'static str, b: &'static str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores data under a key (usually the plugin's name plus a suffix).
    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        match self.data.iter_mut().find(|(k, _)| same_key(k, key)) {
            Some(slot) => slot.1 = Box::new(value),
            None => self.data.push((key, Box::new(value))),
        }
    }

    /// Reads data stored under a key.
    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        self.data
            .iter()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| (**v).as_any().downcast_ref::<T>())
    }

    /// Mutable access to data stored under a key.
    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data
            .iter_mut()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| (**v).as_any_mut().downcast_mut::<T>())
    }

    /// Marks a filter plugin as skipped for this cycle (its PreFilter returned Skip).
    pub fn skip_filter(&mut self, plugin: &'static str) {
        if !self.skip_filter.iter().any(|p| same_key(p, plugin)) {
            self.skip_filter.push(plugin);
        }
    }

    /// True if the filter plugin is skipped.
    pub fn is_filter_skipped(&self, plugin: &'static str) -> bool {
        self.skip_filter.iter().any(|p| same_key(p, plugin))
    }

    /// Marks a score plugin as skipped for this cycle (its PreScore returned Skip).
    pub fn skip_score(&mut self, plugin: &'static str) {
        if !self.skip_score.iter().any(|p| same_key(p, plugin)) {
            self.skip_score.push(plugin);
        }
    }

    /// True if the score plugin is skipped.
    pub fn is_score_skipped(&self, plugin: &'static str) -> bool {
        self.skip_score.iter().any(|p| same_key(p, plugin))
    }
}
