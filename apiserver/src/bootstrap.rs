//! Built-in objects created at first start: the namespaces `default`, `kube-system`,
//! `kube-public`, `kube-node-lease`, and the `kubernetes` Service in `default`. Idempotent: on a
//! restart existing objects are left alone.

use axum::http::HeaderMap;
use serde_json::json;

use crate::error::{ApiError, Result};
use crate::handlers::write::{prepare_new, store_new};
use crate::handlers::{Ctx, Target};
use crate::http::query::Query;
use crate::state::AppState;

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

fn ctx(state: &AppState, plural: &str, namespace: Option<&str>) -> Result<Ctx> {
    let info = api::find_resource("", "v1", plural)
        .ok_or_else(|| ApiError::internal("seeding", format!("resource {plural} is not served")))?;
    Ok(Ctx {
        state: state.clone(),
        target: Target {
            info,
            namespace: namespace.map(String::from),
            name: None,
            subresource: None,
        },
        query: Query::default(),
        headers: HeaderMap::new(),
    })
}

async fn ensure(ctx: &Ctx, obj: serde_json::Value) -> Result<()> {
    let name = api::meta::name(&obj).unwrap_or("").to_string();
    if ctx.state.store.get(&ctx.target.key(&name)).await?.is_some() {
        return Ok(());
    }
    let obj = prepare_new(ctx, obj).await?;
    match store_new(ctx, obj, false).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the built-in objects that are missing.
pub async fn seed(state: &AppState) -> Result<()> {
    let ns = ctx(state, "namespaces", None)?;
    for name in SYSTEM_NAMESPACES {
        ensure(&ns, json!({ "metadata": { "name": name } })).await?;
    }
    let svc = ctx(state, "services", Some("default"))?;
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
