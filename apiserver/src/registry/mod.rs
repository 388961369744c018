//! Per-kind strategies: the typed hooks the generic REST flow calls for each built-in kind.
//!
//! Objects are `serde_json::Value` as stored. For each kind a [`Strategy`] provides defaulting,
//! validation (with field paths and apimachinery's messages), the spec/status split, `metadata.generation`
//! tracking, kubectl's printer columns, field-selector values and the graceful-deletion rule. The
//! strategies are stateless `'static` values; the only state here is the [`ClusterIpAllocator`].
//!
//! Guarantees: no hook panics on any JSON input (mistyped fields are validation errors, or ignored by the
//! printers); `prepare_*` never touch system metadata other than `generation` (uid, resourceVersion,
//! timestamps are the generic flow's business).

mod binding;
mod common;
mod config;
mod event;
mod ipalloc;
mod lease;
mod namespace;
mod node;
mod pod;
mod pod_printer;
mod service;
mod table;
mod workloads;

pub use binding::{apply_binding, BindingError};
pub use common::{spec_changed, DefaultTable};
pub use ipalloc::service_cluster_ips;
pub use ipalloc::{ClusterIpAllocator, IpAllocError, KUBERNETES_SERVICE_IP, SERVICE_CIDR};
pub use pod_printer::pod_status_reason;
pub use table::{column, to_partial_object_metadata};

use api::validation::FieldError;
use api::ResourceInfo;
use serde_json::Value;

/// The typed hooks of one kind. See the module docs for the guarantees.
pub trait Strategy: Send + Sync + 'static {
    fn resource(&self) -> &'static ResourceInfo;

    /// Kind defaults, clear status (when the kind has a status subresource) to its initial value,
    /// generation = 1 where tracked.
    fn prepare_for_create(&self, obj: &mut Value);

    /// Keep status from `old` (main resource writes don't change status), bump `metadata.generation` iff
    /// spec changed (generation otherwise kept from `old`).
    fn prepare_for_update(&self, new: &mut Value, old: &Value);

    /// `/status` writes: keep everything but status from `old` (labels/annotations too, as upstream).
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value);

    /// Object meta validation included.
    fn validate_create(&self, obj: &Value) -> Vec<FieldError>;

    /// Immutable fields (pod spec mostly, selectors, …) plus everything `validate_create` checks.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError>;

    /// Whether the kind has a `status` subresource.
    fn has_status(&self) -> bool {
        self.resource().has_status_subresource()
    }

    /// `/scale` access for kinds that have it.
    fn scale(&self) -> Option<&dyn ScaleAccess> {
        None
    }

    /// `meta.k8s.io/v1` TableColumnDefinition JSON: kubectl's own columns (priority 1 = `-o wide`).
    fn table_columns(&self) -> Vec<Value>;

    /// One row's cells, aligned with [`table_columns`](Self::table_columns).
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value>;

    /// Field-selector value of `field`, or None if the kind does not support that field (the HTTP side
    /// then answers 400 `field label not supported: <field>`). Missing values are `Some("")`.
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        common::meta_field_value(self.resource(), obj, field)
    }

    /// Graceful deletion: `Some(seconds)` when the object should get `deletionTimestamp` +
    /// `deletionGracePeriodSeconds` instead of being removed; `None` = delete immediately.
    fn graceful_deletion_seconds(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether PUT may create a missing object (events).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Converts an object of this endpoint's version into the storage form (identity except for
    /// `events.k8s.io/v1`, stored as core `v1` Events). Called before validation and writes.
    fn to_storage(&self, obj: Value) -> Value {
        obj
    }

    /// Converts a stored object into this endpoint's version (for responses and watch events).
    #[allow(clippy::wrong_self_convention)]
    fn from_storage(&self, obj: Value) -> Value {
        obj
    }

    /// Default `propagationPolicy` when a DELETE names none (`Orphan` for v1 RCs, else `Background`).
    fn default_propagation_policy(&self) -> &'static str {
        "Background"
    }
}

/// The `/scale` subresource of a kind: conversion to and from `autoscaling/v1 Scale`.
pub trait ScaleAccess: Send + Sync {
    /// The Scale view of `obj` (metadata name/namespace/uid/resourceVersion/creationTimestamp,
    /// `spec.replicas`, `status.replicas`, `status.selector` as a selector string).
    fn to_scale(&self, obj: &Value) -> Value;

    /// Writes `scale.spec.replicas` into `obj.spec.replicas` (validated: integer ≥ 0).
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>>;
}

static NAMESPACE: namespace::NamespaceStrategy = namespace::NamespaceStrategy;
static POD: pod::PodStrategy = pod::PodStrategy;
static RC: workloads::ReplicationControllerStrategy = workloads::ReplicationControllerStrategy;
static RS: workloads::ReplicaSetStrategy = workloads::ReplicaSetStrategy;
static DEPLOYMENT: workloads::DeploymentStrategy = workloads::DeploymentStrategy;
static NODE: node::NodeStrategy = node::NodeStrategy;
static EVENT_CORE: event::EventStrategy = event::EventStrategy { new_api: false };
static EVENT_NEW: event::EventStrategy = event::EventStrategy { new_api: true };
static SERVICE: service::ServiceStrategy = service::ServiceStrategy;
static CONFIGMAP: config::ConfigMapStrategy = config::ConfigMapStrategy;
static SECRET: config::SecretStrategy = config::SecretStrategy;
static SERVICE_ACCOUNT: config::ServiceAccountStrategy = config::ServiceAccountStrategy;
static LEASE: lease::LeaseStrategy = lease::LeaseStrategy;

/// The strategy of a served kind. Every entry of [`api::resources`] has one; a `ResourceInfo` not from
/// that table gets a generic strategy (metadata validation, NAME/AGE table).
pub fn strategy_for(info: &ResourceInfo) -> &'static dyn Strategy {
    match (info.group, info.plural) {
        ("", "namespaces") => &NAMESPACE,
        ("", "pods") => &POD,
        ("", "replicationcontrollers") => &RC,
        ("", "nodes") => &NODE,
        ("", "events") => &EVENT_CORE,
        ("", "services") => &SERVICE,
        ("", "configmaps") => &CONFIGMAP,
        ("", "secrets") => &SECRET,
        ("", "serviceaccounts") => &SERVICE_ACCOUNT,
        ("apps", "replicasets") => &RS,
        ("apps", "deployments") => &DEPLOYMENT,
        ("coordination.k8s.io", "leases") => &LEASE,
        ("events.k8s.io", "events") => &EVENT_NEW,
        _ => &GENERIC,
    }
}

/// Fallback for infos outside the table: metadata rules only, NAME/AGE table, `resource()` reports
/// [`common::UNKNOWN_RESOURCE`].
static GENERIC: common::GenericStrategy = common::GenericStrategy;

/// The table entry for (group, plural); the stand-in for entries that do not exist.
pub(crate) fn info(group: &str, plural: &str) -> &'static ResourceInfo {
    api::resources()
        .iter()
        .find(|r| r.group == group && r.plural == plural)
        .unwrap_or(&common::UNKNOWN_RESOURCE)
}

/// Looks up (group, plural) in the resource table and returns its strategy.
pub fn get(group: &str, version: &str, plural: &str) -> Option<&'static dyn Strategy> {
    api::find_resource(group, version, plural).map(strategy_for)
}

#[cfg(test)]
mod tests;
