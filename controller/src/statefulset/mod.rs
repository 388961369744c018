//! The StatefulSet controller (kube-controller-manager's `statefulset-controller`, alias
//! `statefulset`; upstream `pkg/controller/statefulset`, 1.33).
//!
//! A StatefulSet runs `replicas` pods with stable identities: `<set>-<ordinal>` from
//! `spec.ordinals.start`, labelled `statefulset.kubernetes.io/pod-name` and
//! `apps.kubernetes.io/pod-index`, with hostname `<pod>` and subdomain `serviceName`, each with
//! its own claims `<template>-<set>-<ordinal>` made from `volumeClaimTemplates` before the pod.
//! Every template the set has run is a ControllerRevision ([`crate::history`]); a pod's
//! `controller-revision-hash` label names its revision.
//!
//! Guarantees, as upstream:
//! - `OrderedReady`: pods are created lowest ordinal first, each only once all lower ones are
//!   Running, Ready and available (`minReadySeconds`); removed highest first, one at a time; a
//!   sync stops at the first pod that is not healthy. `Parallel`: created and removed at once.
//! - `RollingUpdate`: pods at or above `partition` not at the update revision are deleted one at
//!   a time, highest ordinal first, each once the ones above it are available again; the
//!   replacement is made at the update revision (below the partition: the current one).
//!   `maxUnavailable` is ignored (MaxUnavailableStatefulSet is alpha and off in 1.33).
//!   `OnDelete`: pods change revision only when deleted by someone else.
//! - `persistentVolumeClaimRetentionPolicy` becomes controller references on the claims
//!   ([`retention`]); the garbage collector deletes them with their owner.
//! - Nothing is cached across syncs but the informers: a sync sees the world as the caches do;
//!   a create that races a stale cache fails with AlreadyExists and is retried with back-off.
//!
//! Modules: [`identity`] and [`retention`] (values), [`plan`] (the sync's decisions, pure),
//! `controller` (informers, queue, handlers), `sync` (the sync's steps), `pod_control` (its
//! requests and events).

pub mod controller;
pub mod identity;
pub mod plan;
mod pod_control;
pub mod retention;
mod sync;

pub use controller::StatefulSetController;
