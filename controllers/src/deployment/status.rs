//! The status a Deployment reports: counts summed over its ReplicaSets, the
//! Available condition, and the Progressing condition that drives
//! `kubectl rollout status`.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};

use super::util::{
    condition, desired, new_condition, remove_condition, rs_available, set_condition,
};
use crate::controller_utils::{now, seconds_between};

/// Condition reasons upstream uses (kubectl and users match on them).
pub(super) const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub(super) const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub(super) const RS_UPDATED: &str = "ReplicaSetUpdated";
pub(super) const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub(super) const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub(super) const PAUSED: &str = "DeploymentPaused";
pub(super) const RESUMED: &str = "DeploymentResumed";

fn rs_status_field(
    rs: &ReplicaSet,
    f: impl Fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> i32,
) -> i32 {
    rs.status.as_ref().map(f).unwrap_or(0)
}

/// progressDeadlineSeconds, when the Deployment has one.
pub(super) fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()?
        .progress_deadline_seconds
        .filter(|s| *s != i32::MAX)
}

/// Counts and the Available condition; other conditions carried over.
pub(super) fn calculate(
    d: &Deployment,
    all: &[ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    max_unavailable: i32,
) -> DeploymentStatus {
    let old = d.status.clone().unwrap_or_default();
    let available: i32 = all.iter().map(rs_available).sum();
    let replicas = desired(d);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(
            all.iter()
                .map(|rs| rs_status_field(rs, |s| s.replicas))
                .sum(),
        ),
        updated_replicas: Some(new_rs.map_or(0, |rs| rs_status_field(rs, |s| s.replicas))),
        ready_replicas: Some(
            all.iter()
                .map(|rs| rs_status_field(rs, |s| s.ready_replicas.unwrap_or(0)))
                .sum(),
        ),
        available_replicas: Some(available),
        unavailable_replicas: Some((replicas - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    if available >= replicas - max_unavailable {
        set_condition(
            &mut status,
            new_condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            ),
        );
    } else {
        set_condition(
            &mut status,
            new_condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            ),
        );
    }
    let failure = all.iter().find_map(|rs| {
        rs.status
            .as_ref()?
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
            .cloned()
    });
    match failure {
        Some(c) => set_condition(
            &mut status,
            new_condition(
                "ReplicaFailure",
                "True",
                c.reason.as_deref().unwrap_or("FailedCreate"),
                c.message.unwrap_or_default(),
            ),
        ),
        None => remove_condition(&mut status, "ReplicaFailure"),
    }
    status
}

/// True when every replica is updated and available and nothing old runs.
pub(super) fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = desired(d);
    status.updated_replicas == Some(replicas)
        && status.replicas == Some(replicas)
        && status.available_replicas == Some(replicas)
        && status.observed_generation >= d.metadata.generation
}

/// True when `new` moved the rollout forward compared with `old`.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let v = |x: Option<i32>| x.unwrap_or(0);
    let old_old_pods = v(old.replicas) - v(old.updated_replicas);
    let new_old_pods = v(new.replicas) - v(new.updated_replicas);
    v(new.updated_replicas) > v(old.updated_replicas)
        || v(new.ready_replicas) > v(old.ready_replicas)
        || v(new.available_replicas) > v(old.available_replicas)
        || new_old_pods < old_old_pods
}

/// True when the last progress is older than the deadline.
pub(super) fn timed_out(d: &Deployment, status: &DeploymentStatus) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(cond) = condition(status, "Progressing") else {
        return false;
    };
    match cond.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => return false,
        Some(TIMED_OUT) => return true,
        _ => {}
    }
    cond.last_update_time
        .as_ref()
        .is_some_and(|t| seconds_between(t, &now()) > i64::from(deadline))
}

/// Adds the Progressing condition for a rollout step to `status`.
pub(super) fn set_progressing(
    d: &Deployment,
    status: &mut DeploymentStatus,
    new_rs: Option<&ReplicaSet>,
) {
    if progress_deadline(d).is_none() {
        return;
    }
    let old = d.status.clone().unwrap_or_default();
    let name = new_rs
        .and_then(|rs| rs.metadata.name.clone())
        .unwrap_or_default();
    let current = condition(status, "Progressing").cloned();
    if complete(d, status) {
        set_condition(
            status,
            new_condition(
                "Progressing",
                "True",
                NEW_RS_AVAILABLE,
                format!("ReplicaSet \"{name}\" has successfully progressed."),
            ),
        );
    } else if progressing(&old, status) {
        let mut cond = new_condition(
            "Progressing",
            "True",
            RS_UPDATED,
            format!("ReplicaSet \"{name}\" is progressing."),
        );
        if let Some(current) = current {
            if current.status == "True" {
                cond.last_transition_time = current.last_transition_time;
            }
            remove_condition(status, "Progressing");
        }
        set_condition(status, cond);
    } else if timed_out(d, status) {
        set_condition(
            status,
            new_condition(
                "Progressing",
                "False",
                TIMED_OUT,
                format!("ReplicaSet \"{name}\" has timed out progressing."),
            ),
        );
    }
}

/// Seconds until a progressing rollout would pass its deadline.
pub(super) fn seconds_to_deadline(d: &Deployment, status: &DeploymentStatus) -> Option<i64> {
    let deadline = progress_deadline(d)?;
    if complete(d, status) {
        return None;
    }
    let cond = condition(status, "Progressing")?;
    if cond.status != "True" {
        return None;
    }
    let since = cond.last_update_time.as_ref()?;
    Some((i64::from(deadline) - seconds_between(since, &now())).max(0) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deployment(replicas: i32) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                progress_deadline_seconds: Some(600),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn rs(name: &str, replicas: i32, available: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: None,
            status: Some(ReplicaSetStatus {
                replicas,
                ready_replicas: Some(available),
                available_replicas: Some(available),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn complete_rollouts_report_new_replica_set_available() {
        let d = deployment(3);
        let all = vec![rs("web-1", 3, 3)];
        let mut s = calculate(&d, &all, all.first(), 0);
        set_progressing(&d, &mut s, all.first());
        assert_eq!(s.unavailable_replicas, Some(0));
        let p = condition(&s, "Progressing").unwrap();
        assert_eq!(p.reason.as_deref(), Some(NEW_RS_AVAILABLE));
        assert_eq!(
            p.message.as_deref(),
            Some("ReplicaSet \"web-1\" has successfully progressed.")
        );
        assert_eq!(condition(&s, "Available").unwrap().status, "True");
    }

    #[test]
    fn partial_rollouts_progress_then_lack_availability() {
        let d = deployment(4);
        let all = vec![rs("old", 3, 3), rs("new", 2, 0)];
        let mut s = calculate(&d, &all, all.get(1), 0);
        set_progressing(&d, &mut s, all.get(1));
        assert_eq!(s.updated_replicas, Some(2));
        assert_eq!(s.replicas, Some(5));
        assert_eq!(s.unavailable_replicas, Some(1));
        assert_eq!(
            condition(&s, "Progressing").unwrap().reason.as_deref(),
            Some(RS_UPDATED)
        );
        let a = condition(&s, "Available").unwrap();
        assert_eq!(
            (a.status.as_str(), a.reason.as_deref()),
            ("False", Some("MinimumReplicasUnavailable"))
        );
    }
}
