//! Tests of [`super`] (identity, storage, revisions).
#![allow(clippy::unwrap_used)]

use super::*;
use crate::cached_pod::CachedPod;
use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSetOrdinals, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A built pod as the cache would show it.
fn seen(p: &Pod) -> CachedPod {
    CachedPod::from(p.clone())
}

pub(crate) fn set(replicas: i32, image: &str) -> StatefulSet {
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    StatefulSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("set-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some("nginx".into()),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some(image.into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("www".into()),
                    labels: Some(BTreeMap::from([("tier".to_string(), "data".to_string())])),
                    ..Default::default()
                },
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn names_and_ordinals() {
    assert_eq!(parent_and_ordinal("web-0"), Some(("web", 0)));
    assert_eq!(parent_and_ordinal("my-web-12"), Some(("my-web", 12)));
    assert_eq!(parent_and_ordinal("web"), None);
    assert_eq!(parent_and_ordinal("web-x1"), None);
    assert_eq!(
        parent_and_ordinal("web-99999999999"),
        None,
        "not a 32-bit ordinal"
    );
    let mut s = set(3, "nginx:1");
    assert_eq!((start_ordinal(&s), end_ordinal(&s)), (0, 2));
    s.spec.as_mut().unwrap().ordinals = Some(StatefulSetOrdinals { start: Some(5) });
    assert_eq!((start_ordinal(&s), end_ordinal(&s)), (5, 7));
    let p = new_pod(&s, 6);
    assert!(in_ordinal_range(&seen(&p), &s));
    assert!(!in_ordinal_range(&seen(&new_pod(&s, 4)), &s));
    assert_eq!(claim_name(&s, "www", 6), "www-web-6");
    assert!(is_member_of(&s, &seen(&p)));
}

#[test]
fn a_new_pod_has_its_identity_storage_and_owner() {
    let s = set(3, "nginx:1");
    let p = new_pod(&s, 1);
    assert_eq!(p.metadata.name.as_deref(), Some("web-1"));
    let labels = p.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[POD_NAME_LABEL], "web-1");
    assert_eq!(labels[POD_INDEX_LABEL], "1");
    assert_eq!(labels["app"], "web");
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    let vols = spec.volumes.as_ref().unwrap();
    assert_eq!(vols[0].name, "www");
    assert_eq!(
        vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-1"
    );
    let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("StatefulSet", Some(true))
    );
    assert!(identity_matches(&s, &seen(&p)) && storage_matches(&s, &seen(&p)));

    let mut broken = p.clone();
    broken
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(POD_NAME_LABEL);
    broken.spec.as_mut().unwrap().volumes = None;
    assert!(!identity_matches(&s, &seen(&broken)) && !storage_matches(&s, &seen(&broken)));
    update_identity(&s, &mut broken);
    update_storage(&s, &mut broken);
    assert!(identity_matches(&s, &seen(&broken)) && storage_matches(&s, &seen(&broken)));
}

#[test]
fn claims_carry_the_selector_labels_over_their_own() {
    let s = set(1, "nginx:1");
    let claims = claims_for(&s, 0);
    assert_eq!(claims.len(), 1);
    let (t, c) = &claims[0];
    assert_eq!(t, "www");
    assert_eq!(c.metadata.name.as_deref(), Some("www-web-0"));
    assert_eq!(c.metadata.namespace.as_deref(), Some("default"));
    let l = c.metadata.labels.as_ref().unwrap();
    assert_eq!((l["app"].as_str(), l["tier"].as_str()), ("web", "data"));
}

#[test]
fn revisions_round_trip_the_template() {
    let s1 = set(3, "nginx:1");
    let s2 = set(3, "nginx:2");
    let r1 = new_revision(&s1, 1, 0);
    let r2 = new_revision(&s2, 2, 0);
    assert_ne!(r1.metadata.name, r2.metadata.name);
    assert!(r1.metadata.name.as_deref().unwrap().starts_with("web-"));
    assert_eq!(
        r1.data.as_ref().unwrap().0["spec"]["template"]["$patch"],
        "replace"
    );
    assert!(history::equal_revision(&r1, &new_revision(&s1, 7, 0)));
    let back = apply_revision(&s2, &r1).unwrap();
    assert_eq!(back.spec.unwrap().template, s1.spec.unwrap().template);
}

#[test]
fn versioned_pods_follow_the_partition() {
    let mut current = set(4, "nginx:1");
    current.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(2),
            max_unavailable: None,
        }),
    });
    let update = set(4, "nginx:2");
    let p1 = new_versioned_pod(&current, &update, "web-a", "web-b", 1);
    let p2 = new_versioned_pod(&current, &update, "web-a", "web-b", 2);
    assert_eq!(pod_revision(&seen(&p1)), "web-a");
    assert_eq!(pod_revision(&seen(&p2)), "web-b");
    let image = |p: &CachedPod| {
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(
        (image(&seen(&p1)), image(&seen(&p2))),
        ("nginx:1".to_string(), "nginx:2".to_string())
    );
}
