//! The ResourceQuota admission plugin (`plugin/pkg/admission/resourcequota`, with the evaluator of
//! `apiserver/pkg/admission/plugin/resourcequota`).
//!
//! A write in a namespace with ResourceQuotas is checked against each of them ([`check`]) and,
//! when it changes usage, the new usage is recorded in the quota's `status.used` BEFORE the
//! object is stored, so that concurrent writes cannot together exceed the quota:
//!
//! 1. The namespace's quotas are read from the watch cache (a create has waited for it to hold
//!    every acknowledged write). None: nothing to do — the common case costs one range lookup.
//! 2. [`check::check_request`] decides on the cached quotas: refusal (403) or the quotas charged.
//! 3. Each charged quota is written through the generic store's one
//!    [`guaranteed_update`](crate::registry::Store::guaranteed_update) on `resourcequotas/status`,
//!    whose every attempt re-runs the check against the stored quota: a lost compare-and-swap
//!    re-reads the quota and checks again, so two creates racing for the last unit cannot both
//!    win. A quota deleted meanwhile is skipped.
//!
//! A dry run is checked but charges nothing. As upstream, a write that is charged and then fails
//! to be stored (or refused by a second quota) leaves the usage charged until the `resourcequota`
//! controller recounts the namespace. Events (both groups) and unstored resources are never
//! counted (`DefaultIgnoredResources`).

pub mod check;

use std::sync::Arc;

use api::quota::evaluator::{Evaluator, Operation};
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::registry::store::{Attempt, WriteScope};
use crate::registry::{Preconditions, Store, WriteOptions};
use crate::state::AppState;
use crate::watch_cache::Select;
use check::{Refusal, Request};

/// The field manager of the quota status writes (upstream writes them through kube-apiserver's
/// loopback client).
const FIELD_MANAGER: &str = "kube-apiserver";

/// `DefaultIgnoredResources`: unstored or never-quota'd group-resources.
const IGNORED: &[(&str, &str)] = &[
    ("", "bindings"),
    ("", "componentstatuses"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("", "events"),
    ("events.k8s.io", "events"),
];

/// The written object: what the plugin needs of the request.
pub struct Write<'a> {
    /// The resource written.
    pub info: &'a api::ResourceInfo,
    /// `""` for the main resource, else the subresource.
    pub subresource: &'a str,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object an update replaces (`None` for a create).
    pub old: Option<&'a Value>,
    /// Whether to check only, charging nothing.
    pub dry_run: bool,
}

/// The namespace's quotas as the watch cache has them.
fn cached_quotas(state: &AppState, namespace: &str) -> Vec<Arc<Value>> {
    let prefix = "/registry/resourcequotas/";
    let key_prefix = format!("{prefix}{namespace}/");
    state.cache.current(prefix, &key_prefix, Select::All)
}

/// Admits `write` against the quotas of its namespace (see the module docs).
pub async fn validate(state: &AppState, write: Write<'_>) -> Result<()> {
    let info = write.info;
    if !info.namespaced || IGNORED.contains(&(info.group.as_str(), info.plural.as_str())) {
        return Ok(());
    }
    let Some(namespace) = api::meta::namespace(write.object).filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let evaluator = Evaluator::for_resource(&info.group, &info.plural);
    let operation = match write.old {
        Some(_) => Operation::Update,
        None => Operation::Create,
    };
    // Upstream's `Handles` first: most writes (status writes, updates that change no usage) are
    // not quota's business and look up no quota.
    if !evaluator.handles(operation, write.subresource, write.object, write.old) {
        return Ok(());
    }
    let quotas = cached_quotas(state, namespace);
    if quotas.is_empty() {
        return Ok(());
    }
    let request = Request {
        evaluator: &evaluator,
        operation,
        subresource: write.subresource,
        object: write.object,
        old: write.old,
        now: jiff::Timestamp::now(),
    };
    let refused = |r: Refusal| -> ApiError {
        match r {
            Refusal::Forbidden(reason) => api::status::forbidden(
                &info.group_resource(),
                api::meta::name(write.object).unwrap_or(""),
                &reason,
            )
            .into(),
            Refusal::Internal(msg) => api::status::internal(&msg).into(),
        }
    };
    let charges = check::check_request(&quotas, &request).map_err(refused)?;
    if write.dry_run {
        return Ok(());
    }
    for charge in charges {
        let name = api::meta::name(&quotas[charge.index])
            .unwrap_or("")
            .to_string();
        record(state, namespace, &name, &request, &refused).await?;
    }
    Ok(())
}

/// Charges `request` to the quota `name`: one guaranteed update of its status, each attempt
/// checking the request against the quota as stored (`refused` renders a refusal).
async fn record(
    state: &AppState,
    namespace: &str,
    name: &str,
    request: &Request<'_>,
    refused: &(dyn Fn(Refusal) -> ApiError + Sync),
) -> Result<()> {
    let Some(resource) = state.resources.find("", "v1", "resourcequotas") else {
        return Ok(());
    };
    let store = Store::new(state, resource, Some(namespace));
    let opts = WriteOptions {
        field_manager: FIELD_MANAGER.to_string(),
        ..WriteOptions::default()
    };
    let written = store
        .guaranteed_update(name, "PUT", &Preconditions::default(), &opts, |current| {
            let Some(current) = current else {
                return Ok(Attempt::Keep);
            };
            let charges = check::check_request(&[&*current.object], request).map_err(refused)?;
            let Some(charge) = charges.into_iter().next() else {
                return Ok(Attempt::Keep);
            };
            let mut new = Value::clone(&current.object);
            if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
                status.insert("used".to_string(), api::quota::to_json(&charge.used));
            }
            store.prepare_update(&mut new, &current.object, WriteScope::Status, FIELD_MANAGER)?;
            Ok(Attempt::Write(new))
        })
        .await;
    match written {
        Ok(_) => Ok(()),
        // Deleted since the cache listed it: nothing to charge.
        Err(e) if e.code() == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
