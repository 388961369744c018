//! DELETE and DELETECOLLECTION (spec §7.7): preconditions, graceful deletion, finalizers and the
//! garbage collector's propagation finalizers.
//!
//! Order of decisions for an existing object: preconditions (409) → already terminating (a shorter
//! grace period moves `deletionTimestamp` earlier, else nothing changes) → graceful deletion (pods:
//! `deletionTimestamp = now + grace`, the kubelet or the server's own reaper completes it) →
//! propagation finalizers (`orphan`, `foregroundDeletion`) → pending finalizers (mark and keep) →
//! remove now. Namespaces are never removed directly: they turn `Terminating` and the namespace
//! controller empties them and finalizes them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::{ApiError, Result};
use crate::handlers::read::{decode_kv, stored_object, wait_consistent, Filter};
use crate::handlers::render::{encode, output, present};
use crate::handlers::write::{respond_committed, Written};
use crate::handlers::{object_key, Ctx, Target};
use crate::http::query::{DeleteOptions, ListOptions, Propagation};
use crate::registry::strategy_for;
use crate::state::AppState;
use crate::watch_cache::{ListAt, ObjectJson, SnapshotOutcome};

/// Namespaces that may not be deleted.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Attempts of a delete that keeps losing compare-and-swap races.
const MAX_RETRIES: usize = 16;

/// What a delete did.
pub enum Deleted {
    /// Removed from storage: the last state, shared with the watch cache, the deletion's
    /// revision, its resourceVersion from now on (none for a dry run: the state's own), and the
    /// state's JSON if the cache had it.
    Removed(Arc<Value>, Option<u64>, Option<ObjectJson>),
    /// Kept, marked for deletion (graceful or finalizers): its new state.
    Marked(Written),
}

fn bump_generation(obj: &mut Value) {
    if let Some(g) = api::meta::generation(obj).filter(|g| *g > 0) {
        api::meta::set_generation(obj, g + 1);
    }
}

fn time_in(seconds: i64) -> String {
    let now = jiff::Timestamp::now();
    let t = now
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    api::meta::format_time(t)
}

/// Deletes one object by name following the algorithm of the module docs.
pub async fn delete_object(
    state: &AppState,
    target: &Target,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Deleted> {
    let info = target.info;
    let gr = info.group_resource();
    let key = target.key(name);
    let strategy = strategy_for(info);
    let is_namespace = info.group.is_empty() && info.plural == "namespaces";
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        return Err(api::status::forbidden(&gr, name, "this namespace may not be deleted").into());
    }
    for _ in 0..MAX_RETRIES {
        let Some(kv) = state.store.get(&key).await? else {
            return Err(ApiError::not_found(&gr, name));
        };
        // Shared with the watch cache: copied only where a marked state is written.
        let obj = stored_object(state, &kv)?;
        let uid = api::meta::uid(&obj).unwrap_or("").to_string();
        if let Some(want) = &opts.preconditions.uid {
            if *want != uid {
                return Err(api::status::conflict(
                    &gr,
                    name,
                    &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                )
                .into());
            }
        }
        if let Some(want) = &opts.preconditions.resource_version {
            if *want != kv.mod_revision.to_string() {
                return Err(api::status::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        kv.mod_revision
                    ),
                )
                .into());
            }
        }
        let mut finalizers = api::meta::finalizers(&obj);
        if api::meta::deletion_timestamp(&obj).is_some() {
            // Already terminating: only a shorter grace period changes anything.
            let current = api::meta::deletion_grace_period_seconds(&obj).unwrap_or(0);
            match opts.grace_period_seconds {
                Some(0) if finalizers.is_empty() => {}
                Some(g) if g < current => {
                    let g = g.max(1);
                    let mut new = Value::clone(&obj);
                    api::meta::set_deletion(&mut new, &time_in(g), g);
                    match mark(state, &key, kv.mod_revision, new, opts.dry_run).await? {
                        Some(marked) => {
                            if finalizers.is_empty() {
                                spawn_reaper(state.clone(), key.clone(), uid.clone(), g);
                            }
                            return Ok(Deleted::Marked(marked));
                        }
                        None => continue,
                    }
                }
                _ => return Ok(Deleted::Marked(Written::shared(obj))),
            }
        } else {
            let grace = strategy
                .graceful_deletion_seconds(&obj, opts.grace_period_seconds)
                .filter(|g| *g > 0);
            let policy = opts
                .propagation
                .unwrap_or(match strategy.default_propagation_policy() {
                    "Orphan" => Propagation::Orphan,
                    "Foreground" => Propagation::Foreground,
                    _ => Propagation::Background,
                });
            let gc_finalizer = match policy {
                Propagation::Orphan => Some("orphan"),
                Propagation::Foreground => Some("foregroundDeletion"),
                Propagation::Background => None,
            };
            if let Some(f) = gc_finalizer {
                if !finalizers.iter().any(|x| x == f) {
                    finalizers.push(f.to_string());
                }
            }
            let spec_finalizers = is_namespace
                && obj
                    .pointer("/spec/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
            if grace.is_some() || !finalizers.is_empty() || spec_finalizers {
                let mut new = Value::clone(&obj);
                match grace {
                    Some(g) => api::meta::set_deletion(&mut new, &time_in(g), g),
                    None => api::meta::set_deletion(&mut new, &api::meta::now_rfc3339(), 0),
                }
                bump_generation(&mut new);
                api::meta::set_finalizers(&mut new, &finalizers);
                if is_namespace {
                    if let Some(o) = new.as_object_mut() {
                        let status = o.entry("status").or_insert_with(|| json!({}));
                        if let Some(s) = status.as_object_mut() {
                            s.insert("phase".into(), json!("Terminating"));
                        }
                    }
                }
                match mark(state, &key, kv.mod_revision, new, opts.dry_run).await? {
                    Some(marked) => {
                        if let (Some(g), true) = (grace, finalizers.is_empty()) {
                            spawn_reaper(state.clone(), key.clone(), uid.clone(), g);
                        }
                        return Ok(Deleted::Marked(marked));
                    }
                    None => continue,
                }
            }
        }
        if opts.dry_run {
            return Ok(Deleted::Removed(obj, None, None));
        }
        // Taken before the delete: the cache lets go of it once the delete's event is applied.
        let json = state.cache.json_at(&key, kv.mod_revision);
        match state.store.delete(&key, Some(kv.mod_revision)).await? {
            store::DeleteOutcome::Deleted { revision, .. } => {
                crate::handlers::subresource::release_on_delete(state, target, &obj);
                return Ok(Deleted::Removed(obj, Some(revision), json));
            }
            store::DeleteOutcome::NotFound => return Err(ApiError::not_found(&gr, name)),
            store::DeleteOutcome::Conflict(_) => continue,
        }
    }
    Err(api::status::server_timeout(&gr, "DELETE", 1).into())
}

/// Stores the marked-for-deletion state; `None` when the compare-and-swap lost.
async fn mark(
    state: &AppState,
    key: &str,
    rev: u64,
    new: Value,
    dry_run: bool,
) -> Result<Option<Written>> {
    if dry_run {
        return Ok(Some(Written::object(new)));
    }
    use crate::handlers::write::{write_shared, StoreWrite};
    let written = write_shared(state, key, new, |bytes| async move {
        Ok(match state.store.update(key, bytes, Some(rev)).await? {
            store::UpdateOutcome::Updated { kv, .. } => StoreWrite::Stored(kv.mod_revision),
            store::UpdateOutcome::NotFound | store::UpdateOutcome::Conflict(_) => {
                StoreWrite::NotStored
            }
        })
    })
    .await?;
    Ok(written.ok())
}

/// Completes a graceful deletion when its grace period has passed and nobody (the kubelet) did:
/// removes the object if it is still the same terminating object.
fn spawn_reaper(state: AppState, key: String, uid: String, grace: i64) {
    let wait = Duration::from_secs(u64::try_from(grace.max(0)).unwrap_or(0));
    tokio::spawn(async move {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        let Ok(Some(kv)) = state.store.get(&key).await else {
            return;
        };
        let Ok(obj) = decode_kv(&kv) else { return };
        if api::meta::uid(&obj) == Some(uid.as_str())
            && api::meta::deletion_timestamp(&obj).is_some()
            && api::meta::finalizers(&obj).is_empty()
        {
            if let Err(e) = state.store.delete(&key, Some(kv.mod_revision)).await {
                tracing::warn!(%key, error = %e, "completing a graceful deletion failed");
            }
        }
    });
}

impl Deleted {
    /// The object as the response shows it.
    fn into_object(self) -> Value {
        match self {
            Deleted::Marked(w) => Arc::unwrap_or_clone(w.object),
            Deleted::Removed(obj, revision, _) => {
                let mut obj = Arc::unwrap_or_clone(obj);
                if let Some(rev) = revision {
                    api::meta::set_resource_version(&mut obj, &rev.to_string());
                }
                obj
            }
        }
    }
}

/// Kinds whose DELETE answers with the removed object rather than a Status.
fn removal_returns_object(target: &Target) -> bool {
    target.info.plural == "pods" && target.info.group.is_empty()
}

/// The response body of a finished delete: the object for kinds that return it (pods and
/// everything marked), else a Success Status.
fn deleted_body(target: &Target, d: Deleted) -> (Value, bool) {
    match d {
        Deleted::Removed(obj, ..) if !removal_returns_object(target) => {
            let name = api::meta::name(&obj).unwrap_or("");
            let uid = api::meta::uid(&obj).unwrap_or("");
            (
                api::status::to_json(&api::status::success_deleted(
                    &target.group_resource(),
                    name,
                    uid,
                )),
                false,
            )
        }
        d => (d.into_object(), true),
    }
}

/// DELETE of one object.
pub async fn delete(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    let bytes = ctx.read_body(body).await?;
    let opts = DeleteOptions::parse(&bytes, &ctx.query)?;
    let d = delete_object(&ctx.state, &ctx.target, &name, &opts).await?;
    if let Deleted::Marked(w) = d {
        return respond_committed(&ctx, crate::handlers::write::Committed::Stored(w));
    }
    if let Deleted::Removed(obj, Some(rev), json) = &d {
        // The usual answer (a kubelet's final delete of a pod): written from the shared object.
        let out = crate::handlers::render::output(ctx.accept())?;
        if removal_returns_object(&ctx.target)
            && out == crate::http::negotiate::Output::Json
            && crate::handlers::render::is_presentable(ctx.target.info, obj)
        {
            let json = match json {
                Some(json) => json.clone(),
                None => ObjectJson::encode(obj)
                    .map_err(|e| ApiError::internal("encoding an object", e))?,
            };
            let body = json.with_resource_version(&rev.to_string());
            return Ok(crate::handlers::render::with_content_type(
                body,
                out.content_type(),
                StatusCode::OK,
            ));
        }
    }
    let (body, is_object) = deleted_body(&ctx.target, d);
    if is_object {
        return respond_committed(
            &ctx,
            crate::handlers::write::Committed::Stored(Written::object(body)),
        );
    }
    Ok(axum::Json(body).into_response())
}

/// DELETE of a collection: every matching object, as DELETE does; responds with the list of
/// deleted (or marked) objects.
pub async fn delete_collection(ctx: Ctx, body: Body) -> Result<Response> {
    let bytes = ctx.read_body(body).await?;
    let opts = DeleteOptions::parse(&bytes, &ctx.query)?;
    let list_opts = ListOptions::from_query(&ctx.query)?;
    let filter = Filter::new(&ctx.target, &list_opts)?;
    wait_consistent(&ctx).await?;
    let snapshot = match ctx.state.cache.list(
        &ctx.target.resource_prefix(),
        &ctx.target.collection_prefix(),
        ListAt::Current,
        None,
        None,
        &|o| filter.matches(o),
    ) {
        SnapshotOutcome::Listed(s) => s,
        _ => {
            return Err(ApiError::internal(
                "listing for deletecollection",
                "cache snapshot unavailable",
            ))
        }
    };
    let mut items = Vec::new();
    for obj in snapshot.items {
        let name = api::meta::name(&obj).unwrap_or("").to_string();
        let ns = api::meta::namespace(&obj).map(String::from);
        let target = Target {
            namespace: ns.clone(),
            name: Some(name.clone()),
            ..ctx.target.clone()
        };
        debug_assert_eq!(
            target.key(&name),
            object_key(ctx.target.info, ns.as_deref(), &name)
        );
        match delete_object(&ctx.state, &target, &name, &opts).await {
            Ok(d) => items.push(present(ctx.target.info, d.into_object())),
            Err(e) if e.code() == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let body = json!({
        "kind": ctx.target.info.list_kind,
        "apiVersion": ctx.target.info.api_version(),
        "metadata": { "resourceVersion": ctx.state.store.current_revision().to_string() },
        "items": items,
    });
    let out = output(ctx.accept())?;
    Ok(encode(&body, out, StatusCode::OK))
}
