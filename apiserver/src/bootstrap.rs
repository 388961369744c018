//! Built-in objects created at first start: the namespaces `default`, `kube-system`,
//! `kube-public`, `kube-node-lease`, the `kubernetes` Service in `default`, the system
//! PriorityClasses, the `kubernetes` ServiceCIDR ([`servicecidr`]), the bootstrap RBAC policy
//! ([`rbac`]) and the API Priority and Fairness configuration ([`flowcontrol`]); then the Local
//! APIServices ([`apiservices`]) and the Services' IPAddresses ([`ipaddresses`]) are kept in step. Idempotent: on a
//! restart existing
//! objects are left alone, changed or not (upstream's reconciliation would update objects
//! annotated `autoupdate`; here they stay as they are).
//!
//! Each kind's missing objects are created concurrently, through the generic store (defaults,
//! validation, managed fields), so a durable store commits them in shared flushes.

pub mod apiservices;
pub mod flowcontrol;
pub mod ipaddresses;
pub mod rbac;
pub mod servicecidr;

use futures::future::join_all;
use serde_json::{json, Value};

use crate::error::{ApiError, Result};
use crate::registry::store::object_key;
use crate::registry::{Store, WriteOptions, SYSTEM_PRIORITY_CLASSES};
use crate::state::AppState;

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The manager of the objects kube-apiserver creates itself (its loopback client's name).
const FIELD_MANAGER: &str = "kube-apiserver";

/// The store of the built-in `group/plural` in `namespace`.
fn store<'a>(
    state: &'a AppState,
    group: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Result<Store<'a>> {
    let resource = state
        .resources
        .find(group, "v1", plural)
        .ok_or_else(|| ApiError::internal("seeding", format!("resource {plural} is not served")))?;
    Ok(Store::new(state, resource, namespace))
}

async fn ensure(store: &Store<'_>, obj: Value) -> Result<()> {
    let name = api::meta::name(&obj).unwrap_or("").to_string();
    if store.read(&name).await?.is_some() {
        return Ok(());
    }
    create(store, obj, &WriteOptions::default()).await
}

/// Creates `obj`; one that exists already (a concurrent start) is fine.
async fn create(store: &Store<'_>, obj: Value, opts: &WriteOptions) -> Result<()> {
    match store.create(obj, opts).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the objects of `group/plural` (each naming its namespace, if namespaced) that the
/// watch cache does not have, all at once.
async fn ensure_all(state: &AppState, group: &str, plural: &str, objects: &[Value]) -> Result<()> {
    let first = store(state, group, plural, None)?;
    first.wait_consistent().await?;
    let info = &first.resource().info;
    let missing: Vec<(Store<'_>, &Value)> = objects
        .iter()
        .filter_map(|obj| {
            let ns = api::meta::namespace(obj).map(String::from);
            let name = api::meta::name(obj).unwrap_or("");
            let key = object_key(info, ns.as_deref(), name);
            let found = state.cache.get(&key).is_some();
            let store = Store::new(state, first.resource().clone(), ns.as_deref());
            (!found).then_some((store, obj))
        })
        .collect();
    let opts = WriteOptions {
        field_manager: FIELD_MANAGER.to_string(),
        ..WriteOptions::default()
    };
    let created = join_all(
        missing
            .iter()
            .map(|(store, obj)| create(store, Value::clone(obj), &opts)),
    )
    .await;
    created.into_iter().collect()
}

/// Creates the built-in objects that are missing.
pub async fn seed(state: &AppState) -> Result<()> {
    let ns = store(state, "", "namespaces", None)?;
    for name in SYSTEM_NAMESPACES {
        ensure(&ns, json!({ "metadata": { "name": name } })).await?;
    }
    let svc = store(state, "", "services", Some("default"))?;
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
    .await?;
    let classes: Vec<Value> = SYSTEM_PRIORITY_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({
                "metadata": { "name": name },
                "value": value,
                "description": description,
            })
        })
        .collect();
    ensure_all(state, "scheduling.k8s.io", "priorityclasses", &classes).await?;
    servicecidr::seed(state).await?;
    let policy = rbac::policy();
    const RBAC: &str = "rbac.authorization.k8s.io";
    // Roles before the bindings that name them, as upstream's post-start hook does.
    ensure_all(state, RBAC, "clusterroles", &policy.cluster_roles).await?;
    ensure_all(state, RBAC, "roles", &policy.roles).await?;
    ensure_all(
        state,
        RBAC,
        "clusterrolebindings",
        &policy.cluster_role_bindings,
    )
    .await?;
    ensure_all(state, RBAC, "rolebindings", &policy.role_bindings).await?;
    const APF: &str = "flowcontrol.apiserver.k8s.io";
    // Levels before the schemas that name them (their Dangling condition is computed on write).
    let levels = flowcontrol::priority_levels();
    ensure_all(state, APF, "prioritylevelconfigurations", &levels).await?;
    ensure_all(state, APF, "flowschemas", &flowcontrol::flow_schemas()).await?;
    apiservices::sync(state).await?;
    apiservices::keep_in_step(state);
    ipaddresses::keep_in_step(state);
    crate::registry::customresource::keep_in_step(state);
    crate::admission::policy::status::keep_in_step(state);
    crate::flowcontrol::status::keep_in_step(state);
    Ok(())
}
