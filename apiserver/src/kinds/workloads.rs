//! Workload controllers and pod templates: Deployments, ReplicaSets,
//! ReplicationControllers, StatefulSets, DaemonSets, Jobs, CronJobs and
//! PodTemplates — their defaults (each pod template gets the pod-spec
//! defaults), where each keeps its pod template, the pod-template checks,
//! the ReplicationController's map selector in its Scale, and what an update
//! may change (a Job's template and selector are fixed, a StatefulSet's
//! spec but for a few fields). The four `apps/v1` kinds share one strategy
//! type, [`AppsWorkload`], that differs only in their spec defaults, their
//! rollout checks (`validation::rollouts`) and update rule.

use serde_json::{Value, json};

use super::pods::default_pod_spec;
use super::{KindStrategy, default_object, scale, set_default, spec_of};
use crate::kinds::Written;
use crate::object::{items_mut, path_mut};
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::rollouts;
use crate::validation::workloads as checks;

/// Where most workloads keep their pod template.
const SPEC_TEMPLATE: &[&str] = &["spec", "template"];

/// Pod-spec defaults for the template at `path` under `spec`.
fn default_template(spec: &mut Value, path: &[&str]) {
    if let Some(pod) = path_mut(spec, path) {
        default_pod_spec(pod);
    }
}

/// The `pod_template` and `validate` of a kind whose only checks are its pod
/// template's: the one path (a `&'static [&'static str]`) says both where
/// the admission plugins find the template and where its pod spec is checked.
macro_rules! checked_template {
    ($template:expr) => {
        fn pod_template(&self) -> Option<&'static [&'static str]> {
            Some($template)
        }

        fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
            if !written.status_only() {
                check_template(written.object, $template, errors);
            }
        }
    };
}

/// The pod-spec checks of the template at `template`, reported under its
/// dotted path (`spec.template.spec`).
fn check_template(object: &Value, template: &[&str], errors: &mut Vec<FieldError>) {
    let found = super::template_of(object, template);
    let path = format!("{}.spec", template.join("."));
    checks::pod_spec(&found["spec"], &path, errors);
}

/// Defaults of the update strategy at `field` (a Deployment's `strategy`,
/// the others' `updateStrategy`) when its type is (or defaults to)
/// RollingUpdate: `rollingUpdate` is `rolling` when missing, and is
/// returned for defaults of its own fields.
fn default_rolling_update<'a>(
    spec: &'a mut Value,
    field: &str,
    rolling: Value,
) -> Option<&'a mut Value> {
    let strategy = default_object(spec, field).filter(|s| s.is_object())?;
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy["type"] != "RollingUpdate" {
        return None;
    }
    set_default(strategy, "rollingUpdate", rolling);
    path_mut(strategy, &["rollingUpdate"])
}

/// The `apps/v1` workloads (Deployments, ReplicaSets, StatefulSets,
/// DaemonSets): the same rules but for the defaults of their own spec fields
/// and what an update may change.
#[derive(Debug)]
pub(crate) struct AppsWorkload {
    /// Defaults of the kind's own `spec` fields (its pod template's follow).
    spec_defaults: fn(&mut Value),
    /// How its selector's checks are worded.
    selector: checks::SelectorRule,
    /// The checks of an update, given the stored object and the new one.
    update: fn(&Value, &Value, &mut Vec<FieldError>),
    /// The checks of the kind's own `spec` fields (how it rolls out).
    spec_checks: fn(&Value, &mut Vec<FieldError>),
    /// Whether its name is part of its pods' names (see
    /// [`KindStrategy::names_pods`]).
    names_pods: bool,
    /// Warnings of its own spec beyond the template.
    spec_warnings: fn(&Written<'_>) -> Vec<String>,
}

/// The selector rule of Deployments and ReplicaSets (whose empty selector
/// upstream also calls invalid "for deployment").
const DEPLOYMENT_SELECTOR: checks::SelectorRule = checks::SelectorRule {
    empty_for: "deployment",
    unusable: Some("invalid label selector"),
    required: true,
};

impl KindStrategy for AppsWorkload {
    fn pod_template(&self) -> Option<&'static [&'static str]> {
        Some(SPEC_TEMPLATE)
    }

    fn names_pods(&self) -> bool {
        self.names_pods
    }

    fn spec_warnings(&self, written: &Written<'_>) -> Vec<String> {
        (self.spec_warnings)(written)
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        (self.spec_defaults)(spec);
        default_template(spec, &["template", "spec"]);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        if written.status_only() {
            return;
        }
        checks::workload(object, self.selector, errors);
        always_restarts(object, errors);
        (self.spec_checks)(&object["spec"], errors);
        if let Some(old) = old {
            (self.update)(old, object, errors);
        }
    }
}

/// The pods of a workload that keeps them running restart always, as
/// upstream's ValidatePodTemplateSpecForReplicaSet (and its siblings) rule.
fn always_restarts(object: &Value, errors: &mut Vec<FieldError>) {
    let policy = object["spec"]["template"]["spec"]["restartPolicy"]
        .as_str()
        .unwrap_or("Always");
    if policy != "Always" {
        errors.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
}

/// `apps/v1` deployments.
pub(crate) static DEPLOYMENTS: AppsWorkload = AppsWorkload {
    spec_defaults: deployment_defaults,
    selector: DEPLOYMENT_SELECTOR,
    update: checks::selector_unchanged,
    spec_checks: rollouts::deployment,
    names_pods: true,
    spec_warnings: |_| Vec::new(),
};

fn deployment_defaults(spec: &mut Value) {
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(rolling) = default_rolling_update(spec, "strategy", json!({})) {
        set_default(rolling, "maxUnavailable", json!("25%"));
        set_default(rolling, "maxSurge", json!("25%"));
    }
}

/// `apps/v1` replicasets.
pub(crate) static REPLICA_SETS: AppsWorkload = AppsWorkload {
    spec_defaults: |spec| set_default(spec, "replicas", json!(1)),
    selector: DEPLOYMENT_SELECTOR,
    update: checks::selector_unchanged,
    spec_checks: |_, _| {},
    names_pods: true,
    spec_warnings: |_| Vec::new(),
};

/// Core `replicationcontrollers`: a map selector instead of a label selector.
#[derive(Debug)]
pub(crate) struct ReplicationControllers;

impl KindStrategy for ReplicationControllers {
    fn pod_template(&self) -> Option<&'static [&'static str]> {
        Some(SPEC_TEMPLATE)
    }

    fn names_pods(&self) -> bool {
        true
    }

    /// Besides the replica and pod-spec defaults, a controller without a
    /// selector selects its template's labels, and one without labels of
    /// its own carries them too (what `kubectl expose rc` reads).
    fn apply_defaults(&self, info: &ResourceInfo, object: &mut Value) {
        let template_labels = object["spec"]["template"]["metadata"]["labels"].clone();
        let has_labels = |v: &Value| v.as_object().is_some_and(|m| !m.is_empty());
        if has_labels(&template_labels) {
            if let Some(spec) = spec_of(object)
                && !has_labels(&spec["selector"])
            {
                spec["selector"] = template_labels.clone();
            }
            if !has_labels(&object["metadata"]["labels"])
                && let Some(meta) = path_mut(object, &["metadata"]).filter(|m| m.is_object())
            {
                meta["labels"] = template_labels;
            }
        }
        REPLICA_SETS.apply_defaults(info, object);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        if !written.status_only() {
            checks::replication_controller(written.object, errors);
            always_restarts(written.object, errors);
        }
    }

    /// The Scale's selector is the map selector as `k=v,…`.
    fn scale(&self, _info: &ResourceInfo, object: &Value) -> Value {
        let selector = crate::table::columns::map_selector_string(object.pointer("/spec/selector"));
        scale::view(object, selector)
    }
}

/// `apps/v1` statefulsets.
pub(crate) static STATEFUL_SETS: AppsWorkload = AppsWorkload {
    spec_defaults: stateful_set_defaults,
    selector: checks::SelectorRule {
        empty_for: "statefulset",
        unusable: Some(""),
        required: true,
    },
    update: checks::stateful_set_update,
    spec_checks: rollouts::stateful_set,
    names_pods: false,
    spec_warnings: stateful_set_warnings,
};

/// A StatefulSet's own warnings: its claim templates' fractional storage
/// (under upstream's paths, which differ between create and update) and a
/// negative history limit.
fn stateful_set_warnings(written: &Written<'_>) -> Vec<String> {
    let spec = &written.object["spec"];
    let mut out = Vec::new();
    for (i, claim) in crate::object::indexed(&spec["volumeClaimTemplates"]) {
        let here = if written.old.is_some() {
            format!("spec.volumeClaimTemplates[{i}].Spec")
        } else {
            format!("spec.volumeClaimTemplates[{i}]")
        };
        crate::validation::pod_warnings::claim_spec(&claim["spec"], &here, &mut out);
    }
    if spec["revisionHistoryLimit"].as_i64().is_some_and(|l| l < 0) {
        out.push(
            "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended"
                .to_owned(),
        );
    }
    out
}

fn stateful_set_defaults(spec: &mut Value) {
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    set_default(spec, "revisionHistoryLimit", json!(10));
    default_rolling_update(spec, "updateStrategy", json!({ "partition": 0 }));
    if let Some(policy) = default_object(spec, "persistentVolumeClaimRetentionPolicy") {
        set_default(policy, "whenDeleted", json!("Retain"));
        set_default(policy, "whenScaled", json!("Retain"));
    }
    // Claim templates are whole claims to upstream's defaulting, status
    // included: they read back with `status.phase: Pending`, and always as
    // `v1` PersistentVolumeClaims (its internal claims carry no type, so
    // whatever a write says there, or leaves out, changes nothing).
    for claim in items_mut(spec, &["volumeClaimTemplates"]).filter(|c| c.is_object()) {
        if let Some(map) = claim.as_object_mut() {
            map.insert("apiVersion".into(), json!("v1"));
            map.insert("kind".into(), json!("PersistentVolumeClaim"));
        }
        if let Some(claim_spec) = spec_of(claim) {
            super::volumes::default_claim_spec(claim_spec);
        }
        if let Some(status) = default_object(claim, "status") {
            set_default(status, "phase", json!("Pending"));
        }
    }
}

/// `apps/v1` daemonsets.
pub(crate) static DAEMON_SETS: AppsWorkload = AppsWorkload {
    spec_defaults: |spec| {
        set_default(spec, "revisionHistoryLimit", json!(10));
        if let Some(rolling) = default_rolling_update(spec, "updateStrategy", json!({})) {
            set_default(rolling, "maxUnavailable", json!(1));
            set_default(rolling, "maxSurge", json!(0));
        }
    },
    selector: checks::SelectorRule {
        empty_for: "daemonset",
        unusable: None,
        required: false,
    },
    update: checks::selector_unchanged,
    spec_checks: rollouts::daemon_set,
    names_pods: false,
    spec_warnings: |_| Vec::new(),
};

/// `batch/v1` jobs.
#[derive(Debug)]
pub(crate) struct Jobs;

/// Upstream's warnings of a Job spec at `path` (a Job's `spec`, a
/// CronJob's `spec.jobTemplate.spec`): an Indexed Job too large to track
/// its failed indexes, then its pod template's when new or changed.
fn job_spec_warnings(job: &Value, old: Option<&Value>, path: &[&str]) -> Vec<String> {
    const MANY_COMPLETIONS: i64 = 100_000;
    const MANY_PARALLEL: i64 = 10_000;
    let spec = super::template_of(job, path);
    let mut out = Vec::new();
    let count = |field: &str| spec[field].as_i64().unwrap_or(0);
    if spec["completionMode"] == "Indexed"
        && count("completions") > MANY_COMPLETIONS
        && count("parallelism") > MANY_PARALLEL
    {
        out.push(format!(
            "{}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail",
            path.join(".")
        ));
    }
    let template = &spec["template"];
    if old.is_none_or(|old| &super::template_of(old, path)["template"] != template) {
        let at = format!("{}.template", path.join("."));
        out.extend(crate::validation::pod_warnings::warnings(template, &at));
    }
    out
}

/// A Job's or CronJob's warnings: on create its name (its pods take it)
/// and its job spec's; on an update that changes the spec, the job spec's.
fn job_warnings(written: &Written<'_>, path: &[&str]) -> Vec<String> {
    if written.status_only() {
        return Vec::new();
    }
    let Written { object, old, .. } = *written;
    let mut out = Vec::new();
    match old {
        None => {
            out.extend(super::name_warning(object, "Pod names and hostnames"));
            out.extend(job_spec_warnings(object, None, path));
        }
        Some(old) if old["spec"] != object["spec"] => {
            out.extend(job_spec_warnings(object, Some(old), path));
        }
        Some(_) => {}
    }
    out
}

impl KindStrategy for Jobs {
    fn pod_template(&self) -> Option<&'static [&'static str]> {
        Some(SPEC_TEMPLATE)
    }

    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        job_warnings(written, &["spec"])
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        if written.status_only() {
            return;
        }
        // Upstream's counts come before the template's checks.
        for field in [
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "ttlSecondsAfterFinished",
        ] {
            crate::validation::non_negative(&object["spec"], field, errors);
        }
        check_template(object, SPEC_TEMPLATE, errors);
        job_restart_policy(object, SPEC_TEMPLATE, errors);
        crate::validation::job_policies::validate(&object["spec"], "spec", errors);
        if let Some(old) = old {
            job_update(old, object, errors);
        }
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        let uid = object["metadata"]["uid"].as_str().map(String::from);
        let name = object["metadata"]["name"].as_str().map(String::from);
        let Some(spec) = spec_of(object) else {
            return;
        };
        // A per-index limit takes over from the job-wide one, which then
        // never stops the job by itself.
        let per_index = spec
            .get("backoffLimitPerIndex")
            .is_some_and(|v| !v.is_null());
        set_default(
            spec,
            "backoffLimit",
            json!(if per_index { i64::from(i32::MAX) } else { 6 }),
        );
        // Both unset: one pod to one completion. Only parallelism set: a
        // work queue, so completions stays unset.
        if spec.get("parallelism").is_none() && spec.get("completions").is_none() {
            set_default(spec, "completions", json!(1));
        }
        set_default(spec, "parallelism", json!(1));
        set_default(spec, "completionMode", json!("NonIndexed"));
        set_default(spec, "suspend", json!(false));
        // With a pod failure policy a pod is only replaced once it failed.
        let failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
        set_default(
            spec,
            "podReplacementPolicy",
            json!(if failure_policy {
                "Failed"
            } else {
                "TerminatingOrFailed"
            }),
        );
        let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
        if let (false, Some(uid), Some(name)) = (manual, uid, name) {
            default_job_selector(spec, &uid, &name);
        }
        default_template(spec, &["template", "spec"]);
    }
}

/// A job's pods run to completion: its template's restart policy (`Always`
/// when not given) must be `OnFailure` or `Never`.
fn job_restart_policy(object: &Value, template: &[&str], errors: &mut Vec<FieldError>) {
    let found = super::template_of(object, template);
    let policy = found["spec"]["restartPolicy"].as_str().unwrap_or_default();
    if policy != "OnFailure" && policy != "Never" {
        errors.push(FieldError::not_supported(
            format!("{}.spec.restartPolicy", template.join(".")),
            policy,
            &["OnFailure", "Never"],
        ));
    }
}

/// What an update of a Job may not change, as upstream rules it: its
/// selector, its completion mode and the policies it runs by, the count of
/// completions (but for an indexed job's, in step with its parallelism),
/// and its pod template — but for the scheduling directives of a job
/// suspended before it ever started, which a queue controller places.
fn job_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let (was, now) = (&old["spec"], &new["spec"]);
    if now["completionMode"] == "Indexed" {
        if was["completions"] != now["completions"]
            && !now["completions"].is_null()
            && now["completions"] != now["parallelism"]
        {
            errors.push(FieldError::invalid(
                "spec.completions",
                now["completions"].clone(),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    } else {
        checks::immutable(old, new, &["spec", "completions"], errors);
    }
    checks::immutable(old, new, &["spec", "selector"], errors);
    let unstarted_suspended = was["suspend"] == true && old["status"]["startTime"].is_null();
    let template = |spec: &Value| {
        let mut template = spec["template"].clone();
        if unstarted_suspended {
            for (path, field) in SCHEDULING_DIRECTIVES {
                if let Some(map) = path_mut(&mut template, path).and_then(Value::as_object_mut) {
                    map.remove(*field);
                }
            }
        }
        template
    };
    if template(was) != template(now) {
        errors.push(FieldError::invalid(
            "spec.template",
            now["template"].clone(),
            "field is immutable",
        ));
    }
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
        "podReplacementPolicy",
    ] {
        checks::immutable(old, new, &["spec", field], errors);
    }
}

/// What a suspended Job that never started may change in its pod template
/// (the object under the path, and the field of it).
const SCHEDULING_DIRECTIVES: &[(&[&str], &str)] = &[
    (&["metadata"], "labels"),
    (&["metadata"], "annotations"),
    (&["spec"], "nodeSelector"),
    (&["spec"], "tolerations"),
    (&["spec"], "affinity"),
    (&["spec"], "schedulingGates"),
];

/// A Job without a manual selector selects its pods by its own uid, and its
/// pod template carries the labels that say so, as upstream generates them.
fn default_job_selector(spec: &mut Value, uid: &str, name: &str) {
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    });
    set_default(
        spec,
        "selector",
        json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } }),
    );
    if let Some(template) = default_object(spec, "template")
        && let Some(meta) = default_object(template, "metadata")
    {
        set_default(meta, "labels", json!({}));
        if let (Some(existing), Some(add)) = (meta["labels"].as_object_mut(), labels.as_object()) {
            for (k, v) in add {
                existing.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

/// `batch/v1` cronjobs.
#[derive(Debug)]
pub(crate) struct CronJobs;

/// Where a CronJob keeps the pod template of its jobs.
const CRON_JOB_TEMPLATE: &[&str] = &["spec", "jobTemplate", "spec", "template"];

impl KindStrategy for CronJobs {
    fn pod_template(&self) -> Option<&'static [&'static str]> {
        Some(CRON_JOB_TEMPLATE)
    }

    /// A Job's warnings for its job template, and on update a schedule
    /// still naming its time zone (which only an update may keep).
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        let mut out = job_warnings(written, &["spec", "jobTemplate", "spec"]);
        let schedule = written.object["spec"]["schedule"].as_str().unwrap_or("");
        if written.old.is_some() && !written.status_only() && schedule.contains("TZ") {
            // Upstream names the field `spec.spec.schedule` here.
            out.push(
                "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
                    .to_owned(),
            );
        }
        out
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        if written.status_only() {
            return;
        }
        let spec = &object["spec"];
        let old_spec = old.map(|old| &old["spec"]);
        cron_schedule(spec, old_spec, errors);
        crate::validation::job_policies::validate(
            &spec["jobTemplate"]["spec"],
            "spec.jobTemplate.spec",
            errors,
        );
        // Only a changed zone is checked: one the zone database has since
        // dropped must not block other updates.
        if old_spec.is_none_or(|old| old["timeZone"] != spec["timeZone"]) {
            cron_time_zone(&spec["timeZone"], errors);
        }
        if let Some(policy) = spec["concurrencyPolicy"].as_str()
            && !CONCURRENCY_POLICIES.contains(&policy)
        {
            errors.push(FieldError::not_supported(
                "spec.concurrencyPolicy",
                policy,
                CONCURRENCY_POLICIES,
            ));
        }
        for field in [
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ] {
            if let Some(n) = spec[field].as_i64().filter(|n| *n < 0) {
                errors.push(FieldError::invalid(
                    format!("spec.{field}"),
                    n,
                    "must be greater than or equal to 0",
                ));
            }
        }
        check_template(object, CRON_JOB_TEMPLATE, errors);
        job_restart_policy(object, CRON_JOB_TEMPLATE, errors);
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "concurrencyPolicy", json!("Allow"));
        set_default(spec, "suspend", json!(false));
        set_default(spec, "successfulJobsHistoryLimit", json!(3));
        set_default(spec, "failedJobsHistoryLimit", json!(1));
        default_template(spec, &["jobTemplate", "spec", "template", "spec"]);
    }
}

const CONCURRENCY_POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];

/// The schedule parses as upstream's cron library parses it, and names its
/// zone only in `timeZone`: a `TZ=`/`CRON_TZ=` prefix is kept only by a
/// CronJob that already had one (and then without a `timeZone` too).
fn cron_schedule(spec: &Value, old_spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    let schedule = spec["schedule"].as_str().unwrap_or("");
    if schedule.is_empty() {
        errors.push(FieldError::required("spec.schedule", ""));
        return;
    }
    let invalid = |detail: String| FieldError::invalid("spec.schedule", schedule, detail);
    if let Err(error) = skiff_common::cron::Schedule::parse(schedule, None) {
        errors.push(invalid(error.to_string()));
    }
    let had_zone =
        old_spec.is_some_and(|old| old["schedule"].as_str().unwrap_or("").contains("TZ"));
    if !schedule.contains("TZ") {
        return;
    }
    if !had_zone {
        errors.push(invalid(
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into(),
        ));
    } else if !spec["timeZone"].is_null() {
        errors.push(invalid(
            "cannot use both timeZone field and TZ or CRON_TZ in schedule".into(),
        ));
    }
}

/// `timeZone`, when set, is a zone of the IANA database, named explicitly.
fn cron_time_zone(zone: &Value, errors: &mut Vec<FieldError>) {
    let Some(name) = zone.as_str() else {
        return;
    };
    let invalid = |detail: String| FieldError::invalid("spec.timeZone", name, detail);
    if name.is_empty() {
        errors.push(invalid("timeZone must be nil or non-empty string".into()));
        return;
    }
    let well_formed = name.split('/').all(|part| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && (1..=14).contains(&part.len())
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    });
    if well_formed && name.eq_ignore_ascii_case("Local") {
        errors.push(invalid(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        ));
    } else if !well_formed || jiff::tz::TimeZone::get(name).is_err() {
        errors.push(invalid(format!("unknown time zone {name}")));
    }
}

/// Core `podtemplates`: checked as pod specs, not defaulted.
#[derive(Debug)]
pub(crate) struct PodTemplates;

impl KindStrategy for PodTemplates {
    checked_template!(&["template"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_checked_where_it_is_kept() {
        let cron_job: &[&str] = &["spec", "jobTemplate", "spec", "template"];
        for (template, field) in [
            (SPEC_TEMPLATE, "spec.template.spec.containers"),
            (cron_job, "spec.jobTemplate.spec.template.spec.containers"),
            (&["template"][..], "template.spec.containers"),
        ] {
            let missing = format!("{field}: Required value");
            let mut errors = Vec::new();
            check_template(&json!({}), template, &mut errors);
            assert!(errors.iter().any(|e| e.render() == missing), "{errors:?}");
            let pod = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
            let object = template.iter().rev().fold(pod, |inner, key| {
                Value::Object([(key.to_string(), inner)].into_iter().collect())
            });
            let mut errors = Vec::new();
            check_template(&object, template, &mut errors);
            assert!(!errors.iter().any(|e| e.render() == missing), "{errors:?}");
        }
    }
}
