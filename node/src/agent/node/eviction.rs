//! The hard eviction thresholds, as the kubelet's `--eviction-hard` spells
//! them (`memory.available<100Mi,nodefs.available<10%`): below a threshold
//! the node reports the matching pressure condition, and each threshold is
//! kept back from the node's allocatable (see `reserved`).
//!
//! Signals left out keep the kubelet's defaults; signals the kubelet knows
//! but skiff does not measure (`imagefs.*`, `nodefs.inodesFree`,
//! `pid.available`) and anything else are refused, so a flag never silently
//! means less than it says.

use std::fmt;
use std::str::FromStr;

use skiff_common::quantity::parse_scaled;

/// One threshold: an amount, or a share of the whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Bytes (`100Mi`).
    Bytes(u64),
    /// A fraction of capacity, 0 to 1 (`10%` is 0.1).
    Fraction(f64),
}

impl Threshold {
    /// The threshold in bytes of a resource whose capacity is `capacity`.
    pub fn bytes_of(self, capacity: u64) -> u64 {
        match self {
            Threshold::Bytes(b) => b.min(capacity),
            Threshold::Fraction(f) => (capacity as f64 * f) as u64,
        }
    }

    /// Whether `available` of `capacity` is below the threshold (an unknown
    /// capacity, 0, never is).
    pub fn crossed(self, available: u64, capacity: u64) -> bool {
        capacity > 0 && available < self.bytes_of(capacity)
    }
}

impl FromStr for Threshold {
    type Err = EvictionError;

    fn from_str(text: &str) -> Result<Self, EvictionError> {
        let bad = || EvictionError::Value(text.to_string());
        if let Some(percent) = text.strip_suffix('%') {
            let p: f64 = percent.trim().parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&p) {
                return Err(bad());
            }
            return Ok(Threshold::Fraction(p / 100.0));
        }
        let bytes = parse_scaled(text, 1).ok_or_else(bad)?;
        u64::try_from(bytes)
            .map(Threshold::Bytes)
            .map_err(|_| bad())
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Bytes(b) => write!(f, "{b}"),
            Threshold::Fraction(p) => write!(f, "{}%", p * 100.0),
        }
    }
}

/// What `--eviction-hard` could not be read as.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EvictionError {
    /// A term without `<`.
    #[error("eviction threshold {0:?} is not signal<value (e.g. memory.available<100Mi)")]
    Term(String),
    /// A signal skiff does not measure.
    #[error(
        "eviction signal {0:?} is not supported (supported: memory.available, nodefs.available)"
    )]
    Signal(String),
    /// A value that is neither a quantity nor a percentage from 0 to 100.
    #[error("eviction threshold value {0:?} is not a quantity or a percentage from 0% to 100%")]
    Value(String),
}

/// The hard eviction thresholds this node keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvictionHard {
    /// `memory.available`: memory kept free for the system.
    pub memory_available: Threshold,
    /// `nodefs.available`: the agent's file system kept free.
    pub nodefs_available: Threshold,
}

impl Default for EvictionHard {
    /// The kubelet's defaults on Linux.
    fn default() -> Self {
        EvictionHard {
            memory_available: Threshold::Bytes(100 << 20),
            nodefs_available: Threshold::Fraction(0.1),
        }
    }
}

impl FromStr for EvictionHard {
    type Err = EvictionError;

    fn from_str(text: &str) -> Result<Self, EvictionError> {
        let mut thresholds = EvictionHard::default();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (signal, value) = term
                .split_once('<')
                .ok_or_else(|| EvictionError::Term(term.to_string()))?;
            let value: Threshold = value.trim().parse()?;
            match signal.trim() {
                "memory.available" => thresholds.memory_available = value,
                "nodefs.available" => thresholds.nodefs_available = value,
                other => return Err(EvictionError::Signal(other.to_string())),
            }
        }
        Ok(thresholds)
    }
}

impl fmt::Display for EvictionHard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memory.available<{},nodefs.available<{}",
            self.memory_available, self.nodefs_available
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_spelling_reads_and_prints_back() {
        let t: EvictionHard = "memory.available<200Mi, nodefs.available<5%"
            .parse()
            .unwrap();
        assert_eq!(t.memory_available, Threshold::Bytes(200 << 20));
        assert_eq!(t.nodefs_available, Threshold::Fraction(0.05));
        assert_eq!(
            t.to_string(),
            "memory.available<209715200,nodefs.available<5%"
        );
        assert_eq!(t.to_string().parse::<EvictionHard>().unwrap(), t);
    }

    #[test]
    fn signals_left_out_keep_the_defaults() {
        let t: EvictionHard = "nodefs.available<0%".parse().unwrap();
        assert_eq!(t.memory_available, EvictionHard::default().memory_available);
        assert_eq!(t.nodefs_available, Threshold::Fraction(0.0));
        assert_eq!("".parse::<EvictionHard>().unwrap(), EvictionHard::default());
    }

    #[test]
    fn what_skiff_cannot_honour_is_refused() {
        assert_eq!(
            "imagefs.available<15%".parse::<EvictionHard>(),
            Err(EvictionError::Signal("imagefs.available".into()))
        );
        assert_eq!(
            "memory.available=100Mi".parse::<EvictionHard>(),
            Err(EvictionError::Term("memory.available=100Mi".into()))
        );
        for value in ["150%", "-1%", "lots", "-5Mi"] {
            assert_eq!(
                format!("nodefs.available<{value}").parse::<EvictionHard>(),
                Err(EvictionError::Value(value.into())),
                "{value}"
            );
        }
    }

    #[test]
    fn a_threshold_is_crossed_below_its_share_or_amount() {
        let ten = Threshold::Fraction(0.1);
        assert!(ten.crossed(9, 100));
        assert!(!ten.crossed(10, 100));
        assert!(!ten.crossed(0, 0), "an unmeasured disk is no pressure");
        assert!(!Threshold::Fraction(0.0).crossed(0, 100));
        assert!(Threshold::Fraction(1.0).crossed(99, 100));
        let mib = Threshold::Bytes(1 << 20);
        assert!(mib.crossed((1 << 20) - 1, 1 << 30));
        assert_eq!(mib.bytes_of(1000), 1000, "never more than there is");
    }
}
