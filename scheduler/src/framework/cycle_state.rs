//! `CycleState`: per-pod, per-cycle scratch data that PreFilter/PreScore plugins compute
//! once and Filter/Score read per node.

use std::any::Any;
use std::collections::{HashMap, HashSet};

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
#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn StateData>>,
    /// Filter plugins whose PreFilter returned Skip.
    pub skip_filter: HashSet<&'static str>,
    /// Score plugins whose PreScore returned Skip.
    pub skip_score: HashSet<&'static str>,
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

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores data under a key (usually the plugin's name plus a suffix).
    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    /// Reads data stored under a key.
    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        self.data
            .get(key)
            .and_then(|v| (**v).as_any().downcast_ref::<T>())
    }

    /// Mutable access to data stored under a key.
    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data
            .get_mut(key)
            .and_then(|v| (**v).as_any_mut().downcast_mut::<T>())
    }
}
