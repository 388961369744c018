//! List and watch, served by the watch cache (spec §7.2, §7.3).
//!
//! A list is taken at one consistent revision: the current one after the cache has every
//! acknowledged write (no `resourceVersion`), whatever the cache has (`resourceVersion=0`), at
//! least a given one, or exactly one still in the ring (`resourceVersionMatch=Exact`, a continue
//! token, or a limit with a resourceVersion). Older than the ring is 410 Expired. A watch starts
//! from a snapshot (ADDED events of every object, then live events) or after a revision (the ring's
//! later events, then live ones).

use std::sync::Arc;

use serde_json::{json, Value};

use super::Store;
use crate::error::{ApiError, Result};
use crate::http::query::{ContinueToken, ListOptions, RvMatch};
use crate::registry::Resource;
use crate::watch_cache::{ListAt, Listed, Select, SnapshotOutcome, WatchFrom, WatchStart};

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Label and field selectors of a request, validated against the kind.
pub struct Filter {
    labels: api::labels::Selector,
    fields: api::fields::Selector,
    resource: Arc<Resource>,
}

impl Filter {
    /// Parses the selectors of `opts` (400 on syntax errors and unsupported fields).
    pub fn new(resource: Arc<Resource>, opts: &ListOptions) -> Result<Self> {
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
            if resource.field_value(&json!({}), &r.field).is_none() {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            }
        }
        Ok(Filter {
            labels,
            fields,
            resource,
        })
    }

    /// Whether every object passes (no selector).
    pub fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// How the watch cache picks what passes, `matches` being [`Self::matches`]: on held
    /// objects' selector views when every selector reads only what a view holds (labels, name,
    /// namespace, and the field labels of a kind that lists the fields they read).
    pub fn select<'a>(&self, matches: &'a (dyn Fn(&Value) -> bool + Sync)) -> Select<'a> {
        if self.is_everything() {
            return Select::All;
        }
        // Field labels are checked against the kind in `new`: these two are the generic ones.
        let generic = |field: &str| matches!(field, "metadata.name" | "metadata.namespace");
        let on_view = self.resource.strategy.selector_paths().is_some()
            || self.fields.requirements().iter().all(|r| generic(&r.field));
        if on_view {
            Select::OnView(matches)
        } else {
            Select::Object(matches)
        }
    }

    /// Whether `obj` passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(&api::meta::labels(obj)))
            && (self.fields.is_empty()
                || self.fields.matches(|f| self.resource.field_value(obj, f)))
    }
}

/// One page of a list.
pub struct ListPage {
    /// The objects, in key order, as the watch cache has them (see [`Listed`]).
    pub items: Vec<Listed>,
    /// `metadata` of the list: resourceVersion, and continue / remainingItemCount when more follow.
    pub metadata: Value,
}

/// A watch registered on the cache.
pub struct WatchOpened {
    /// Where it starts.
    pub from: WatchFrom,
    /// The registration (or the 410 the client gets as an ERROR event).
    pub start: WatchStart,
}

impl Store<'_> {
    /// The selectors of `opts`, checked against this resource.
    pub fn filter(&self, opts: &ListOptions) -> Result<Filter> {
        Filter::new(self.resource.clone(), opts)
    }

    /// One page of the collection, as `opts` asks (see the module docs).
    pub async fn list(&self, opts: &ListOptions, filter: &Filter) -> Result<ListPage> {
        let (at, start_after) = match (&opts.continue_token, opts.resource_version) {
            (Some(raw), _) => {
                let token = ContinueToken::decode(raw)?;
                if !token.start.starts_with(&self.collection_prefix()) {
                    return Err(ApiError::bad_request(
                        "continue key is not valid: the token belongs to another collection",
                    ));
                }
                (ListAt::Exact(token.rv), Some(token.start))
            }
            (None, None) => {
                self.wait_consistent_if_cached().await?;
                (ListAt::Current, None)
            }
            (None, Some(0)) => (ListAt::Current, None),
            (None, Some(rv)) => {
                self.wait_for_revision(rv).await?;
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
        let outcome = self
            .state
            .cache
            .list_resource(
                &self.resource_prefix(),
                &self.collection_prefix(),
                at,
                start_after.as_deref(),
                limit,
                filter.select(&|o| filter.matches(o)),
            )
            .await?;
        let snapshot = match outcome {
            SnapshotOutcome::Listed(s) => s,
            SnapshotOutcome::Expired { .. } if opts.continue_token.is_some() => {
                // The inconsistent continuation: resume after the same key against current data.
                let token = ContinueToken {
                    rv: self.state.cache.revision(),
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
        let mut metadata = json!({ "resourceVersion": snapshot.revision.to_string() });
        if let Some(last) = snapshot.more_after {
            metadata["continue"] = json!(ContinueToken {
                rv: snapshot.revision,
                start: last
            }
            .encode());
            // Counted only without selectors, as upstream's etcd store does (its count would
            // include objects the selectors leave out).
            if let Some(n) = snapshot.remaining.filter(|_| filter.is_everything()) {
                metadata["remainingItemCount"] = json!(n);
            }
        }
        Ok(ListPage {
            items: self.items_to_endpoint_version(snapshot.items).await?,
            metadata,
        })
    }

    /// Registers a watch of the resource as `opts` asks (events of other namespaces are the
    /// caller's to filter with [`collection_prefix`](Self::collection_prefix)).
    pub async fn watch(&self, opts: &ListOptions) -> Result<WatchOpened> {
        let send_initial = opts.send_initial_events == Some(true);
        let from = match opts.resource_version {
            None => {
                self.wait_consistent_if_cached().await?;
                WatchFrom::Snapshot
            }
            Some(0) => WatchFrom::Snapshot,
            Some(rv) if send_initial => {
                self.wait_for_revision(rv).await?;
                WatchFrom::Snapshot
            }
            Some(rv) => {
                // Decide 410 against a cache that has every acknowledged write.
                self.wait_consistent_if_cached().await?;
                WatchFrom::After(rv)
            }
        };
        let start = self
            .state
            .cache
            .watch_resource(&self.resource_prefix(), &self.collection_prefix(), from)
            .await?;
        Ok(WatchOpened { from, start })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(plural: &str, labels: Option<&str>, fields: Option<&str>) -> &'static str {
        let resource = crate::registry::builtin::find("", plural).expect("built in");
        let opts = ListOptions {
            label_selector: labels.map(String::from),
            field_selector: fields.map(String::from),
            ..Default::default()
        };
        let filter = Filter::new(resource, &opts).expect("valid selectors");
        match filter.select(&|_| true) {
            Select::All => "all",
            Select::OnView(_) => "view",
            Select::Object(_) => "object",
        }
    }

    #[test]
    fn selectors_read_views_where_the_kind_lists_what_its_field_labels_read() {
        assert_eq!(select("pods", None, None), "all");
        assert_eq!(
            select("pods", Some("app=a"), Some("spec.nodeName=n")),
            "view"
        );
        assert_eq!(select("pods", None, Some("status.podIP=10.0.0.1")), "view");
        assert_eq!(select("configmaps", Some("app"), None), "view");
        assert_eq!(select("configmaps", None, Some("metadata.name=c")), "view");
        // Secrets' `type` is read by a strategy that lists no paths: the whole object.
        assert_eq!(select("secrets", None, Some("type=Opaque")), "object");
        assert_eq!(
            select("secrets", Some("a"), Some("metadata.namespace=ns")),
            "view"
        );
    }
}
