//! The EndpointSlice mirroring controller (kube-controller-manager's
//! `endpointslice-mirroring-controller`, alias `endpointslicemirroring`; upstream
//! `pkg/controller/endpointslicemirroring`, 1.33).
//!
//! For a Service without a selector, whose Endpoints are written by hand (or by another
//! controller), it mirrors that Endpoints object into EndpointSlices managed by
//! `endpointslicemirroring-controller.k8s.io` ([`reconciler`]). Each Endpoints is a key. An
//! Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"` or used as a
//! leader-election lock is not mirrored; when the Endpoints or its Service is gone, the Service
//! gains a selector, or mirroring is turned off, the mirrored slices are deleted. Invalid IPs
//! (`InvalidIPAddress`) and subsets over 1,000 addresses (`TooManyAddressesToMirror`) are
//! reported as Warning events on the Endpoints.
//!
//! The same generation tracking as the EndpointSlice controller keeps a sync from acting on a
//! cache older than its own writes. Failed syncs back off from 1 s to 100 s (10 retries/s
//! overall); a key failing 15 times in a row is dropped until it next changes.

pub mod controller;
pub mod reconciler;

pub use controller::EndpointSliceMirroringController;

/// The `endpointslice.kubernetes.io/managed-by` value of mirrored slices.
pub const MANAGED_BY: &str = "endpointslicemirroring-controller.k8s.io";
/// `--mirroring-max-endpoints-per-subset` default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SUBSET: usize = 1000;
