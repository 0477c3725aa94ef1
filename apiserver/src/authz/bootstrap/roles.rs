//! The default roles for people and for the system components (not the
//! controllers, which are in `controllers.rs`), with their bindings. The
//! rule lists follow what upstream grants each role; where skiff runs a
//! component upstream does not have (the cluster DNS that publishes its
//! own Service, the local-path provisioner), it has a `system:skiff:*`
//! role of its own with just what it does.

use super::table::*;

/// The group whose members are authenticated.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";

/// The label that folds a role into `admin`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// The label that folds a role into `edit`.
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// The label that folds a role into `view`.
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The user upstream binds `system:kube-dns` to, besides the service
/// account `kube-system/kube-dns` the in-process DNS runs as.
pub const DNS_USER: &str = "system:kube-dns";
/// The service account (in kube-system) the controller manager's local-path
/// provisioner runs as: k3s's name for its provisioner.
pub const LOCAL_PATH_ACCOUNT: &str = "local-path-provisioner-service-account";
/// The user `--simulated-nodes` hollow nodes run as.
pub const SIMULATED_NODES_USER: &str = "system:skiff:simulated-nodes";
/// The server's own identity towards its embedded node: it puts the
/// control-plane role labels on that Node, which NodeRestriction keeps the
/// node itself from setting (k3s's server does the same with its own client).
pub const SERVER_USER: &str = "system:skiff:server";
/// The user that applies the files of `DATA_DIR/server/manifests`.
pub const DEPLOY_USER: &str = "system:skiff:deploy";
/// The built-in ingress controller (`skiff-ingress`).
pub const INGRESS_USER: &str = "system:skiff:ingress";
/// The network policy controller (`skiff-netpol`) inside `skiff server`.
pub const NETWORK_POLICY_USER: &str = "system:skiff:network-policy";

/// Paths every client reads to find its way (discovery, OpenAPI, health).
const DISCOVERY_PATHS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
];

/// Paths that are safe to show to anyone, even without credentials.
const PUBLIC_INFO_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// The default ClusterRoles, upstream's set and skiff's own components'.
pub fn cluster_roles() -> Vec<RoleSpec> {
    vec![
        RoleSpec::cluster(
            "cluster-admin",
            vec![allow(&["*"], &["*"], &["*"]), rule(&["*"]).urls(&["*"])],
        ),
        RoleSpec::cluster(
            "system:discovery",
            vec![rule(&["get"]).urls(DISCOVERY_PATHS)],
        ),
        RoleSpec::cluster(
            "system:public-info-viewer",
            vec![rule(&["get"]).urls(PUBLIC_INFO_PATHS)],
        ),
        RoleSpec::cluster(
            "system:monitoring",
            vec![rule(&["get"]).urls(&[
                "/metrics",
                "/metrics/slis",
                "/livez",
                "/readyz",
                "/healthz",
                "/livez/*",
                "/readyz/*",
                "/healthz/*",
            ])],
        ),
        RoleSpec::cluster(
            "system:basic-user",
            vec![
                allow(
                    &["create"],
                    &[AUTHORIZATION],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                allow(&["create"], &[AUTHENTICATION], &["selfsubjectreviews"]),
            ],
        ),
        RoleSpec::cluster(
            "system:service-account-issuer-discovery",
            vec![rule(&["get"]).urls(&[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ])],
        ),
        // The user-facing roles are filled from the roles carrying their
        // aggregation label; edit is part of admin, view part of edit.
        RoleSpec::cluster("admin", Vec::new()).aggregating(AGGREGATE_TO_ADMIN),
        RoleSpec::cluster("edit", Vec::new())
            .aggregating(AGGREGATE_TO_EDIT)
            .labelled(AGGREGATE_TO_ADMIN),
        RoleSpec::cluster("view", Vec::new())
            .aggregating(AGGREGATE_TO_VIEW)
            .labelled(AGGREGATE_TO_EDIT),
        RoleSpec::cluster("system:aggregate-to-admin", aggregate_to_admin())
            .labelled(AGGREGATE_TO_ADMIN),
        RoleSpec::cluster("system:aggregate-to-edit", aggregate_to_edit())
            .labelled(AGGREGATE_TO_EDIT),
        RoleSpec::cluster("system:aggregate-to-view", aggregate_to_view())
            .labelled(AGGREGATE_TO_VIEW),
        // Who may read the resource metrics: everyone who may view, as
        // the ClusterRole metrics-server installs.
        RoleSpec::cluster(
            "system:aggregated-metrics-reader",
            vec![allow(
                &["get", "list", "watch"],
                &["metrics.k8s.io"],
                &["pods", "nodes"],
            )],
        )
        .labelled(AGGREGATE_TO_VIEW)
        .labelled(AGGREGATE_TO_EDIT)
        .labelled(AGGREGATE_TO_ADMIN),
        RoleSpec::cluster(
            "system:auth-delegator",
            vec![
                allow(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
                allow(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
            ],
        ),
        RoleSpec::cluster("system:node", node()),
        RoleSpec::cluster(
            "system:node-proxier",
            vec![
                allow(&["list", "watch"], &[CORE], &["services", "endpoints"]),
                allow(&["get", "list", "watch"], &[CORE], &["nodes"]),
                events_rule(),
                allow(&["list", "watch"], &[DISCOVERY], &["endpointslices"]),
            ],
        ),
        RoleSpec::cluster(
            "system:node-bootstrapper",
            vec![allow(
                &["create", "get", "list", "watch"],
                &[CERTIFICATES],
                &["certificatesigningrequests"],
            )],
        ),
        // What the kubelet TLS bootstrap is checked against (upstream's
        // csrapproving controller asks a SubjectAccessReview for these
        // subresources): a new node's client certificate, and a node
        // renewing its own.
        RoleSpec::cluster(
            NODE_CLIENT_ROLE,
            vec![allow(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        RoleSpec::cluster(
            SELF_NODE_CLIENT_ROLE,
            vec![allow(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        // k3s's /cacerts: the CA a joining agent checks against its token.
        RoleSpec::cluster(
            "system:skiff:cacerts",
            vec![rule(&["get"]).urls(&["/cacerts"])],
        ),
        RoleSpec::cluster(
            "system:kubelet-api-admin",
            vec![
                allow(&["get", "list", "watch"], &[CORE], &["nodes"]),
                allow(&["proxy"], &[CORE], &["nodes"]),
                allow(
                    &["*"],
                    &[CORE],
                    &[
                        "nodes/proxy",
                        "nodes/metrics",
                        "nodes/spec",
                        "nodes/stats",
                        "nodes/log",
                    ],
                ),
            ],
        ),
        RoleSpec::cluster("system:kube-scheduler", kube_scheduler()),
        RoleSpec::cluster(
            "system:volume-scheduler",
            vec![
                allow(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                // skiff's scheduler annotates the claim's selected node by
                // patch where upstream's updates it.
                allow(
                    &["get", "list", "watch", "update", "patch"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                allow(READ, &[STORAGE], &["storageclasses"]),
            ],
        ),
        RoleSpec::cluster("system:kube-controller-manager", kube_controller_manager()),
        RoleSpec::cluster(
            "system:kube-dns",
            vec![
                allow(&["list", "watch"], &[CORE], &["endpoints", "services"]),
                allow(&["list", "watch"], &[DISCOVERY], &["endpointslices"]),
            ],
        ),
        // skiff's DNS also answers for pods and publishes itself (its
        // Service and EndpointSlice in kube-system, see `dns_publisher`).
        RoleSpec::cluster(
            "system:skiff:dns",
            vec![allow(&["list", "watch"], &[CORE], &["pods", "namespaces"])],
        ),
        RoleSpec::cluster(
            "system:persistent-volume-provisioner",
            vec![
                allow(
                    &["get", "list", "watch", "create", "delete"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                allow(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                allow(READ, &[STORAGE], &["storageclasses"]),
                allow(
                    &["watch", "create", "update", "patch"],
                    &[CORE],
                    &["events"],
                ),
            ],
        ),
        RoleSpec::cluster("system:skiff:local-path-provisioner", local_path()),
        RoleSpec::cluster("system:skiff:simulated-nodes", simulated_nodes()),
        // The built-in ingress: reads what routing and TLS need (Secrets
        // too, as every ingress controller does), writes Ingress status and
        // creates its own IngressClass; nothing else.
        RoleSpec::cluster(
            "system:skiff:ingress",
            vec![
                allow(READ, &[NETWORKING], &["ingresses", "ingressclasses"]),
                allow(&["update"], &[NETWORKING], &["ingresses/status"]),
                allow(&["create"], &[NETWORKING], &["ingressclasses"]),
                allow(READ, &[CORE], &["services", "secrets"]),
                allow(READ, &[DISCOVERY], &["endpointslices"]),
            ],
        ),
        // The network policy controller only reads what its rules come
        // from (k3s's agent does this as system:k3s-controller).
        RoleSpec::cluster(
            "system:skiff:network-policy",
            vec![
                allow(&["list", "watch"], &[CORE], &["pods", "namespaces"]),
                allow(&["list", "watch"], &[NETWORKING], &["networkpolicies"]),
            ],
        ),
        RoleSpec::cluster(
            "system:skiff:server",
            vec![allow(&["get", "patch"], &[CORE], &["nodes"])],
        ),
    ]
}

/// The default ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<BindingSpec> {
    vec![
        BindingSpec::cluster("cluster-admin", vec![group(crate::authz::MASTERS_GROUP)]),
        BindingSpec::cluster("system:discovery", vec![group(AUTHENTICATED)]),
        BindingSpec::cluster("system:basic-user", vec![group(AUTHENTICATED)]),
        BindingSpec::cluster(
            "system:public-info-viewer",
            vec![group(AUTHENTICATED), group(UNAUTHENTICATED)],
        ),
        BindingSpec::cluster(
            "system:skiff:cacerts",
            vec![group(AUTHENTICATED), group(UNAUTHENTICATED)],
        ),
        // Bootstrap tokens (and the server token) may ask for node client
        // certificates, which the csrapproving controller approves; nodes
        // may renew their own (kubeadm binds the same three).
        BindingSpec::cluster("system:skiff:node-bootstrapper", vec![group(BOOTSTRAPPERS)])
            .of("system:node-bootstrapper"),
        BindingSpec::cluster(
            "system:skiff:node-autoapprove-bootstrap",
            vec![group(BOOTSTRAPPERS)],
        )
        .of(NODE_CLIENT_ROLE),
        BindingSpec::cluster(
            "system:skiff:node-autoapprove-certificate-rotation",
            vec![group("system:nodes")],
        )
        .of(SELF_NODE_CLIENT_ROLE),
        BindingSpec::cluster("system:monitoring", vec![group("system:monitoring")]),
        BindingSpec::cluster(
            "system:service-account-issuer-discovery",
            vec![group("system:serviceaccounts")],
        ),
        // Nodes are authorized by the Node authorizer; upstream keeps this
        // binding with no subjects.
        BindingSpec::cluster("system:node", Vec::new()),
        BindingSpec::cluster("system:node-proxier", vec![user("system:kube-proxy")]),
        // The API server's own client certificate towards node servers
        // (logs, exec, attach, port-forward), which they check with a
        // SubjectAccessReview; bound as k3s and kubeadm bind it.
        BindingSpec::cluster(
            "kube-apiserver-kubelet-admin",
            vec![user(crate::kubelet_client::KUBELET_CLIENT_USER)],
        )
        .of("system:kubelet-api-admin"),
        BindingSpec::cluster("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        BindingSpec::cluster(
            "system:volume-scheduler",
            vec![user("system:kube-scheduler")],
        ),
        BindingSpec::cluster(
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        BindingSpec::cluster("system:kube-dns", dns_subjects()),
        BindingSpec::cluster("system:skiff:dns", dns_subjects()),
        BindingSpec::cluster(
            "system:skiff:local-path-provisioner",
            vec![service_account("kube-system", LOCAL_PATH_ACCOUNT)],
        ),
        BindingSpec::cluster(
            "system:skiff:simulated-nodes",
            vec![user(SIMULATED_NODES_USER)],
        ),
        BindingSpec::cluster("system:skiff:server", vec![user(SERVER_USER)]),
        BindingSpec::cluster("system:skiff:ingress", vec![user(INGRESS_USER)]),
        BindingSpec::cluster(
            "system:skiff:network-policy",
            vec![user(NETWORK_POLICY_USER)],
        ),
        // The manifests directory may hold any kind, RBAC included (whose
        // writes need every permission they grant), so no narrower role
        // could apply it. Writing there already takes what cluster-admin
        // gives: the directory sits in the 0700 data dir next to the CA key
        // and the admin kubeconfig. The identity of its own keeps the audit
        // log and managedFields telling the files' writes apart.
        BindingSpec::cluster("system:skiff:deploy", vec![user(DEPLOY_USER)]).of("cluster-admin"),
    ]
}

/// Namespaced defaults: leader-election locks and the DNS's own objects.
pub fn roles() -> Vec<RoleSpec> {
    vec![
        RoleSpec::namespaced(
            "kube-system",
            "extension-apiserver-authentication-reader",
            vec![
                allow(READ, &[CORE], &["configmaps"])
                    .names(&["extension-apiserver-authentication"]),
            ],
        ),
        leader_locking_role("kube-controller-manager"),
        leader_locking_role("kube-scheduler"),
        // Upstream's token cleaner: deletes expired bootstrap tokens.
        RoleSpec::namespaced(
            "kube-system",
            "system:controller:token-cleaner",
            vec![
                allow(&["delete", "get", "list", "watch"], &[CORE], &["secrets"]),
                events_rule(),
            ],
        ),
        // k3s's node-password cleanup: a deleted Node's password Secret.
        RoleSpec::namespaced(
            "kube-system",
            "system:controller:node-password-controller",
            vec![allow(&["get", "delete"], &[CORE], &["secrets"])],
        ),
        // What `skiff-dns` writes when it publishes itself.
        RoleSpec::namespaced(
            "kube-system",
            "system:skiff:dns-publisher",
            vec![
                allow(&["get", "create"], &[CORE], &["services"]),
                allow(
                    &["get", "create", "update"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                // The slice every server shared before slices were per
                // server; only that one.
                allow(&["delete"], &[DISCOVERY], &["endpointslices"]).names(&["kube-dns-skiff"]),
                // Its slice's owner: the server's identity Lease.
                allow(&["get"], &[COORDINATION], &["leases"]),
            ],
        ),
    ]
}

/// The default RoleBindings, each in its namespace.
pub fn role_bindings() -> Vec<BindingSpec> {
    vec![
        BindingSpec::namespaced(
            "kube-system",
            "system::extension-apiserver-authentication-reader",
            vec![
                user("system:kube-controller-manager"),
                user("system:kube-scheduler"),
            ],
        )
        .of("extension-apiserver-authentication-reader"),
        leader_locking_binding("kube-controller-manager"),
        leader_locking_binding("kube-scheduler"),
        BindingSpec::namespaced(
            "kube-system",
            "system:controller:token-cleaner",
            vec![service_account("kube-system", TOKEN_CLEANER_ACCOUNT)],
        ),
        BindingSpec::namespaced(
            "kube-system",
            "system:controller:node-password-controller",
            vec![service_account("kube-system", NODE_PASSWORD_ACCOUNT)],
        ),
        BindingSpec::namespaced("kube-system", "system:skiff:dns-publisher", dns_subjects()),
    ]
}

/// The group of bootstrap-token identities.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";
/// Upstream's role allowing a new node's client certificate request.
pub const NODE_CLIENT_ROLE: &str =
    "system:certificates.k8s.io:certificatesigningrequests:nodeclient";
/// Upstream's role allowing a node to renew its own client certificate.
pub const SELF_NODE_CLIENT_ROLE: &str =
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient";
/// The service account of the token cleaner.
pub const TOKEN_CLEANER_ACCOUNT: &str = "token-cleaner";
/// The service account of the node-password cleanup.
pub const NODE_PASSWORD_ACCOUNT: &str = "node-password-controller";

/// Who the DNS runs as: upstream's account, and upstream's user.
fn dns_subjects() -> Vec<Subject> {
    vec![service_account("kube-system", "kube-dns"), user(DNS_USER)]
}

fn aggregate_to_admin() -> Vec<Rule> {
    vec![
        allow(
            &["create"],
            &[AUTHORIZATION],
            &["localsubjectaccessreviews"],
        ),
        allow(READ_WRITE, &[RBAC], &["roles", "rolebindings"]),
    ]
}

fn aggregate_to_edit() -> Vec<Rule> {
    vec![
        // Reading these can lead to more rights (secrets, exec), so they
        // are edit's, not view's.
        allow(
            READ,
            &[CORE],
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        allow(&["impersonate"], &[CORE], &["serviceaccounts"]),
        allow(
            WRITE,
            &[CORE],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        allow(&["create"], &[CORE], &["pods/eviction"]),
        allow(
            WRITE,
            &[CORE],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        allow(&["create"], &[CORE], &["serviceaccounts/token"]),
        allow(
            WRITE,
            &[APPS],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        allow(WRITE, &[AUTOSCALING], &["horizontalpodautoscalers"]),
        allow(WRITE, &[BATCH], &["jobs", "cronjobs"]),
        allow(
            WRITE,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        allow(WRITE, &[POLICY], &["poddisruptionbudgets"]),
        allow(WRITE, &[NETWORKING], &["networkpolicies", "ingresses"]),
        allow(READ_WRITE, &[COORDINATION], &["leases"]),
    ]
}

fn aggregate_to_view() -> Vec<Rule> {
    vec![
        allow(
            READ,
            &[CORE],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        allow(
            READ,
            &[CORE],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        // In a RoleBinding this reads the binding's own namespace only.
        allow(READ, &[CORE], &["namespaces"]),
        allow(READ, &[DISCOVERY], &["endpointslices"]),
        allow(
            READ,
            &[APPS],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        allow(
            READ,
            &[AUTOSCALING],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        allow(
            READ,
            &[BATCH],
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        allow(
            READ,
            &[EXTENSIONS],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        allow(
            READ,
            &[POLICY],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        allow(
            READ,
            &[NETWORKING],
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

fn node() -> Vec<Rule> {
    vec![
        allow(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
        allow(
            &["create"],
            &[AUTHORIZATION],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        allow(READ, &[CORE], &["services"]),
        allow(&["create", "get", "list", "watch"], &[CORE], &["nodes"]),
        allow(&["update", "patch"], &[CORE], &["nodes/status"]),
        allow(&["update", "patch"], &[CORE], &["nodes"]),
        allow(&["create", "update", "patch"], &[CORE], &["events"]),
        allow(READ, &[CORE], &["pods"]),
        allow(&["create", "delete"], &[CORE], &["pods"]),
        allow(&["update", "patch"], &[CORE], &["pods/status"]),
        allow(&["create"], &[CORE], &["pods/eviction"]),
        allow(READ, &[CORE], &["secrets", "configmaps"]),
        allow(
            &["get"],
            &[CORE],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        allow(&["get"], &[CORE], &["endpoints"]),
        allow(
            &["create", "get", "list", "watch"],
            &[CERTIFICATES],
            &["certificatesigningrequests"],
        ),
        allow(
            &["get", "create", "update", "patch", "delete"],
            &[COORDINATION],
            &["leases"],
        ),
        allow(&["get"], &[STORAGE], &["volumeattachments"]),
        allow(&["create"], &[CORE], &["serviceaccounts/token"]),
        allow(
            &["get", "update", "patch"],
            &[CORE],
            &["persistentvolumeclaims/status"],
        ),
        allow(READ, &[STORAGE], &["csidrivers"]),
        allow(
            &["get", "create", "update", "patch", "delete"],
            &[STORAGE],
            &["csinodes"],
        ),
        allow(READ, &[NODE], &["runtimeclasses"]),
    ]
}

/// What an upstream control-plane `component` (`kube-scheduler`,
/// `kube-controller-manager`) needs to record events and to hold its
/// leader lock, as a Lease or as the older Endpoints object; the lock
/// object's name is the component's.
fn leader_election(component: &str) -> Vec<Rule> {
    vec![
        events_rule(),
        allow(&["create"], &[COORDINATION], &["leases"]),
        allow(&["get", "update"], &[COORDINATION], &["leases"]).names(&[component]),
        allow(&["create"], &[CORE], &["endpoints"]),
        allow(&["get", "update"], &[CORE], &["endpoints"]).names(&[component]),
    ]
}

/// The Role `system::leader-locking-<component>` in kube-system: the
/// ConfigMap lock upstream's `component` took before Leases.
fn leader_locking_role(component: &str) -> RoleSpec {
    RoleSpec::namespaced(
        "kube-system",
        format!("system::leader-locking-{component}"),
        vec![
            allow(&["watch"], &[CORE], &["configmaps"]),
            allow(&["get", "update"], &[CORE], &["configmaps"]).names(&[component]),
        ],
    )
}

/// Binds [`leader_locking_role`] to the `component`'s user and to its
/// service account in kube-system.
fn leader_locking_binding(component: &str) -> BindingSpec {
    BindingSpec::namespaced(
        "kube-system",
        format!("system::leader-locking-{component}"),
        vec![
            user(&format!("system:{component}")),
            service_account("kube-system", component),
        ],
    )
}

fn kube_scheduler() -> Vec<Rule> {
    [
        leader_election("kube-scheduler"),
        vec![
            allow(READ, &[CORE], &["nodes"]),
            allow(&["get", "list", "watch", "delete"], &[CORE], &["pods"]),
            allow(&["create"], &[CORE], &["pods/binding", "bindings"]),
            allow(&["patch", "update"], &[CORE], &["pods/status"]),
            allow(READ, &[CORE], &["services", "replicationcontrollers"]),
            allow(READ, &[APPS, EXTENSIONS], &["replicasets"]),
            allow(READ, &[APPS], &["statefulsets"]),
            allow(READ, &[POLICY], &["poddisruptionbudgets"]),
            allow(
                READ,
                &[CORE],
                &["persistentvolumeclaims", "persistentvolumes"],
            ),
            allow(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
            allow(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
            allow(READ, &[STORAGE], &["csinodes"]),
            allow(READ, &[CORE], &["namespaces"]),
            allow(READ, &[STORAGE], &["csidrivers"]),
            allow(READ, &[STORAGE], &["csistoragecapacities"]),
        ],
    ]
    .concat()
}

fn kube_controller_manager() -> Vec<Rule> {
    [
        leader_election("kube-controller-manager"),
        vec![
            allow(&["create"], &[CORE], &["secrets", "serviceaccounts"]),
            allow(&["delete"], &[CORE], &["secrets"]),
            allow(
                &["get"],
                &[CORE],
                &["configmaps", "namespaces", "secrets", "serviceaccounts"],
            ),
            allow(&["update"], &[CORE], &["secrets", "serviceaccounts"]),
            allow(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
            allow(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
            // The shared informers of every controller.
            allow(&["list", "watch"], &["*"], &["*"]),
            allow(&["create"], &[CORE], &["serviceaccounts/token"]),
        ],
    ]
    .concat()
}

/// What `--simulated-nodes` hollow nodes do: register their Nodes and
/// Leases, report their pods' status and remove terminated pods.
fn simulated_nodes() -> Vec<Rule> {
    vec![
        allow(&["get", "create", "update", "patch"], &[CORE], &["nodes"]),
        allow(&["update", "patch"], &[CORE], &["nodes/status"]),
        allow(
            &["get", "create", "update", "patch"],
            &[COORDINATION],
            &["leases"],
        ),
        allow(&["get", "list", "watch", "delete"], &[CORE], &["pods"]),
        allow(&["update", "patch"], &[CORE], &["pods/status"]),
        events_rule(),
    ]
}

/// What the controller manager's local-path provisioner does: it makes a
/// PersistentVolume for a claim placed on a node, binds the two, and makes
/// sure the `local-path` StorageClass exists. (Its informers list and
/// watch as the controller manager; the nodes delete the volumes they
/// reclaim.)
fn local_path() -> Vec<Rule> {
    vec![
        allow(
            &["get", "list", "watch", "update", "patch"],
            &[CORE],
            &["persistentvolumeclaims"],
        ),
        allow(
            &["update", "patch"],
            &[CORE],
            &["persistentvolumeclaims/status"],
        ),
        allow(
            &["get", "list", "watch", "create", "update", "patch"],
            &[CORE],
            &["persistentvolumes"],
        ),
        allow(&["update", "patch"], &[CORE], &["persistentvolumes/status"]),
        allow(
            &["get", "list", "watch", "create"],
            &[STORAGE],
            &["storageclasses"],
        ),
        allow(READ, &[CORE], &["nodes"]),
        events_rule(),
    ]
}
