//! The EndpointSlice controller (kube-controller-manager's `endpointslice-controller`, alias
//! `endpointslice`; upstream `pkg/controller/endpointslice` with the reconciler of
//! `k8s.io/endpointslice`, 1.33).
//!
//! Each Service is a key. A sync lists the pods its selector matches and the slices labelled
//! `kubernetes.io/service-name=<service>` and managed by this controller (ignoring those being
//! deleted), and hands them to the [`reconciler`], which decides the creates, updates and
//! deletes (packing at most `--max-endpoints-per-slice`, 100, endpoints per slice, with minimal
//! churn); the controller makes those writes, each slice with the
//! `endpoints.kubernetes.io/last-change-trigger-time` annotation. Selector-less and
//! ExternalName Services are left alone; a Service being deleted gets no new slices (its slices
//! go with it through the garbage collector, as they are owned by it).
//!
//! Guarantees: every write's resulting generation is recorded ([`EndpointSliceTracker`]), so a
//! sync that finds the cache behind its own writes retries instead of acting on it, the
//! controller's own writes coming back as events do not queue another sync, and a slice deleted
//! by someone else is put back. Pod events queue the Services selecting the pod (old and new
//! labels); slice events are batched for a second (`endpointSliceChangeMinSyncDelay`). Failed
//! syncs back off from 1 s to 1000 s (and 10 retries/s overall); a Service failing 15 times in a
//! row is dropped until it next changes. Topology hints (`service.kubernetes.io/topology-mode`,
//! `trafficDistribution`) are not computed.
//!
//! [`EndpointSliceTracker`]: crate::endpointutil::slice_tracker::EndpointSliceTracker

pub mod controller;
pub mod reconciler;
#[cfg(test)]
mod reconciler_tests;
pub mod slices;

pub use controller::EndpointSliceController;

/// `controllerQualifiedName`: the `endpointslice.kubernetes.io/managed-by` value.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// `--max-endpoints-per-slice` default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: usize = 100;
