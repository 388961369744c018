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
use crate::watch_cache::{
    ListAt, Listed, Select, SelectorView, SnapshotOutcome, ViewFilter, WatchFrom, WatchStart,
};

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
        // Old names of field labels, as their current ones.
        let fields = api::fields::Selector::from_requirements(
            fields
                .requirements()
                .iter()
                .map(|r| api::fields::FieldRequirement {
                    field: match resource.strategy.field_label_alias(&r.field) {
                        Some(current) => current.to_string(),
                        None => r.field.clone(),
                    },
                    ..r.clone()
                })
                .collect(),
        );
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
    /// namespace, and the field labels the kind's views keep).
    pub fn select<'a>(&'a self, matches: &'a (dyn Fn(&Value) -> bool + Sync)) -> Select<'a> {
        if self.is_everything() {
            return Select::All;
        }
        let kept = self.resource.strategy.field_labels().unwrap_or_default();
        let in_view = |field: &str| {
            matches!(field, "metadata.name" | "metadata.namespace") || kept.contains(&field)
        };
        if self.fields.requirements().iter().all(|r| in_view(&r.field)) {
            Select::OnView(self)
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

/// Told on views only when [`Filter::select`] says so: every field it reads is in the view.
impl ViewFilter for Filter {
    fn on_view(&self, view: &SelectorView) -> bool {
        (self.labels.is_empty() || self.labels.matches_with(|k| view.label(k)))
            && (self.fields.is_empty() || self.fields.matches_with(|f| view.field(f)))
    }

    fn on_object(&self, obj: &Value) -> bool {
        self.matches(obj)
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
        // An old name, read as the field label it stands for.
        assert_eq!(select("pods", None, Some("spec.host=n")), "view");
        assert_eq!(select("configmaps", Some("app"), None), "view");
        assert_eq!(select("configmaps", None, Some("metadata.name=c")), "view");
        // Secrets' `type` is a field label their views do not keep: the whole object.
        assert_eq!(select("secrets", None, Some("type=Opaque")), "object");
        assert_eq!(
            select("secrets", Some("a"), Some("metadata.namespace=ns")),
            "view"
        );
    }

    /// A filter tells the same on an object and on its view, for every selector that goes to
    /// views.
    #[test]
    fn a_filter_tells_the_same_on_a_view_as_on_its_object() {
        use crate::watch_cache::StorageDefaults;
        let registry = crate::registry::ResourceRegistry::new();
        let ips = Arc::new(crate::registry::ClusterIpAllocator::new());
        crate::registry::builtin::register(&registry, &ips).unwrap();
        let resource = crate::registry::builtin::find("", "pods").expect("built in");
        let pod = |name: &str, labels: Value, node: Option<&str>, phase: &str| {
            let mut p = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ns", "labels": labels},
                "spec": {"restartPolicy": "Never", "hostNetwork": name == "c",
                         "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase, "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
            });
            if let Some(node) = node {
                p["spec"]["nodeName"] = json!(node);
            }
            p
        };
        let pods = [
            pod(
                "a",
                json!({"app": "web", "tier": "1"}),
                Some("n1"),
                "Running",
            ),
            pod("b", json!({"app": "db"}), None, "Pending"),
            pod("c", json!({}), Some("n2"), "Succeeded"),
        ];
        let labels = [
            None,
            Some("app=web"),
            Some("app!=web"),
            Some("app in (web,db)"),
            Some("app notin (web)"),
            Some("tier"),
            Some("!tier"),
            Some("tier>0"),
            Some("tier<1"),
        ];
        let fields = [
            None,
            Some("spec.nodeName=n1"),
            Some("spec.host=n1"),
            Some("spec.nodeName="),
            Some("spec.nodeName!="),
            Some("metadata.name=b,metadata.namespace=ns"),
            Some("status.phase!=Running,spec.restartPolicy=Never"),
            Some("spec.hostNetwork=true"),
            Some("status.podIP=10.0.0.1"),
            Some("status.podIPs!="),
            Some("spec.schedulerName="),
            Some("spec.serviceAccountName=x"),
            Some("status.nominatedNodeName="),
        ];
        let mut told = 0;
        for l in labels {
            for f in fields {
                let opts = ListOptions {
                    label_selector: l.map(String::from),
                    field_selector: f.map(String::from),
                    ..Default::default()
                };
                let filter = Filter::new(resource.clone(), &opts).expect("valid selectors");
                let on_view = matches!(filter.select(&|_| true), Select::OnView(_));
                assert!(on_view || filter.is_everything(), "{l:?} {f:?}");
                for p in &pods {
                    let name = p["metadata"]["name"].as_str().unwrap();
                    let key = format!("/registry/pods/ns/{name}");
                    let view = registry.selector_view(&key, p).expect("a view");
                    let whole = filter.on_object(p);
                    assert_eq!(filter.on_view(&view), whole, "{name}: {l:?} {f:?}");
                    told += usize::from(whole);
                }
            }
        }
        assert!(told > 0 && told < labels.len() * fields.len() * pods.len());
    }
}
