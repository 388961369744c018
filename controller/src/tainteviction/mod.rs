//! The taint eviction controller (`taint-eviction-controller`; upstream
//! `pkg/controller/tainteviction`, 1.33): pods on a node with `NoExecute` taints they do not
//! tolerate are deleted at once, pods that tolerate them for `tolerationSeconds` are deleted when
//! that time has passed, each with the `DisruptionTarget` condition set first and a
//! `TaintManagerEviction` event. It is the only place pods are evicted for taints: the node
//! lifecycle controller only taints nodes (`node.kubernetes.io/unreachable`), as in 1.33.
//!
//! [`decide`] holds the pure decisions (tested with explicit instants); [`controller`] the
//! informer wiring, the scheduled evictions and the writes.

pub mod controller;
pub mod decide;

pub use controller::TaintEvictionController;
