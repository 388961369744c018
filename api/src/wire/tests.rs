use super::*;
use serde_json::json;

#[test]
fn status_is_written_as_kube_apiserver_writes_it() {
    let st = crate::status::not_found("pods", "x");
    let text = String::from_utf8(to_vec_with_newline(&crate::status::to_json(&st))).unwrap();
    assert_eq!(
        text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}\n"
    );
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn a_pod_comes_in_go_struct_order() {
    let mut pod = json!({
        "status": {"phase": "Pending"},
        "spec": {
            "volumes": [{"emptyDir": {}, "name": "v"}],
            "restartPolicy": "Always",
            "containers": [{"resources": {}, "name": "c", "image": "nginx",
                            "livenessProbe": {"periodSeconds": 3, "httpGet": {"port": 80, "path": "/"}}}],
            "nodeSelector": {"z": "1", "a": "2"},
        },
        "metadata": {"uid": "u", "labels": {"b": "1", "a": "2"}, "name": "p", "namespace": "d",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "zzUnknown": 1, "annotations": {}},
        "apiVersion": "v1",
        "kind": "Pod",
        "extra": true,
    });
    canonicalize_object(&mut pod, true);
    assert_eq!(
        keys(&pod),
        ["kind", "apiVersion", "metadata", "spec", "status", "extra"]
    );
    assert_eq!(
        keys(&pod["metadata"]),
        [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "labels",
            "annotations",
            "zzUnknown"
        ]
    );
    assert_eq!(keys(&pod["metadata"]["labels"]), ["a", "b"]);
    assert_eq!(
        keys(&pod["spec"]),
        ["volumes", "containers", "restartPolicy", "nodeSelector"]
    );
    assert_eq!(keys(&pod["spec"]["nodeSelector"]), ["a", "z"]);
    // Embedded structs inline: Volume{Name, VolumeSource}, Probe{ProbeHandler, ...}.
    assert_eq!(keys(&pod["spec"]["volumes"][0]), ["name", "emptyDir"]);
    let c = &pod["spec"]["containers"][0];
    assert_eq!(keys(c), ["name", "image", "resources", "livenessProbe"]);
    assert_eq!(keys(&c["livenessProbe"]), ["httpGet", "periodSeconds"]);
    assert_eq!(keys(&c["livenessProbe"]["httpGet"]), ["path", "port"]);
}

#[test]
fn objects_without_a_type_keep_their_order_but_metadata() {
    let mut cr = json!({"spec": {"z": 1, "a": 2}, "kind": "Thing", "apiVersion": "x.io/v1",
                        "metadata": {"uid": "u", "name": "n"}});
    canonicalize_object(&mut cr, true);
    assert_eq!(keys(&cr), ["spec", "kind", "apiVersion", "metadata"]);
    assert_eq!(keys(&cr["spec"]), ["z", "a"]);
    assert_eq!(keys(&cr["metadata"]), ["name", "uid"]);
}

#[test]
fn resource_version_goes_after_uid() {
    let mut o = json!({"metadata": {"name": "n", "uid": "u", "generation": 1, "labels": {}}});
    set_resource_version(&mut o, "5".into());
    assert_eq!(
        keys(&o["metadata"]),
        ["name", "uid", "resourceVersion", "generation", "labels"]
    );
    let mut o = json!({"metadata": {"name": "n"}});
    set_resource_version(&mut o, "5".into());
    assert_eq!(keys(&o["metadata"]), ["name", "resourceVersion"]);
    set_resource_version(&mut o, "6".into());
    assert_eq!(o["metadata"]["resourceVersion"], "6");
}

#[test]
fn kinds_are_found_by_api_version() {
    for (av, kind, name) in [
        ("v1", "Pod", "io.k8s.api.core.v1.Pod"),
        ("apps/v1", "Deployment", "io.k8s.api.apps.v1.Deployment"),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "io.k8s.api.rbac.v1.ClusterRole",
        ),
        (
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
        ),
        (
            "apiregistration.k8s.io/v1",
            "APIService",
            "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
        ),
    ] {
        assert_eq!(
            Type::of_kind(av, kind).map(|t| t.def().name),
            Some(name),
            "{av} {kind}"
        );
    }
    assert!(Type::of_kind("x.io/v1", "Pod").is_none());
}

/// Every k8s-openapi type with a schema is in the table with exactly its JSON fields: a bump of
/// the pinned versions that adds fields fails here until `generate.py` is run again.
#[test]
fn the_table_has_every_field_of_the_schemas() {
    use k8s_openapi::schemars::generate::SchemaSettings;
    let mut gen = SchemaSettings::openapi3().into_generator();
    gen.subschema_for::<k8s_openapi::api::core::v1::Pod>();
    gen.subschema_for::<k8s_openapi::api::apps::v1::Deployment>();
    gen.subschema_for::<k8s_openapi::api::batch::v1::CronJob>();
    gen.subschema_for::<k8s_openapi::api::core::v1::Service>();
    gen.subschema_for::<k8s_openapi::api::core::v1::Node>();
    gen.subschema_for::<k8s_openapi::api::networking::v1::Ingress>();
    let defs = gen.take_definitions(true);
    let mut checked = 0;
    for (name, schema) in &defs {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        let ty = Type::named(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        let mut want: Vec<&str> = props.keys().map(String::as_str).collect();
        let mut got: Vec<&str> = ty.def().fields.iter().map(|f| f.json).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "{name}");
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn strings_are_escaped_as_go_escapes_them() {
    let v = json!({"a": "<none> & \u{2028}\u{2029} é \"q\"\n"});
    assert_eq!(
        String::from_utf8(to_vec(&v).unwrap()).unwrap(),
        "{\"a\":\"\\u003cnone\\u003e \\u0026 \\u2028\\u2029 é \\\"q\\\"\\n\"}"
    );
    let back: Value = serde_json::from_slice(&to_vec(&v).unwrap()).unwrap();
    assert_eq!(back, v);
}
