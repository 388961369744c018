//! A pod's required node affinity (upstream `component-helpers/scheduling/corev1/nodeaffinity`):
//! its `nodeSelector` AND its
//! `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`, the rule both the
//! scheduler's NodeAffinity filter and the DaemonSet controller's placement check apply.
//!
//! * The node-selector terms are ORed; inside one term `matchExpressions` (on the node's labels:
//!   `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`) and `matchFields` (only
//!   `metadata.name`, `In` or `NotIn` with exactly one value) are ANDed. A term with neither
//!   matches nothing.
//! * A term that does not parse is skipped, as upstream's lazy-error selector does: the pod then
//!   fits a node only through one of its valid terms (none valid: no node fits).
//!
//! Built once per pod ([`RequiredNodeAffinity::of`]) and matched against many nodes; pure.

use std::collections::BTreeMap;

use api::labels::{Operator, Requirement};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
};

use crate::cached_pod::CachedPod;

/// The only field `matchFields` may name (`metav1.ObjectNameField`).
pub const OBJECT_NAME_FIELD: &str = "metadata.name";

/// One parsed node-selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    labels: Vec<Requirement>,
    /// `(want_equal, name)` per `matchFields` requirement on `metadata.name`.
    names: Vec<(bool, String)>,
}

impl Term {
    fn matches(&self, node: &Node) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&EMPTY);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.labels.iter().all(|r| r.matches(labels))
            && self.names.iter().all(|(eq, n)| (n == name) == *eq)
    }
}

/// `nodeSelectorRequirementsAsSelector`: `None` when a requirement is invalid.
fn label_requirements(reqs: &[NodeSelectorRequirement]) -> Option<Vec<Requirement>> {
    reqs.iter()
        .map(|r| {
            let op = match r.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                "Gt" => Operator::GreaterThan,
                "Lt" => Operator::LessThan,
                _ => return None,
            };
            Requirement::new(&r.key, op, r.values.clone().unwrap_or_default()).ok()
        })
        .collect()
}

/// `nodeSelectorRequirementsAsFieldSelector`: `None` when a requirement is invalid.
fn field_requirements(reqs: &[NodeSelectorRequirement]) -> Option<Vec<(bool, String)>> {
    reqs.iter()
        .map(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            let eq = match r.operator.as_str() {
                "In" => true,
                "NotIn" => false,
                _ => return None,
            };
            match values {
                [v] if r.key == OBJECT_NAME_FIELD => Some((eq, v.clone())),
                _ => None,
            }
        })
        .collect()
}

fn parse_term(t: &NodeSelectorTerm) -> Option<Term> {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return None;
    }
    Some(Term {
        labels: label_requirements(exprs)?,
        names: field_requirements(fields)?,
    })
}

/// The required node affinity of one pod (`RequiredNodeAffinity`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequiredNodeAffinity {
    node_selector: BTreeMap<String, String>,
    /// `None`: no required terms (every node passes this part); `Some`: the valid terms.
    terms: Option<Vec<Term>>,
}

impl RequiredNodeAffinity {
    /// `GetRequiredNodeAffinity` of a pod.
    pub fn of(pod: &CachedPod) -> Self {
        pod.spec
            .as_ref()
            .map(|s| Self::of_parts(s.node_selector.as_ref(), s.affinity.as_deref()))
            .unwrap_or_default()
    }

    /// The same from a pod spec (a template's).
    pub fn of_spec(spec: &PodSpec) -> Self {
        Self::of_parts(spec.node_selector.as_ref(), spec.affinity.as_ref())
    }

    /// The same from a spec's `nodeSelector` and `affinity`.
    fn of_parts(
        node_selector: Option<&BTreeMap<String, String>>,
        affinity: Option<&Affinity>,
    ) -> Self {
        let required = affinity
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        Self {
            node_selector: node_selector.cloned().unwrap_or_default(),
            terms: required.map(|r| {
                r.node_selector_terms
                    .iter()
                    .filter_map(parse_term)
                    .collect()
            }),
        }
    }

    /// `Match`: the node's labels satisfy the nodeSelector and, if there are required terms, one
    /// of them matches the node.
    pub fn matches(&self, node: &Node) -> bool {
        let labels = node.metadata.labels.as_ref();
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        selector_ok
            && self
                .terms
                .as_ref()
                .is_none_or(|ts| ts.iter().any(|t| t.matches(node)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
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
            ..Default::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn spec(terms: Vec<NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn match_fields_pin_a_node_by_name() {
        let a = RequiredNodeAffinity::of_spec(&spec(vec![NodeSelectorTerm {
            match_fields: Some(vec![req(OBJECT_NAME_FIELD, "In", &["n1"])]),
            ..Default::default()
        }]));
        assert!(a.matches(&node("n1", &[])));
        assert!(!a.matches(&node("n2", &[])));
        let not = RequiredNodeAffinity::of_spec(&spec(vec![NodeSelectorTerm {
            match_fields: Some(vec![req(OBJECT_NAME_FIELD, "NotIn", &["n1"])]),
            ..Default::default()
        }]));
        assert!(!not.matches(&node("n1", &[])) && not.matches(&node("n2", &[])));
    }

    #[test]
    fn terms_are_ored_requirements_anded() {
        let a = RequiredNodeAffinity::of_spec(&spec(vec![
            NodeSelectorTerm {
                match_expressions: Some(vec![
                    req("disk", "In", &["ssd"]),
                    req("cores", "Gt", &["4"]),
                ]),
                ..Default::default()
            },
            NodeSelectorTerm {
                match_expressions: Some(vec![req("gpu", "Exists", &[])]),
                ..Default::default()
            },
        ]));
        assert!(a.matches(&node("n", &[("disk", "ssd"), ("cores", "8")])));
        assert!(!a.matches(&node("n", &[("disk", "ssd"), ("cores", "2")])));
        assert!(a.matches(&node("n", &[("gpu", "")])));
        assert!(!a.matches(&node("n", &[])));
    }

    #[test]
    fn empty_or_invalid_terms_match_nothing_and_node_selector_is_anded() {
        let empty = RequiredNodeAffinity::of_spec(&spec(vec![NodeSelectorTerm::default()]));
        assert!(!empty.matches(&node("n", &[])));
        let bad = RequiredNodeAffinity::of_spec(&spec(vec![NodeSelectorTerm {
            match_fields: Some(vec![req("metadata.uid", "In", &["x"])]),
            ..Default::default()
        }]));
        assert!(!bad.matches(&node("n", &[])));
        let mut s = spec(vec![NodeSelectorTerm {
            match_fields: Some(vec![req(OBJECT_NAME_FIELD, "In", &["n"])]),
            ..Default::default()
        }]);
        s.node_selector = Some([("zone".to_string(), "a".to_string())].into());
        let both = RequiredNodeAffinity::of_spec(&s);
        assert!(both.matches(&node("n", &[("zone", "a")])));
        assert!(!both.matches(&node("n", &[("zone", "b")])));
        assert!(RequiredNodeAffinity::default().matches(&node("n", &[])));
    }
}
