//! The admission plugins of PersistentVolumeClaims, as kube-apiserver 1.33 runs them:
//!
//! - **DefaultStorageClass** (`plugin/pkg/admission/storage/storageclass/setdefault`): a claim
//!   created without a class (neither `spec.storageClassName` nor the beta annotation
//!   `volume.beta.kubernetes.io/storage-class`; an explicit `""` counts as a class) gets the default
//!   StorageClass: among the classes annotated `storageclass.kubernetes.io/is-default-class: "true"`
//!   (or the beta annotation), the newest, ties to the first name (`GetDefaultClass`). No default
//!   class leaves the claim as it is (the binder and the RetroactiveDefaultStorageClass rule in
//!   `claim.rs` may set one later).
//! - **PersistentVolumeClaimResize** (`plugin/pkg/admission/storage/persistentvolume/resize`): an
//!   update of the main resource that grows `spec.resources.requests.storage` is refused unless the
//!   claim was Bound and its class (the same before and after) has `allowVolumeExpansion: true`,
//!   with upstream's messages.
//!
//! Both read StorageClasses through [`Objects`] (the watch cache, as upstream's listers); neither
//! writes anything but the claim being admitted.

use serde_json::Value;

use super::storage::{storage_class, STORAGE_CLASS_ANNOTATION};
use super::{Forbidden, Objects};

const GROUP: &str = "storage.k8s.io";
const CLASSES: &str = "storageclasses";

/// `GetDefaultClass`: the newest default class (ties to the first name), if any.
pub fn default_class_name(objects: &dyn Objects) -> Option<String> {
    let mut defaults: Vec<(Option<jiff::Timestamp>, String)> = objects
        .list(GROUP, CLASSES)
        .iter()
        .filter(|c| super::storageclass::is_default_class(c))
        .map(|c| {
            let created = api::meta::creation_timestamp(c).and_then(api::meta::parse_time);
            (created, api::meta::name(c).unwrap_or("").to_string())
        })
        .collect();
    defaults.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    defaults.into_iter().next().map(|(_, name)| name)
}

/// `PersistentVolumeClaimHasClass`: the beta annotation or a (possibly empty) `storageClassName`.
fn has_class(claim: &Value) -> bool {
    api::meta::annotations(claim).contains_key(STORAGE_CLASS_ANNOTATION)
        || claim
            .pointer("/spec/storageClassName")
            .is_some_and(|c| !c.is_null())
}

/// DefaultStorageClass, on a create.
pub fn set_default_class(claim: &mut Value, objects: &dyn Objects) {
    if has_class(claim) {
        return;
    }
    let Some(class) = default_class_name(objects) else {
        return;
    };
    if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("storageClassName".into(), Value::from(class));
    }
}

/// PersistentVolumeClaimResize, on an update of the main resource.
pub fn validate_resize(new: &Value, old: &Value, objects: &dyn Objects) -> Result<(), Forbidden> {
    if super::claim::storage_request(new) <= super::claim::storage_request(old) {
        return Ok(());
    }
    if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err(Forbidden(
            "Only bound persistent volume claims can be expanded".into(),
        ));
    }
    let (class, old_class) = (storage_class(new), storage_class(old));
    let allowed = !class.is_empty()
        && class == old_class
        && objects
            .get(GROUP, CLASSES, None, &class)
            .and_then(|sc| sc.get("allowVolumeExpansion").and_then(Value::as_bool))
            .unwrap_or(false);
    if !allowed {
        return Err(Forbidden(
            "only dynamically provisioned pvc can be resized and the storageclass that provisions \
             the pvc must support resize"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    struct Classes(Vec<Value>);

    impl Objects for Classes {
        fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
            assert_eq!((group, plural), (GROUP, CLASSES));
            self.0.iter().cloned().map(Arc::new).collect()
        }
        fn get(&self, _: &str, _: &str, _: Option<&str>, name: &str) -> Option<Arc<Value>> {
            let found = self.0.iter().find(|c| api::meta::name(c) == Some(name));
            found.cloned().map(Arc::new)
        }
    }

    fn class(name: &str, created: &str, default: Option<&str>, expand: bool) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created},
            "provisioner": "rancher.io/local-path", "allowVolumeExpansion": expand});
        if let Some(a) = default {
            c["metadata"]["annotations"] = json!({a: "true"});
        }
        c
    }

    fn claim(spec: Value) -> Value {
        json!({"metadata": {"name": "data", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn default_class_is_the_newest_default_then_first_name() {
        let classes = Classes(vec![
            class(
                "old",
                "2026-01-01T00:00:00Z",
                Some("storageclass.kubernetes.io/is-default-class"),
                false,
            ),
            class("newest", "2026-06-01T00:00:00Z", None, false),
            class(
                "z",
                "2026-03-01T00:00:00Z",
                Some("storageclass.kubernetes.io/is-default-class"),
                false,
            ),
            class(
                "b",
                "2026-03-01T00:00:00Z",
                Some("storageclass.beta.kubernetes.io/is-default-class"),
                false,
            ),
        ]);
        let mut c = claim(json!({"accessModes": ["ReadWriteOnce"]}));
        set_default_class(&mut c, &classes);
        assert_eq!(c["spec"]["storageClassName"], "b");
    }

    #[test]
    fn a_claim_naming_a_class_even_empty_keeps_it() {
        let classes = Classes(vec![class(
            "standard",
            "2026-01-01T00:00:00Z",
            Some("storageclass.kubernetes.io/is-default-class"),
            false,
        )]);
        let mut empty = claim(json!({"storageClassName": ""}));
        set_default_class(&mut empty, &classes);
        assert_eq!(empty["spec"]["storageClassName"], "");
        let mut annotated = claim(json!({}));
        annotated["metadata"]["annotations"] = json!({STORAGE_CLASS_ANNOTATION: "fast"});
        set_default_class(&mut annotated, &classes);
        assert!(annotated["spec"].get("storageClassName").is_none());
        let mut none = claim(json!({}));
        set_default_class(&mut none, &Classes(vec![]));
        assert!(none["spec"].get("storageClassName").is_none());
    }

    fn sized(class: &str, size: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "data"},
            "spec": {"storageClassName": class, "resources": {"requests": {"storage": size}}},
            "status": {"phase": phase}})
    }

    #[test]
    fn resize_needs_a_bound_claim_and_an_expandable_class() {
        let classes = Classes(vec![
            class("grow", "2026-01-01T00:00:00Z", None, true),
            class("fixed", "2026-01-01T00:00:00Z", None, false),
        ]);
        let grow = sized("grow", "2Gi", "Bound");
        assert!(validate_resize(&grow, &sized("grow", "1Gi", "Bound"), &classes).is_ok());
        assert_eq!(
            validate_resize(&grow, &sized("grow", "1Gi", "Pending"), &classes),
            Err(Forbidden(
                "Only bound persistent volume claims can be expanded".into()
            ))
        );
        let refused = validate_resize(
            &sized("fixed", "2Gi", "Bound"),
            &sized("fixed", "1Gi", "Bound"),
            &classes,
        );
        assert!(refused.is_err_and(|Forbidden(m)| m.ends_with("must support resize")));
        assert!(validate_resize(
            &sized("missing", "2Gi", "Bound"),
            &sized("missing", "1Gi", "Bound"),
            &classes
        )
        .is_err());
        // Not growing: nothing to check (shrinking is validation's business).
        assert!(validate_resize(
            &sized("fixed", "1Gi", "Pending"),
            &sized("fixed", "1Gi", "Pending"),
            &classes
        )
        .is_ok());
    }
}
