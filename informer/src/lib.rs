//! skiff-informer owns the client-side machinery every reconciler runs on:
//! shared informers (one watch per resource type per process), thread-safe
//! indexed caches with listers, event handler fan-out, the rate-limited
//! de-duplicating work queue, the controller runner and leader election.
//!
//! It sees the cluster only through a `kube::Client`; it must never import the
//! API server or the store, so that any component built on it can move out of
//! process unchanged.
