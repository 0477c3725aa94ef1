//! The arithmetic of a rolling update, as upstream does it: how far the new
//! ReplicaSet may grow (maxSurge) and how far old ones may shrink
//! (maxUnavailable). Pure functions over replica counts.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::controller_utils::scaled_value;

/// (maxSurge, maxUnavailable) for `replicas`: surge rounds up, unavailable
/// down, and both zero becomes unavailable = 1 so a rollout can progress.
pub(super) fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    replicas: i32,
) -> (i32, i32) {
    let surge = scaled_value(max_surge, replicas, true, "25%");
    let unavailable = scaled_value(max_unavailable, replicas, false, "25%");
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// The new ReplicaSet's size for the next step: grow by as much as the surge
/// allows, never past `replicas`.
pub(super) fn new_rs_replicas(
    replicas: i32,
    max_surge: i32,
    all_replicas: i32,
    new_replicas: i32,
) -> i32 {
    let max_total = replicas + max_surge;
    if all_replicas >= max_total {
        return new_replicas;
    }
    let scale_up = (max_total - all_replicas).min(replicas - new_replicas);
    new_replicas + scale_up.max(0)
}

/// A ReplicaSet's counts as the rolling update sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    /// spec.replicas
    pub spec: i32,
    /// status.availableReplicas
    pub available: i32,
}

/// How many old pods may go now: all pods minus what must stay available
/// minus the new ReplicaSet's not-yet-available pods.
pub(super) fn max_scaled_down(
    all_spec: i32,
    replicas: i32,
    max_unavailable: i32,
    new_rs: Counts,
) -> i32 {
    let min_available = replicas - max_unavailable;
    let new_unavailable = new_rs.spec - new_rs.available;
    all_spec - min_available - new_unavailable
}

/// New sizes for old ReplicaSets (oldest first): first drop their
/// unavailable pods (up to `budget`), then, while more than `min_available`
/// pods are available overall, drop available ones.
pub(super) fn scale_down_old(
    old: &[Counts],
    budget: i32,
    all_available: i32,
    min_available: i32,
) -> Vec<i32> {
    let mut sizes: Vec<i32> = old.iter().map(|c| c.spec).collect();
    // Unhealthy pods first: they cost no availability.
    let mut cleaned = 0;
    for (i, c) in old.iter().enumerate() {
        if cleaned >= budget {
            break;
        }
        if c.spec == 0 || c.spec <= c.available {
            continue;
        }
        let down = (budget - cleaned).min(c.spec - c.available);
        sizes[i] -= down;
        cleaned += down;
    }
    if all_available <= min_available {
        return sizes;
    }
    let total = all_available - min_available;
    let mut scaled = 0;
    for size in sizes.iter_mut() {
        if scaled >= total {
            break;
        }
        if *size == 0 {
            continue;
        }
        let down = (*size).min(total - scaled);
        *size -= down;
        scaled += down;
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn percentages_round_like_upstream() {
        assert_eq!(scaled_value(Some(&s("25%")), 10, true, "25%"), 3);
        assert_eq!(scaled_value(Some(&s("25%")), 10, false, "25%"), 2);
        assert_eq!(
            scaled_value(Some(&IntOrString::Int(2)), 10, false, "25%"),
            2
        );
        assert_eq!(scaled_value(None, 4, true, "25%"), 1);
        assert_eq!(
            resolve_fenceposts(Some(&s("25%")), Some(&s("25%")), 1),
            (1, 0)
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("0%")), Some(&s("10%")), 3),
            (0, 1)
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(0)), Some(&IntOrString::Int(0)), 5),
            (0, 1)
        );
    }

    #[test]
    fn new_replica_set_grows_within_surge() {
        // 10 replicas, surge 3: all at 10 → new may reach 3
        assert_eq!(new_rs_replicas(10, 3, 10, 0), 3);
        // already at the ceiling
        assert_eq!(new_rs_replicas(10, 3, 13, 3), 3);
        // never beyond replicas
        assert_eq!(new_rs_replicas(2, 5, 2, 1), 2);
    }

    #[test]
    fn old_replica_sets_shrink_within_unavailability() {
        // 10 replicas, maxUnavailable 2: old 10 (all available), new 3 (none available)
        let budget = max_scaled_down(
            13,
            10,
            2,
            Counts {
                spec: 3,
                available: 0,
            },
        );
        assert_eq!(budget, 2 + 3 - 3);
        let sizes = scale_down_old(
            &[Counts {
                spec: 10,
                available: 10,
            }],
            budget,
            10,
            8,
        );
        assert_eq!(sizes, vec![8]);
        // unavailable old pods go first, oldest ReplicaSet first
        let sizes = scale_down_old(
            &[
                Counts {
                    spec: 3,
                    available: 1,
                },
                Counts {
                    spec: 4,
                    available: 4,
                },
            ],
            5,
            5,
            5,
        );
        assert_eq!(sizes, vec![1, 4]);
    }
}
