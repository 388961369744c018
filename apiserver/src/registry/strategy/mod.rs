//! Per-kind strategies: the [`Strategy`] hooks the generic store calls, and one module per kind
//! (`pod.rs`, `service.rs`, `job.rs`, …) implementing them, with the rules every kind shares
//! ([`common`](self)'s spec/status split and object-meta validation), the pod-template rules of
//! workload controllers (`podtemplate.rs`), Go renderings of values in messages (`gofmt.rs`) and
//! the Table building blocks.
//!
//! Admission ([`Strategy::admit`]) is the one hook that sees other objects: upstream's admission
//! plugins of a kind (Priority for pods and priority classes) read informer listers; here they
//! read the watch cache through [`Objects`], read-only.

mod admissionregistration;
mod apiregistration;
mod binding;
mod certificates;
mod claim;
pub(crate) mod claim_admission;
mod common;
mod componentstatus;
mod config;
mod controllerrevision;
mod crd;
mod crd_validation;
mod cronjob;
mod csi;
mod custom;
mod custom_table;
mod daemonset;
mod endpoints;
mod event;
mod flowcontrol;
mod gofmt;
mod hpa;
mod hpa_convert;
mod ingress;
mod ingressclass;
mod ipalloc;
mod job;
mod job_spec;
mod lease;
mod namespace;
mod netvalid;
mod networkpolicy;
mod node;
mod nodeports;
mod pdb;
mod pod;
mod pod_printer;
mod pod_subresources;
mod podtemplate;
mod podtemplates;
mod portalloc;
mod quota;
mod rbac;
mod resource_list;
mod runtimeclass;
mod scheduling;
mod service;
mod servicecidr;
mod statefulset;
mod storage;
mod storageclass;
mod table;
mod volume_defaults;
mod workloads;

pub(crate) use admissionregistration::{
    ValidatingAdmissionPolicyBindingStrategy, ValidatingAdmissionPolicyStrategy,
    WebhookConfigurationStrategy,
};
pub(crate) use apiregistration::ApiServiceStrategy;
pub use apiregistration::{apiservice_name, local_apiservice, local_status, AUTOMANAGED_LABEL};
pub use binding::{apply_binding, BindingError};
pub(crate) use certificates::CertificateSigningRequestStrategy;
pub use certificates::{approval_update, validate_approval_update};
pub use common::{semantically_equal, spec_changed, DefaultTable, GenericStrategy};
pub use ipalloc::{
    service_cluster_ips, ClusterIpAllocator, IpAllocError, KUBERNETES_SERVICE_IP, SERVICE_CIDR,
};
pub use pod_printer::pod_status_reason;
pub use pod_subresources::{
    prepare_ephemeral_containers, prepare_resize, validate_ephemeral_containers_update,
    validate_resize,
};
pub use portalloc::{NodePortAllocator, PortAllocError, NODE_PORT_MAX, NODE_PORT_MIN};
pub use table::{column, to_partial_object_metadata};

pub(crate) use claim::PersistentVolumeClaimStrategy;
pub(crate) use common::{meta_field_value, validate_meta, validate_meta_update};
pub(crate) use common::{object_at, prepare_status_common, prepare_update_common, set_field};
pub(crate) use componentstatus::{BindingStrategy, ComponentStatusStrategy};
pub(crate) use config::{ConfigMapStrategy, SecretStrategy, ServiceAccountStrategy};
pub(crate) use controllerrevision::ControllerRevisionStrategy;
pub use crd::{
    accepted_names, condition, condition_true, set_condition, storage_version,
    CustomResourceDefinitionStrategy, CLEANUP_FINALIZER,
};
pub(crate) use cronjob::CronJobStrategy;
pub(crate) use csi::{CsiDriverStrategy, CsiNodeStrategy, CsiStorageCapacityStrategy};
pub use custom::{has_defaults, CustomResourceStrategy, CustomVersion};
pub(crate) use daemonset::DaemonSetStrategy;
pub(crate) use endpoints::{EndpointSliceStrategy, EndpointsStrategy};
pub(crate) use event::EventStrategy;
pub(crate) use flowcontrol::{
    set_dangling, FlowSchemaStrategy, PriorityLevelConfigurationStrategy,
};
pub(crate) use hpa::HorizontalPodAutoscalerStrategy;
pub use hpa_convert::{
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION,
};
pub(crate) use ingress::IngressStrategy;
pub(crate) use ingressclass::IngressClassStrategy;
pub(crate) use job::JobStrategy;
pub(crate) use lease::LeaseStrategy;
pub(crate) use namespace::NamespaceStrategy;
pub(crate) use networkpolicy::NetworkPolicyStrategy;
pub(crate) use node::NodeStrategy;
pub(crate) use pdb::PodDisruptionBudgetStrategy;
pub use pdb::{pdb_selects, UNHEALTHY_POD_EVICTION_POLICIES};
pub(crate) use pod::PodStrategy;
pub(crate) use podtemplates::PodTemplateStrategy;
pub(crate) use quota::{LimitRangeStrategy, ResourceQuotaStrategy};
pub use rbac::RBAC_GROUP;
pub(crate) use rbac::{
    ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy,
};
pub(crate) use runtimeclass::RuntimeClassStrategy;
pub(crate) use scheduling::PriorityClassStrategy;
pub use scheduling::{SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL, SYSTEM_PRIORITY_CLASSES};
pub(crate) use service::ServiceStrategy;
pub(crate) use servicecidr::{IpAddressStrategy, ServiceCidrStrategy};
pub(crate) use statefulset::StatefulSetStrategy;
pub(crate) use storage::PersistentVolumeStrategy;
pub(crate) use storageclass::{StorageClassStrategy, VolumeAttachmentStrategy};
pub(crate) use workloads::{DeploymentStrategy, ReplicaSetStrategy, ReplicationControllerStrategy};

use std::sync::Arc;

use api::validation::{FieldError, NameValidator};
use serde_json::Value;

use super::Propagation;

/// A resource served without storage: its REST storage implements only the verbs named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unstored {
    /// `componentstatuses`: get and list of objects computed per request.
    ComponentStatuses,
    /// `bindings`: a POST binds the pod the Binding names (as `pods/binding`).
    Bindings,
}

/// The typed hooks of one kind. Every hook has the generic behaviour as its default, so a kind
/// (or a custom resource) only overrides what it changes. See the module docs for the guarantees.
pub trait Strategy: Send + Sync + 'static {
    // ---- create ----

    /// How `metadata.name` is validated (`ValidateObjectMeta`'s name function).
    fn name_validation(&self) -> NameValidator {
        api::validation::name_is_dns1123_subdomain
    }

    /// Kind defaults of a new object.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// The scheme's defaults of the kind (upstream's `SetDefaults_*`; a custom resource's schema
    /// `default`s), applied to every object read from storage in this endpoint's version, as
    /// upstream's storage codec defaults what it decodes: an object stored before a default
    /// existed reads with it. Only defaults: no status reset, allocation or admission. Returns
    /// whether they added fields ([`defaulted`] tells; the object then goes back into Go field
    /// order); kinds without defaults change nothing.
    fn default_decoded(&self, _obj: &mut Value) -> bool {
        false
    }

    /// Status reset on create: `Some(status)` replaces whatever the client sent; `None` keeps it.
    /// Called after [`prepare_for_create`](Self::prepare_for_create).
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        None
    }

    /// Whether `metadata.generation` tracks spec changes (1 at create, +1 per spec change).
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether an update changes what generation tracks (`spec`; a PodTemplate's `template`,
    /// everything of an EndpointSlice but its metadata, the `webhooks` of webhook configurations).
    /// Only asked when [`tracks_generation`](Self::tracks_generation).
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        spec_changed(new, old)
    }

    /// The kind's own validation of a new object (object meta is validated generically first).
    fn validate_create(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Why creates are refused for now (a custom resource whose CRD is terminating): a 405 with
    /// this message.
    fn create_refused(&self) -> Option<String> {
        None
    }

    /// Removes the fields the kind's schema does not declare and returns their paths
    /// (`spec.foo`), for kinds pruned by their own schema (custom resources); `None` for kinds
    /// whose typed schema the generic `fieldValidation` step walks.
    fn prune_unknown(&self, _obj: &mut Value) -> Option<Vec<String>> {
        None
    }

    /// The structural schema of a custom resource's version (its list and map types for
    /// server-side apply); `None` for built-in kinds.
    fn structural(&self) -> Option<&schema::Structural> {
        None
    }

    /// Whether strategic merge patches apply (every custom resource refuses them with a 415).
    fn strategic_merge(&self) -> bool {
        true
    }

    /// Normalises a validated object before it is stored.
    fn canonicalize(&self, _obj: &mut Value) {}

    /// Admission (upstream's admission plugins of the kind: Priority resolves a pod's priority
    /// from its class): on a create (`old` is `None`) and on an update of the main resource (not
    /// of a subresource), after the kind's defaults and managed fields and before validation, also
    /// for a dry run. It may fill fields from other objects, read through `objects`, or refuse the
    /// write: [`Forbidden`] is a 403 `<resource> "<name>" is forbidden: <reason>`.
    fn admit(
        &self,
        _obj: &mut Value,
        _old: Option<&Value>,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        Ok(())
    }

    /// Allocations a create needs (Service cluster IPs), after validation and before the store
    /// write; a refusal is a 422 on the kind. Returns what undoes them if the object is not stored
    /// after all (upstream's `BeginCreate` and its finish function). Never called for a dry run.
    fn before_create(&self, _obj: &mut Value) -> Result<Option<Undo>, Vec<FieldError>> {
        Ok(None)
    }

    /// Allocations an update needs (Service node ports), on the prepared and validated new state
    /// of any write that changes the object, before the store write; a refusal is a 422 on the
    /// kind. Returns what undoes them if the write does not happen (a lost race computes and
    /// allocates again). Never called for a dry run.
    fn before_update(
        &self,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<Option<Undo>, Vec<FieldError>> {
        Ok(None)
    }

    /// After an update was stored: releases what `old` held and `new` no longer does.
    fn after_update(&self, _new: &Value, _old: &Value) {}

    // ---- update ----

    /// Kind rules of an update of the main resource (the generic store then keeps `status` from
    /// the stored object where the kind has a status subresource, and recomputes generation).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Kind rules of an update of the main resource that need the state after the generic step
    /// (status kept from `old`, generation recomputed): a CRD's new storage version joins
    /// `status.storedVersions`, a custom resource is stored in its CRD's storage version.
    fn finish_update(&self, _new: &mut Value, _old: &Value) {}

    /// The kind's own validation of an update (immutable fields, …), after the generic object-meta
    /// rules.
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Kind rules of a `/status` write, after the generic ones (everything but `status` comes
    /// from `old`): a PersistentVolume's `lastPhaseTransitionTime` follows its phase.
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// Whether PUT may create a missing object (events).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    // ---- delete ----

    /// Graceful deletion: `Some(seconds)` when the object should get `deletionTimestamp` +
    /// `deletionGracePeriodSeconds` instead of being removed; `None` = delete immediately.
    fn graceful_deletion_seconds(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Default `propagationPolicy` when a DELETE names none (`Orphan` for v1 RCs).
    fn default_propagation_policy(&self) -> Propagation {
        Propagation::Background
    }

    /// Names that may not be deleted, with upstream's reason (`default`, `kube-system`, … for
    /// namespaces).
    fn protected_from_deletion(&self, _name: &str) -> Option<&'static str> {
        None
    }

    /// Kind changes of an object being marked for deletion (a namespace turns `Terminating`).
    fn prepare_for_delete(&self, _obj: &mut Value) {}

    /// Whether removal waits for the kind's own finalization besides `metadata.finalizers` (a
    /// namespace's `spec.finalizers`): part of `ShouldDeleteDuringUpdate`.
    fn pending_finalization(&self, _obj: &Value) -> bool {
        false
    }

    /// Whether a DELETE that removed the object answers with the object (pods) rather than a
    /// Success Status.
    fn delete_returns_object(&self) -> bool {
        false
    }

    /// After the object was removed from storage: releases what it held (cluster IPs).
    fn after_delete(&self, _obj: &Value) {}

    /// At start-up, with every stored object of the resource (decoded as the iterator is read):
    /// rebuilds in-memory state that is derived from storage (the cluster-IP bitmap).
    fn restore(&self, _stored: &mut dyn Iterator<Item = Arc<Value>>) {}

    // ---- presentation ----

    /// `/scale` access for kinds that have it.
    fn scale(&self) -> Option<&dyn ScaleAccess> {
        None
    }

    /// `meta.k8s.io/v1` TableColumnDefinition JSON: kubectl's own columns (priority 1 = `-o wide`).
    fn table_columns(&self) -> Vec<Value> {
        DefaultTable::columns()
    }

    /// The order of a Table's rows when the kind's printer sorts them (FlowSchemas by matching
    /// precedence); `None` keeps the list's order.
    fn table_row_order(&self) -> Option<fn(&Value, &Value) -> std::cmp::Ordering> {
        None
    }

    /// One row's cells, aligned with [`table_columns`](Self::table_columns).
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        DefaultTable::cells(obj, now)
    }

    /// Field-selector value of a field of the kind (`metadata.name` and `metadata.namespace` are
    /// generic), or None if the kind does not support it (the HTTP side then answers 400 `field
    /// label not supported: <field>`). Missing values are `Some("")`.
    fn field_value(&self, _obj: &Value, _field: &str) -> Option<String> {
        None
    }

    /// The field label that `label`, an old name of one, stands for (upstream's field label
    /// conversion functions: a v1 pod's `spec.host` is `spec.nodeName`). Selectors are converted
    /// when parsed, so [`field_value`](Self::field_value) answers only current names.
    fn field_label_alias(&self, _label: &str) -> Option<&'static str> {
        None
    }

    /// Field labels of the kind's own (beside `metadata.name` and `metadata.namespace`) whose
    /// values the watch cache keeps, with the name, namespace and labels, as each object's
    /// selector view (`watch_cache::SelectorView`), so that lists selecting on them are filtered
    /// without decoding the objects. Each must be one [`field_value`](Self::field_value)
    /// answers. `None` (the default): a field selector on a field label of the kind's own reads
    /// the whole object.
    fn field_labels(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Whether the resource is served without storage, and how ([`Unstored`]); `None` for every
    /// stored kind.
    fn unstored(&self) -> Option<Unstored> {
        None
    }

    /// The deprecation warning every request to the resource answers with (a `Warning: 299`
    /// header, as upstream's deprecated APIs: `v1 ComponentStatus is deprecated in v1.19+`).
    fn deprecation_warning(&self) -> Option<&'static str> {
        None
    }

    /// Whether a stored object must go through [`from_storage`](Self::from_storage) even when
    /// it is in this endpoint's version. (Defaults of objects stored before a default existed
    /// are not a reason: the watch cache holds objects defaulted, [`Self::default_decoded`].)
    fn reads_need_conversion(&self) -> bool {
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
}

/// Applies `defaults` to `obj`; whether they added fields (for [`Strategy::default_decoded`]).
/// Told by counting the object's fields and items before and after, which allocates nothing: an
/// object read from storage is most often defaulted already, and copying it to compare would
/// cost more than the defaults themselves.
pub fn defaulted(obj: &mut Value, defaults: impl FnOnce(&mut Value)) -> bool {
    let before = size(obj);
    defaults(obj);
    size(obj) != before
}

/// How many fields and items `v` holds, at every depth.
fn size(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.len() + m.values().map(size).sum::<usize>(),
        Value::Array(a) => a.len() + a.iter().map(size).sum::<usize>(),
        _ => 0,
    }
}

/// Read-only access to other stored objects, for [`Strategy::admit`]. The generic store serves it
/// from the watch cache; on a create the cache has every write acknowledged before the request
/// (as a store read would), on an update it may trail writes still in flight, as upstream's
/// informer listers do.
pub trait Objects {
    /// Every object of `group`/`plural` (all namespaces), in key order; none when not served.
    fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>>;

    /// Every object of the namespaced `group`/`plural` in `namespace`, in key order.
    fn list_in(&self, group: &str, plural: &str, namespace: &str) -> Vec<Arc<Value>> {
        let mut all = self.list(group, plural);
        all.retain(|o| api::meta::namespace(o) == Some(namespace));
        all
    }

    /// The pods of `namespace` bound to `node`, in key order.
    fn pods_on_node(&self, namespace: &str, node: &str) -> Vec<Arc<Value>> {
        let mut pods = self.list_in("", "pods", namespace);
        pods.retain(|p| p["spec"]["nodeName"] == node);
        pods
    }

    /// The object `name` of `group`/`plural` (in `namespace` for a namespaced resource).
    fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>>;

    /// The RBAC objects compiled for authorization and kept current, when the view has them (a
    /// server's); `None`: the authorizer compiles them from [`Objects::list`].
    fn rule_resolver(&self) -> Option<Arc<crate::authz::rule_resolver::RuleResolver>> {
        None
    }
}

/// An admission refusal: its reason (`no PriorityClass with name foo was found`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden(pub String);

/// Undoes a [`Strategy::before_create`] whose create did not happen.
pub type Undo = Box<dyn FnOnce() + Send>;

/// The `/scale` subresource of a kind: conversion to and from `autoscaling/v1 Scale`.
pub trait ScaleAccess: Send + Sync {
    /// The Scale view of `obj` (metadata name/namespace/uid/resourceVersion/creationTimestamp,
    /// `spec.replicas`, `status.replicas`, `status.selector` as a selector string).
    fn to_scale(&self, obj: &Value) -> Value;

    /// Writes `scale.spec.replicas` into `obj.spec.replicas` (validated: integer ≥ 0).
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>>;
}

#[cfg(test)]
mod admissionregistration_tests;
#[cfg(test)]
mod certificates_tests;
#[cfg(test)]
mod flowcontrol_tests;
#[cfg(test)]
mod hpa_tests;
#[cfg(test)]
mod net_tests;
#[cfg(test)]
mod rbac_tests;
#[cfg(test)]
mod scheduling_tests;
#[cfg(test)]
mod storage_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_apps;
#[cfg(test)]
mod tests_batch;
#[cfg(test)]
mod tests_core;
