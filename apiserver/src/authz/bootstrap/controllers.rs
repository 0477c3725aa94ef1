//! The roles of the controllers skiff runs, one per controller as upstream
//! names them (`system:controller:<account>`), each bound to the service
//! account `kube-system/<account>` a controller runs as when it has its
//! own identity. The rules are upstream's for the same controller, widened
//! where skiff's controller does more (status written by patch, node
//! lifecycle evicting through `pods/eviction` and reading Leases).
//!
//! The controllers' shared informers list and watch under the controller
//! manager's own identity (`system:kube-controller-manager`), as upstream.

use super::table::*;

/// The controller manager's controller names with the account (and role
/// suffix) each runs as.
pub const CONTROLLER_ACCOUNTS: &[(&str, &str)] = &[
    ("namespace", "namespace-controller"),
    ("garbage-collector", "generic-garbage-collector"),
    ("serviceaccount", "service-account-controller"),
    ("root-ca-cert-publisher", "root-ca-cert-publisher"),
    ("endpoint", "endpoint-controller"),
    ("endpointslice", "endpointslice-controller"),
    ("servicelb", "service-lb-controller"),
    ("node-lifecycle", "node-controller"),
    ("node-ipam", "node-controller"),
    ("certificates", "certificate-controller"),
    ("pod-garbage-collector", "pod-garbage-collector"),
    ("replicaset", "replicaset-controller"),
    ("replicationcontroller", "replication-controller"),
    ("cronjob", "cronjob-controller"),
    ("daemonset", "daemon-set-controller"),
    ("statefulset", "statefulset-controller"),
    ("job", "job-controller"),
    ("deployment", "deployment-controller"),
    ("disruption", "disruption-controller"),
    (
        "clusterrole-aggregation",
        "clusterrole-aggregation-controller",
    ),
    ("resourcequota", "resourcequota-controller"),
    ("horizontalpodautoscaling", "horizontal-pod-autoscaler"),
    ("persistentvolume-binder", "persistent-volume-binder"),
    ("pvc-protection", "pvc-protection-controller"),
    ("pv-protection", "pv-protection-controller"),
];

/// Every controller role, named `system:controller:<account>`.
pub fn roles() -> Vec<(&'static str, Vec<Rule>)> {
    vec![
        (
            "clusterrole-aggregation-controller",
            vec![
                // It writes rules it does not hold itself: escalate.
                allow(
                    &["escalate", "get", "list", "watch", "update", "patch"],
                    &[RBAC],
                    &["clusterroles"],
                ),
            ],
        ),
        (
            "certificate-controller",
            vec![
                allow(
                    &["get", "list", "watch", "delete"],
                    &[CERTIFICATES],
                    &["certificatesigningrequests"],
                ),
                allow(
                    &["update"],
                    &[CERTIFICATES],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                // skiff approves and signs nodes' serving and client
                // certificates, and signs users' once a human approved.
                allow(&["approve", "sign"], &[CERTIFICATES], &["signers"]).names(&[
                    "kubernetes.io/kubelet-serving",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                ]),
                allow(&["sign"], &[CERTIFICATES], &["signers"])
                    .names(&["kubernetes.io/kube-apiserver-client"]),
                allow(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
                // The approver checks the Node a request names.
                allow(&["get", "list", "watch"], &[CORE], &["nodes"]),
                events_rule(),
            ],
        ),
        (
            "cronjob-controller",
            vec![
                allow(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                allow(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &[BATCH],
                    &["jobs"],
                ),
                allow(&["update", "patch"], &[BATCH], &["cronjobs/status"]),
                allow(&["update"], &[BATCH], &["cronjobs/finalizers"]),
                allow(&["list", "delete"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                allow(READ, &[EXTENSIONS, APPS], &["deployments", "replicasets"]),
                allow(READ, &[APPS], &["statefulsets"]),
                allow(READ, &[CORE], &["replicationcontrollers"]),
                allow(READ, &[POLICY], &["poddisruptionbudgets"]),
                allow(&["update"], &[POLICY], &["poddisruptionbudgets/status"]),
                events_rule(),
            ],
        ),
        (
            "daemon-set-controller",
            [
                owned(READ, &[EXTENSIONS, APPS], "daemonsets"),
                vec![
                    allow(&["list", "watch"], &[CORE], &["nodes"]),
                    allow(
                        &["list", "watch", "create", "delete", "patch"],
                        &[CORE],
                        &["pods"],
                    ),
                    allow(&["create"], &[CORE], &["pods/binding"]),
                    allow(
                        &[
                            "get", "list", "watch", "create", "delete", "update", "patch",
                        ],
                        &[APPS],
                        &["controllerrevisions"],
                    ),
                    events_rule(),
                ],
            ]
            .concat(),
        ),
        (
            "deployment-controller",
            [
                owned(
                    &["get", "list", "watch", "update", "patch"],
                    &[EXTENSIONS, APPS],
                    "deployments",
                ),
                vec![
                    allow(
                        &[
                            "get", "list", "watch", "create", "update", "patch", "delete",
                        ],
                        &[APPS, EXTENSIONS],
                        &["replicasets"],
                    ),
                    allow(&["get", "list", "watch", "update"], &[CORE], &["pods"]),
                    events_rule(),
                ],
            ]
            .concat(),
        ),
        (
            "endpoint-controller",
            vec![
                allow(READ, &[CORE], &["services", "pods"]),
                allow(
                    &["get", "list", "create", "update", "delete"],
                    &[CORE],
                    &["endpoints"],
                ),
                allow(&["create"], &[CORE], &["endpoints/restricted"]),
                events_rule(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                allow(READ, &[CORE], &["services", "pods", "nodes"]),
                allow(&["update"], &[CORE], &["services/finalizers"]),
                allow(
                    &["get", "list", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                events_rule(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                allow(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events_rule(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                allow(READ, &[AUTOSCALING], &["horizontalpodautoscalers"]),
                allow(
                    &["update"],
                    &[AUTOSCALING],
                    &["horizontalpodautoscalers/status"],
                ),
                // Any kind with a scale subresource can be a target.
                allow(&["get", "update"], &["*"], &["*/scale"]),
                allow(&["list"], &[CORE], &["pods"]),
                allow(&["list"], &["metrics.k8s.io"], &["pods"]),
                allow(&["get", "list"], &["custom.metrics.k8s.io"], &["*"]),
                allow(&["get", "list"], &["external.metrics.k8s.io"], &["*"]),
                events_rule(),
            ],
        ),
        (
            "job-controller",
            [
                // It also expires finished Jobs (upstream's
                // ttl-after-finished controller, which may delete them).
                owned(
                    &["get", "list", "watch", "update", "patch", "delete"],
                    &[BATCH],
                    "jobs",
                ),
                vec![
                    allow(
                        &["list", "watch", "create", "delete", "patch"],
                        &[CORE],
                        &["pods"],
                    ),
                    events_rule(),
                ],
            ]
            .concat(),
        ),
        (
            "namespace-controller",
            vec![
                allow(
                    &["get", "list", "watch", "delete"],
                    &[CORE],
                    &["namespaces"],
                ),
                allow(
                    &["update", "patch"],
                    &[CORE],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                allow(
                    &["get", "list", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "node-controller",
            vec![
                allow(
                    &["get", "list", "update", "delete", "patch"],
                    &[CORE],
                    &["nodes"],
                ),
                allow(&["patch", "update"], &[CORE], &["nodes/status"]),
                allow(&["patch", "update"], &[CORE], &["pods/status"]),
                allow(&["get", "list", "delete"], &[CORE], &["pods"]),
                allow(&["create"], &[CORE], &["pods/eviction"]),
                allow(READ, &[COORDINATION], &["leases"]),
                events_rule(),
            ],
        ),
        (
            // Only what skiff's part of it does: the default StorageClass
            // of claims created before there was one, and a volume whose
            // claim is gone marked Released.
            "persistent-volume-binder",
            vec![
                allow(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                allow(READ, &[CORE], &["persistentvolumes"]),
                allow(&["update", "patch"], &[CORE], &["persistentvolumes/status"]),
                allow(READ, &[STORAGE], &["storageclasses"]),
                events_rule(),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                allow(
                    &["get", "list", "watch", "update", "patch"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                allow(&["get", "list", "watch"], &[CORE], &["pods"]),
            ],
        ),
        (
            "pv-protection-controller",
            vec![allow(
                &["get", "list", "watch", "update", "patch"],
                &[CORE],
                &["persistentvolumes"],
            )],
        ),
        (
            "pod-garbage-collector",
            vec![
                allow(&["get", "list", "watch", "delete"], &[CORE], &["pods"]),
                allow(&["get", "list"], &[CORE], &["nodes"]),
                allow(&["patch"], &[CORE], &["pods/status"]),
            ],
        ),
        (
            "replicaset-controller",
            replica_controller(&[APPS, EXTENSIONS], "replicasets"),
        ),
        (
            "replication-controller",
            replica_controller(&[CORE], "replicationcontrollers"),
        ),
        (
            "resourcequota-controller",
            vec![
                // It counts whatever a quota names, of any resource.
                allow(&["list", "watch"], &["*"], &["*"]),
                allow(&["update"], &[CORE], &["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                allow(&["create", "update"], &[CORE], &["configmaps"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                allow(&["create"], &[CORE], &["serviceaccounts"]),
                events_rule(),
            ],
        ),
        (
            "service-lb-controller",
            vec![
                allow(READ, &[CORE], &["services", "nodes"]),
                allow(&["update", "patch"], &[CORE], &["services/status"]),
                events_rule(),
            ],
        ),
        (
            "statefulset-controller",
            [
                vec![allow(&["list", "watch"], &[CORE], &["pods"])],
                owned(READ, &[APPS], "statefulsets"),
                vec![
                    allow(
                        &["get", "create", "delete", "update", "patch"],
                        &[CORE],
                        &["pods"],
                    ),
                    allow(
                        &[
                            "get", "create", "delete", "update", "patch", "list", "watch",
                        ],
                        &[APPS],
                        &["controllerrevisions"],
                    ),
                    allow(
                        &["get", "list", "watch", "create", "update", "delete"],
                        &[CORE],
                        &["persistentvolumeclaims"],
                    ),
                    events_rule(),
                ],
            ]
            .concat(),
        ),
    ]
}

/// The ReplicaSet and ReplicationController controllers' rules: upstream
/// runs one controller for both kinds, so they hold the same rules on
/// their own `kind` and on pods.
fn replica_controller(groups: &[&str], kind: &str) -> Vec<Rule> {
    [
        owned(&["get", "list", "watch", "update"], groups, kind),
        vec![
            allow(
                &["list", "watch", "patch", "create", "delete"],
                &[CORE],
                &["pods"],
            ),
            events_rule(),
        ],
    ]
    .concat()
}

/// The ClusterRoles, as specs.
pub fn cluster_roles() -> Vec<RoleSpec> {
    roles()
        .into_iter()
        .map(|(account, rules)| RoleSpec::cluster(role_name(account), rules))
        .collect()
}

/// One ClusterRoleBinding per role, to its account in kube-system.
pub fn cluster_role_bindings() -> Vec<BindingSpec> {
    roles()
        .into_iter()
        .map(|(account, _)| {
            BindingSpec::cluster(
                role_name(account),
                vec![service_account("kube-system", account)],
            )
        })
        .collect()
}

/// `system:controller:<account>`.
pub fn role_name(account: &str) -> String {
    format!("system:controller:{account}")
}
