//! A DaemonSet's ControllerRevisions as values (upstream `update.go`: `getPatch`, `Match`,
//! `snapshot`'s object, `maxRevision`, `dedupCurHistories`' choice, `cleanupHistory`'s choice).
//!
//! A revision stores the patch that restores the DaemonSet's template,
//! `{"spec":{"template":{…,"$patch":"replace"}}}` — exactly what `kubectl rollout undo` applies
//! and `kubectl rollout history` reads. It is named `<ds>-<hash>` where the hash is
//! `ComputeHash(template, collisionCount)`, carries the template's labels plus
//! `controller-revision-hash: <hash>` and the DaemonSet's annotations (so `kubernetes.io/change-cause`
//! shows in `rollout history`), and is controlled by the DaemonSet. A revision *matches* the
//! DaemonSet when its data equals the current patch (compared as JSON values).
//!
//! Pure; the requests are in `history` and `sync`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{json, Value};

use super::placement::CONTROLLER_REVISION_HASH_LABEL;
use crate::deployment::util::compute_hash;
use crate::history::sort_revisions;

/// `getPatch`: the strategic-merge patch that puts the DaemonSet's template back.
pub fn get_patch(ds: &DaemonSet) -> Value {
    let template = ds
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(&s.template).ok())
        .unwrap_or_else(|| json!({}));
    let mut template = match template {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    template.insert("$patch".into(), json!("replace"));
    json!({ "spec": { "template": Value::Object(template) } })
}

/// `Match`: the revision holds the DaemonSet's current template.
pub fn matches(ds: &DaemonSet, cr: &ControllerRevision) -> bool {
    cr.data.as_ref().is_some_and(|d| d.0 == get_patch(ds))
}

/// The current template's hash (`ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)`).
pub fn template_hash(ds: &DaemonSet) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    compute_hash(
        &template,
        ds.status.as_ref().and_then(|s| s.collision_count),
    )
}

/// The revision `snapshot` creates for the DaemonSet's current template.
pub fn new_revision(ds: &DaemonSet, revision: i64, owner: OwnerReference) -> ControllerRevision {
    let hash = template_hash(ds);
    let mut labels = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                ds.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: ds.metadata.annotations.clone(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(get_patch(ds))),
        revision,
    }
}

/// `dedupCurHistories`' choice: of several revisions matching the template, the one with the
/// highest revision (the last such on a tie) is kept.
pub fn keep_of_duplicates(current: &[ControllerRevision]) -> Option<&ControllerRevision> {
    current
        .iter()
        .fold(None, |best: Option<&ControllerRevision>, c| match best {
            Some(b) if c.revision < b.revision => Some(b),
            _ => Some(c),
        })
}

fn hash_label(cr: &ControllerRevision) -> Option<&str> {
    cr.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_LABEL)
        .map(String::as_str)
}

/// `cleanupHistory`'s choice: beyond `limit` old revisions, the oldest ones whose hash no live
/// pod carries, by ascending revision.
pub fn revisions_to_delete<'a>(
    old: &'a [ControllerRevision],
    limit: usize,
    live_hashes: &BTreeSet<String>,
) -> Vec<&'a ControllerRevision> {
    let to_kill = old.len().saturating_sub(limit);
    let mut sorted: Vec<&ControllerRevision> = old.iter().collect();
    sort_revisions(&mut sorted);
    sorted
        .into_iter()
        .filter(|r| hash_label(r).is_none_or(|h| !live_hashes.contains(h)))
        .take(to_kill)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::claim::controller_ref;
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

    fn ds(image: &str) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("agent".into()),
                namespace: Some("default".into()),
                annotations: Some(
                    [("kubernetes.io/change-cause".to_string(), image.to_string())].into(),
                ),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_string(), "agent".to_string())].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "c".into(),
                            image: Some(image.into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    fn rev(name: &str, revision: i64, hash: &str) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    [(CONTROLLER_REVISION_HASH_LABEL.to_string(), hash.to_string())].into(),
                ),
                ..Default::default()
            },
            data: None,
            revision,
        }
    }

    #[test]
    fn snapshot_matches_its_template_only() {
        let a = ds("img:1");
        let r = new_revision(&a, 3, controller_ref("apps/v1", "DaemonSet", "agent", "u"));
        let hash = template_hash(&a);
        assert_eq!(
            r.metadata.name.as_deref(),
            Some(format!("agent-{hash}").as_str())
        );
        assert_eq!(r.revision, 3);
        let labels = r.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("agent"));
        assert_eq!(labels.get(CONTROLLER_REVISION_HASH_LABEL), Some(&hash));
        assert_eq!(
            r.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/change-cause"))
                .map(String::as_str),
            Some("img:1")
        );
        let data = r.data.clone().map(|d| d.0).unwrap_or_default();
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        assert_eq!(
            data["spec"]["template"]["spec"]["containers"][0]["image"],
            "img:1"
        );
        assert!(matches(&a, &r));
        assert!(!matches(&ds("img:2"), &r));
        assert_ne!(template_hash(&ds("img:2")), hash);
    }

    #[test]
    fn cleanup_keeps_the_limit_and_live_revisions() {
        let old = vec![
            rev("r3", 3, "h3"),
            rev("r1", 1, "h1"),
            rev("r2", 2, "h2"),
            rev("r4", 4, "h4"),
        ];
        let live: BTreeSet<String> = ["h1".to_string()].into();
        let names = |v: Vec<&ControllerRevision>| -> Vec<String> {
            v.iter().filter_map(|r| r.metadata.name.clone()).collect()
        };
        assert_eq!(names(revisions_to_delete(&old, 2, &live)), ["r2", "r3"]);
        assert!(revisions_to_delete(&old, 4, &live).is_empty());
        assert_eq!(
            names(revisions_to_delete(&old, 0, &BTreeSet::new())),
            ["r1", "r2", "r3", "r4"]
        );
        assert_eq!(crate::history::next_revision(&old), 5);
        let dups = [rev("a", 5, "x"), rev("b", 7, "x"), rev("c", 7, "x")];
        assert_eq!(
            keep_of_duplicates(&dups).and_then(|r| r.metadata.name.as_deref()),
            Some("c")
        );
    }
}
