//! `storage.k8s.io/v1` CSIDrivers, CSINodes and CSIStorageCapacities, as upstream's
//! `pkg/apis/storage/validation`, `pkg/apis/storage/v1/defaults.go` and
//! `pkg/registry/storage/{csidriver,csinode,csistoragecapacity}` define them.
//!
//! - CSIDriver: `attachRequired` defaults to true; `podInfoOnMount`, `storageCapacity`,
//!   `requiresRepublish` and `seLinuxMount` to false; `fsGroupPolicy` to
//!   `ReadWriteOnceWithFSType`; `volumeLifecycleModes` to `[Persistent]`. Token requests have
//!   distinct audiences and 10 minutes to 2³² seconds of expiry. `attachRequired` and
//!   `volumeLifecycleModes` never change (upstream reports the former at `spec.attachedRequired`);
//!   generation tracks the spec.
//! - CSINode: drivers with valid, distinct names, a node ID of at most 256 characters, distinct
//!   qualified topology keys; an existing driver entry never changes.
//! - CSIStorageCapacity: namespaced; a storage class name, an optional node-topology selector and
//!   a non-negative capacity; topology and class never change.

use std::collections::BTreeSet;

use super::common::object_at;
use super::gofmt;
use super::netvalid::{go_strings, go_typed_strings, items, set, text};
use super::storageclass::validate_csi_driver_name;
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, go_quote, FieldError, FieldErrorKind};
use serde_json::{json, Value};

const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];
const MIN_TOKEN_SECONDS: i64 = 10 * 60;
const MAX_TOKEN_SECONDS: i64 = 1 << 32;
/// `csiNodeIDLongerMaxLength`: the strategy allows long node IDs.
const MAX_NODE_ID_LENGTH: usize = 256;
const IMMUTABLE: &str = "field is immutable";

fn invalid_rendered(field: impl Into<String>, rendered: String, msg: &str) -> FieldError {
    FieldError {
        field: field.into(),
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(rendered),
    }
}

/// `SetDefaults_CSIDriver`.
fn default_csi_driver(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    for (key, value) in [
        ("attachRequired", json!(true)),
        ("podInfoOnMount", json!(false)),
        ("storageCapacity", json!(false)),
        ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
        ("requiresRepublish", json!(false)),
        ("seLinuxMount", json!(false)),
    ] {
        super::common::default_field(spec, key, value);
    }
    let no_modes = spec
        .get("volumeLifecycleModes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_modes {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
}

/// `validateCSIDriverSpec`.
fn validate_driver_spec(obj: &Value) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let mut errs = Vec::new();
    for (key, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
    ] {
        if set(spec, key).is_none() {
            errs.push(FieldError::required(path, ""));
        }
    }
    if let Some(p) = set(spec, "fsGroupPolicy") {
        if !p.as_str().is_some_and(|s| FS_GROUP_POLICIES.contains(&s)) {
            errs.push(FieldError::not_supported(
                "spec.fsGroupPolicy",
                p,
                FS_GROUP_POLICIES,
            ));
        }
    }
    let mut audiences = BTreeSet::new();
    for (i, t) in items(spec, "tokenRequests").iter().enumerate() {
        let path = format!("spec.tokenRequests[{i}]");
        let audience = text(t, "audience");
        if !audiences.insert(audience) {
            errs.push(FieldError::duplicate(
                format!("{path}.audience"),
                &json!(audience),
            ));
            continue;
        }
        if let Some(secs) = set(t, "expirationSeconds") {
            let n = secs.as_i64().unwrap_or(0);
            if n < MIN_TOKEN_SECONDS {
                errs.push(FieldError::invalid_value(
                    format!("{path}.expirationSeconds"),
                    secs,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if n > MAX_TOKEN_SECONDS {
                errs.push(FieldError::invalid_value(
                    format!("{path}.expirationSeconds"),
                    secs,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    for mode in items(spec, "volumeLifecycleModes") {
        if !mode.as_str().is_some_and(|m| LIFECYCLE_MODES.contains(&m)) {
            errs.push(FieldError::not_supported(
                "spec.volumeLifecycleModes",
                mode,
                LIFECYCLE_MODES,
            ));
        }
    }
    if set(spec, "seLinuxMount").is_none() {
        errs.push(FieldError::required("spec.seLinuxMount", ""));
    }
    if let Some(p) = set(spec, "nodeAllocatableUpdatePeriodSeconds") {
        if p.as_i64().is_some_and(|n| n < 10) {
            errs.push(FieldError::invalid_value(
                "spec.nodeAllocatableUpdatePeriodSeconds",
                p,
                "must be greater than or equal to 10 seconds",
            ));
        }
    }
    errs
}

/// storage.k8s.io/v1 CSIDriver.
pub struct CsiDriverStrategy;

impl Strategy for CsiDriverStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_csi_driver(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_csi_driver)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_csi_driver(new);
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        // Upstream's strategy runs `ValidateCSIDriver` twice on create: every cause is listed
        // twice (the message lists it once).
        let mut errs = validate_driver_spec(obj);
        errs.extend(validate_driver_spec(obj));
        errs
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // Upstream's strategy validates the spec, then `ValidateCSIDriverUpdate` again with
        // the immutable fields.
        let mut errs = validate_driver_spec(new);
        errs.extend(validate_driver_spec(new));
        let attach = new.pointer("/spec/attachRequired");
        if attach != old.pointer("/spec/attachRequired") {
            errs.push(FieldError::invalid_value(
                "spec.attachedRequired",
                attach.unwrap_or(&Value::Null),
                IMMUTABLE,
            ));
        }
        let modes = new.pointer("/spec/volumeLifecycleModes");
        if modes != old.pointer("/spec/volumeLifecycleModes") {
            errs.push(invalid_rendered(
                "spec.volumeLifecycleModes",
                go_typed_strings("storage.VolumeLifecycleMode", modes),
                IMMUTABLE,
            ));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("AttachRequired", "boolean", "", "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is set to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.", 0),
            column("PodInfoOnMount", "boolean", "", "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.", 0),
            column("StorageCapacity", "boolean", "", "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.", 0),
            column("TokenRequests", "string", "", "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls.", 0),
            column("RequiresRepublish", "boolean", "", "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.", 0),
            column("Modes", "string", "", "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let flag = |key: &str, dflt: bool| spec.get(key).and_then(Value::as_bool).unwrap_or(dflt);
        let modes: Vec<&str> = items(spec, "volumeLifecycleModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let modes = if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes.join(",")
        };
        let tokens = match set(spec, "tokenRequests").and_then(Value::as_array) {
            None => "<unset>".to_string(),
            Some(t) => t
                .iter()
                .map(|t| text(t, "audience"))
                .collect::<Vec<_>>()
                .join(","),
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(flag("attachRequired", true)),
            Value::from(flag("podInfoOnMount", false)),
            Value::from(flag("storageCapacity", false)),
            Value::from(tokens),
            Value::from(flag("requiresRepublish", false)),
            Value::from(modes),
            age_cell(obj, now),
        ]
    }
}

/// `validateCSINodeDriver` of every driver.
fn validate_node_drivers(obj: &Value) -> Vec<FieldError> {
    let drivers = obj
        .pointer("/spec/drivers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, d) in drivers.iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        let name = text(d, "name");
        errs.extend(validate_csi_driver_name(name, &format!("{path}.name")));
        let node_id = text(d, "nodeID");
        if node_id.is_empty() {
            errs.push(FieldError::required(format!("{path}.nodeID"), ""));
        }
        if node_id.len() > MAX_NODE_ID_LENGTH {
            errs.push(FieldError::invalid(
                format!("{path}.nodeID"),
                node_id,
                format!("must be {MAX_NODE_ID_LENGTH} characters or less"),
            ));
        }
        if let Some(count) = d.pointer("/allocatable/count").filter(|c| !c.is_null()) {
            if count.as_i64().is_none_or(|n| n < 0) {
                errs.push(FieldError::invalid_value(
                    format!("{path}.allocatable.count"),
                    count,
                    "must be greater than or equal to 0",
                ));
            }
        }
        if !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
        }
        let mut keys = BTreeSet::new();
        for k in items(d, "topologyKeys") {
            let key = k.as_str().unwrap_or("");
            if key.is_empty() {
                errs.push(FieldError::required(path.clone(), ""));
            }
            if !keys.insert(key) {
                errs.push(FieldError::duplicate(path.clone(), &json!(key)));
            }
            for m in validation::is_qualified_name(key) {
                errs.push(FieldError::invalid(path.clone(), key, m));
            }
        }
    }
    errs
}

/// Go's `%#v` of a `storage.CSINodeDriver`.
fn go_node_driver(d: &Value) -> String {
    let allocatable = match set(d, "allocatable") {
        Some(_) => "(*storage.VolumeNodeResources)(0xc000000000)",
        None => "(*storage.VolumeNodeResources)(nil)",
    };
    format!(
        "storage.CSINodeDriver{{Name:{}, NodeID:{}, TopologyKeys:{}, Allocatable:{allocatable}}}",
        go_quote(text(d, "name")),
        go_quote(text(d, "nodeID")),
        go_strings(set(d, "topologyKeys")),
    )
}

/// storage.k8s.io/v1 CSINode.
pub struct CsiNodeStrategy;

impl Strategy for CsiNodeStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_node_drivers(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_node_drivers(new);
        let drivers = |o: &Value| -> Vec<Value> {
            o.pointer("/spec/drivers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (new_drivers, old_drivers) = (drivers(new), drivers(old));
        for o in &old_drivers {
            for n in new_drivers
                .iter()
                .filter(|n| text(n, "name") == text(o, "name"))
            {
                if !super::common::semantically_equal(Some(n), Some(o)) {
                    errs.push(invalid_rendered(
                        "spec.drivers",
                        go_node_driver(n),
                        IMMUTABLE,
                    ));
                }
            }
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Drivers",
                "integer",
                "",
                "Drivers indicates the number of CSI drivers registered on the node",
                0,
            ),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let n = obj
            .pointer("/spec/drivers")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(n),
            age_cell(obj, now),
        ]
    }
}

/// `ValidateCSIStorageCapacity` (without its object meta); `allow_invalid_values` keeps label
/// values the stored selector already had.
fn validate_capacity(obj: &Value, allow_invalid_values: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(sel) = set(obj, "nodeTopology") {
        errs.extend(validation::validate_label_selector(
            sel,
            "nodeTopology",
            allow_invalid_values,
        ));
    }
    let class = text(obj, "storageClassName");
    for m in validation::is_dns1123_subdomain(class) {
        errs.push(FieldError::invalid("storageClassName", class, m));
    }
    if let Some(q) = set(obj, "capacity").and_then(Value::as_str) {
        if api::quantity::Amount::parse(q).is_ok_and(|a| a < api::quantity::Amount::ZERO) {
            errs.push(FieldError::invalid(
                "capacity",
                q,
                "must be greater than or equal to 0",
            ));
        }
    }
    errs
}

/// storage.k8s.io/v1 CSIStorageCapacity.
pub struct CsiStorageCapacityStrategy;

impl Strategy for CsiStorageCapacityStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_capacity(obj, false)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let allow = set(old, "nodeTopology")
            .is_some_and(|s| !validation::validate_label_selector(s, "", false).is_empty());
        let mut errs = validate_capacity(new, allow);
        let topology = set(new, "nodeTopology");
        if !super::common::semantically_equal(topology, set(old, "nodeTopology")) {
            let shown = topology.map_or_else(|| "null".to_string(), gofmt::label_selector);
            errs.push(invalid_rendered("nodeTopology", shown, IMMUTABLE));
        }
        let class = text(new, "storageClassName");
        if class != text(old, "storageClassName") {
            errs.push(FieldError::invalid("storageClassName", class, IMMUTABLE));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("StorageClassName", "string", "", "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable.", 0),
            column("Capacity", "string", "", "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.\n\nThe semantic is currently (CSI spec 1.2) defined as: The available capacity, in bytes, of the storage that can be used to provision volumes. If not set, that information is currently unavailable.", 0),
        ]
    }
    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let capacity = set(obj, "capacity")
            .and_then(Value::as_str)
            .unwrap_or("<unset>");
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(text(obj, "storageClassName")),
            Value::from(capacity),
        ]
    }
}
