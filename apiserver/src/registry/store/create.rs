//! Create (`Store.Create` upstream): the steps a new object takes before it is stored.
//!
//! In order: type meta checked against the resource, namespace taken from the store (a body naming
//! another is refused), `generateName` expanded, unknown fields (`fieldValidation`), conversion to
//! the storage form, system metadata (uid, creationTimestamp; client-set deletion fields and
//! resourceVersion dropped), the kind's defaults and status reset, managed fields, mutating
//! admission (403; the built-in chain, then mutating webhooks), object-meta and kind validation
//! (422), validating admission (403; the built-in chain, validating webhooks, then
//! ResourceQuota, which charges the namespace's quotas), the kind's
//! allocations (`before_create`), then the store create. The namespace's existence and lifecycle
//! (upstream's first admission plugin, NamespaceLifecycle) are checked before all of these, and
//! then the store waits (bounded) for objects admission expects to appear shortly. Under a webhook
//! converter every step before the store create sees the object in the request's version; it is
//! converted to the storage version just before it is stored, and the result back. A generated
//! name that collides is generated again
//! (upstream's `RetryGenerateName`); any other existing name is 409 AlreadyExists.

use rand::Rng;
use serde_json::Value;

use super::{Store, Written};
use crate::error::{ApiError, Result};
use crate::registry::{FieldValidation, WriteOptions};
use crate::watch_cache::StoreWrite;

/// Characters of generated name suffixes (apiserver `names.SimpleNameGenerator`).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Attempts at a unique generated name (upstream retries `generateName` collisions 7 more times,
/// `retryGenerateNameAttempts` in `registry/generic/registry/store.go`; we allow as many as a
/// compare-and-swap loop).
const GENERATE_NAME_ATTEMPTS: usize = super::MAX_ATTEMPTS;

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

/// `fieldValidation=Strict` refuses unknown fields (400 `strict decoding error: unknown field
/// "spec.foo", …`); `Warn` lets them be dropped with a warning each (`unknown field
/// "spec.foo"`), `Ignore` silently.
fn unknown_fields_refused(
    unknown: &[String],
    validation: FieldValidation,
    warnings: &crate::registry::Warnings,
) -> Result<()> {
    if validation == FieldValidation::Warn {
        for f in unknown {
            warnings.push(format!("unknown field \"{f}\""));
        }
    }
    if unknown.is_empty() || validation != FieldValidation::Strict {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    Err(ApiError::bad_request(format!(
        "strict decoding error: {}",
        list.join(", ")
    )))
}

impl Store<'_> {
    /// Checks `kind`/`apiVersion` of a body against the resource (absent is fine).
    pub fn check_type_meta(&self, obj: &Value) -> Result<()> {
        let info = &self.resource.info;
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

    /// Fills or checks the body's namespace against the store's; clears it for cluster-scoped
    /// kinds.
    pub fn reconcile_namespace(&self, obj: &mut Value) -> Result<()> {
        if !self.resource.info.namespaced {
            api::meta::remove(obj, "namespace");
            return Ok(());
        }
        let ns = self.namespace.as_deref().unwrap_or("");
        match api::meta::namespace(obj) {
            None | Some("") => api::meta::set_namespace(obj, ns),
            Some(body_ns) if body_ns == ns => {}
            Some(_) => return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
        }
        Ok(())
    }

    /// Applies `fieldValidation` to an object in the endpoint's form: `Strict` answers 400 for
    /// fields the kind's schema does not define; `Ignore` and `Warn` drop them, as typed decoding
    /// (or a custom resource's pruning) does, `Warn` with a warning each in `opts.warnings`.
    pub fn validate_fields(&self, obj: &mut Value, opts: &WriteOptions) -> Result<()> {
        let validation = opts.field_validation;
        if let Some(unknown) = self.resource.strategy.prune_unknown(obj) {
            return unknown_fields_refused(&unknown, validation, &opts.warnings);
        }
        let unknown = crate::openapi::schemas::unknown_fields(&self.resource, obj);
        if unknown.is_empty() {
            return Ok(());
        }
        unknown_fields_refused(&unknown, validation, &opts.warnings)?;
        crate::openapi::schemas::prune(obj, &unknown);
        Ok(())
    }

    /// A new object ready to store (the steps of the module docs after the namespace check;
    /// [`create`](Self::create) has checked its type meta and namespace).
    async fn prepare_create(&self, mut obj: Value, opts: &WriteOptions) -> Result<Value> {
        let info = &self.resource.info;
        if api::meta::resource_version(&obj).is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let requested_name = api::meta::name(&obj).unwrap_or("").to_string();
        if requested_name.is_empty() {
            if let Some(prefix) = api::meta::generate_name(&obj).filter(|p| !p.is_empty()) {
                let n = generate_name(prefix);
                api::meta::set_name(&mut obj, &n);
            }
        }
        let strategy = &self.resource.strategy;
        let mut obj = crate::registry::with_type_meta(info, obj);
        self.validate_fields(&mut obj, opts)?;
        self.check_decodes(&obj, super::Decoded::Body)?;
        let mut obj = strategy.to_storage(obj);
        let uid = uuid::Uuid::new_v4().to_string();
        let created = api::meta::now_rfc3339();
        self.before_create(&mut obj, &uid, &created);
        crate::patch::update_managed_fields(
            self.resource.patch_kind(),
            None,
            &mut obj,
            &opts.field_manager,
            &api::meta::now_rfc3339(),
            None,
        );
        self.admit(&mut obj, None, &requested_name, Some(opts))?;
        let node = crate::admission::node_restriction::NodeOperation::Create;
        let user = opts.user.as_deref();
        self.restrict_node(node, Some(&obj), None, "", &requested_name, user)?;
        if self.mutate_by_webhooks(&mut obj, None, "", opts).await? {
            // Upstream's mutating admission runs before the store's `BeforeCreate`: what a
            // webhook sets in the status or the system metadata does not survive.
            self.before_create(&mut obj, &uid, &created);
        }
        let name = api::meta::name(&obj).unwrap_or("").to_string();
        let errs = self.resource.validate_create(&obj);
        if !errs.is_empty() {
            return Err(self.invalid(&name, &errs));
        }
        // Validating admission runs after the name is generated, as upstream's (inside the
        // store's create), so its refusals name the object.
        self.validate_admission(&obj, None, &name, "", Some(opts))?;
        self.validate_by_webhooks(&obj, None, "", opts).await?;
        strategy.canonicalize(&mut obj);
        Ok(obj)
    }

    /// Upstream's `BeforeCreate`: the system metadata set (`uid`, `creationTimestamp`) or
    /// cleared, then the kind's `PrepareForCreate` (status reset, generation 1, …).
    fn before_create(&self, obj: &mut Value, uid: &str, created: &str) {
        api::meta::set_uid(obj, uid);
        api::meta::set_creation_timestamp(obj, created);
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            api::meta::remove(obj, k);
        }
        self.resource.prepare_for_create(obj);
    }

    /// Creates `obj` (a body as a client sent it): prepared, admitted, checked, allocated and
    /// stored. First waits until the watch cache has every write acknowledged so far: the
    /// namespace check and admission read it as consistently as a store read, without one.
    pub async fn create(&self, obj: Value, opts: &WriteOptions) -> Result<Written> {
        if let Some(reason) = self.resource.strategy.create_refused() {
            return Err(api::status::method_not_allowed_because(&reason).into());
        }
        self.wait_own_writes().await?;
        let mut obj = obj;
        self.check_type_meta(&obj)?;
        self.reconcile_namespace(&mut obj)?;
        // NamespaceLifecycle is the first admission plugin: before the others, which may wait
        // for objects of the namespace.
        self.check_namespace(api::meta::name(&obj).unwrap_or(""))?;
        self.await_admission_objects(&obj).await;
        let obj = self.prepare_create(obj, opts).await?;
        self.validate_quota(&obj, None, "", opts.dry_run).await?;
        if opts.dry_run {
            let mut obj = obj;
            self.resource.canonicalize(&mut obj);
            return Ok(Written::object(obj));
        }
        // Validated in the request's version, stored in the storage version.
        let mut obj = self.to_storage_version(obj).await?;
        let undo = match self.resource.strategy.before_create(&mut obj) {
            Ok(undo) => undo,
            Err(errs) => return Err(self.invalid(api::meta::name(&obj).unwrap_or(""), &errs)),
        };
        let result = self.store_new(obj).await;
        if let (Err(_), Some(undo)) = (&result, undo) {
            undo();
        }
        self.written_to_endpoint_version(result?).await
    }

    /// Namespace existence and lifecycle for creates of namespaced objects (from the cache,
    /// which [`create`](Self::create) let catch up).
    fn check_namespace(&self, name: &str) -> Result<()> {
        let Some(ns) = self.namespace.as_deref() else {
            return Ok(());
        };
        let found = self.state.cache.get(&format!("/registry/namespaces/{ns}"));
        match found {
            None => Err(ApiError::not_found("namespaces", ns)),
            Some(obj) => {
                let terminating = api::meta::deletion_timestamp(&obj).is_some()
                    || obj.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
                if terminating {
                    Err(api::status::namespace_terminating(&self.group_resource(), name, ns).into())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Stores a prepared new object; generates the name again on a collision of a generated one.
    async fn store_new(&self, mut obj: Value) -> Result<Written> {
        let generated = api::meta::generate_name(&obj).is_some_and(|g| !g.is_empty());
        for _ in 0..GENERATE_NAME_ATTEMPTS {
            let name = api::meta::name(&obj).unwrap_or("").to_string();
            let key = self.key(&name);
            let store = &self.state.store;
            self.resource.canonicalize(&mut obj);
            let written = self
                .state
                .cache
                .write_through(&key, obj, |bytes| async {
                    Ok(match store.create(&key, bytes).await? {
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
                Err(_) => return Err(ApiError::already_exists(&self.group_resource(), &name)),
            };
        }
        Err(api::status::server_timeout(&self.group_resource(), "POST", 1).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_validation_refuses_unknown_fields_with_upstreams_message() {
        let unknown = ["spec.foo".to_string(), "spec.bar".to_string()];
        let warnings = crate::registry::Warnings::default();
        let refused = unknown_fields_refused(&unknown, FieldValidation::Strict, &warnings);
        let status = refused.err().map(|e| (e.code(), e.to_status()));
        assert_eq!(
            status.map(|(code, s)| (code, s["message"].clone())),
            Some((
                400,
                serde_json::json!(
                    "strict decoding error: unknown field \"spec.foo\", unknown field \"spec.bar\""
                )
            ))
        );
        assert!(warnings.all().is_empty());
        assert!(unknown_fields_refused(&unknown, FieldValidation::Warn, &warnings).is_ok());
        assert_eq!(
            warnings.all(),
            ["unknown field \"spec.foo\"", "unknown field \"spec.bar\""]
        );
        assert!(unknown_fields_refused(&[], FieldValidation::Strict, &warnings).is_ok());
    }
}
