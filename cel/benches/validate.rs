//! Time to validate an HTTPRoute against Gateway API's rules (`cargo bench -p k8s-cel`).
//! A plain std::time loop: prints the mean per validation, asserts nothing.

use k8s_cel::Validator;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};
use std::time::Instant;

fn main() {
    micro();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/crds/gateway-api/gateway.networking.k8s.io_httproutes.yaml"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("no CRD at {path}");
        return;
    };
    let Some(crd) = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| <Value as serde::Deserialize>::deserialize(d).ok())
        .find(|v| v["kind"] == "CustomResourceDefinition")
        .and_then(|v| serde_json::from_value::<CustomResourceDefinition>(v).ok())
    else {
        eprintln!("no CRD in {path}");
        return;
    };
    let Some(schema) = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
    else {
        return;
    };
    let t = Instant::now();
    let Ok(v) = Validator::compile(schema, "spec.versions[0].schema.openAPIV3Schema") else {
        eprintln!("compile failed");
        return;
    };
    println!("compile: {:?} for {} rules", t.elapsed(), v.len());
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
            "hostnames": ["example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"type": "Exact", "name": "x", "value": "y"}]}],
                "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "x.example.com", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": "svc", "port": 80, "weight": 1}]
            }, {
                "matches": [{"path": {"type": "Exact", "value": "/a"}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": "svc2", "port": 80, "weight": 1}]
            }]
        }
    });
    let node = k8s_cel::schema::node(schema, true);
    let t = Instant::now();
    for _ in 0..2000 {
        std::hint::black_box(k8s_cel::convert::to_val(&route, &node));
    }
    println!("convert: {:?} per object", t.elapsed() / 2000);
    for (name, old) in [
        ("warm-up", None),
        ("create", None),
        ("update", Some(&route)),
    ] {
        let n: u32 = 4000;
        let t = Instant::now();
        let mut errs = 0;
        let c0 = cpu_ms();
        for _ in 0..n {
            errs += v.validate(&route, old).len();
        }
        println!(
            "{name}: {:?} per validation wall, {:.1}µs CPU ({errs} errors)",
            t.elapsed() / n,
            (cpu_ms() - c0) * 1000.0 / f64::from(n)
        );
    }
}

#[allow(dead_code)]
fn micro() {
    let schema: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps = serde_json::from_value(json!({
        "type": "object",
        "properties": {"type": {"type": "string"}, "urlRewrite": {"type": "object", "properties": {"hostname": {"type": "string"}}}},
        "x-kubernetes-validations": [{"rule": "self.type == 'URLRewrite' ? has(self.urlRewrite) : true"}]
    })).unwrap_or_default();
    let Ok(v) = Validator::compile(&schema, "s") else {
        return;
    };
    let obj = json!({"type": "URLRewrite", "urlRewrite": {"hostname": "x"}});
    let n = 20000;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(v.validate(&obj, None));
    }
    println!("one simple rule: {:?} per validation", t.elapsed() / n);
}

/// This thread's user+system CPU time in ms, from /proc (10 ms ticks): stable under load, unlike
/// wall time.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) * 10.0
}
