//! Every served resource, through HTTP, from one table: create a minimal valid object, get it,
//! list it with a label selector (and not with another), watch it, update it, patch it in every
//! patch type (merge, JSON, strategic merge, apply), delete it. Create-only resources (the review
//! APIs, bindings) are created; read-only ones (componentstatuses) are listed. A served resource
//! missing from the table fails the test, so a new kind cannot go untested.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use axum::Router;
use serde_json::{json, Value};

use crate::common;
use common::http::{call, delete, get, patch, post, put, watch_lines};

/// A pod spec every workload fixture uses.
fn pod_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "nginx"}]})
}

fn template(restart: &str) -> Value {
    let mut spec = pod_spec();
    spec["restartPolicy"] = json!(restart);
    json!({"metadata": {"labels": {"app": "every"}}, "spec": spec})
}

fn workload() -> Value {
    json!({"selector": {"matchLabels": {"app": "every"}}, "template": template("Always")})
}

fn csr_request() -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "every");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem)
}

/// The minimal valid object of each stored resource, keyed by `group/version/plural`, without
/// `apiVersion`, `kind` and `metadata.name` (the test sets them): the fields its validation
/// requires, nothing more.
fn fixture(key: &str) -> Option<Value> {
    let rule = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    let user = json!([{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]);
    let webhook = json!([{
        "name": "every.example.com", "clientConfig": {"url": "https://127.0.0.1/hook"},
        "sideEffects": "None", "admissionReviewVersions": ["v1"]
    }]);
    let hpa_spec = json!({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
        "minReplicas": 1, "maxReplicas": 3
    });
    Some(match key {
        "/v1/namespaces" | "/v1/nodes" | "/v1/serviceaccounts" | "/v1/endpoints" => json!({}),
        "/v1/pods" => json!({"spec": pod_spec()}),
        "/v1/replicationcontrollers" => json!({"spec": {
            "selector": {"app": "every"}, "template": template("Always")
        }}),
        "/v1/events" => json!({
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Every", "message": "m", "type": "Normal"
        }),
        "/v1/services" => json!({"spec": {"ports": [{"port": 80}]}}),
        "/v1/configmaps" => json!({"data": {"a": "b"}}),
        "/v1/secrets" => json!({"data": {"a": "Yg=="}}),
        "/v1/persistentvolumes" => json!({"spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/every"}
        }}),
        "/v1/persistentvolumeclaims" => json!({"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}
        }}),
        "/v1/podtemplates" => json!({"template": {"spec": pod_spec()}}),
        "/v1/limitranges" => {
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}})
        }
        "/v1/resourcequotas" => json!({"spec": {"hard": {"pods": "10"}}}),
        "autoscaling/v2/horizontalpodautoscalers" | "autoscaling/v1/horizontalpodautoscalers" => {
            json!({"spec": hpa_spec})
        }
        "flowcontrol.apiserver.k8s.io/v1/flowschemas" => json!({"spec": {
            "priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 5000
        }}),
        "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations" => json!({"spec": {
            "type": "Limited",
            "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}
        }}),
        "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        | "admissionregistration.k8s.io/v1/validatingwebhookconfigurations" => {
            json!({"webhooks": webhook})
        }
        "admissionregistration.k8s.io/v1/validatingadmissionpolicies" => json!({"spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]
            }]},
            "validations": [{"expression": "true"}]
        }}),
        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings" => json!({"spec": {
            "policyName": "every", "validationActions": ["Deny"]
        }}),
        "apiregistration.k8s.io/v1/apiservices" => json!({"spec": {
            "group": "every.example.com", "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "default", "name": "every"}
        }}),
        "apps/v1/controllerrevisions" => json!({"revision": 1, "data": {"spec": {}}}),
        "apps/v1/daemonsets"
        | "apps/v1/replicasets"
        | "apps/v1/deployments"
        | "apps/v1/statefulsets" => json!({"spec": workload()}),
        "batch/v1/cronjobs" => json!({"spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"
            }}}}
        }}),
        "batch/v1/jobs" => json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"
        }}}}),
        "coordination.k8s.io/v1/leases" => json!({"spec": {}}),
        "discovery.k8s.io/v1/endpointslices" => json!({"addressType": "IPv4", "endpoints": []}),
        "events.k8s.io/v1/events" => json!({
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/every",
            "reportingInstance": "i", "action": "Every", "reason": "Every", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}
        }),
        "certificates.k8s.io/v1/certificatesigningrequests" => json!({"spec": {
            "request": csr_request(), "signerName": "example.com/every",
            "usages": ["digital signature"]
        }}),
        "rbac.authorization.k8s.io/v1/clusterrolebindings" => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": user
        }),
        "rbac.authorization.k8s.io/v1/rolebindings" => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": user
        }),
        "rbac.authorization.k8s.io/v1/clusterroles" | "rbac.authorization.k8s.io/v1/roles" => {
            json!({"rules": rule})
        }
        "scheduling.k8s.io/v1/priorityclasses" => json!({"value": 1000}),
        "networking.k8s.io/v1/ingressclasses" => {
            json!({"spec": {"controller": "example.com/every"}})
        }
        "networking.k8s.io/v1/ingresses" => json!({"spec": {
            "defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}
        }}),
        "networking.k8s.io/v1/ipaddresses" => json!({"spec": {
            "parentRef": {"group": "", "resource": "services", "name": "s", "namespace": "default"}
        }}),
        "networking.k8s.io/v1/networkpolicies" => json!({"spec": {"podSelector": {}}}),
        "networking.k8s.io/v1/servicecidrs" => json!({"spec": {"cidrs": ["10.200.0.0/16"]}}),
        "node.k8s.io/v1/runtimeclasses" => json!({"handler": "runc"}),
        "storage.k8s.io/v1/csidrivers" => json!({"spec": {}}),
        "storage.k8s.io/v1/csinodes" => json!({"spec": {"drivers": []}}),
        "storage.k8s.io/v1/csistoragecapacities" => json!({"storageClassName": "s"}),
        "storage.k8s.io/v1/storageclasses" => json!({"provisioner": "example.com/every"}),
        "storage.k8s.io/v1/volumeattachments" => json!({"spec": {
            "attacher": "csi.example.com", "nodeName": "n",
            "source": {"persistentVolumeName": "pv"}
        }}),
        "apiextensions.k8s.io/v1/customresourcedefinitions" => json!({"spec": {
            "group": "every.example.com", "scope": "Namespaced",
            "names": {"plural": "everythings", "singular": "everything", "kind": "Everything"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}]
        }}),
        "policy/v1/poddisruptionbudgets" => json!({"spec": {
            "minAvailable": 1, "selector": {"matchLabels": {"app": "every"}}
        }}),
        _ => return None,
    })
}

/// The request body of each create-only resource.
fn create_only(key: &str) -> Option<Value> {
    let attrs = json!({"namespace": "default", "verb": "get", "resource": "pods"});
    Some(match key {
        "authentication.k8s.io/v1/selfsubjectreviews" => json!({}),
        "authentication.k8s.io/v1/tokenreviews" => json!({"spec": {"token": "not-a-token"}}),
        "authorization.k8s.io/v1/localsubjectaccessreviews" => {
            json!({"spec": {"user": "u", "resourceAttributes": attrs}})
        }
        "authorization.k8s.io/v1/subjectaccessreviews" => {
            json!({"spec": {"user": "u", "resourceAttributes": attrs}})
        }
        "authorization.k8s.io/v1/selfsubjectaccessreviews" => {
            json!({"spec": {"resourceAttributes": attrs}})
        }
        "authorization.k8s.io/v1/selfsubjectrulesreviews" => {
            json!({"spec": {"namespace": "default"}})
        }
        "/v1/bindings" => json!({
            "metadata": {"name": "every-binding-target"},
            "target": {"kind": "Node", "name": "n"}
        }),
        _ => return None,
    })
}

/// Names some kinds need (an APIService is `<version>.<group>`, an IPAddress an address).
fn name_of(info: &api::ResourceInfo) -> String {
    match info.plural.as_str() {
        "apiservices" => "v1.every.example.com".into(),
        "ipaddresses" => "10.0.77.7".into(),
        "csidrivers" => "every.csi.example.com".into(),
        "customresourcedefinitions" => "everythings.every.example.com".into(),
        // Both HPA versions and both Event kinds share one storage: one name each.
        _ => format!("every-{}-{}", info.plural, info.version),
    }
}

fn collection(info: &api::ResourceInfo) -> String {
    let root = if info.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    if info.namespaced {
        format!("{root}/namespaces/default/{}", info.plural)
    } else {
        format!("{root}/{}", info.plural)
    }
}

fn label(obj: &Value, key: &str) -> Option<String> {
    obj["metadata"]["labels"][key].as_str().map(str::to_string)
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The whole life of one object of a stored resource.
async fn exercise(app: &Router, info: &api::ResourceInfo, mut obj: Value) {
    let what = format!("{}/{}/{}", info.group, info.version, info.plural);
    let name = name_of(info);
    let coll = collection(info);
    let item = format!("{coll}/{name}");
    obj["apiVersion"] = json!(info.api_version());
    obj["kind"] = json!(info.kind);
    obj["metadata"] = json!({"name": name, "labels": {"every": info.plural}});

    let (code, created) = post(app, &coll, obj).await;
    assert_eq!(code, 201, "{what}: create: {created}");

    let (code, got) = get(app, &item).await;
    assert_eq!(code, 200, "{what}: get: {got}");
    assert_eq!(got["metadata"]["name"], json!(name), "{what}");
    assert_eq!(got["kind"], json!(info.kind), "{what}");

    let selector = format!("{coll}?labelSelector=every%3D{}", info.plural);
    let (code, list) = get(app, &selector).await;
    assert_eq!(code, 200, "{what}: list: {list}");
    assert!(names(&list).contains(&name), "{what}: {list}");
    let (_, other) = get(app, &format!("{coll}?labelSelector=every%3Dnothing")).await;
    assert!(!names(&other).contains(&name), "{what}: {other}");

    let watch = format!("{coll}?watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{name}");
    let events = watch_lines(app, &watch, 1).await;
    assert_eq!(
        events.first().map(|e| e["type"].clone()),
        Some(json!("ADDED")),
        "{what}: {events:?}"
    );
    assert_eq!(
        events[0]["object"]["metadata"]["name"],
        json!(name),
        "{what}"
    );

    // Some kinds have controllers writing their status meanwhile (a CRD's conditions): a 409 is
    // retried from a fresh read, as clients do.
    let mut attempt = 0;
    let after = loop {
        let (_, current) = get(app, &item).await;
        let mut updated = current;
        updated["metadata"]["labels"]["updated"] = json!("yes");
        let (code, after) = put(app, &item, updated).await;
        attempt += 1;
        if code == 409 && attempt < 10 {
            continue;
        }
        assert_eq!(code, 200, "{what}: update: {after}");
        break after;
    };
    assert_eq!(label(&after, "updated").as_deref(), Some("yes"), "{what}");

    let patches = [
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"merge": "yes"}}}),
            "merge",
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels/json", "value": "yes"}]),
            "json",
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"strategic": "yes"}}}),
            "strategic",
        ),
    ];
    for (content_type, body, key) in patches {
        let (code, after) = patch(app, &item, content_type, body).await;
        assert_eq!(code, 200, "{what}: {key} patch: {after}");
        assert_eq!(
            label(&after, key).as_deref(),
            Some("yes"),
            "{what}: {key} patch"
        );
    }
    let apply = json!({
        "apiVersion": info.api_version(), "kind": info.kind,
        "metadata": {"name": name, "labels": {"applied": "yes"}}
    });
    let (code, after) = patch(
        app,
        &format!("{item}?fieldManager=every&force=true"),
        "application/apply-patch+yaml",
        apply,
    )
    .await;
    assert_eq!(code, 200, "{what}: apply: {after}");
    assert_eq!(
        label(&after, "applied").as_deref(),
        Some("yes"),
        "{what}: apply"
    );
    let managers: Vec<&str> = after["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"every"), "{what}: {managers:?}");

    let (code, gone) = delete(app, &item).await;
    assert!(code == 200 || code == 202, "{what}: delete: {code} {gone}");
    let (code, after) = get(app, &item).await;
    assert!(
        code == 404 || after["metadata"]["deletionTimestamp"].is_string(),
        "{what}: after delete: {code} {after}"
    );
}

#[tokio::test]
async fn every_served_resource_goes_through_its_whole_life_over_http() {
    let app = common::router().await;
    // What some fixtures point at: a pod for the binding (unscheduled, so it can be bound).
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "every-binding-target"}, "spec": pod_spec()
    });
    let (code, body) = post(&app, "/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(code, 201, "{body}");

    let mut missing = Vec::new();
    let mut exercised = 0;
    for info in api::resources::builtin() {
        let key = format!("{}/{}/{}", info.group, info.version, info.plural);
        let verbs = &info.verbs;
        if verbs.iter().all(|v| v == "get" || v == "list") {
            let (code, list) = get(&app, &collection(&info)).await;
            assert_eq!(code, 200, "{key}: {list}");
            assert!(list["items"].is_array(), "{key}: {list}");
            exercised += 1;
        } else if verbs == &["create"] {
            let Some(mut body) = create_only(&key) else {
                missing.push(key);
                continue;
            };
            body["apiVersion"] = json!(info.api_version());
            body["kind"] = json!(info.kind);
            let (code, answer) =
                call(&app, "POST", &collection(&info), "application/json", body).await;
            assert!(code == 201 || code == 200, "{key}: {code} {answer}");
            exercised += 1;
        } else {
            let Some(obj) = fixture(&key) else {
                missing.push(key);
                continue;
            };
            exercise(&app, &info, obj).await;
            exercised += 1;
        }
    }
    assert!(
        missing.is_empty(),
        "served resources without a fixture here: {missing:?}"
    );
    assert!(exercised >= 60, "only {exercised} resources exercised");
}
