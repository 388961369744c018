//! The registry: how objects are stored, and everything kind-specific about it.
//!
//! Upstream's shape (`k8s.io/apiserver/pkg/registry/generic/registry`):
//! - [`store::Store`] is the one generic store: create, get, list, watch, update, patch, delete and
//!   delete-collection, every read-modify-write through one
//!   [`guaranteed_update`](store::Store::guaranteed_update). It takes request-independent
//!   [`options`], never HTTP.
//! - A [`Strategy`] ([`strategy`], one file per kind) carries every per-kind rule as hooks (defaults, validation, status reset,
//!   allocation before create and release after delete, graceful deletion, printer columns,
//!   field-selector values, storage conversion). The strategies are values registered with their
//!   resource; only the service strategy holds state (its [`ClusterIpAllocator`]).
//! - [`resources::ResourceRegistry`] is the runtime set of served resources: routing, discovery,
//!   OpenAPI and Table read it, built-in kinds register at start-up ([`builtin`]), and entries can be
//!   added and removed while the server runs.
//! - [`subresources`]: the REST storage of `pods/binding`, `namespaces/finalize` and `*/scale`.
//! - [`defaulting`]: the kinds' defaults of objects read from storage, by storage key, for the
//!   watch cache (upstream's storage codec defaults what it decodes).
//! - [`conversion`]: custom resources whose CRD converts through a webhook
//!   ([`conversion_webhook`]) are converted by the store, an async step beside the strategies'
//!   synchronous storage conversion.
//!
//! Objects are `serde_json::Value` as stored. Guarantees: no hook panics on any JSON input (mistyped
//! fields are validation errors, or ignored by the printers); hooks never touch system metadata other
//! than `generation` (uid, resourceVersion, timestamps are the generic store's business).

pub mod builtin;
pub mod conversion;
pub mod conversion_webhook;
pub mod customresource;
pub mod defaulting;
pub mod eviction;
pub mod options;
pub mod pod_subresources;
pub mod resources;
pub mod store;
pub mod strategy;
pub mod subresources;
pub mod typed;

pub use options::{
    AuditAnnotations, DeleteOptions, FieldValidation, Preconditions, Propagation, Warnings,
    WriteOptions,
};
pub use resources::{Resource, ResourceRegistry};
pub use store::{Deleted, Store, Written};
pub use strategy::{apply_binding, BindingError};
pub use strategy::{column, pod_status_reason, to_partial_object_metadata};
pub use strategy::{pdb_selects, spec_changed, DefaultTable, GenericStrategy, Unstored};
pub use strategy::{service_cluster_ips, ClusterIpAllocator, IpAllocError};
pub use strategy::{Forbidden, Objects, ScaleAccess, Strategy, Undo};
pub use strategy::{KUBERNETES_SERVICE_IP, SERVICE_CIDR};
pub use strategy::{SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL, SYSTEM_PRIORITY_CLASSES};

use serde_json::Value;

/// Sets `kind`/`apiVersion` of an object to the endpoint's (objects shared between API groups,
/// such as events, are stored once).
pub fn with_type_meta(info: &api::ResourceInfo, mut obj: Value) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.insert("kind".into(), Value::String(info.kind.clone()));
        o.insert("apiVersion".into(), Value::String(info.api_version()));
    }
    obj
}
