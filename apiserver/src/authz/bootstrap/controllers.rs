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
    (
        "clusterrole-aggregation",
        "clusterrole-aggregation-controller",
    ),
    ("resourcequota", "resourcequota-controller"),
    ("horizontalpodautoscaling", "horizontal-pod-autoscaler"),
];

/// Every controller role, named `system:controller:<account>`.
pub fn roles() -> Vec<(&'static str, Vec<Rule>)> {
    let read = |groups: &[&str], resources: &[&str]| rule(READ).groups(groups).resources(resources);
    vec![
        (
            "clusterrole-aggregation-controller",
            vec![
                // It writes rules it does not hold itself: escalate.
                rule(&["escalate", "get", "list", "watch", "update", "patch"])
                    .groups(&[RBAC])
                    .resources(&["clusterroles"]),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests"]),
                rule(&["update"]).groups(&[CERTIFICATES]).resources(&[
                    "certificatesigningrequests/status",
                    "certificatesigningrequests/approval",
                ]),
                // skiff signs kubelet serving and kubelet client
                // certificates only.
                rule(&["approve", "sign"])
                    .groups(&[CERTIFICATES])
                    .resources(&["signers"])
                    .names(&[
                        "kubernetes.io/kubelet-serving",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                    ]),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"]),
                // The approver checks the Node a request names.
                rule(&["get", "list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                events_rule(),
            ],
        ),
        (
            "cronjob-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs"]),
                rule(&[
                    "get", "list", "watch", "create", "update", "delete", "patch",
                ])
                .groups(&[BATCH])
                .resources(&["jobs"]),
                rule(&["update", "patch"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs/status"]),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs/finalizers"]),
                rule(&["list", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                read(&[EXTENSIONS, APPS], &["daemonsets"]),
                rule(&["update", "patch"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["daemonsets/status"]),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["daemonsets/finalizers"]),
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                rule(&["list", "watch", "create", "delete", "patch"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["pods/binding"]),
                rule(&[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ])
                .groups(&[APPS])
                .resources(&["controllerrevisions"]),
                events_rule(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments"]),
                rule(&["update", "patch"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments/status"]),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments/finalizers"]),
                rule(&[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ])
                .groups(&[APPS, EXTENSIONS])
                .resources(&["replicasets"]),
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                read(&[CORE], &["services", "pods"]),
                rule(&["get", "list", "create", "update", "delete"])
                    .groups(&[CORE])
                    .resources(&["endpoints"]),
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["endpoints/restricted"]),
                events_rule(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                read(&[CORE], &["services", "pods", "nodes"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["services/finalizers"]),
                rule(&["get", "list", "create", "update", "delete"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"]),
                events_rule(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                rule(&["get", "list", "watch", "patch", "update", "delete"])
                    .groups(&["*"])
                    .resources(&["*"]),
                events_rule(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                read(&[AUTOSCALING], &["horizontalpodautoscalers"]),
                rule(&["update"])
                    .groups(&[AUTOSCALING])
                    .resources(&["horizontalpodautoscalers/status"]),
                // Any kind with a scale subresource can be a target.
                rule(&["get", "update"])
                    .groups(&["*"])
                    .resources(&["*/scale"]),
                rule(&["list"]).groups(&[CORE]).resources(&["pods"]),
                rule(&["list"])
                    .groups(&["metrics.k8s.io"])
                    .resources(&["pods"]),
                rule(&["get", "list"])
                    .groups(&["custom.metrics.k8s.io"])
                    .resources(&["*"]),
                rule(&["get", "list"])
                    .groups(&["external.metrics.k8s.io"])
                    .resources(&["*"]),
                events_rule(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[BATCH])
                    .resources(&["jobs"]),
                rule(&["update", "patch"])
                    .groups(&[BATCH])
                    .resources(&["jobs/status"]),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["jobs/finalizers"]),
                rule(&["list", "watch", "create", "delete", "patch"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[CORE])
                    .resources(&["namespaces"]),
                rule(&["update", "patch"])
                    .groups(&[CORE])
                    .resources(&["namespaces/finalize", "namespaces/status"]),
                rule(&["get", "list", "delete", "deletecollection"])
                    .groups(&["*"])
                    .resources(&["*"]),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(&["get", "list", "update", "delete", "patch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                rule(&["patch", "update"])
                    .groups(&[CORE])
                    .resources(&["nodes/status"]),
                rule(&["patch", "update"])
                    .groups(&[CORE])
                    .resources(&["pods/status"]),
                rule(&["get", "list", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["pods/eviction"]),
                read(&[COORDINATION], &["leases"]),
                events_rule(),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                rule(&["get", "list"]).groups(&[CORE]).resources(&["nodes"]),
                rule(&["patch"]).groups(&[CORE]).resources(&["pods/status"]),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets"]),
                rule(&["update", "patch"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets/status"]),
                rule(&["update"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets/finalizers"]),
                rule(&["list", "watch", "patch", "create", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["replicationcontrollers"]),
                rule(&["update", "patch"])
                    .groups(&[CORE])
                    .resources(&["replicationcontrollers/status"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["replicationcontrollers/finalizers"]),
                rule(&["list", "watch", "patch", "create", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                // It counts whatever a quota names, of any resource.
                rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"])
                    .groups(&[CORE])
                    .resources(&["configmaps"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["serviceaccounts"]),
                events_rule(),
            ],
        ),
        (
            "service-lb-controller",
            vec![
                read(&[CORE], &["services", "nodes"]),
                rule(&["update", "patch"])
                    .groups(&[CORE])
                    .resources(&["services/status"]),
                events_rule(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                read(&[APPS], &["statefulsets"]),
                rule(&["update", "patch"])
                    .groups(&[APPS])
                    .resources(&["statefulsets/status"]),
                rule(&["update"])
                    .groups(&[APPS])
                    .resources(&["statefulsets/finalizers"]),
                rule(&["get", "create", "delete", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                rule(&[
                    "get", "create", "delete", "update", "patch", "list", "watch",
                ])
                .groups(&[APPS])
                .resources(&["controllerrevisions"]),
                rule(&["get", "create", "update", "delete"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                events_rule(),
            ],
        ),
    ]
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
