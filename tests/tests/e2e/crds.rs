//! CRDs installed from a directory (`Sandbox::crds_from_dir`, `minik8s up --crds DIR`), as
//! envtest's `CRDDirectoryPaths`: the real Gateway API CRDs Established when start returns, a CRD
//! that cannot be established failing start with its conditions named, and the client's dynamic
//! API over custom resources (the REST mapper rediscovering a kind installed after it first
//! looked, a dynamic informer over CRs).

#![allow(clippy::result_large_err)] // client::Error carries a full Status by design

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use minik8s::client::{
    self, Api, DynamicObject, Error, FnHandler, GroupVersionKind, ListParams, Patch, RestMapper,
    SharedInformerFactory,
};
use minik8s::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn gateway_api_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crds/gateway-api")
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

fn widget_crd(kind: &str, plural: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

#[tokio::test]
async fn the_gateway_api_crds_are_established_when_the_sandbox_starts() -> client::Result<()> {
    let dir = gateway_api_dir();
    let files = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .count();
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .crds_from_dir(&dir)
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    // Read at once: start returned only after every CRD was Established.
    let crds: Api<CustomResourceDefinition> = sandbox.client().all();
    let list = crds.list(&ListParams::default()).await?;
    // One CRD per file but the ValidatingAdmissionPolicy file, which is skipped.
    assert_eq!(list.items.len(), files - 1);
    for crd in &list.items {
        assert!(established(crd), "{:?} not established", crd.metadata.name);
    }
    let mapper = RestMapper::new(sandbox.client());
    let routes = mapper
        .resolve(&GroupVersionKind::new(
            "gateway.networking.k8s.io",
            "v1",
            "HTTPRoute",
        ))
        .await?;
    assert_eq!(routes.plural, "httproutes");
    assert!(routes.namespaced && routes.has_subresource("status"));
    let classes = mapper
        .resolve_kind("gateway.networking.k8s.io", "GatewayClass")
        .await?;
    assert!(!classes.namespaced);
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "example"},
        "spec": {"controllerName": "example.com/gateway-controller"}
    }))
    .map_err(|e| Error::Decode {
        what: "GatewayClass".into(),
        source: e,
    })?;
    let created = mapper.api_for(&class).await?.create(&class).await?;
    assert_eq!(
        created.pointer("/spec/controllerName"),
        Some(&json!("example.com/gateway-controller"))
    );
    sandbox.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_crd_that_cannot_be_established_fails_start_naming_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Two CRDs of one group with the same kind: the second's names are not accepted.
    let docs = [
        widget_crd("Widget", "widgets"),
        widget_crd("Widget", "gadgets"),
    ]
    .iter()
    .map(|d| serde_yaml::to_string(d).unwrap_or_default())
    .collect::<Vec<_>>()
    .join("---\n");
    std::fs::write(dir.path().join("crds.yaml"), docs).unwrap_or_else(|e| panic!("{e}"));
    let err = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .crds_from_dir(dir.path())
        .crd_wait(Duration::from_secs(2))
        .start()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.starts_with(
            "CustomResourceDefinitions not established within 2s: gadgets.example.com ("
        ) && err.contains("NamesAccepted=False")
            && !err.contains("widgets.example.com"),
        "{err}"
    );
    // A directory that does not exist is an error too, not an empty install.
    let err = minik8s::Sandbox::builder()
        .in_memory()
        .crds_from_dir(dir.path().join("missing"))
        .start()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("cannot read CRD directory"), "{err}");
}

#[tokio::test]
async fn the_rest_mapper_finds_a_kind_installed_after_it_first_looked() -> client::Result<()> {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let client = sandbox.client();
    let mapper = RestMapper::new(client.clone());
    let gvk = GroupVersionKind::new("example.com", "v1", "Widget");
    let err = mapper.resolve(&gvk).await.err().map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(r#"no matches for kind "Widget" in version "example.com/v1""#)
    );
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd("Widget", "widgets"))
        .map_err(|e| Error::Decode {
            what: "crd".into(),
            source: e,
        })?;
    minik8s::crds::install(&client, &[crd], minik8s::crds::DEFAULT_WAIT)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    // The cached discovery predates the CRD: the miss rediscovers.
    let widgets = mapper.resolve(&gvk).await?;
    assert_eq!(
        (widgets.plural.as_str(), widgets.namespaced),
        ("widgets", true)
    );
    assert!(widgets.has_subresource("status"));

    // A dynamic informer over the custom resource.
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.dynamic_informer(&widgets);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (s1, s2) = (seen.clone(), seen.clone());
    informer.add_event_handler(
        FnHandler::new()
            .on_add(move |w: &Arc<DynamicObject>, _| {
                s1.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("add {}", w.name()))
            })
            .on_delete(move |d| {
                s2.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("delete {}", d.key()))
            }),
    );
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    assert!(factory.wait_for_cache_sync(&shutdown).await);
    let api = client.dynamic(&widgets, Some("default"));
    let w = DynamicObject::new("w1", &widgets)
        .within("default")
        .with("spec", json!({"size": 3}));
    api.create(&w).await?;
    let status = api
        .patch_status("w1", &Patch::Merge(json!({"status": {"ready": true}})))
        .await?;
    assert_eq!(status.pointer("/status/ready"), Some(&json!(true)));
    assert_eq!(status.pointer("/spec/size"), Some(&json!(3)));
    api.delete("w1", &Default::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap_or_else(|p| p.into_inner()).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "events: {:?}",
            seen.lock().unwrap_or_else(|p| p.into_inner())
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *seen.lock().unwrap_or_else(|p| p.into_inner()),
        ["add w1", "delete default/w1"]
    );
    shutdown.cancel();
    factory.shutdown().await;
    sandbox.stop().await;
    Ok(())
}

#[test]
fn minik8s_up_with_crds_is_ready_once_they_are_established() {
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = gateway_api_dir();
    let m = tests::Minik8s::up(
        data.path(),
        &["--nodes", "0", "--crds", dir.to_str().unwrap_or_default()],
    );
    // Ready (the kubeconfig written) means established: no wait here.
    let out = m.kubectl().json(&["get", "crds", "-o", "json"]);
    let items = out["items"].as_array().cloned().unwrap_or_default();
    assert!(items.len() >= 10, "{out}");
    for crd in &items {
        let conditions = crd["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True"),
            "{}",
            crd["metadata"]["name"]
        );
    }
    let routes = m.kubectl().json(&["get", "httproutes", "-A", "-o", "json"]);
    assert_eq!(routes["items"], json!([]), "{routes}");
}
