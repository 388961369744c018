//! Services: defaulting (type, sessionAffinity, port protocol and targetPort, IP families), DNS-1035
//! names, port validation, immutable cluster IPs, kubectl's service printer. Cluster IPs come from the
//! strategy's [`ClusterIpAllocator`]: allocated in `before_create`, released when a create fails and
//! after a delete, rebuilt from storage at start (`restore`).

use super::common::{default_field, field_text, object_at};
use super::nodeports::{allocate_node_ports, keep_allocated_values, validate_node_ports};
use super::portalloc::{service_node_ports, NodePortAllocator};
use super::table::{age_cell, age_column, column, name_column};
use super::workloads::format_labels;
use super::{ClusterIpAllocator, Strategy, Undo};
use api::validation::{self, FieldError};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

pub struct ServiceStrategy {
    /// Cluster IPs in use; shared by every service write.
    ips: Arc<ClusterIpAllocator>,
    /// Node ports in use (node ports and health-check node ports); shared by every service write.
    ports: Arc<NodePortAllocator>,
}

impl ServiceStrategy {
    /// A strategy allocating cluster IPs from `ips` and node ports from its own allocator.
    pub fn new(ips: Arc<ClusterIpAllocator>) -> Self {
        ServiceStrategy {
            ips,
            ports: Arc::new(NodePortAllocator::new()),
        }
    }

    /// Returns the addresses and node ports `svc` holds to the pools (an `ExternalName` service
    /// holds none, whatever its `clusterIP` says).
    fn release(&self, svc: &Value) {
        if field_text(svc, "spec.type") == "ExternalName" {
            return;
        }
        for ip in super::service_cluster_ips(svc) {
            self.ips.release(&ip);
        }
        for port in service_node_ports(svc) {
            self.ports.release(port);
        }
    }

    /// An undo releasing `ports`.
    fn release_ports(&self, ports: Vec<i64>) -> Option<Undo> {
        if ports.is_empty() {
            return None;
        }
        let pool = self.ports.clone();
        Some(Box::new(move || {
            ports.into_iter().for_each(|p| pool.release(p))
        }))
    }
}

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// `SetDefaults_Service` and the REST storage's IP family fields (`initIPFamilyFields`).
fn default_service(obj: &mut Value) {
    default_service_scheme(obj);
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        // A single-stack IPv4 cluster: one family; a headless service without a selector asks
        // for every family of the cluster (`RequireDualStack`, upstream's `initIPFamilyFields`).
        let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
        let selectorless = spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(|m| m.is_empty());
        let policy = if headless && selectorless {
            "RequireDualStack"
        } else {
            "SingleStack"
        };
        default_field(spec, "ipFamilies", json!(["IPv4"]));
        default_field(spec, "ipFamilyPolicy", json!(policy));
    }
}

/// `SetDefaults_Service` alone: what decoding a stored Service applies. Whether it removed or
/// replaced a field (what adding fields does not tell: [`super::defaulted`] counts them).
fn default_service_scheme(obj: &mut Value) -> bool {
    let mut replaced = false;
    let Some(spec) = object_at(obj, "spec") else {
        return replaced;
    };
    default_field(spec, "type", json!("ClusterIP"));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default_field(spec, "sessionAffinity", json!("None"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            replaced |= spec.remove("sessionAffinityConfig").is_some();
        }
        Some("ClientIP") => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"));
            if timeout.is_none_or(Value::is_null) {
                replaced = true;
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_AFFINITY_SECONDS}}),
                );
            }
        }
        _ => {}
    }
    if ty != "ExternalName" {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    // `service.ExternallyAccessible`: node ports, a load balancer, or external IPs.
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    if ty == "NodePort" || ty == "LoadBalancer" || (ty == "ClusterIP" && external_ips) {
        default_field(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        default_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(p, "protocol", json!("TCP"));
            // An absent, zero or empty target port is the port.
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                Some(_) => false,
            };
            if let (true, Some(port)) = (unset, p.get("port").cloned()) {
                replaced |= p.insert("targetPort".into(), port).is_some();
            }
        }
    }
    if ty == "LoadBalancer" {
        // A load balancer ingress with an IP and no mode is a VIP.
        let ingress = obj
            .pointer_mut("/status/loadBalancer/ingress")
            .and_then(Value::as_array_mut);
        for ing in ingress
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let has_ip = ing
                .get("ip")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty());
            if has_ip {
                default_field(ing, "ipMode", json!("VIP"));
            }
        }
    }
    replaced
}

/// `DefaultClientIPServiceAffinitySeconds`: three hours.
const DEFAULT_CLIENT_IP_AFFINITY_SECONDS: i64 = 10_800;

impl ServiceStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ty_v = obj
            .pointer("/spec/type")
            .cloned()
            .unwrap_or(json!("ClusterIP"));
        let ty = ty_v.as_str().unwrap_or("");
        if !TYPES.contains(&ty) {
            errs.push(FieldError::not_supported("spec.type", &ty_v, TYPES));
        }
        let ports = obj
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let headless = obj.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
        if ports.is_empty() && ty != "ExternalName" && !headless {
            errs.push(FieldError::required("spec.ports", ""));
        }
        if ty == "ExternalName" && field_text(obj, "spec.externalName").is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        }
        let mut names = BTreeSet::new();
        for (i, p) in ports.iter().enumerate() {
            let path = format!("spec.ports[{i}]");
            let name = p.get("name").and_then(Value::as_str).unwrap_or("");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(format!("{path}.name"), ""));
            } else if !name.is_empty() {
                for m in validation::is_dns1123_label(name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), name, m));
                }
                if !names.insert(name.to_string()) {
                    errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
                }
            }
            match p.get("port") {
                Some(v) if v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) => {}
                Some(v) => errs.push(FieldError::invalid_value(
                    format!("{path}.port"),
                    v,
                    "must be between 1 and 65535, inclusive",
                )),
                None => errs.push(FieldError::required(format!("{path}.port"), "")),
            }
            if let Some(proto) = p.get("protocol") {
                if !proto.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
                    errs.push(FieldError::not_supported(
                        format!("{path}.protocol"),
                        proto,
                        PROTOCOLS,
                    ));
                }
            }
            if let Some(np) = p.get("nodePort") {
                if !np.as_i64().is_some_and(|n| (0..=65535).contains(&n)) {
                    errs.push(FieldError::invalid_value(
                        format!("{path}.nodePort"),
                        np,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
        if let Some(sel) = obj.pointer("/spec/selector") {
            errs.extend(validation::validate_labels(sel, "spec.selector"));
        }
        errs.extend(validate_node_ports(obj));
        errs.extend(validate_ip_families(obj));
        errs
    }
}

const IP_FAMILY_POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];

/// `ValidateService`'s IP family rules and the allocator's checks of a single-stack IPv4 cluster.
fn validate_ip_families(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if field_text(obj, "spec.type") == "ExternalName" {
        return errs;
    }
    let policy = obj.pointer("/spec/ipFamilyPolicy").filter(|v| !v.is_null());
    if let Some(p) = policy {
        if !p.as_str().is_some_and(|s| IP_FAMILY_POLICIES.contains(&s)) {
            errs.push(FieldError::not_supported(
                "spec.ipFamilyPolicy",
                p,
                IP_FAMILY_POLICIES,
            ));
        }
    }
    let families = obj
        .pointer("/spec/ipFamilies")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, f) in families.iter().enumerate() {
        let path = format!("spec.ipFamilies[{i}]");
        match f.as_str() {
            Some("IPv4") => {}
            Some("IPv6") => errs.push(FieldError::invalid(
                &path,
                "IPv6",
                "not configured on this cluster",
            )),
            _ => errs.push(FieldError::not_supported(path, f, &["IPv4", "IPv6"])),
        }
    }
    let headless = field_text(obj, "spec.clusterIP") == "None";
    let selectorless = obj
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .is_none_or(|m| m.is_empty());
    if policy.and_then(Value::as_str) == Some("RequireDualStack") && !(headless && selectorless) {
        errs.push(FieldError::invalid(
            "spec.ipFamilyPolicy",
            "RequireDualStack",
            "this cluster is not configured for dual-stack services",
        ));
    }
    errs
}

fn port_string(obj: &Value) -> String {
    let ports = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() {
        return "<none>".to_string();
    }
    ports
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) {
                0 => format!("{port}/{proto}"),
                np => format!("{port}:{np}/{proto}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn external_ip(obj: &Value) -> String {
    let ty = obj
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let external: Vec<String> = obj
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    match ty {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_string()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut ips: Vec<String> = obj
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|i| {
                            i.get("ip")
                                .or_else(|| i.get("hostname"))
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        })
                        .collect()
                })
                .unwrap_or_default();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => field_text(obj, "spec.externalName"),
        _ => "<unknown>".to_string(),
    }
}

impl Strategy for ServiceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_service(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        let mut replaced = false;
        super::defaulted(obj, |o| replaced = default_service_scheme(o)) || replaced
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"loadBalancer": {}}))
    }
    fn name_validation(&self) -> validation::NameValidator {
        validation::name_is_dns1035_label
    }
    fn before_create(&self, obj: &mut Value) -> Result<Option<Undo>, Vec<FieldError>> {
        let allocated = self.ips.assign(obj).map_err(|e| vec![e])?;
        let release_ip = {
            let ips = self.ips.clone();
            move || {
                if let Some(ip) = allocated {
                    ips.release(&ip.to_string());
                }
            }
        };
        let ports = match allocate_node_ports(&self.ports, obj, None) {
            Ok(ports) => ports,
            Err(errs) => {
                release_ip();
                return Err(errs);
            }
        };
        let release_ports = self.release_ports(ports);
        if allocated.is_none() && release_ports.is_none() {
            return Ok(None);
        }
        Ok(Some(Box::new(move || {
            release_ip();
            if let Some(undo) = release_ports {
                undo();
            }
        })))
    }
    fn before_update(&self, new: &mut Value, old: &Value) -> Result<Option<Undo>, Vec<FieldError>> {
        // An ExternalName service holds no cluster IP: one that becomes another type gets one.
        let from_external = field_text(old, "spec.type") == "ExternalName"
            && field_text(new, "spec.type") != "ExternalName";
        let ip = if from_external {
            self.ips.assign(new).map_err(|e| vec![e])?
        } else {
            None
        };
        let release_ip = {
            let ips = self.ips.clone();
            move || {
                if let Some(ip) = ip {
                    ips.release(&ip.to_string());
                }
            }
        };
        let ports = match allocate_node_ports(&self.ports, new, Some(old)) {
            Ok(ports) => ports,
            Err(errs) => {
                release_ip();
                return Err(errs);
            }
        };
        let release_ports = self.release_ports(ports);
        if ip.is_none() && release_ports.is_none() {
            return Ok(None);
        }
        Ok(Some(Box::new(move || {
            release_ip();
            if let Some(undo) = release_ports {
                undo();
            }
        })))
    }
    fn after_update(&self, new: &Value, old: &Value) {
        let kept = service_node_ports(new);
        for port in service_node_ports(old) {
            if !kept.contains(&port) {
                self.ports.release(port);
            }
        }
        if field_text(old, "spec.type") != "ExternalName" {
            let held = if field_text(new, "spec.type") == "ExternalName" {
                Vec::new()
            } else {
                super::service_cluster_ips(new)
            };
            for ip in super::service_cluster_ips(old) {
                if !held.contains(&ip) {
                    self.ips.release(&ip);
                }
            }
        }
    }
    fn after_delete(&self, obj: &Value) {
        self.release(obj);
    }
    fn restore(&self, stored: &mut dyn Iterator<Item = Arc<Value>>) {
        let services: Vec<Arc<Value>> = stored.collect();
        self.ips.rebuild(services.iter().map(|s| s.as_ref()));
        self.ports.rebuild(services.iter().map(|s| s.as_ref()));
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Cluster IPs are kept when an update omits them (kubectl apply never sends them).
        for key in ["clusterIP", "clusterIPs"] {
            let missing = new
                .pointer(&format!("/spec/{key}"))
                .is_none_or(|v| v.is_null() || v == "");
            if let (true, Some(v)) = (missing, old.pointer(&format!("/spec/{key}"))) {
                if let Some(spec) = object_at(new, "spec") {
                    spec.insert(key.to_string(), v.clone());
                }
            }
        }
        default_service(new);
        keep_allocated_values(new, old);
        // Switching to ExternalName with the allocated IPs unchanged drops them and the fields
        // that only IP services have (`dropTypeDependentFields`); the IPs are released after the
        // write.
        let to_external = field_text(new, "spec.type") == "ExternalName"
            && field_text(old, "spec.type") != "ExternalName";
        if to_external && super::service_cluster_ips(new) == super::service_cluster_ips(old) {
            if let Some(spec) = object_at(new, "spec") {
                for key in [
                    "clusterIP",
                    "clusterIPs",
                    "ipFamilies",
                    "ipFamilyPolicy",
                    "internalTrafficPolicy",
                ] {
                    spec.remove(key);
                }
            }
        }
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (a, b) = (
            field_text(new, "spec.clusterIP"),
            field_text(old, "spec.clusterIP"),
        );
        let type_change = field_text(new, "spec.type") == "ExternalName"
            || field_text(old, "spec.type") == "ExternalName";
        if !b.is_empty() && a != b && !type_change {
            errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                &a,
                "may not change once set",
            ));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Type", "string", "", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.", 0),
            column("Cluster-IP", "string", "", "clusterIP is the IP address of the service and is usually assigned randomly.", 0),
            column("External-IP", "string", "", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.", 0),
            column("Port(s)", "string", "", "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies", 0),
            age_column(),
            column("Selector", "string", "", "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/", 1),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let cluster_ip = field_text(obj, "spec.clusterIP");
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(field_text(obj, "spec.type")),
            Value::from(if cluster_ip.is_empty() {
                "<none>".to_string()
            } else {
                cluster_ip
            }),
            Value::from(external_ip(obj)),
            Value::from(port_string(obj)),
            age_cell(obj, now),
            Value::from(format_labels(&api::meta::as_string_map(
                obj.pointer("/spec/selector"),
            ))),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::default_service_scheme;

    #[test]
    fn scheme_defaults_as_set_defaults_service() {
        let mut svc = json!({"spec": {
            "sessionAffinity": "ClientIP",
            "externalIPs": ["10.9.9.9"],
            "ports": [{"port": 80, "targetPort": 0}, {"port": 81, "targetPort": ""},
                      {"port": 82, "targetPort": "http"}],
        }});
        default_service_scheme(&mut svc);
        let spec = &svc["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(
            spec["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
        // External IPs make a ClusterIP service externally accessible.
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        let targets: Vec<_> = (0..3)
            .map(|i| spec["ports"][i]["targetPort"].clone())
            .collect();
        assert_eq!(targets, [json!(80), json!(81), json!("http")]);

        // A configured timeout is kept; affinity None drops the configuration.
        let mut kept = json!({"spec": {"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}});
        default_service_scheme(&mut kept);
        assert_eq!(
            kept["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            60
        );
        let mut none =
            json!({"spec": {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}});
        // A removal is reported (a count of fields would not tell it from adding one).
        assert!(default_service_scheme(&mut none));
        assert!(none["spec"].get("sessionAffinityConfig").is_none());
        assert!(!default_service_scheme(&mut none), "defaulted already");
        let mut internal = json!({"spec": {"type": "ClusterIP"}});
        default_service_scheme(&mut internal);
        assert!(internal["spec"].get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn load_balancer_ingress_ips_are_vips() {
        let mut svc = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [
            {"ip": "1.2.3.4"}, {"hostname": "lb.example"}, {"ip": "5.6.7.8", "ipMode": "Proxy"},
        ]}}});
        default_service_scheme(&mut svc);
        let ingress = &svc["status"]["loadBalancer"]["ingress"];
        assert_eq!(ingress[0]["ipMode"], "VIP");
        assert!(ingress[1].get("ipMode").is_none());
        assert_eq!(ingress[2]["ipMode"], "Proxy");
        assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], true);
    }
}
