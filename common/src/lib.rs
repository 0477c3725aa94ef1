//! skiff-common is the one home of the Kubernetes rules that the client-side
//! components (controllers, scheduler, node agent, proxy) and the API server
//! all apply the same way: recording Events, reading resource quantities
//! (adding and printing them), what a ResourceQuota counts, a pod's QoS
//! class, which of its containers run beside each other (`containers`:
//! the containers and the sidecars), the claims a pod refers to
//! (`claims`), what names and pins a `local-path` volume (`local_path`,
//! for its provisioner and the nodes that keep its directories), IPv4 CIDRs, label-selector
//! matching, whether a pod may be on a node (`placement`: tolerations
//! against taints, node selector and required node affinity), a Node's
//! Ready condition (`node_conditions`), which StorageClass or IngressClass
//! is the default (`default_class`), cron schedules as CronJobs read and
//! refuse them (`cron`, for the API server's validation and the
//! controller), Go duration text, strings
//! quoted as Go and TOML quote them (`quote`), the
//! cluster's join token (`join_token`), where a node's password hash is
//! kept (`node_password`), the
//! process's Prometheus registry (`metrics`, where every component's metrics
//! are defined and gathered), nftables tables as data applied through
//! `nft` (`nft`, shared by the service proxy and the network policies),
//! running such host commands with their errors named (`host_command`),
//! writing a data directory's keys, certificates and tokens whole and
//! with the right mode (`files`), when a loop that keeps something in
//! step with informer caches syncs next (`wakeups`), and the platform in
//! Go's spelling (`platform`: `amd64`, `linux/arm64`), and what the HTTP
//! servers do alike around their requests: the accept loop, the TLS
//! handshake, the user a client certificate names and splicing upgraded
//! streams (`serving`).
//!
//! Why a crate of its own: these are not informer machinery (so not
//! `skiff-informer`) and not one component's logic, yet each was written two
//! or three times, once per component. Here they sit below every component.
//! It must never import the API server, the store or any component crate:
//! beside `kube` and `k8s-openapi` it uses only general-purpose libraries
//! (tokio, hyper, rustls, x509-parser, prometheus, jiff, …), so whatever uses it
//! stays an ordinary API client.

#![warn(missing_docs)]

pub mod amount;
pub mod cidr;
pub mod claims;
pub mod conditions;
pub mod containers;
pub mod cron;
pub mod default_class;
pub mod duration;
pub mod events;
pub mod files;
pub mod host_command;
pub mod join_token;
pub mod labels;
pub mod local_path;
pub mod metrics;
pub mod nft;
pub mod node_conditions;
pub mod node_password;
pub mod placement;
pub mod platform;
pub mod qos;
pub mod quantity;
pub mod quota;
pub mod quote;
pub mod serving;
pub mod wakeups;
