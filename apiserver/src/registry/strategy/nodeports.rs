//! The node-port rules of Services (Kubernetes 1.33's `pkg/registry/core/service/storage/alloc.go`
//! and `rest.go`, and the node-port checks of `ValidateService`):
//! - which services need node ports: `NodePort`, and `LoadBalancer` unless
//!   `allocateLoadBalancerNodePorts` is false (then only requested ones are held); a
//!   health-check node port for `LoadBalancer` with `externalTrafficPolicy: Local`;
//! - allocation ([`allocate_node_ports`], on create and on update): a requested port not already
//!   held by the service is reserved (out of range or taken is a 422 on
//!   `spec.ports[i].nodePort` / `spec.healthCheckNodePort` with upstream's messages), a missing one
//!   is allocated; the caller releases what the old state held and the new one does not after the
//!   write;
//! - an update that omits allocated values keeps them (`patchAllocatedValues`: node ports by port
//!   name, the health-check port), and a type change away from node ports with the ports unchanged
//!   clears them (`dropTypeDependentFields`) — [`keep_allocated_values`];
//! - validation ([`validate_node_ports`]): no node port on a `ClusterIP` service, no (protocol,
//!   nodePort) twice, a health-check node port only where one is needed.

use super::portalloc::{service_node_ports, NodePortAllocator};
use api::validation::FieldError;
use serde_json::{json, Value};

fn ty(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

/// `shouldAllocateNodePorts` / `needsNodePort`.
pub fn needs_node_ports(svc: &Value) -> bool {
    match ty(svc) {
        "NodePort" => true,
        "LoadBalancer" => {
            svc.pointer("/spec/allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool)
                != Some(false)
        }
        _ => false,
    }
}

/// `NeedsHealthCheck`: `LoadBalancer` with `externalTrafficPolicy: Local`.
pub fn needs_health_check(svc: &Value) -> bool {
    ty(svc) == "LoadBalancer"
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local")
}

fn node_port(p: &Value) -> i64 {
    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0)
}

fn ports(svc: &Value) -> &[Value] {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn health_check_port(svc: &Value) -> i64 {
    svc.pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Allocates the node ports `svc` needs that `old` (the stored state of an update) does not hold,
/// filling missing ones in. Returns the ports it allocated (to release if the write does not
/// happen); on a refusal nothing stays allocated.
pub fn allocate_node_ports(
    pool: &NodePortAllocator,
    svc: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<i64>, Vec<FieldError>> {
    if ty(svc) == "ExternalName" {
        return Ok(Vec::new());
    }
    let held = old.map(service_node_ports).unwrap_or_default();
    let mut allocated: Vec<i64> = Vec::new();
    let fail = |allocated: &[i64], err: FieldError| {
        allocated.iter().for_each(|p| pool.release(*p));
        Err(vec![err])
    };
    let auto = needs_node_ports(svc);
    let count = ports(svc).len();
    for i in 0..count {
        let requested = node_port(&ports(svc)[i]);
        if requested == 0 && !auto {
            continue;
        }
        let path = format!("spec.ports[{i}].nodePort");
        // Ports with the same port number (53/TCP and 53/UDP) share one node port, the one
        // another of them requests or got (upstream's `findRequestedNodePort`).
        let shared = if requested == 0 {
            let number = ports(svc)[i].get("port").and_then(Value::as_i64);
            ports(svc)
                .iter()
                .enumerate()
                .filter(|(j, p)| *j != i && p.get("port").and_then(Value::as_i64) == number)
                .map(|(_, p)| node_port(p))
                .find(|np| *np != 0)
        } else {
            None
        };
        let port = match shared.or((requested != 0).then_some(requested)) {
            Some(wanted) => {
                if !held.contains(&wanted) && !allocated.contains(&wanted) {
                    if let Err(e) = pool.allocate_specific(wanted) {
                        return fail(&allocated, e.field_error(&path));
                    }
                    allocated.push(wanted);
                }
                wanted
            }
            None => match pool.allocate() {
                Ok(p) => {
                    allocated.push(p);
                    p
                }
                Err(e) => return fail(&allocated, e.field_error(&path)),
            },
        };
        if let Some(p) = svc
            .pointer_mut(&format!("/spec/ports/{i}"))
            .and_then(Value::as_object_mut)
        {
            p.insert("nodePort".into(), json!(port));
        }
    }
    if needs_health_check(svc) {
        let requested = health_check_port(svc);
        let path = "spec.healthCheckNodePort";
        let port = if requested == 0 {
            pool.allocate()
        } else if held.contains(&requested) || allocated.contains(&requested) {
            Ok(requested)
        } else {
            pool.allocate_specific(requested)
        };
        let newly =
            requested == 0 || !(held.contains(&requested) || allocated.contains(&requested));
        match port {
            Ok(p) => {
                if newly {
                    allocated.push(p);
                }
                if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("healthCheckNodePort".into(), json!(p));
                }
            }
            Err(e) => return fail(&allocated, e.field_error(path)),
        }
    }
    Ok(allocated)
}

/// `patchAllocatedValues` and the node-port part of `dropTypeDependentFields` for an update.
pub fn keep_allocated_values(new: &mut Value, old: &Value) {
    if needs_node_ports(old) && needs_node_ports(new) {
        let used: Vec<i64> = ports(new)
            .iter()
            .map(node_port)
            .filter(|p| *p != 0)
            .collect();
        let by_name: Vec<(String, i64)> = ports(old)
            .iter()
            .map(|p| {
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                (name.to_string(), node_port(p))
            })
            .collect();
        if let Some(list) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in list.iter_mut() {
                if node_port(p) != 0 {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                let found = by_name.iter().find(|(n, _)| n == name).map(|(_, np)| *np);
                if let (Some(np), Some(m)) = (
                    found.filter(|np| *np != 0 && !used.contains(np)),
                    p.as_object_mut(),
                ) {
                    m.insert("nodePort".into(), json!(np));
                }
            }
        }
    }
    if needs_health_check(old) && needs_health_check(new) && health_check_port(new) == 0 {
        let hc = health_check_port(old);
        if let (true, Some(spec)) = (hc != 0, new.get_mut("spec").and_then(Value::as_object_mut)) {
            spec.insert("healthCheckNodePort".into(), json!(hc));
        }
    }
    // Switching to a type without node ports while keeping the old values drops them.
    let same_ports = {
        let a: Vec<i64> = ports(new).iter().map(node_port).collect();
        let b: Vec<i64> = ports(old).iter().map(node_port).collect();
        a == b
    };
    if needs_node_ports(old) && !needs_node_ports(new) && same_ports {
        if let Some(list) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in list.iter_mut().filter_map(Value::as_object_mut) {
                p.remove("nodePort");
            }
        }
    }
    if needs_health_check(old)
        && !needs_health_check(new)
        && health_check_port(new) == health_check_port(old)
    {
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("healthCheckNodePort");
        }
    }
    if ty(new) != "LoadBalancer" {
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("allocateLoadBalancerNodePorts");
        }
    }
}

/// The node-port checks of `ValidateService`.
pub fn validate_node_ports(svc: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let t = ty(svc);
    if t == "ClusterIP" {
        for (i, p) in ports(svc).iter().enumerate() {
            if node_port(p) != 0 {
                errs.push(FieldError::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut seen: Vec<(String, i64)> = Vec::new();
    for (i, p) in ports(svc).iter().enumerate() {
        let np = node_port(p);
        if np == 0 {
            continue;
        }
        let proto = p
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP")
            .to_string();
        if seen.contains(&(proto.clone(), np)) {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}].nodePort"),
                &json!(np),
            ));
        }
        seen.push((proto, np));
    }
    if let Some(hc) = svc.pointer("/spec/healthCheckNodePort") {
        let n = hc.as_i64().unwrap_or(-1);
        if n != 0 {
            if !needs_health_check(svc) {
                errs.push(FieldError::forbidden(
                    "spec.healthCheckNodePort",
                    "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
                ));
            } else if !(1..=65535).contains(&n) {
                errs.push(FieldError::invalid_value(
                    "spec.healthCheckNodePort",
                    hc,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    if svc
        .pointer("/spec/allocateLoadBalancerNodePorts")
        .is_some_and(|v| !v.is_null())
        && t != "LoadBalancer"
    {
        errs.push(FieldError::forbidden(
            "spec.allocateLoadBalancerNodePorts",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ty: &str, ports: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": {"type": ty, "ports": ports}})
    }

    #[test]
    fn allocates_on_create_keeps_on_update_and_refuses_conflicts() {
        let pool = NodePortAllocator::new();
        let mut a = svc(
            "NodePort",
            json!([{"name": "http", "port": 80}, {"name": "x", "port": 81, "nodePort": 30080}]),
        );
        let got = allocate_node_ports(&pool, &mut a, None).unwrap_or_default();
        assert_eq!(got.len(), 2);
        let auto = a
            .pointer("/spec/ports/0/nodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        assert!((30000..=32767).contains(&auto));
        // A second service asking for the same port is refused.
        let mut b = svc("NodePort", json!([{"port": 80, "nodePort": 30080}]));
        let err = allocate_node_ports(&pool, &mut b, None)
            .err()
            .unwrap_or_default();
        assert_eq!(
            format!("{}: {}", err[0].field, err[0].body()),
            "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        // An update that omits the node ports keeps them (kubectl apply).
        let mut upd = svc(
            "NodePort",
            json!([{"name": "http", "port": 80}, {"name": "x", "port": 81}]),
        );
        keep_allocated_values(&mut upd, &a);
        assert_eq!(upd.pointer("/spec/ports/0/nodePort"), Some(&json!(auto)));
        assert_eq!(allocate_node_ports(&pool, &mut upd, Some(&a)), Ok(vec![]));
        // Changing the type away drops them; validation then passes for ClusterIP.
        let mut cip = a.clone();
        cip["spec"]["type"] = json!("ClusterIP");
        keep_allocated_values(&mut cip, &a);
        assert!(cip.pointer("/spec/ports/0/nodePort").is_none());
        assert!(validate_node_ports(&cip).is_empty());
        let mut bad = svc("ClusterIP", json!([{"port": 80, "nodePort": 30001}]));
        assert_eq!(
            validate_node_ports(&bad)
                .iter()
                .map(|e| format!("{}: {}", e.field, e.body()))
                .collect::<Vec<_>>(),
            ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        bad["spec"]["type"] = json!("NodePort");
        bad["spec"]["ports"] = json!([{"name": "a", "port": 80, "nodePort": 30001}, {"name": "b", "port": 81, "nodePort": 30001}]);
        assert_eq!(validate_node_ports(&bad).len(), 1);
    }

    #[test]
    fn same_port_numbers_share_a_node_port() {
        let pool = NodePortAllocator::new();
        let mut dns = svc(
            "NodePort",
            json!([{"name": "tcp", "port": 53, "protocol": "TCP"}, {"name": "udp", "port": 53, "protocol": "UDP"}]),
        );
        assert_eq!(
            allocate_node_ports(&pool, &mut dns, None).map(|v| v.len()),
            Ok(1)
        );
        assert_eq!(
            dns.pointer("/spec/ports/0/nodePort"),
            dns.pointer("/spec/ports/1/nodePort")
        );
        assert!(validate_node_ports(&dns).is_empty());
        let mut later = svc(
            "NodePort",
            json!([{"name": "tcp", "port": 53}, {"name": "udp", "port": 53, "protocol": "UDP", "nodePort": 31053}]),
        );
        assert_eq!(
            allocate_node_ports(&pool, &mut later, None),
            Ok(vec![31053])
        );
        assert_eq!(later.pointer("/spec/ports/0/nodePort"), Some(&json!(31053)));
    }

    #[test]
    fn load_balancers_get_health_check_ports_when_local() {
        let pool = NodePortAllocator::new();
        let mut lb = svc("LoadBalancer", json!([{"port": 80}]));
        lb["spec"]["externalTrafficPolicy"] = json!("Local");
        let got = allocate_node_ports(&pool, &mut lb, None).unwrap_or_default();
        assert_eq!(got.len(), 2);
        assert!(lb
            .pointer("/spec/healthCheckNodePort")
            .and_then(Value::as_i64)
            .is_some());
        let mut no_alloc = svc("LoadBalancer", json!([{"port": 80}]));
        no_alloc["spec"]["allocateLoadBalancerNodePorts"] = json!(false);
        assert_eq!(allocate_node_ports(&pool, &mut no_alloc, None), Ok(vec![]));
        let mut np = svc("NodePort", json!([{"port": 80}]));
        np["spec"]["healthCheckNodePort"] = json!(30100);
        assert_eq!(validate_node_ports(&np).len(), 1);
    }
}
