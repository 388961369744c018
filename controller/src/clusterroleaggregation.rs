//! The ClusterRole aggregation controller (`clusterrole-aggregation-controller`, alias
//! `clusterrole-aggregation`; upstream `pkg/controller/clusterroleaggregation`, 1.33).
//!
//! A ClusterRole with an `aggregationRule` gets as its `rules` the union of the rules of the
//! ClusterRoles its `clusterRoleSelectors` select, in upstream's order: selector by selector, the
//! selected roles sorted by name (the role itself skipped), each rule kept once at its first
//! occurrence ([`aggregated_rules`]). Any ClusterRole event queues every aggregating role (their
//! selectors may select the changed one); a sync that computes rules different from the stored
//! ones writes them with server-side apply (field manager `clusterrole-aggregation-controller`,
//! forced), as upstream. Nested aggregation (`admin` selects `edit`, which selects `view`)
//! settles as each write triggers the next round. An invalid selector fails the sync, which is
//! retried with back-off.

use std::sync::Arc;

use api::labels::{from_label_selector, SelectorError};
use client::{
    Action, Client, DeletedObject, HandlerRegistration, Lister, Patch, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{Error, Result};

/// The field manager of the controller's applies.
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules `role` aggregates from `all` (the cluster's ClusterRoles), or `None` if it has no
/// `aggregationRule`.
pub fn aggregated_rules(
    role: &ClusterRole,
    all: &[Arc<ClusterRole>],
) -> Result<Option<Vec<PolicyRule>>, SelectorError> {
    let Some(rule) = role.aggregation_rule.as_ref() else {
        return Ok(None);
    };
    let mut out: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        let sel = from_label_selector(selector)?;
        let mut selected: Vec<&ClusterRole> = all
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| sel.matches(r.metadata.labels.as_ref()))
            .filter(|r| r.metadata.name != role.metadata.name)
            .collect();
        selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for r in selected {
            for rule in r.rules.iter().flatten() {
                if !out.iter().any(|have| same_rule(have, rule)) {
                    out.push(rule.clone());
                }
            }
        }
    }
    Ok(Some(out))
}

/// `equality.Semantic.DeepEqual` of two rules: an absent list equals an empty one.
fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    fn list(v: &Option<Vec<String>>) -> &[String] {
        v.as_deref().unwrap_or(&[])
    }
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_rule(x, y))
}

struct Inner {
    client: Client,
    roles: Lister<ClusterRole>,
    queue: RateLimitingQueue<String>,
}

/// The ClusterRole aggregation controller.
pub struct ClusterRoleAggregationController {
    inner: Arc<Inner>,
    registration: HandlerRegistration,
}

impl ClusterRoleAggregationController {
    /// Build on the shared ClusterRole informer.
    pub fn new(client: Client, roles: SharedIndexInformer<ClusterRole>) -> Self {
        let inner = Arc::new(Inner {
            client,
            roles: roles.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("ClusterRoleAggregator"),
        });
        let registration = roles.add_event_handler(Handler(inner.clone()));
        Self {
            inner,
            registration,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the cache, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        Runner::new("clusterrole_aggregation")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[&self.registration],
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move { inner.sync(&key).await.map(|()| Action::AwaitChange) }
                },
            )
            .await;
    }
}

impl Inner {
    /// `syncClusterRole`.
    async fn sync(&self, name: &str) -> Result<()> {
        let Some(role) = self.roles.get(name) else {
            return Ok(());
        };
        let all = self.roles.list(&api::labels::Selector::everything());
        let Some(rules) = aggregated_rules(&role, &all)? else {
            return Ok(());
        };
        if same_rules(&rules, role.rules.as_deref().unwrap_or(&[])) {
            return Ok(());
        }
        tracing::info!(clusterrole = name, rules = rules.len(), "aggregating rules");
        let body = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        });
        let patch = Patch::Apply {
            body,
            field_manager: FIELD_MANAGER.into(),
            force: true,
        };
        match self
            .client
            .api::<ClusterRole>(None)
            .patch(name, &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("apply aggregated clusterrole rules", e)),
        }
    }

    /// `enqueue`: every aggregating role.
    fn enqueue_all(&self) {
        for r in self.roles.list(&api::labels::Selector::everything()) {
            if r.aggregation_rule.is_some() {
                if let Some(n) = r.metadata.name.clone() {
                    self.queue.add(n);
                }
            }
        }
    }
}

struct Handler(Arc<Inner>);

impl ResourceEventHandler<ClusterRole> for Handler {
    fn on_add(&self, _obj: &Arc<ClusterRole>, _in_initial_list: bool) {
        self.0.enqueue_all();
    }

    fn on_update(&self, _old: &Arc<ClusterRole>, _new: &Arc<ClusterRole>) {
        self.0.enqueue_all();
    }

    fn on_delete(&self, _obj: DeletedObject<ClusterRole>) {
        self.0.enqueue_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn rule(verb: &str, resource: &str) -> PolicyRule {
        PolicyRule {
            verbs: vec![verb.into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.into()]),
            ..Default::default()
        }
    }

    fn role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> Arc<ClusterRole> {
        Arc::new(ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        })
    }

    fn aggregating(name: &str, selectors: &[(&str, &str)]) -> ClusterRole {
        let mut r = (*role(name, &[], vec![])).clone();
        r.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(
                selectors
                    .iter()
                    .map(|(k, v)| LabelSelector {
                        match_labels: Some([(k.to_string(), v.to_string())].into()),
                        match_expressions: None,
                    })
                    .collect(),
            ),
        });
        r
    }

    #[test]
    fn union_in_selector_then_name_order_without_duplicates() {
        // As upstream's table: roles sorted by name per selector, each rule once.
        let all = vec![
            role(
                "zz",
                &[("a", "true")],
                vec![rule("get", "pods"), rule("list", "pods")],
            ),
            role("aa", &[("a", "true")], vec![rule("get", "pods")]),
            role(
                "mm",
                &[("b", "true")],
                vec![rule("watch", "pods"), rule("list", "pods")],
            ),
            role("other", &[], vec![rule("delete", "pods")]),
        ];
        let agg = aggregating("agg", &[("b", "true"), ("a", "true")]);
        let got = aggregated_rules(&agg, &all)
            .ok()
            .flatten()
            .unwrap_or_default();
        assert_eq!(
            got,
            vec![
                rule("watch", "pods"),
                rule("list", "pods"),
                rule("get", "pods")
            ]
        );
    }

    #[test]
    fn no_rule_no_aggregation_and_self_is_skipped() {
        let plain = role("plain", &[("a", "true")], vec![rule("get", "pods")]);
        assert_eq!(
            aggregated_rules(&plain, std::slice::from_ref(&plain)),
            Ok(None)
        );
        let mut me = aggregating("me", &[("a", "true")]);
        me.metadata.labels = Some([("a".to_string(), "true".to_string())].into());
        me.rules = Some(vec![rule("escalate", "roles")]);
        let all = vec![Arc::new(me.clone()), plain];
        assert_eq!(
            aggregated_rules(&me, &all),
            Ok(Some(vec![rule("get", "pods")]))
        );
        // Nothing selected: empty rules (an aggregated role loses what it had).
        let lonely = aggregating("lonely", &[("nobody", "true")]);
        assert_eq!(aggregated_rules(&lonely, &all), Ok(Some(vec![])));
    }

    #[test]
    fn absent_and_empty_lists_are_the_same_rule() {
        let mut a = rule("get", "pods");
        a.resource_names = None;
        let mut b = rule("get", "pods");
        b.resource_names = Some(vec![]);
        assert!(same_rule(&a, &b));
        assert!(!same_rule(&a, &rule("list", "pods")));
    }
}
