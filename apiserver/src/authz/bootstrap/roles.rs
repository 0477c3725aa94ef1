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
/// The service account (in kube-system) the node agent's local-path
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
            vec![
                rule(&["*"]).groups(&["*"]).resources(&["*"]),
                rule(&["*"]).urls(&["*"]),
            ],
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
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["selfsubjectreviews"]),
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
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&["metrics.k8s.io"])
                    .resources(&["pods", "nodes"]),
            ],
        )
        .labelled(AGGREGATE_TO_VIEW)
        .labelled(AGGREGATE_TO_EDIT)
        .labelled(AGGREGATE_TO_ADMIN),
        RoleSpec::cluster(
            "system:auth-delegator",
            vec![
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["tokenreviews"]),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"]),
            ],
        ),
        RoleSpec::cluster("system:node", node()),
        RoleSpec::cluster(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["services", "endpoints"]),
                rule(&["get", "list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                events_rule(),
                rule(&["list", "watch"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"]),
            ],
        ),
        RoleSpec::cluster(
            "system:node-bootstrapper",
            vec![
                rule(&["create", "get", "list", "watch"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests"]),
            ],
        ),
        // What the kubelet TLS bootstrap is checked against (upstream's
        // csrapproving controller asks a SubjectAccessReview for these
        // subresources): a new node's client certificate, and a node
        // renewing its own.
        RoleSpec::cluster(
            NODE_CLIENT_ROLE,
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/nodeclient"]),
            ],
        ),
        RoleSpec::cluster(
            SELF_NODE_CLIENT_ROLE,
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/selfnodeclient"]),
            ],
        ),
        // k3s's /cacerts: the CA a joining agent checks against its token.
        RoleSpec::cluster(
            "system:skiff:cacerts",
            vec![rule(&["get"]).urls(&["/cacerts"])],
        ),
        RoleSpec::cluster(
            "system:kubelet-api-admin",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                rule(&["proxy"]).groups(&[CORE]).resources(&["nodes"]),
                rule(&["*"]).groups(&[CORE]).resources(&[
                    "nodes/proxy",
                    "nodes/metrics",
                    "nodes/spec",
                    "nodes/stats",
                    "nodes/log",
                ]),
            ],
        ),
        RoleSpec::cluster("system:kube-scheduler", kube_scheduler()),
        RoleSpec::cluster(
            "system:volume-scheduler",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                // skiff's scheduler annotates the claim's selected node by
                // patch where upstream's updates it.
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
            ],
        ),
        RoleSpec::cluster("system:kube-controller-manager", kube_controller_manager()),
        RoleSpec::cluster(
            "system:kube-dns",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["endpoints", "services"]),
                rule(&["list", "watch"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"]),
            ],
        ),
        // skiff's DNS also answers for pods and publishes itself (its
        // Service and EndpointSlice in kube-system, see `dns_publisher`).
        RoleSpec::cluster(
            "system:skiff:dns",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["pods", "namespaces"]),
            ],
        ),
        RoleSpec::cluster(
            "system:persistent-volume-provisioner",
            vec![
                rule(&["get", "list", "watch", "create", "delete"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
                rule(&["watch", "create", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["events"]),
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
                rule(READ)
                    .groups(&[NETWORKING])
                    .resources(&["ingresses", "ingressclasses"]),
                rule(&["update"])
                    .groups(&[NETWORKING])
                    .resources(&["ingresses/status"]),
                rule(&["create"])
                    .groups(&[NETWORKING])
                    .resources(&["ingressclasses"]),
                rule(READ)
                    .groups(&[CORE])
                    .resources(&["services", "secrets"]),
                rule(READ)
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"]),
            ],
        ),
        // The network policy controller only reads what its rules come
        // from (k3s's agent does this as system:k3s-controller).
        RoleSpec::cluster(
            "system:skiff:network-policy",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["pods", "namespaces"]),
                rule(&["list", "watch"])
                    .groups(&[NETWORKING])
                    .resources(&["networkpolicies"]),
            ],
        ),
        RoleSpec::cluster(
            "system:skiff:server",
            vec![
                rule(&["get", "patch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
            ],
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
                rule(READ)
                    .groups(&[CORE])
                    .resources(&["configmaps"])
                    .names(&["extension-apiserver-authentication"]),
            ],
        ),
        RoleSpec::namespaced(
            "kube-system",
            "system::leader-locking-kube-controller-manager",
            vec![
                rule(&["watch"]).groups(&[CORE]).resources(&["configmaps"]),
                rule(&["get", "update"])
                    .groups(&[CORE])
                    .resources(&["configmaps"])
                    .names(&["kube-controller-manager"]),
            ],
        ),
        RoleSpec::namespaced(
            "kube-system",
            "system::leader-locking-kube-scheduler",
            vec![
                rule(&["watch"]).groups(&[CORE]).resources(&["configmaps"]),
                rule(&["get", "update"])
                    .groups(&[CORE])
                    .resources(&["configmaps"])
                    .names(&["kube-scheduler"]),
            ],
        ),
        // Upstream's token cleaner: deletes expired bootstrap tokens.
        RoleSpec::namespaced(
            "kube-system",
            "system:controller:token-cleaner",
            vec![
                rule(&["delete", "get", "list", "watch"])
                    .groups(&[CORE])
                    .resources(&["secrets"]),
                events_rule(),
            ],
        ),
        // k3s's node-password cleanup: a deleted Node's password Secret.
        RoleSpec::namespaced(
            "kube-system",
            "system:controller:node-password-controller",
            vec![
                rule(&["get", "delete"])
                    .groups(&[CORE])
                    .resources(&["secrets"]),
            ],
        ),
        // What `skiff-dns` writes when it publishes itself.
        RoleSpec::namespaced(
            "kube-system",
            "system:skiff:dns-publisher",
            vec![
                rule(&["get", "create"])
                    .groups(&[CORE])
                    .resources(&["services"]),
                rule(&["get", "create", "update"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"]),
                // The slice every server shared before slices were per
                // server; only that one.
                rule(&["delete"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"])
                    .names(&["kube-dns-skiff"]),
                // Its slice's owner: the server's identity Lease.
                rule(&["get"])
                    .groups(&[COORDINATION])
                    .resources(&["leases"]),
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
        BindingSpec::namespaced(
            "kube-system",
            "system::leader-locking-kube-controller-manager",
            vec![
                user("system:kube-controller-manager"),
                service_account("kube-system", "kube-controller-manager"),
            ],
        ),
        BindingSpec::namespaced(
            "kube-system",
            "system::leader-locking-kube-scheduler",
            vec![
                user("system:kube-scheduler"),
                service_account("kube-system", "kube-scheduler"),
            ],
        ),
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
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["localsubjectaccessreviews"]),
        rule(READ_WRITE)
            .groups(&[RBAC])
            .resources(&["roles", "rolebindings"]),
    ]
}

fn aggregate_to_edit() -> Vec<Rule> {
    vec![
        // Reading these can lead to more rights (secrets, exec), so they
        // are edit's, not view's.
        rule(READ).groups(&[CORE]).resources(&[
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
            "secrets",
            "services/proxy",
        ]),
        rule(&["impersonate"])
            .groups(&[CORE])
            .resources(&["serviceaccounts"]),
        rule(WRITE).groups(&[CORE]).resources(&[
            "pods",
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
        ]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/eviction"]),
        rule(WRITE).groups(&[CORE]).resources(&[
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
        rule(WRITE).groups(&[APPS]).resources(&[
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ]),
        rule(WRITE)
            .groups(&[AUTOSCALING])
            .resources(&["horizontalpodautoscalers"]),
        rule(WRITE)
            .groups(&[BATCH])
            .resources(&["jobs", "cronjobs"]),
        rule(WRITE).groups(&[EXTENSIONS]).resources(&[
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "ingresses",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
            "networkpolicies",
        ]),
        rule(WRITE)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"]),
        rule(WRITE)
            .groups(&[NETWORKING])
            .resources(&["networkpolicies", "ingresses"]),
        rule(READ_WRITE)
            .groups(&[COORDINATION])
            .resources(&["leases"]),
    ]
}

fn aggregate_to_view() -> Vec<Rule> {
    vec![
        rule(READ).groups(&[CORE]).resources(&[
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
        ]),
        rule(READ).groups(&[CORE]).resources(&[
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ]),
        // In a RoleBinding this reads the binding's own namespace only.
        rule(READ).groups(&[CORE]).resources(&["namespaces"]),
        rule(READ)
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"]),
        rule(READ).groups(&[APPS]).resources(&[
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
        ]),
        rule(READ).groups(&[AUTOSCALING]).resources(&[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ]),
        rule(READ).groups(&[BATCH]).resources(&[
            "jobs",
            "cronjobs",
            "cronjobs/status",
            "jobs/status",
        ]),
        rule(READ).groups(&[EXTENSIONS]).resources(&[
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
        ]),
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(READ).groups(&[NETWORKING]).resources(&[
            "networkpolicies",
            "ingresses",
            "ingresses/status",
        ]),
    ]
}

fn node() -> Vec<Rule> {
    vec![
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews", "localsubjectaccessreviews"]),
        rule(READ).groups(&[CORE]).resources(&["services"]),
        rule(&["create", "get", "list", "watch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes/status"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["create", "update", "patch"])
            .groups(&[CORE])
            .resources(&["events"]),
        rule(READ).groups(&[CORE]).resources(&["pods"]),
        rule(&["create", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/eviction"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["secrets", "configmaps"]),
        rule(&["get"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        rule(&["get"]).groups(&[CORE]).resources(&["endpoints"]),
        rule(&["create", "get", "list", "watch"])
            .groups(&[CERTIFICATES])
            .resources(&["certificatesigningrequests"]),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get"])
            .groups(&[STORAGE])
            .resources(&["volumeattachments"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
        rule(&["get", "update", "patch"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims/status"]),
        rule(READ).groups(&[STORAGE]).resources(&["csidrivers"]),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[STORAGE])
            .resources(&["csinodes"]),
        rule(READ).groups(&[NODE]).resources(&["runtimeclasses"]),
    ]
}

fn kube_scheduler() -> Vec<Rule> {
    vec![
        events_rule(),
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-scheduler"]),
        rule(&["create"]).groups(&[CORE]).resources(&["endpoints"]),
        rule(&["get", "update"])
            .groups(&[CORE])
            .resources(&["endpoints"])
            .names(&["kube-scheduler"]),
        rule(READ).groups(&[CORE]).resources(&["nodes"]),
        rule(&["get", "list", "watch", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/binding", "bindings"]),
        rule(&["patch", "update"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["services", "replicationcontrollers"]),
        rule(READ)
            .groups(&[APPS, EXTENSIONS])
            .resources(&["replicasets"]),
        rule(READ).groups(&[APPS]).resources(&["statefulsets"]),
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews"]),
        rule(READ).groups(&[STORAGE]).resources(&["csinodes"]),
        rule(READ).groups(&[CORE]).resources(&["namespaces"]),
        rule(READ).groups(&[STORAGE]).resources(&["csidrivers"]),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csistoragecapacities"]),
    ]
}

fn kube_controller_manager() -> Vec<Rule> {
    vec![
        events_rule(),
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-controller-manager"]),
        rule(&["create"]).groups(&[CORE]).resources(&["endpoints"]),
        rule(&["get", "update"])
            .groups(&[CORE])
            .resources(&["endpoints"])
            .names(&["kube-controller-manager"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["secrets", "serviceaccounts"]),
        rule(&["delete"]).groups(&[CORE]).resources(&["secrets"]),
        rule(&["get"]).groups(&[CORE]).resources(&[
            "configmaps",
            "namespaces",
            "secrets",
            "serviceaccounts",
        ]),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["secrets", "serviceaccounts"]),
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews"]),
        // The shared informers of every controller.
        rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
    ]
}

/// What `--simulated-nodes` hollow nodes do: register their Nodes and
/// Leases, report their pods' status and remove terminated pods.
fn simulated_nodes() -> Vec<Rule> {
    vec![
        rule(&["get", "create", "update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes/status"]),
        rule(&["get", "create", "update", "patch"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "list", "watch", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        events_rule(),
    ]
}

/// What the node agent's local-path provisioner does: it provisions a
/// PersistentVolume for a claim placed on its node, binds the two, and
/// makes sure the `local-path` StorageClass exists.
fn local_path() -> Vec<Rule> {
    vec![
        rule(&["get", "list", "watch", "update", "patch"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims/status"]),
        rule(&[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ])
        .groups(&[CORE])
        .resources(&["persistentvolumes"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["persistentvolumes/status"]),
        rule(&["get", "list", "watch", "create"])
            .groups(&[STORAGE])
            .resources(&["storageclasses"]),
        rule(READ).groups(&[CORE]).resources(&["nodes"]),
        events_rule(),
    ]
}
