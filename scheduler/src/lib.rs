//! skiff-scheduler places pods on nodes as kube-scheduler does: a scheduling
//! queue (active, backoff, unschedulable), a cache of nodes and pods with
//! assumed pods, the filter/score framework and its plugins, preemption, and
//! asynchronous binding through `pods/binding`.
//!
//! It must never import the API server or the store, and never writes a pod's
//! `spec.nodeName` any other way than through the binding subresource.
