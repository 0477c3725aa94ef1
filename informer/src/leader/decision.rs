//! The leader-election rules as pure functions over Lease specs and clocks.
//!
//! Expiry is judged on the candidate's own monotonic clock: a lease is expired
//! when its record has not changed for `leaseDurationSeconds` since this
//! candidate first saw that record. Comparing the holder's `renewTime` with our
//! wall clock would let clock skew between servers hand out two leaderships.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// Timing and identity of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Unique name of this candidate (e.g. hostname plus a random suffix).
    pub identity: String,
    /// How long a lease stays valid without renewal (written into the Lease).
    pub lease_duration: Duration,
    /// A leader that could not renew for this long steps down; shorter than
    /// `lease_duration` so it stops before anyone else may take over.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// Upstream's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the orderings that make leadership exclusive.
    pub fn validate(&self) -> Result<(), String> {
        if self.identity.is_empty() {
            return Err("identity must not be empty".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err("lease duration must exceed the renew deadline".into());
        }
        if self.renew_deadline <= self.retry_period {
            return Err("renew deadline must exceed the retry period".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err("lease duration must be at least one second".into());
        }
        Ok(())
    }

    /// A candidate identity unique to this process: the host name (from
    /// `HOSTNAME` or /etc/hostname) plus a random suffix, as upstream builds it.
    pub fn unique_identity() -> String {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "skiff".to_owned());
        format!("{host}_{:016x}", rand::random::<u64>())
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// What a candidate should do after reading the Lease.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// No Lease exists: create it with this spec.
    Create(LeaseSpec),
    /// The Lease is free or expired: take it over with this spec.
    Acquire(LeaseSpec),
    /// We hold the Lease: renew it with this spec.
    Renew(LeaseSpec),
    /// Someone else holds a live Lease.
    Wait {
        /// The current holder.
        holder: String,
    },
}

/// A candidate's memory of the last Lease record it saw and when it saw it.
#[derive(Clone, Debug, Default)]
pub struct LeaseObserver {
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaseObserver {
    /// A candidate that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides what to do given the `current` Lease spec (None if no Lease
    /// exists), the local monotonic time `now` and the wall-clock time `wall`
    /// to write into the record.
    pub fn decide(
        &mut self,
        config: &ElectionConfig,
        current: Option<&LeaseSpec>,
        now: Instant,
        wall: Timestamp,
    ) -> Decision {
        let Some(current) = current else {
            return Decision::Create(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(config.lease_duration_seconds()),
                acquire_time: Some(MicroTime(wall)),
                renew_time: Some(MicroTime(wall)),
                lease_transitions: Some(0),
                ..Default::default()
            });
        };
        if self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| seen != current)
        {
            self.observed = Some((current.clone(), now));
        }
        let holder = current.holder_identity.as_deref().unwrap_or_default();
        let transitions = current.lease_transitions.unwrap_or(0);
        if holder == config.identity {
            return Decision::Renew(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(config.lease_duration_seconds()),
                acquire_time: current.acquire_time.clone().or(Some(MicroTime(wall))),
                renew_time: Some(MicroTime(wall)),
                lease_transitions: Some(transitions),
                ..Default::default()
            });
        }
        if !holder.is_empty() && !self.expired(current, now) {
            return Decision::Wait {
                holder: holder.to_owned(),
            };
        }
        Decision::Acquire(LeaseSpec {
            holder_identity: Some(config.identity.clone()),
            lease_duration_seconds: Some(config.lease_duration_seconds()),
            acquire_time: Some(MicroTime(wall)),
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(transitions.saturating_add(1)),
            ..Default::default()
        })
    }

    /// Remembers a record we wrote ourselves, seen at `now`.
    pub fn observe_written(&mut self, spec: &LeaseSpec, now: Instant) {
        self.observed = Some((spec.clone(), now));
    }

    fn expired(&self, current: &LeaseSpec, now: Instant) -> bool {
        let Some((_, seen_at)) = &self.observed else {
            return true;
        };
        let seconds = current.lease_duration_seconds.unwrap_or(0).max(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        now.saturating_duration_since(*seen_at) >= duration
    }
}

/// The spec that hands the Lease back: no holder and a one-second duration, so
/// the next candidate takes over at its next attempt. None if we do not hold it.
pub fn release_spec(
    config: &ElectionConfig,
    current: &LeaseSpec,
    wall: Timestamp,
) -> Option<LeaseSpec> {
    if current.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return None;
    }
    Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(wall)),
        renew_time: Some(MicroTime(wall)),
        lease_transitions: current.lease_transitions,
        ..Default::default()
    })
}

/// True when a leader whose last successful renewal was at `last_renewed` must
/// step down at `now`.
pub fn should_step_down(config: &ElectionConfig, last_renewed: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last_renewed) >= config.renew_deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(identity: &str) -> ElectionConfig {
        ElectionConfig::new(identity)
    }

    fn wall(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn held_by(holder: &str, renewed_at: i64, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(wall(0))),
            renew_time: Some(MicroTime(wall(renewed_at))),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// What we ("me") decide on seeing `lease` `seconds` after `t0`: the
    /// expiry cases move our clock and the wall clock together.
    fn decide_at(
        observer: &mut LeaseObserver,
        lease: &LeaseSpec,
        t0: Instant,
        seconds: u64,
    ) -> Decision {
        let wall_seconds = i64::try_from(seconds).unwrap();
        observer.decide(
            &config("me"),
            Some(lease),
            t0 + Duration::from_secs(seconds),
            wall(wall_seconds),
        )
    }

    /// Asserts another's `lease` still stands `held_at` seconds after `t0`
    /// and is ours to take at `expired_at`: the edges of its expiry.
    fn assert_expires_between(
        observer: &mut LeaseObserver,
        lease: &LeaseSpec,
        t0: Instant,
        held_at: u64,
        expired_at: u64,
    ) {
        let held = decide_at(observer, lease, t0, held_at);
        assert!(matches!(held, Decision::Wait { .. }), "{held:?}");
        let expired = decide_at(observer, lease, t0, expired_at);
        assert!(matches!(expired, Decision::Acquire(_)), "{expired:?}");
    }

    #[test]
    fn a_missing_lease_is_created_with_us_as_holder() {
        let mut observer = LeaseObserver::new();
        let decision = observer.decide(&config("me"), None, Instant::now(), wall(5));
        let Decision::Create(spec) = decision else {
            panic!("expected create, got {decision:?}");
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.renew_time, Some(MicroTime(wall(5))));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(5))));
    }

    #[test]
    fn a_live_lease_of_another_holder_expires_after_its_duration_on_our_clock() {
        let mut observer = LeaseObserver::new();
        let t0 = Instant::now();
        let lease = held_by("other", 0, 3);
        // Its renewTime is ancient by our wall clock, but we only just saw it.
        let first = observer.decide(&config("me"), Some(&lease), t0, wall(10_000));
        assert_eq!(
            first,
            Decision::Wait {
                holder: "other".into()
            }
        );
        let almost = t0 + Duration::from_millis(14_999);
        assert!(matches!(
            observer.decide(&config("me"), Some(&lease), almost, wall(10_015)),
            Decision::Wait { .. }
        ));
        let decision = observer.decide(
            &config("me"),
            Some(&lease),
            t0 + Duration::from_secs(15),
            wall(10_015),
        );
        let Decision::Acquire(spec) = decision else {
            panic!("expected acquire, got {decision:?}");
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(10_015))));
    }

    #[test]
    fn a_renewal_by_the_holder_restarts_the_expiry_clock() {
        let mut observer = LeaseObserver::new();
        let t0 = Instant::now();
        decide_at(&mut observer, &held_by("other", 0, 1), t0, 0);
        let renewed = held_by("other", 10, 1);
        decide_at(&mut observer, &renewed, t0, 10);
        // 20 s after the first sighting but only 10 s after the renewal: still
        // held; 15 s after the renewal: expired.
        assert_expires_between(&mut observer, &renewed, t0, 20, 25);
    }

    #[test]
    fn the_holders_duration_counts_not_ours() {
        let mut observer = LeaseObserver::new();
        let t0 = Instant::now();
        let mut lease = held_by("other", 0, 0);
        lease.lease_duration_seconds = Some(60);
        decide_at(&mut observer, &lease, t0, 0);
        assert_expires_between(&mut observer, &lease, t0, 30, 60);
    }

    #[test]
    fn our_own_lease_is_renewed_keeping_acquire_time_and_transitions() {
        let mut observer = LeaseObserver::new();
        let lease = held_by("me", 3, 7);
        let decision = observer.decide(&config("me"), Some(&lease), Instant::now(), wall(5));
        let Decision::Renew(spec) = decision else {
            panic!("expected renew, got {decision:?}");
        };
        assert_eq!(spec.renew_time, Some(MicroTime(wall(5))));
        assert_eq!(spec.acquire_time, Some(MicroTime(wall(0))));
        assert_eq!(spec.lease_transitions, Some(7));
    }

    #[test]
    fn a_released_lease_is_free_at_once() {
        let me = config("me");
        let held = held_by("me", 3, 2);
        let released = release_spec(&me, &held, wall(4)).expect("we hold it");
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, Some(2));
        assert_eq!(release_spec(&config("other"), &held, wall(4)), None);

        let mut other = LeaseObserver::new();
        let decision = other.decide(&config("other"), Some(&released), Instant::now(), wall(5));
        let Decision::Acquire(spec) = decision else {
            panic!("expected acquire, got {decision:?}");
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("other"));
        assert_eq!(spec.lease_transitions, Some(3));
    }

    #[test]
    fn a_leader_steps_down_when_it_cannot_renew_within_the_deadline() {
        let me = config("me");
        let renewed = Instant::now();
        assert!(!should_step_down(
            &me,
            renewed,
            renewed + Duration::from_secs(9)
        ));
        assert!(should_step_down(
            &me,
            renewed,
            renewed + Duration::from_secs(10)
        ));
    }

    #[test]
    fn unique_identities_differ_between_candidates() {
        let (a, b) = (
            ElectionConfig::unique_identity(),
            ElectionConfig::unique_identity(),
        );
        assert_ne!(a, b);
        assert!(!a.is_empty() && a.contains('_'));
    }

    #[test]
    fn config_validation_rejects_unsafe_timings() {
        assert!(config("me").validate().is_ok());
        let mut bad = config("me");
        bad.renew_deadline = bad.lease_duration;
        assert!(bad.validate().is_err());
        let mut bad = config("me");
        bad.retry_period = bad.renew_deadline;
        assert!(bad.validate().is_err());
        assert!(config("").validate().is_err());
    }
}
