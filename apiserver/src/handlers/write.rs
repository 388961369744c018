//! CREATE (POST), UPDATE (PUT) and PATCH of objects (spec §6, §7.4–§7.6), and the shared commit
//! step every mutation of an existing object goes through.
//!
//! Writes are compare-and-swap on the stored revision. An unconditional write (no
//! `resourceVersion` in the body) that loses a race re-reads and re-applies; a conditional one
//! answers 409. System metadata (uid, creationTimestamp, deletion fields) is owned by the server:
//! set on create, carried over on update whatever the client sent.

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use rand::Rng;
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::handlers::read::{decode_stored, load, stored_object};
use crate::handlers::render::respond_object;
use crate::handlers::{Ctx, ObjectResponse, Target};
use crate::http::body::{content_type, decode_object};
use crate::http::query::{IncludeObject, WriteOptions};
use crate::registry::strategy_for;
use crate::watch_cache::ObjectJson;

/// Attempts of an unconditional write that keeps losing compare-and-swap races.
const MAX_RETRIES: usize = 16;

/// Characters of generated name suffixes (apiserver `names.SimpleNameGenerator`).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `metadata.name` from `generateName`: prefix (≤ 58 chars) + 5 random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut p: String = prefix.chars().take(58).collect();
    let mut rng = rand::thread_rng();
    for _ in 0..5 {
        let i = rng.gen_range(0..NAME_ALPHABET.len());
        p.push(char::from(NAME_ALPHABET[i]));
    }
    p
}

/// Checks `kind`/`apiVersion` of a body against the endpoint (absent is fine).
pub fn check_type_meta(info: &api::ResourceInfo, obj: &Value) -> Result<()> {
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        if !av.is_empty() && av != info.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                info.api_version()
            )));
        }
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str) {
        if !k.is_empty() && k != info.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )));
        }
    }
    Ok(())
}

/// Fills or checks the body's namespace against the URL; clears it for cluster-scoped kinds.
pub fn reconcile_namespace(target: &Target, obj: &mut Value) -> Result<()> {
    if !target.info.namespaced {
        api::meta::remove(obj, "namespace");
        return Ok(());
    }
    let url_ns = target.namespace.as_deref().unwrap_or("");
    match api::meta::namespace(obj) {
        None | Some("") => api::meta::set_namespace(obj, url_ns),
        Some(ns) if ns == url_ns => {}
        Some(_) => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
    Ok(())
}

fn invalid(info: &api::ResourceInfo, name: &str, errs: &[api::validation::FieldError]) -> ApiError {
    api::status::invalid(&info.group_kind(), name, errs).into()
}

/// Namespace existence and lifecycle for creates of namespaced objects.
async fn check_namespace(ctx: &Ctx, name: &str) -> Result<()> {
    if !ctx.target.info.namespaced {
        return Ok(());
    }
    let ns = ctx.target.namespace.as_deref().unwrap_or("");
    let key = format!("/registry/namespaces/{ns}");
    // Read from the cache once it has every acknowledged write: as consistent as a store read,
    // without one.
    crate::handlers::read::wait_consistent(ctx).await?;
    let found = ctx.state.cache.get(&key).map(|v| Value::clone(&v));
    match found {
        None => Err(ApiError::not_found("namespaces", ns)),
        Some(obj) => {
            let terminating = api::meta::deletion_timestamp(&obj).is_some()
                || obj.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
            if terminating {
                Err(
                    api::status::namespace_terminating(&ctx.target.group_resource(), name, ns)
                        .into(),
                )
            } else {
                Ok(())
            }
        }
    }
}

/// The field manager of a write: `fieldManager`, else the client's User-Agent product name
/// (upstream's default).
pub fn field_manager(ctx: &Ctx) -> String {
    if let Some(m) = ctx.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.chars().take(128).collect();
    }
    ctx.headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .map(|s| s.chars().take(128).collect())
        .unwrap_or_default()
}

/// Applies `fieldValidation` to an object in the endpoint's form: `Strict` answers 400 for fields
/// the kind's schema does not define; `Ignore` and `Warn` drop them, as typed decoding does
/// (the `Warn` header is not sent).
pub fn validate_fields(ctx: &Ctx, obj: &mut Value) -> Result<()> {
    let unknown = crate::openapi::schemas::unknown_fields(ctx.target.info, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    let strict = ctx.query.get("fieldValidation") == Some("Strict");
    if strict {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            list.join(", ")
        )));
    }
    crate::openapi::schemas::prune(obj, &unknown);
    Ok(())
}

/// [`validate_fields`] for a status write that need not refuse unknown fields: only `status` is
/// kept from its body (everything else comes from the stored object), so only `status` is walked.
fn validate_status_fields(ctx: &Ctx, obj: &mut Value) -> Result<()> {
    let Some(status) = obj.as_object_mut().and_then(|o| o.remove("status")) else {
        return Ok(());
    };
    let mut only = Value::Object(serde_json::Map::from_iter([("status".to_string(), status)]));
    let checked = validate_fields(ctx, &mut only);
    if let (Some(o), Value::Object(mut only)) = (obj.as_object_mut(), only) {
        if let Some(status) = only.remove("status") {
            o.insert("status".to_string(), status);
        }
    }
    checked
}

/// Prepares a new object for storage: type meta, namespace, name, system metadata, strategy
/// defaults and validation. Returns the object ready to store.
pub async fn prepare_new(ctx: &Ctx, mut obj: Value) -> Result<Value> {
    let info = ctx.target.info;
    check_type_meta(info, &obj)?;
    reconcile_namespace(&ctx.target, &mut obj)?;
    if api::meta::resource_version(&obj).is_some_and(|rv| !rv.is_empty()) {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if api::meta::name(&obj).unwrap_or("").is_empty() {
        if let Some(prefix) = api::meta::generate_name(&obj).filter(|p| !p.is_empty()) {
            let n = generate_name(prefix);
            api::meta::set_name(&mut obj, &n);
        }
    }
    let strategy = strategy_for(info);
    let mut obj = crate::handlers::render::with_type_meta(info, obj);
    validate_fields(ctx, &mut obj)?;
    let mut obj = strategy.to_storage(obj);
    api::meta::set_uid(&mut obj, &uuid::Uuid::new_v4().to_string());
    api::meta::set_creation_timestamp(&mut obj, &api::meta::now_rfc3339());
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
    ] {
        api::meta::remove(&mut obj, k);
    }
    strategy.prepare_for_create(&mut obj);
    crate::patch::update_managed_fields(
        info,
        None,
        &mut obj,
        &field_manager(ctx),
        &api::meta::now_rfc3339(),
        None,
    );
    let name = api::meta::name(&obj).unwrap_or("").to_string();
    let errs = strategy.validate_create(&obj);
    if !errs.is_empty() {
        return Err(invalid(info, &name, &errs));
    }
    Ok(obj)
}

/// Stores a prepared new object; retries generated names on collision.
pub async fn store_new(ctx: &Ctx, obj: Value, dry_run: bool) -> Result<Written> {
    if dry_run {
        return store_new_allocated(ctx, obj, true).await;
    }
    let (obj, ip) = crate::handlers::subresource::allocate_on_create(ctx, obj)?;
    let result = store_new_allocated(ctx, obj, false).await;
    if let (Err(_), Some(ip)) = (&result, ip) {
        ctx.state.ips.release(&ip);
    }
    result
}

async fn store_new_allocated(ctx: &Ctx, mut obj: Value, dry_run: bool) -> Result<Written> {
    let info = ctx.target.info;
    let generated = api::meta::generate_name(&obj).is_some_and(|g| !g.is_empty());
    for _ in 0..MAX_RETRIES {
        let name = api::meta::name(&obj).unwrap_or("").to_string();
        check_namespace(ctx, &name).await?;
        if dry_run {
            return Ok(Written::object(obj));
        }
        let key = ctx.target.key(&name);
        let written = write_shared(&ctx.state, &key, obj, |bytes| async {
            Ok(match ctx.state.store.create(&key, bytes).await? {
                store::CreateOutcome::Created(kv) => StoreWrite::Stored(kv.mod_revision),
                store::CreateOutcome::AlreadyExists(_) => StoreWrite::NotStored,
            })
        })
        .await?;
        obj = match written {
            Ok(stored) => return Ok(stored),
            Err(mut obj) if generated => {
                let prefix = api::meta::generate_name(&obj).unwrap_or("").to_string();
                api::meta::set_name(&mut obj, &generate_name(&prefix));
                obj
            }
            Err(_) => return Err(ApiError::already_exists(&info.group_resource(), &name)),
        };
    }
    Err(api::status::server_timeout(&info.group_resource(), "POST", 1).into())
}

/// POST to a collection.
pub async fn create(ctx: Ctx, body: Body) -> Result<Response> {
    if ctx.target.info.namespaced && ctx.target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let opts = WriteOptions::from_query(&ctx.query, "CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let obj = decode_object(&ctx.headers, &bytes)?;
    let obj = prepare_new(&ctx, obj).await?;
    let stored = store_new(&ctx, obj, opts.dry_run).await?;
    respond_written(&ctx, stored, StatusCode::CREATED)
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteScope {
    /// The main resource: status is kept from storage.
    Main,
    /// `/status`: only status changes.
    Status,
    /// Server-internal: the object is already fully formed (finalize, scale, binding).
    Internal,
}

/// Carries server-owned metadata from `old` to `new`, applies the strategy and validates.
pub fn prepare_update(
    target: &Target,
    new: &mut Value,
    old: &Value,
    scope: WriteScope,
    manager: &str,
) -> Result<()> {
    let info = target.info;
    let name = api::meta::name(old).unwrap_or("").to_string();
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old.get("metadata").and_then(|m| m.get(k)) {
            Some(v) => {
                if let Some(m) = api::meta::metadata_mut(new) {
                    m.insert(k.to_string(), v.clone());
                }
            }
            None => api::meta::remove(new, k),
        }
    }
    api::meta::set_name(new, &name);
    if let Some(ns) = api::meta::namespace(old).map(String::from) {
        api::meta::set_namespace(new, &ns);
    }
    // Storage form: the type of the stored object, whichever endpoint wrote it.
    if let Some(o) = new.as_object_mut() {
        for k in ["kind", "apiVersion"] {
            match old.get(k) {
                Some(v) => o.insert(k.to_string(), v.clone()),
                None => o.remove(k),
            };
        }
    }
    if api::meta::deletion_timestamp(old).is_some() {
        let before = api::meta::finalizers(old);
        if api::meta::finalizers(new)
            .iter()
            .any(|f| !before.contains(f))
        {
            return Err(invalid(
                info,
                &name,
                &[api::validation::FieldError::forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted",
                )],
            ));
        }
    }
    let strategy = strategy_for(info);
    match scope {
        WriteScope::Main => strategy.prepare_for_update(new, old),
        WriteScope::Status => strategy.prepare_for_status_update(new, old),
        WriteScope::Internal => {}
    }
    let subresource = (scope == WriteScope::Status).then_some("status");
    crate::patch::update_managed_fields(
        info,
        Some(old),
        new,
        manager,
        &api::meta::now_rfc3339(),
        subresource,
    );
    let errs = strategy.validate_update(new, old);
    if !errs.is_empty() {
        return Err(invalid(info, &name, &errs));
    }
    Ok(())
}

/// Whether two objects are equal but for `metadata.resourceVersion`, compared in place (this runs
/// on every update; copying both objects to strip the field cost more than the comparison).
fn same_ignoring_rv(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let meta_equal = |x: Option<&Value>, y: Option<&Value>| match (x, y) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let rest = |m: &'_ serde_json::Map<String, Value>| {
                m.len() - usize::from(m.contains_key("resourceVersion"))
            };
            rest(x) == rest(y)
                && x.iter()
                    .filter(|(k, _)| *k != "resourceVersion")
                    .all(|(k, v)| y.get(k) == Some(v))
        }
        (x, y) => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| {
            if k == "metadata" {
                meta_equal(Some(v), b.get(k))
            } else {
                b.get(k) == Some(v)
            }
        })
}

/// Outcome of [`commit`].
pub enum Committed {
    /// Stored (or unchanged, or dry run): the object as it now is.
    Stored(Written),
    /// The object was removed because its last finalizer went away.
    Removed(Arc<Value>),
    /// The stored revision moved since `old` was read (compare-and-swap lost).
    Raced,
}

/// Writes `new` over `old` (read at `old_rev`), or removes the object when it is being deleted
/// and has no finalizers left. No-op writes are not stored.
pub async fn commit(
    ctx: &Ctx,
    name: &str,
    new: Value,
    old: &Value,
    old_rev: u64,
    dry_run: bool,
) -> Result<Committed> {
    let key = ctx.target.key(name);
    // As the generic registry's ShouldDeleteDuringUpdate: an update removes the object only when
    // it is being deleted with no grace period left; a pod in graceful termination stays, with the
    // kubelet's status writes visible, until the kubelet (or the reaper) deletes it.
    let finished = api::meta::deletion_timestamp(&new).is_some()
        && api::meta::deletion_grace_period_seconds(&new).unwrap_or(0) == 0
        && api::meta::finalizers(&new).is_empty()
        && !namespace_spec_finalizers_pending(&ctx.target, &new);
    if finished {
        if dry_run {
            return Ok(Committed::Removed(Arc::new(new)));
        }
        return match ctx.state.store.delete(&key, Some(old_rev)).await? {
            store::DeleteOutcome::Deleted { revision, .. } => {
                let mut gone = new;
                api::meta::set_resource_version(&mut gone, &revision.to_string());
                Ok(Committed::Removed(Arc::new(gone)))
            }
            store::DeleteOutcome::NotFound => {
                Err(ApiError::not_found(&ctx.target.group_resource(), name))
            }
            store::DeleteOutcome::Conflict(_) => Ok(Committed::Raced),
        };
    }
    if same_ignoring_rv(&new, old) || dry_run {
        let mut out = new;
        api::meta::set_resource_version(&mut out, &old_rev.to_string());
        return Ok(Committed::Stored(Written::object(out)));
    }
    let mut gone = false;
    let written = write_shared(&ctx.state, &key, new, |bytes| async {
        Ok(
            match ctx.state.store.update(&key, bytes, Some(old_rev)).await? {
                store::UpdateOutcome::Updated { kv, .. } => StoreWrite::Stored(kv.mod_revision),
                store::UpdateOutcome::NotFound => {
                    gone = true;
                    StoreWrite::NotStored
                }
                store::UpdateOutcome::Conflict(_) => StoreWrite::NotStored,
            },
        )
    })
    .await?;
    match written {
        Ok(written) => Ok(Committed::Stored(written)),
        Err(_) if gone => Err(ApiError::not_found(&ctx.target.group_resource(), name)),
        Err(_) => Ok(Committed::Raced),
    }
}

/// What a store write did: stored at a revision, or not (a lost compare-and-swap, a taken name).
pub(crate) enum StoreWrite {
    Stored(u64),
    NotStored,
}

/// An object as it now is, shared with the watch cache, and its JSON text when a write already
/// made it (exactly `serde_json::to_vec` of `object`).
#[derive(Debug, Clone)]
pub struct Written {
    pub object: Arc<Value>,
    pub json: Option<Bytes>,
}

impl Written {
    /// An object not (yet) serialised.
    pub fn object(object: Value) -> Self {
        Self::shared(Arc::new(object))
    }

    /// A shared object not (yet) serialised.
    pub fn shared(object: Arc<Value>) -> Self {
        Written { object, json: None }
    }
}

/// Stores `obj` at `key` through `write` (given the encoded bytes), sharing the object and its
/// JSON text with the watch cache so the write's event is neither decoded nor serialised again:
/// they are handed over before the write
/// ([`WatchCache::offer_pending`](crate::watch_cache::WatchCache::offer_pending)) and settled
/// after it. Returns the stored object with its resourceVersion, or the object back (without a
/// resourceVersion) when it was not stored.
pub(crate) async fn write_shared<F, Fut>(
    state: &crate::state::AppState,
    key: &str,
    mut obj: Value,
    write: F,
) -> Result<std::result::Result<Written, Value>>
where
    F: FnOnce(Bytes) -> Fut,
    Fut: std::future::Future<Output = Result<StoreWrite>>,
{
    api::meta::remove(&mut obj, "resourceVersion");
    let json = ObjectJson::encode(&obj).map_err(|e| ApiError::internal("encoding an object", e))?;
    let bytes = json.text().clone();
    let cache = &state.cache;
    // Refused while another write of the key is in flight: then this one keeps its object.
    let kept = cache.offer_pending(key, json.clone(), obj).err();
    // Until the outcome is known, a failed write, or the request being dropped mid-write (the
    // client went away), withdraws the offer: it never outlives its writer.
    let mut pending = PendingOffer {
        cache,
        key,
        bytes: bytes.clone(),
        armed: kept.is_none(),
    };
    let outcome = write(bytes.clone()).await?;
    pending.armed = false;
    match (outcome, kept) {
        (StoreWrite::Stored(rev), kept) => {
            let rv = rev.to_string();
            let text = json.with_resource_version(&rv);
            let object = match kept {
                Some(mut obj) => {
                    api::meta::set_resource_version(&mut obj, &rv);
                    let obj = Arc::new(obj);
                    cache.offer(key, rev, obj.clone(), Some(json.clone()));
                    obj
                }
                None => match cache.settle(key, &bytes, rev) {
                    Some(obj) => obj,
                    // The feeder took it first: the cache holds it (unless the key moved on).
                    None => match cache
                        .get(key)
                        .filter(|o| api::meta::resource_version(o) == Some(rv.as_str()))
                    {
                        Some(obj) => obj,
                        None => Arc::new(decode_stored(&bytes, rev)?),
                    },
                },
            };
            Ok(Ok(Written {
                object,
                json: Some(text),
            }))
        }
        (StoreWrite::NotStored, Some(obj)) => Ok(Err(obj)),
        (StoreWrite::NotStored, None) => match cache.withdraw(key, &bytes) {
            Some(obj) => Ok(Err(obj)),
            // A relist dropped the offer: the bytes are the object.
            None => serde_json::from_slice(&bytes)
                .map(Err)
                .map_err(|e| ApiError::internal("decoding an object", e)),
        },
    }
}

/// A pending offer of [`write_shared`], withdrawn when dropped armed.
struct PendingOffer<'a> {
    cache: &'a crate::watch_cache::WatchCache,
    key: &'a str,
    bytes: Bytes,
    armed: bool,
}

impl Drop for PendingOffer<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.cache.withdraw(self.key, &self.bytes);
        }
    }
}

/// A namespace is only removed once its `spec.finalizers` are empty too.
fn namespace_spec_finalizers_pending(target: &Target, obj: &Value) -> bool {
    target.info.group.is_empty()
        && target.info.plural == "namespaces"
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
}

/// The body's `metadata.resourceVersion` as a precondition: `Some(rev)` when set.
pub fn precondition(target: &Target, obj: &Value, name: &str) -> Result<Option<u64>> {
    match api::meta::resource_version(obj) {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::conflict(&target.group_resource(), name)),
    }
}

/// Responds with the result of a commit (200; the removed object for a finished deletion).
pub fn respond_committed(ctx: &Ctx, c: Committed) -> Result<Response> {
    let written = match c {
        Committed::Stored(w) => w,
        Committed::Removed(o) => Written::shared(o),
        Committed::Raced => return Err(ApiError::conflict(&ctx.target.group_resource(), "")),
    };
    respond_written(ctx, written, StatusCode::OK)
}

/// Responds with a written object: its JSON text as the write made it, when it has one.
pub fn respond_written(ctx: &Ctx, written: Written, code: StatusCode) -> Result<Response> {
    respond_object(
        &ctx.target,
        ctx.accept(),
        IncludeObject::Metadata,
        ObjectResponse {
            object: written.object,
            json: written.json,
            code,
        },
    )
}

/// The read-modify-write loop of PUT and of PUT `/status`.
pub async fn update_with(ctx: &Ctx, body: Body, scope: WriteScope) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    let opts = WriteOptions::from_query(&ctx.query, "UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let body_obj = decode_object(&ctx.headers, &bytes)?;
    check_type_meta(ctx.target.info, &body_obj)?;
    if let Some(n) = api::meta::name(&body_obj).filter(|n| !n.is_empty()) {
        if n != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
    }
    let wanted = precondition(&ctx.target, &body_obj, &name)?;
    let strategy = strategy_for(ctx.target.info);
    // The body as sent, kept only where a PUT may create (the create path prepares it anew).
    let may_create = scope == WriteScope::Main && strategy.allow_create_on_update();
    let original = may_create.then(|| body_obj.clone());
    let check = |mut obj: Value| -> Result<Value> {
        reconcile_namespace(&ctx.target, &mut obj)?;
        let mut obj = crate::handlers::render::with_type_meta(ctx.target.info, obj);
        if scope == WriteScope::Status && ctx.query.get("fieldValidation") != Some("Strict") {
            validate_status_fields(ctx, &mut obj)?;
        } else {
            validate_fields(ctx, &mut obj)?;
        }
        Ok(strategy.to_storage(obj))
    };
    // Used up by the first attempt; a retry (a lost compare-and-swap) decodes the body again.
    let mut checked = Some(check(body_obj)?);
    for _ in 0..MAX_RETRIES {
        let key = ctx.target.key(&name);
        let Some(kv) = ctx.state.store.get(&key).await? else {
            if let Some(original) = &original {
                let mut obj = original.clone();
                api::meta::set_name(&mut obj, &name);
                api::meta::remove(&mut obj, "resourceVersion");
                let obj = prepare_new(ctx, obj).await?;
                let stored = store_new(ctx, obj, opts.dry_run).await?;
                return respond_written(ctx, stored, StatusCode::CREATED);
            }
            return Err(ApiError::not_found(&ctx.target.group_resource(), &name));
        };
        if wanted.is_some_and(|w| w != kv.mod_revision) {
            return Err(ApiError::conflict(&ctx.target.group_resource(), &name));
        }
        let old = stored_object(&ctx.state, &kv)?;
        let mut new = match checked.take() {
            Some(obj) => obj,
            None => check(decode_object(&ctx.headers, &bytes)?)?,
        };
        prepare_update(&ctx.target, &mut new, &old, scope, &field_manager(ctx))?;
        match commit(ctx, &name, new, &old, kv.mod_revision, opts.dry_run).await? {
            Committed::Raced if wanted.is_none() => continue,
            Committed::Raced => {
                return Err(ApiError::conflict(&ctx.target.group_resource(), &name))
            }
            c => return respond_committed(ctx, c),
        }
    }
    Err(api::status::server_timeout(&ctx.target.group_resource(), "PUT", 1).into())
}

/// PUT of an object.
pub async fn update(ctx: Ctx, body: Body) -> Result<Response> {
    update_with(&ctx, body, WriteScope::Main).await
}

/// PATCH of an object.
pub async fn patch(ctx: Ctx, body: Body) -> Result<Response> {
    crate::handlers::patch::patch_with(&ctx, body, WriteScope::Main).await
}

/// Reads the object or answers 404 (re-exported for the subresources).
pub async fn load_object(ctx: &Ctx) -> Result<(Arc<Value>, store::KeyValue)> {
    let name = ctx.target.require_name()?.to_string();
    load(ctx, &name).await
}

/// The Content-Type of a PATCH, required.
pub fn patch_content_type(ctx: &Ctx) -> Result<String> {
    content_type(&ctx.headers)
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .ok_or_else(|| ApiError::unsupported_patch_type(""))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::{same_ignoring_rv, write_shared, StoreWrite};

    #[test]
    fn same_ignoring_rv_ignores_only_the_resource_version() {
        let a = json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": {"x": 1}});
        let b = json!({"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"x": 1}});
        let no_rv = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        assert!(same_ignoring_rv(&a, &b));
        assert!(same_ignoring_rv(&a, &no_rv));
        assert!(same_ignoring_rv(&no_rv, &a));
        let label = json!({"metadata": {"name": "p", "labels": {}}, "spec": {"x": 1}});
        assert!(!same_ignoring_rv(&a, &label));
        assert!(!same_ignoring_rv(&label, &a));
        let spec = json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": {"x": 2}});
        assert!(!same_ignoring_rv(&a, &spec));
        let extra = json!({"metadata": {"name": "p"}, "spec": {"x": 1}, "status": {}});
        assert!(!same_ignoring_rv(&a, &extra));
        // resourceVersion matters anywhere but metadata.
        let nested = json!({"metadata": {"name": "p"}, "spec": {"resourceVersion": "1"}});
        let nested2 = json!({"metadata": {"name": "p"}, "spec": {"resourceVersion": "2"}});
        assert!(!same_ignoring_rv(&nested, &nested2));
        assert!(same_ignoring_rv(&json!(1), &json!(1)));
        // Same length, one with resourceVersion and one with another key instead.
        let other = json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"x": 1}});
        assert!(!same_ignoring_rv(&a, &other));
    }

    #[tokio::test]
    async fn a_writer_dropped_mid_write_withdraws_its_hand_over() {
        let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
        let state = crate::AppState::start(
            crate::Config::default(),
            Arc::new(store),
            Default::default(),
        )
        .await
        .unwrap();
        let key = "/registry/configmaps/default/c";
        // The request goes away while its store write is still pending.
        let write = write_shared(&state, key, json!({"metadata": {"name": "c"}}), |_| {
            std::future::pending::<crate::error::Result<StoreWrite>>()
        });
        assert!(tokio::time::timeout(Duration::from_millis(20), write)
            .await
            .is_err());
        // Nothing of it is left: the next write of the key can hand its object over.
        let json = crate::watch_cache::ObjectJson::encode(&json!({})).unwrap();
        assert!(state
            .cache
            .offer_pending(key, json.clone(), json!({}))
            .is_ok());
        assert!(state.cache.withdraw(key, json.text()).is_some());
    }
}
