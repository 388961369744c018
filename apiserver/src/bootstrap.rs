//! Built-in objects created at first start: the namespaces `default`, `kube-system`,
//! `kube-public`, `kube-node-lease`, and the `kubernetes` Service in `default`. Idempotent: on a
//! restart existing objects are left alone.

use serde_json::json;

use crate::error::{ApiError, Result};
use crate::registry::{Store, WriteOptions};
use crate::state::AppState;

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The store of a core resource.
fn store<'a>(state: &'a AppState, plural: &str, namespace: Option<&str>) -> Result<Store<'a>> {
    let resource = state
        .resources
        .find("", "v1", plural)
        .ok_or_else(|| ApiError::internal("seeding", format!("resource {plural} is not served")))?;
    Ok(Store::new(state, resource, namespace))
}

async fn ensure(store: &Store<'_>, obj: serde_json::Value) -> Result<()> {
    let name = api::meta::name(&obj).unwrap_or("").to_string();
    if store.read(&name).await?.is_some() {
        return Ok(());
    }
    match store.create(obj, &WriteOptions::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the built-in objects that are missing.
pub async fn seed(state: &AppState) -> Result<()> {
    let ns = store(state, "namespaces", None)?;
    for name in SYSTEM_NAMESPACES {
        ensure(&ns, json!({ "metadata": { "name": name } })).await?;
    }
    let svc = store(state, "services", Some("default"))?;
    ensure(
        &svc,
        json!({
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": { "component": "apiserver", "provider": "kubernetes" },
            },
            "spec": {
                "type": "ClusterIP",
                "clusterIP": crate::registry::KUBERNETES_SERVICE_IP,
                "ports": [{ "name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443 }],
                "sessionAffinity": "None",
            },
        }),
    )
    .await
}
