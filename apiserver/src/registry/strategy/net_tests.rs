//! networking.k8s.io strategies: defaults, upstream's messages and field paths, immutable
//! fields, generation, tables.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

const G: &str = "networking.k8s.io";

fn s(plural: &str) -> Arc<Resource> {
    match builtin::find(G, plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

/// `field: body` of each error, as a 422's causes read.
fn render(errs: Vec<api::validation::FieldError>) -> Vec<String> {
    errs.iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

/// Defaults then validation of a new object, as the create path runs them.
fn create_errors(r: &Resource, obj: &Value) -> Vec<String> {
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    render(r.validate_create(&obj))
}

fn update_errors(r: &Resource, new: &Value, old: &Value) -> Vec<String> {
    let mut new = new.clone();
    r.prepare_for_update(&mut new, old);
    render(r.validate_update(&new, old))
}

fn created(r: &Resource, obj: &Value) -> Value {
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    obj
}

fn ingress(spec: Value) -> Value {
    json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn path(path_type: Value, path: &str, backend: Value) -> Value {
    json!({"rules": [{"host": "foo.com", "http": {"paths": [{"path": path, "pathType": path_type, "backend": backend}]}}]})
}

fn svc(name: &str, port: Value) -> Value {
    json!({"service": {"name": name, "port": port}})
}

#[test]
fn ingress_rules_paths_and_backends() {
    let r = s("ingresses");
    let ok = ingress(path(
        json!("Prefix"),
        "/",
        svc("web", json!({"number": 80})),
    ));
    assert_eq!(create_errors(&r, &ok), Vec::<String>::new());
    assert_eq!(
        create_errors(&r, &ingress(json!({}))),
        ["spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]
    );
    assert_eq!(
        create_errors(
            &r,
            &ingress(path(Value::Null, "/", svc("web", json!({"number": 80}))))
        ),
        ["spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"]
    );
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Regex"), "/", svc("web", json!({"number": 80}))))),
        ["spec.rules[0].http.paths[0].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""]
    );
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Exact"), "a//b/..", svc("Web", json!({}))))),
        [
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b/..\": must be an absolute path",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b/..\": must not contain '//'",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b/..\": cannot end with '/..'",
            "spec.rules[0].http.paths[0].backend.service.name: Invalid value: \"Web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.rules[0].http.paths[0].backend: Required value: port name or number is required",
        ]
    );
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Prefix"), "/", svc("web", json!({"name": "http", "number": 80}))))),
        ["spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both port name & port number"]
    );
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Prefix"), "/", svc("web", json!({"number": 70000}))))),
        ["spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive"]
    );
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Prefix"), "/", json!({})))),
        ["spec.rules[0].http.paths[0].backend: Invalid value: \"\": resource or service backend is required"]
    );
    let both = json!({"service": {"name": "a", "port": {"number": 1}}, "resource": {"kind": "K", "name": "n"}});
    assert_eq!(
        create_errors(&r, &ingress(path(json!("Prefix"), "/", both))),
        ["spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both resource and service backends"]
    );
    let hosts = ingress(json!({
        "defaultBackend": {"resource": {"kind": "", "name": "a/b"}},
        "rules": [{"host": "1.2.3.4"}, {"host": "*.foo.com"}, {"host": "a.*.com"}, {"http": {"paths": []}}],
        "tls": [{"hosts": ["Bad"], "secretName": "Not_A_Secret"}],
        "ingressClassName": "Nope",
    }));
    let errs = create_errors(&r, &hosts);
    assert_eq!(errs[0], "spec.defaultBackend.resource.kind: Required value");
    assert_eq!(
        errs[1],
        "spec.defaultBackend.resource.name: Invalid value: \"a/b\": may not contain '/'"
    );
    assert_eq!(
        errs[2],
        "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address"
    );
    assert!(errs[3].starts_with("spec.rules[2].host: Invalid value: \"a.*.com\": a wildcard DNS-1123 subdomain must start with '*.'"), "{errs:?}");
    assert_eq!(errs[4], "spec.rules[3].http.paths: Required value");
    assert!(errs[5].starts_with(
        "spec.tls[0].hosts[0]: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain"
    ));
    assert!(errs[6].starts_with("spec.tls[0].secretName: Invalid value: \"Not_A_Secret\""));
    assert!(errs[7].starts_with("spec.ingressClassName: Invalid value: \"Nope\""));
    assert_eq!(errs.len(), 8, "{errs:?}");
}

#[test]
fn ingress_class_annotation_generation_and_status() {
    let r = s("ingresses");
    let mut obj = ingress(
        json!({"ingressClassName": "nginx", "defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}}}),
    );
    obj["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "traefik"});
    assert_eq!(
        create_errors(&r, &obj),
        ["annotations.kubernetes.io/ingress.class: Invalid value: \"traefik\": must match `ingressClassName` when both are specified"]
    );
    let mut old = created(
        &r,
        &ingress(json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}})),
    );
    old["status"] = json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}});
    assert_eq!(old["metadata"]["generation"], 1);
    // The annotation check is a create rule only.
    assert_eq!(update_errors(&r, &obj, &old), Vec::<String>::new());
    let mut new = obj.clone();
    r.prepare_for_update(&mut new, &old);
    assert_eq!(new["metadata"]["generation"], 2);
    assert_eq!(new["status"], old["status"], "status is a subresource");
    let mut status = old.clone();
    status["status"] =
        json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.300"}, {"hostname": "1.2.3.4"}]}});
    assert_eq!(
        render(r.validate_update(&status, &old)),
        [
            "status.loadBalancer.ingress[0].ip: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "status.loadBalancer.ingress[1].hostname: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
        ]
    );
    assert_eq!(created(&r, &obj)["status"], json!({"loadBalancer": {}}));
}

#[test]
fn ingress_table_is_kubectls() {
    let r = s("ingresses");
    let obj = json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.com"]}],
            "rules": [{"host": "a.com"}, {"host": "b.com"}, {}, {"host": "c.com"}, {"host": "d.com"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.1"}]}},
    });
    let cells = r.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(cells[1], "nginx");
    assert_eq!(cells[2], "a.com,b.com,c.com + 2 more...");
    assert_eq!(cells[3], "10.0.0.1,10.0.0.2,lb.example.com");
    assert_eq!(cells[4], "80, 443");
    let bare = json!({"metadata": {"name": "x"}, "spec": {"defaultBackend": {}}});
    let cells = r.strategy.table_cells(&bare, jiff::Timestamp::now());
    assert_eq!(
        &cells[1..5],
        [json!("<none>"), json!("*"), json!(""), json!("80")]
    );
}

#[test]
fn ingress_class_controller_is_required_and_immutable() {
    let r = s("ingressclasses");
    let obj = |spec: Value| json!({"metadata": {"name": "nginx"}, "spec": spec});
    let ok = obj(
        json!({"controller": "k8s.io/ingress-nginx", "parameters": {"kind": "Params", "name": "p"}}),
    );
    assert_eq!(create_errors(&r, &ok), Vec::<String>::new());
    assert_eq!(created(&r, &ok)["spec"]["parameters"]["scope"], "Cluster");
    assert_eq!(
        create_errors(&r, &obj(json!({}))),
        ["spec.controller: Required value"]
    );
    assert_eq!(
        create_errors(&r, &obj(json!({"controller": "nginx"}))),
        ["spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"]
    );
    assert_eq!(
        create_errors(
            &r,
            &obj(
                json!({"controller": "a.io/b", "parameters": {"kind": "K", "name": "n", "scope": "Namespace"}})
            )
        ),
        ["spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"]
    );
    assert_eq!(
        create_errors(
            &r,
            &obj(
                json!({"controller": "a.io/b", "parameters": {"kind": "K", "name": "n", "scope": "Cluster", "namespace": "x"}})
            )
        ),
        ["spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'"]
    );
    let old = created(&r, &ok);
    let changed =
        obj(json!({"controller": "k8s.io/other", "parameters": {"kind": "Params", "name": "p"}}));
    assert_eq!(
        update_errors(&r, &changed, &old),
        ["spec.controller: Invalid value: \"k8s.io/other\": field is immutable"]
    );
    let table = r.strategy.table_cells(
        &obj(json!({"controller": "a.io/b", "parameters": {"apiGroup": "x.io", "kind": "K", "name": "n"}})),
        jiff::Timestamp::now(),
    );
    assert_eq!(table[1..3], [json!("a.io/b"), json!("K.x.io/n")]);
}

fn netpol(spec: Value) -> Value {
    json!({"metadata": {"name": "np", "namespace": "default"}, "spec": spec})
}

#[test]
fn network_policy_defaults() {
    let r = s("networkpolicies");
    let p = created(
        &r,
        &netpol(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]})),
    );
    assert_eq!(p["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(p["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(p["metadata"]["generation"], 1);
    let p = created(&r, &netpol(json!({"podSelector": {}, "egress": [{}]})));
    assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    let p = created(
        &r,
        &netpol(json!({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]})),
    );
    assert_eq!(p["spec"]["policyTypes"], json!(["Egress"]));
}

#[test]
fn network_policy_ports_peers_and_cidrs() {
    let r = s("networkpolicies");
    let spec = json!({
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{
            "ports": [
                {"protocol": "ICMP", "port": 0},
                {"port": "http", "endPort": 90},
                {"port": 100, "endPort": 90},
                {"endPort": 90},
            ],
            "from": [
                {},
                {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24", "10.1.0.0/24", "10.0.0.0/8", "bad"]}},
                {"ipBlock": {"cidr": "10.0.0.0/33"}, "podSelector": {}},
                {"ipBlock": {}},
            ],
        }],
        "policyTypes": ["Ingress", "Sideways"],
    });
    assert_eq!(
        create_errors(&r, &netpol(spec)),
        [
            "spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
            "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ingress[0].ports[1].endPort: Invalid value: 90: may not be specified when `port` is non-numeric",
            "spec.ingress[0].ports[2].endPort: Invalid value: 90: must be greater than or equal to `port`",
            "spec.ingress[0].ports[3].endPort: Invalid value: 90: may not be specified when `port` is not specified",
            "spec.ingress[0].from[0]: Required value: must specify a peer",
            "spec.ingress[0].from[1].ipBlock.except[1]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`",
            "spec.ingress[0].from[1].ipBlock.except[2]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`",
            "spec.ingress[0].from[1].ipBlock.except[3]: Invalid value: \"bad\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            "spec.ingress[0].from[2].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            "spec.ingress[0].from[2]: Forbidden: may not specify both ipBlock and another peer",
            "spec.ingress[0].from[3].ipBlock.cidr: Required value",
            "spec.policyTypes[1]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"",
        ]
    );
    assert_eq!(
        create_errors(&r, &netpol(json!({"policyTypes": ["Ingress", "Egress", "Ingress"]}))),
        ["spec.policyTypes: Invalid value: []networking.PolicyType{\"Ingress\", \"Egress\", \"Ingress\"}: may not specify more than two policyTypes"]
    );
    let ok = created(
        &r,
        &netpol(json!({"podSelector": {"matchLabels": {"app": "db"}}})),
    );
    let cells = r.strategy.table_cells(&ok, jiff::Timestamp::now());
    assert_eq!(cells[1], "app=db");
    let all = created(&r, &netpol(json!({"podSelector": {}})));
    assert_eq!(
        r.strategy.table_cells(&all, jiff::Timestamp::now())[1],
        "<none>"
    );
    let mut changed = ok.clone();
    changed["spec"]["podSelector"] = json!({"matchLabels": {"app": "web"}});
    r.prepare_for_update(&mut changed, &ok);
    assert_eq!(changed["metadata"]["generation"], 2);
}

#[test]
fn service_cidrs_are_canonical_and_immutable() {
    let r = s("servicecidrs");
    let obj = |cidrs: Value| json!({"metadata": {"name": "extra"}, "spec": {"cidrs": cidrs}});
    assert_eq!(
        create_errors(&r, &obj(json!(["10.100.0.0/16", "fd00::/108"]))),
        Vec::<String>::new()
    );
    assert_eq!(
        create_errors(&r, &obj(json!([]))),
        ["spec.cidrs: Required value: at least one CIDR required"]
    );
    assert_eq!(
        create_errors(&r, &obj(json!(["10.0.0.0/8", "10.1.0.0/16", "fd00::/8"]))),
        ["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/8\", \"10.1.0.0/16\", \"fd00::/8\"}}: may only hold up to 2 values"]
    );
    assert_eq!(
        create_errors(&r, &obj(json!(["10.0.0.1/8", "10.1.0.0/16"]))),
        [
            "spec.cidrs[0]: Invalid value: \"10.0.0.1/8\": must not have bits set beyond the prefix length",
            "spec.cidrs: Invalid value: []string{\"10.0.0.1/8\", \"10.1.0.0/16\"}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
        ]
    );
    let old = obj(json!(["10.100.0.0/16"]));
    assert_eq!(
        update_errors(&r, &obj(json!(["10.100.0.0/16", "fd00::/108"])), &old),
        Vec::<String>::new()
    );
    assert_eq!(
        update_errors(&r, &obj(json!(["10.101.0.0/16"])), &old),
        ["spec.cidrs[0]: Invalid value: \"10.101.0.0/16\": field is immutable"]
    );
    assert_eq!(
        update_errors(&r, &obj(json!([])), &old),
        ["spec.cidrs: Invalid value: []string{}: field is immutable"]
    );
    let cells = r.strategy.table_cells(
        &obj(json!(["10.0.0.0/8", "fd00::/8"])),
        jiff::Timestamp::now(),
    );
    assert_eq!(cells[1], "10.0.0.0/8,fd00::/8");
}

#[test]
fn ip_addresses_are_named_by_their_ip() {
    let r = s("ipaddresses");
    let obj = |name: &str, parent: Value| json!({"metadata": {"name": name}, "spec": {"parentRef": parent}});
    let parent = json!({"resource": "services", "namespace": "default", "name": "web"});
    assert_eq!(
        create_errors(&r, &obj("10.96.0.10", parent.clone())),
        Vec::<String>::new()
    );
    assert_eq!(
        create_errors(&r, &obj("2001:DB8::1", parent.clone())),
        ["metadata.name: Invalid value: \"2001:DB8::1\": must be in canonical form (\"2001:db8::1\")"]
    );
    assert_eq!(
        create_errors(&r, &obj("web", Value::Null)),
        [
            "metadata.name: Invalid value: \"web\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "spec.parentRef: Required value",
        ]
    );
    assert_eq!(
        create_errors(&r, &obj("10.0.0.1", json!({"group": "Bad_Group", "name": "a/b"}))),
        [
            "spec.parentRef.group: Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.parentRef.resource: Required value",
            "spec.parentRef.name: Invalid value: \"a/b\": may not contain '/'",
        ]
    );
    let old = obj("10.0.0.1", parent.clone());
    assert_eq!(
        update_errors(&r, &obj("10.0.0.1", json!({"resource": "services", "name": "other"})), &old),
        ["spec.parentRef: Invalid value: networking.ParentReference{Group:\"\", Resource:\"services\", Namespace:\"\", Name:\"other\"}: field is immutable"]
    );
    let cells = r.strategy.table_cells(&old, jiff::Timestamp::now());
    assert_eq!(cells[1], "services/default/web");
}

/// A fixed set of IngressClasses for admission.
struct Classes(Vec<Value>);

impl crate::registry::strategy::Objects for Classes {
    fn list(&self, _group: &str, _plural: &str) -> Vec<Arc<Value>> {
        self.0.iter().cloned().map(Arc::new).collect()
    }
    fn get(&self, _: &str, _: &str, _: Option<&str>, _: &str) -> Option<Arc<Value>> {
        None
    }
}

#[test]
fn default_ingress_class_admission_picks_the_newest_default() {
    let r = s("ingresses");
    let class = |name: &str, created: &str, default: bool| {
        json!({"metadata": {"name": name, "creationTimestamp": created,
            "annotations": {"ingressclass.kubernetes.io/is-default-class": if default { "true" } else { "false" }}}})
    };
    let classes = Classes(vec![
        class("old", "2026-01-01T00:00:00Z", true),
        class("newest", "2026-06-01T00:00:00Z", false),
        class("z-new", "2026-03-01T00:00:00Z", true),
        class("a-new", "2026-03-01T00:00:00Z", true),
    ]);
    let mut obj = ingress(json!({"defaultBackend": {}}));
    assert!(r.strategy.admit(&mut obj, None, &classes).is_ok());
    assert_eq!(obj["spec"]["ingressClassName"], "a-new");
    let mut obj = ingress(json!({"defaultBackend": {}}));
    let old = obj.clone();
    assert!(r.strategy.admit(&mut obj, Some(&old), &classes).is_ok());
    assert!(
        obj["spec"].get("ingressClassName").is_none(),
        "only on create"
    );
    assert!(r
        .strategy
        .admit(&mut obj, None, &Classes(Vec::new()))
        .is_ok());
    assert!(obj["spec"].get("ingressClassName").is_none());
}
