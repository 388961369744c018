//! Whether a PersistentVolume's `spec.nodeAffinity` admits a node (`CheckNodeAffinity` in
//! `pkg/volume/util`, over `component-helpers/scheduling/corev1/nodeaffinity`): the required
//! node selector's terms are ORed, a term's requirements ANDed, and a term with no requirements
//! matches no node. Operators `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` on labels;
//! `metadata.name` with `In`/`NotIn` on fields. A volume without node affinity admits every node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
};

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) =
                (value.and_then(int), values.first().and_then(|s| int(s)))
            else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

fn term_matches(t: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or(&[]);
    let fields = t.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, Some(name))
        })
}

/// Whether `selector` admits a node with these labels and name.
pub fn selector_matches(
    selector: &NodeSelector,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, labels, name))
}

/// `CheckNodeAffinity`: whether the volume may be used on `node`.
pub fn volume_admits_node(pv: &PersistentVolume, node: &Node) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&EMPTY);
    selector_matches(
        required,
        labels,
        node.metadata.name.as_deref().unwrap_or(""),
    )
}

/// The node affinity local-path gives a volume: `kubernetes.io/hostname In [node]`.
pub fn hostname_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "kubernetes.io/hostname".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_fields: None,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn hostname_affinity_admits_only_its_node() {
        let s = hostname_selector("node-1");
        let l = labels(&[("kubernetes.io/hostname", "node-1")]);
        assert!(selector_matches(&s, &l, "node-1"));
        let other = labels(&[("kubernetes.io/hostname", "node-2")]);
        assert!(!selector_matches(&s, &other, "node-2"));
    }

    #[test]
    fn operators_terms_and_fields() {
        let l = labels(&[("zone", "a"), ("cores", "8")]);
        let term = |reqs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        };
        let sel = |terms: Vec<NodeSelectorTerm>| NodeSelector {
            node_selector_terms: terms,
        };
        assert!(selector_matches(
            &sel(vec![term(vec![
                req("zone", "NotIn", &["b"]),
                req("cores", "Gt", &["4"])
            ])]),
            &l,
            "n"
        ));
        assert!(!selector_matches(
            &sel(vec![term(vec![req("cores", "Lt", &["4"])])]),
            &l,
            "n"
        ));
        assert!(!selector_matches(
            &sel(vec![term(vec![req("gpu", "Exists", &[])])]),
            &l,
            "n"
        ));
        assert!(selector_matches(
            &sel(vec![
                term(vec![req("gpu", "Exists", &[])]),
                term(vec![req("gpu", "DoesNotExist", &[])])
            ]),
            &l,
            "n"
        ));
        // An empty term matches nothing.
        assert!(!selector_matches(&sel(vec![term(vec![])]), &l, "n"));
        let by_name = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "In", &["n"])]),
        };
        assert!(selector_matches(&sel(vec![by_name]), &l, "n"));
    }
}
