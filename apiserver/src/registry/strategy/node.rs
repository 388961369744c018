//! Nodes: cluster-scoped, created with their status (the kubelet registers them that way), status kept
//! on main-resource updates, `spec.unschedulable` field selector, kubectl's node printer.

use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::FieldError;
use serde_json::Value;
use std::collections::BTreeSet;

pub struct NodeStrategy;

/// ROLES: `node-role.kubernetes.io/<role>` label suffixes and the `kubernetes.io/role` value.
fn node_roles(obj: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    for (k, v) in api::meta::labels(obj) {
        if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
            if !r.is_empty() {
                roles.insert(r.to_string());
            }
        } else if k == "kubernetes.io/role" && !v.is_empty() {
            roles.insert(v);
        }
    }
    roles.into_iter().collect()
}

fn address(obj: &Value, ty: &str) -> String {
    obj.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x.get("type").and_then(Value::as_str) == Some(ty))
        })
        .and_then(|x| x.get("address").and_then(Value::as_str))
        .unwrap_or("<none>")
        .to_string()
}

/// The STATUS column: `Ready`, `NotReady` or `Unknown`, plus `,SchedulingDisabled`.
pub fn node_status(obj: &Value) -> String {
    let mut status = Vec::new();
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => status.push("Ready"),
        Some(_) => status.push("NotReady"),
        None => status.push("Unknown"),
    }
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    status.join(",")
}

fn or_unknown(s: String) -> String {
    if s.is_empty() {
        "<unknown>".to_string()
    } else {
        s
    }
}

/// `SetDefaults_NodeStatus`: `allocatable` is the `capacity` when unset.
fn default_node_status(obj: &mut Value) {
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let unset = status.get("allocatable").is_none_or(Value::is_null);
    match status.get("capacity").filter(|c| c.is_object()).cloned() {
        Some(capacity) if unset => {
            status.insert("allocatable".into(), capacity);
        }
        _ => {}
    }
}

impl Strategy for NodeStrategy {
    // Upstream defaults every decoded body, a status update's included.
    fn prepare_for_create(&self, obj: &mut Value) {
        default_node_status(obj);
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_node_status(new);
    }
    fn prepare_for_status_update(&self, new: &mut Value, _old: &Value) {
        default_node_status(new);
    }
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_node_status)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (a, b) = (new.pointer("/spec/podCIDR"), old.pointer("/spec/podCIDR"));
        if b.and_then(Value::as_str).is_some_and(|s| !s.is_empty()) && a != b {
            errs.push(FieldError::forbidden(
                "spec.podCIDR",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Status", "string", "", "The status of the node", 0),
            column("Roles", "string", "", "The roles of the node", 0),
            age_column(),
            column("Version", "string", "", "Kubelet Version reported by the node.", 0),
            column("Internal-IP", "string", "", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).", 1),
            column("External-IP", "string", "", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).", 1),
            column("OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
            column("Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
            column("Container-Runtime", "string", "", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let roles = node_roles(obj);
        let info = |k: &str| {
            obj.pointer(&format!("/status/nodeInfo/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(node_status(obj)),
            Value::from(if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            }),
            age_cell(obj, now),
            Value::from(info("kubeletVersion")),
            Value::from(address(obj, "InternalIP")),
            Value::from(address(obj, "ExternalIP")),
            Value::from(or_unknown(info("osImage"))),
            Value::from(or_unknown(info("kernelVersion"))),
            Value::from(or_unknown(info("containerRuntimeVersion"))),
        ]
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.unschedulable" => Some(
                obj.pointer("/spec/unschedulable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                    .to_string(),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_write_defaults_allocatable_to_capacity() {
        let capacity = json!({"cpu": "4", "pods": "110"});
        let bare = json!({"metadata": {"name": "n"}, "status": {"capacity": capacity}});
        let mut created = bare.clone();
        NodeStrategy.prepare_for_create(&mut created);
        let mut updated = bare.clone();
        NodeStrategy.prepare_for_update(&mut updated, &bare);
        let mut status = bare.clone();
        NodeStrategy.prepare_for_status_update(&mut status, &bare);
        for node in [created, updated, status] {
            assert_eq!(node["status"]["allocatable"], capacity);
        }
        let mut own = json!({"status": {"capacity": capacity, "allocatable": {"cpu": "3"}}});
        NodeStrategy.prepare_for_status_update(&mut own, &bare);
        assert_eq!(own["status"]["allocatable"], json!({"cpu": "3"}));
    }
}
