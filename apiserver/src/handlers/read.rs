//! GET of one object (from the store: always the latest state) and LIST (from the watch cache at
//! one consistent revision, spec §7.2).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use crate::error::{ApiError, Result};
use crate::handlers::render::{respond_list, respond_object};
use crate::handlers::{Ctx, ObjectResponse, Target};
use crate::http::query::{ContinueToken, ListOptions, RvMatch};
use crate::registry::strategy_for;
use crate::watch_cache::{ListAt, SnapshotOutcome};

/// Parses a stored value and stamps its resourceVersion.
pub fn decode_kv(kv: &store::KeyValue) -> Result<Value> {
    decode_stored(&kv.value, kv.mod_revision)
}

/// Parses the bytes stored at `revision` and stamps that resourceVersion.
pub fn decode_stored(bytes: &[u8], revision: u64) -> Result<Value> {
    let mut v: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::internal("decoding a stored object", e))?;
    api::meta::set_resource_version(&mut v, &revision.to_string());
    Ok(v)
}

/// The object `kv` holds, shared with the watch cache when the cache has applied exactly this
/// revision of it (a key's value at one revision never changes), else decoded. Writers read the
/// object they are about to replace through this: most of the time it costs no parse.
pub fn stored_object(state: &crate::state::AppState, kv: &store::KeyValue) -> Result<Arc<Value>> {
    if let Some(cached) = state.cache.get(&kv.key) {
        if api::meta::resource_version(&cached).and_then(|rv| rv.parse().ok())
            == Some(kv.mod_revision)
        {
            return Ok(cached);
        }
    }
    decode_kv(kv).map(Arc::new)
}

/// Reads the current object named `name` (see [`stored_object`]), or 404.
pub async fn load(ctx: &Ctx, name: &str) -> Result<(Arc<Value>, store::KeyValue)> {
    let key = ctx.target.key(name);
    match ctx.state.store.get(&key).await? {
        Some(kv) => Ok((stored_object(&ctx.state, &kv)?, kv)),
        None => Err(ApiError::not_found(&ctx.target.group_resource(), name)),
    }
}

/// GET of one object.
pub async fn get(ctx: Ctx) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    let (obj, _) = load(&ctx, &name).await?;
    let include = ListOptions::from_query(&ctx.query)
        .map(|o| o.include_object)
        .unwrap_or_default();
    respond_object(
        &ctx.target,
        ctx.accept(),
        include,
        ObjectResponse {
            object: obj,
            json: None,
            code: StatusCode::OK,
        },
    )
}

/// Label and field selectors of a request, validated against the kind.
pub struct Filter {
    labels: api::labels::Selector,
    fields: api::fields::Selector,
    info: &'static api::ResourceInfo,
}

impl Filter {
    /// Parses the selectors of `opts` (400 on syntax errors and unsupported fields).
    pub fn new(target: &Target, opts: &ListOptions) -> Result<Self> {
        let labels = match opts.label_selector.as_deref() {
            None | Some("") => api::labels::Selector::everything(),
            Some(s) => {
                api::labels::Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?
            }
        };
        let fields = match opts.field_selector.as_deref() {
            None | Some("") => api::fields::Selector::everything(),
            Some(s) => {
                api::fields::Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?
            }
        };
        for r in fields.requirements() {
            if strategy_for(target.info)
                .field_value(&json!({}), &r.field)
                .is_none()
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            }
        }
        Ok(Filter {
            labels,
            fields,
            info: target.info,
        })
    }

    /// Whether `obj` passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(&api::meta::labels(obj)))
            && (self.fields.is_empty()
                || self
                    .fields
                    .matches(|f| strategy_for(self.info).field_value(obj, f)))
    }
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Waits until the watch cache has applied `rev`, else 504 `Too large resource version`.
pub async fn wait_for_revision(ctx: &Ctx, rev: u64) -> Result<()> {
    if ctx
        .state
        .cache
        .wait_for(rev, ctx.state.config.future_rv_wait)
        .await
    {
        Ok(())
    } else {
        Err(api::status::too_large_resource_version(rev, ctx.state.cache.revision()).into())
    }
}

/// Waits until the cache has every write acknowledged so far (a "most recent" read).
pub async fn wait_consistent(ctx: &Ctx) -> Result<()> {
    let current = ctx.state.store.current_revision();
    if ctx
        .state
        .cache
        .wait_for(current, ctx.state.config.future_rv_wait)
        .await
    {
        Ok(())
    } else {
        Err(api::status::timeout("the watch cache is not caught up with the store").into())
    }
}

/// LIST.
pub async fn list(ctx: Ctx, opts: ListOptions) -> Result<Response> {
    let filter = Filter::new(&ctx.target, &opts)?;
    let (at, start_after) = match (&opts.continue_token, opts.resource_version) {
        (Some(raw), _) => {
            let token = ContinueToken::decode(raw)?;
            if !token.start.starts_with(&ctx.target.collection_prefix()) {
                return Err(ApiError::bad_request(
                    "continue key is not valid: the token belongs to another collection",
                ));
            }
            (ListAt::Exact(token.rv), Some(token.start))
        }
        (None, None) => {
            wait_consistent(&ctx).await?;
            (ListAt::Current, None)
        }
        (None, Some(0)) => (ListAt::Current, None),
        (None, Some(rv)) => {
            wait_for_revision(&ctx, rv).await?;
            let exact = opts.rv_match == Some(RvMatch::Exact)
                || (opts.rv_match.is_none() && opts.limit.is_some());
            if exact {
                (ListAt::Exact(rv), None)
            } else {
                (ListAt::Current, None)
            }
        }
    };
    let limit = opts.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let resource_prefix = ctx.target.resource_prefix();
    let key_prefix = ctx.target.collection_prefix();
    let outcome = ctx.state.cache.list(
        &resource_prefix,
        &key_prefix,
        at,
        start_after.as_deref(),
        limit,
        &|o| filter.matches(o),
    );
    let snapshot = match outcome {
        SnapshotOutcome::Listed(s) => s,
        SnapshotOutcome::Expired { .. } if opts.continue_token.is_some() => {
            // The inconsistent continuation: resume after the same key against current data.
            let token = ContinueToken {
                rv: ctx.state.cache.revision(),
                start: start_after.unwrap_or_default(),
            };
            let mut st = api::status::gone_expired(CONTINUE_EXPIRED);
            st.metadata.continue_ = Some(token.encode());
            return Err(st.into());
        }
        SnapshotOutcome::Expired { .. } => {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ))
        }
        SnapshotOutcome::Future { current } => {
            let rv = match at {
                ListAt::Exact(r) => r,
                ListAt::Current => current,
            };
            return Err(api::status::too_large_resource_version(rv, current).into());
        }
    };
    let mut meta = json!({ "resourceVersion": snapshot.revision.to_string() });
    if let Some(last) = snapshot.more_after {
        meta["continue"] = json!(ContinueToken {
            rv: snapshot.revision,
            start: last
        }
        .encode());
        if let Some(n) = snapshot.remaining {
            meta["remainingItemCount"] = json!(n);
        }
    }
    let items: Vec<Arc<Value>> = snapshot.items;
    respond_list(&ctx.target, ctx.accept(), opts.include_object, &items, meta)
}
