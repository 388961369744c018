//! The pod garbage collector (kube-controller-manager's `pod-garbage-collector-controller`, alias
//! `podgc`; upstream `pkg/controller/podgc/gc_controller.go`, 1.33).
//!
//! Pods the kubelet will never finish are force-deleted (`gracePeriodSeconds=0`): pods bound to a
//! node that no longer exists (after a quarantine and a GET that answers 404), terminating pods
//! never bound to a node, terminating pods on an out-of-service node, and the oldest terminated
//! pods beyond `--terminated-pod-gc-threshold`. A pod not yet Succeeded/Failed is marked `Failed`
//! first (orphans with `DisruptionTarget=True`), so whoever watches it sees how it ended.
//!
//! [`decide`] holds the decisions as values (tested without I/O), [`quarantine`] the node
//! quarantine (tested in paused time); [`controller`] lists the caches every period, applies them
//! and issues the requests. Guarantees: nothing is deleted before both
//! caches synced; a node is believed gone only after it has been missing from the cache for the
//! whole quarantine *and* the apiserver says 404; at most
//! [`controller::MAX_CONCURRENT_DELETES`] requests are in flight; each pass reads one snapshot of
//! the caches.

pub mod controller;
pub mod decide;
pub mod quarantine;

pub use controller::{PodGcConfig, PodGcController};
