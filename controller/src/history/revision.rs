//! ControllerRevisions as values (upstream `pkg/controller/history/controller_history.go`, the
//! pure half): naming, hashing, building a parent's revision, ordering and equality.
//!
//! A revision's identity is the FNV-1 (32 bit) hash of its data, plus the parent's
//! `collisionCount` when one is given, rendered with apimachinery's "safe" alphabet; the name is
//! `<parent>-<hash>` and the hash is also the `controller.kubernetes.io/hash` label. The bytes
//! hashed are the data serialized with every object's keys sorted, which is what Go's
//! `json.Marshal` of the `map[string]interface{}` patches upstream stores produces, so a given
//! value always hashes the same whatever order its maps were built in.
//!
//! Everything here is deterministic and free of I/O.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::Value;

/// Label carrying the hash of a revision's data (`ControllerRevisionHashLabel`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// Longest parent-name prefix of a revision name, so that `<prefix>-<hash>` fits in 253 bytes.
const MAX_PREFIX_LEN: usize = 223;

// k8s.io/apimachinery/pkg/util/rand `SafeEncodeString`: no vowels, no confusable digits.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to 223 bytes (on a character
/// boundary).
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(MAX_PREFIX_LEN);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &prefix[..end])
}

/// FNV-1, 32 bit (Go's `fnv.New32`, which `HashControllerRevision` uses; not FNV-1a).
fn fnv1_32(bytes: &[u8], mut h: u32) -> u32 {
    for b in bytes {
        h = h.wrapping_mul(16_777_619);
        h ^= u32::from(*b);
    }
    h
}

const FNV32_OFFSET: u32 = 2_166_136_261;

/// `rand.SafeEncodeString`: each byte mapped into the safe alphabet.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// A copy of `v` whose objects have their keys in sorted order (Go's map marshalling).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let by_key: BTreeMap<&String, &Value> = m.iter().collect();
            Value::Object(
                by_key
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The bytes of `data` that are hashed and compared: JSON with sorted keys.
pub fn data_bytes(data: &Value) -> Vec<u8> {
    serde_json::to_vec(&sorted(data)).unwrap_or_default()
}

/// `HashControllerRevision`: the hash of the revision's data and, if given, the collision count
/// (`probe`, hashed as its decimal digits).
pub fn hash_revision(revision: &ControllerRevision, probe: Option<i32>) -> String {
    let mut h = FNV32_OFFSET;
    if let Some(RawExtension(data)) = &revision.data {
        if !data.is_null() {
            h = fnv1_32(&data_bytes(data), h);
        }
    }
    if let Some(p) = probe {
        h = fnv1_32(p.to_string().as_bytes(), h);
    }
    safe_encode(&h.to_string())
}

/// `NewControllerRevision`: a revision of `parent` (named and labelled by its hash) carrying
/// `data` as revision number `revision`, controlled by `owner`, with the template's labels.
pub fn new_controller_revision(
    parent: &ObjectMeta,
    owner: OwnerReference,
    template_labels: Option<&BTreeMap<String, String>>,
    data: Value,
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let mut cr = ControllerRevision {
        metadata: ObjectMeta {
            namespace: parent.namespace.clone(),
            labels: Some(template_labels.cloned().unwrap_or_default()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    };
    let hash = hash_revision(&cr, collision_count);
    cr.metadata.name = Some(revision_name(
        parent.name.as_deref().unwrap_or_default(),
        &hash,
    ));
    if let Some(labels) = cr.metadata.labels.as_mut() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_string(), hash);
    }
    cr
}

/// The order of `SortControllerRevisions`: by revision number, then oldest first, then by name.
pub fn compare_revisions(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    let created = |r: &ControllerRevision| {
        r.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_nanosecond())
            .unwrap_or(0)
    };
    a.revision
        .cmp(&b.revision)
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `SortControllerRevisions` (stable).
pub fn sort_revisions<R: Borrow<ControllerRevision>>(revisions: &mut [R]) {
    revisions.sort_by(|a, b| compare_revisions(a.borrow(), b.borrow()));
}

/// The hash label read as upstream does (`strconv.ParseInt(…, 10, 32)`): only all-digit hashes
/// take part in the quick comparison.
fn numeric_hash(r: &ControllerRevision) -> Option<i32> {
    r.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_LABEL)?
        .parse()
        .ok()
}

/// `EqualRevision`: same data (semantically: key order does not matter); two differing numeric
/// hash labels decide early that they are not.
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    if let (Some(x), Some(y)) = (numeric_hash(a), numeric_hash(b)) {
        if x != y {
            return false;
        }
    }
    data_of(a) == data_of(b)
}

fn data_of(r: &ControllerRevision) -> Option<&Value> {
    r.data.as_ref().map(|d| &d.0).filter(|v| !v.is_null())
}

/// `FindEqualRevisions`: the revisions equal to `needle`, in their order.
pub fn find_equal_revisions<'a, R: Borrow<ControllerRevision>>(
    revisions: &'a [R],
    needle: &ControllerRevision,
) -> Vec<&'a R> {
    revisions
        .iter()
        .filter(|r| equal_revision((*r).borrow(), needle))
        .collect()
}

/// `nextRevision`: one more than the highest revision number (1 for an empty history).
pub fn next_revision<R: Borrow<ControllerRevision>>(revisions: &[R]) -> i64 {
    revisions
        .iter()
        .map(|r| r.borrow().revision)
        .max()
        .map_or(1, |m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::claim::controller_ref;
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn parent() -> ObjectMeta {
        ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("sts-1".into()),
            ..Default::default()
        }
    }

    fn rev(data: Value, revision: i64, collisions: Option<i32>) -> ControllerRevision {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        new_controller_revision(
            &parent(),
            controller_ref("apps/v1", "StatefulSet", "web", "sts-1"),
            Some(&labels),
            data,
            revision,
            collisions,
        )
    }

    #[test]
    fn fnv1_matches_the_reference_vectors() {
        // FNV-1 32-bit test vectors (Fowler/Noll/Vo): "", "a" and "abc".
        assert_eq!(fnv1_32(b"", FNV32_OFFSET), 0x811c_9dc5);
        assert_eq!(fnv1_32(b"a", FNV32_OFFSET), 0x050c_5d7e);
        assert_eq!(fnv1_32(b"abc", FNV32_OFFSET), 0x439c_2f4b);
    }

    #[test]
    fn names_are_parent_dash_hash_and_prefixes_are_cut() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        let name = revision_name(&long, "5d8f9c7b4");
        assert_eq!(name.len(), 223 + 1 + 9);
        assert!(name.ends_with("-5d8f9c7b4"));
    }

    #[test]
    fn a_new_revision_is_named_labelled_and_owned() {
        let r = rev(json!({"spec": {"template": {"a": 1}}}), 3, None);
        let hash = hash_revision(&r, None);
        assert_eq!(r.metadata.name.as_deref(), Some(&*format!("web-{hash}")));
        let labels = r.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[CONTROLLER_REVISION_HASH_LABEL], hash);
        assert_eq!(labels["app"], "web");
        assert_eq!(r.revision, 3);
        assert_eq!(r.metadata.namespace.as_deref(), Some("default"));
        let owner = &r.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("sts-1", Some(true))
        );
        assert!(hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
    }

    #[test]
    fn hash_follows_data_and_collision_count_not_key_order() {
        let a = rev(json!({"x": 1, "y": {"b": 2, "a": 1}}), 1, None);
        let b = rev(json!({"y": {"a": 1, "b": 2}, "x": 1}), 7, None);
        assert_eq!(hash_revision(&a, None), hash_revision(&b, None));
        assert_ne!(hash_revision(&a, None), hash_revision(&a, Some(0)));
        assert_ne!(hash_revision(&a, Some(0)), hash_revision(&a, Some(1)));
        let c = rev(json!({"x": 2, "y": {"a": 1, "b": 2}}), 1, None);
        assert_ne!(hash_revision(&a, None), hash_revision(&c, None));
        // The collision count renames the revision.
        assert_ne!(
            rev(json!({"x": 1}), 1, Some(0)).metadata.name,
            rev(json!({"x": 1}), 1, Some(1)).metadata.name
        );
    }

    #[test]
    fn equality_is_on_data_and_numeric_hashes_decide_early() {
        let a = rev(json!({"x": 1}), 1, None);
        let mut b = rev(json!({"x": 1}), 2, None);
        assert!(equal_revision(&a, &b));
        b.metadata.name = Some("renamed".into());
        assert!(equal_revision(&a, &b), "names do not matter");
        let c = rev(json!({"x": 2}), 1, None);
        assert!(!equal_revision(&a, &c));
        // Same data, but two different all-digit hash labels: not equal (as upstream).
        let mut d = a.clone();
        let mut e = a.clone();
        d.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(CONTROLLER_REVISION_HASH_LABEL.into(), "1".into());
        e.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(CONTROLLER_REVISION_HASH_LABEL.into(), "2".into());
        assert!(!equal_revision(&d, &e));
        let all = [a.clone(), c.clone(), b.clone()];
        let found = find_equal_revisions(&all, &a);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].metadata.name.as_deref(), Some("renamed"));
    }

    #[test]
    fn sorting_is_by_revision_then_age_then_name_and_next_is_max_plus_one() {
        let at = |r: &mut ControllerRevision, s: i64, name: &str| {
            r.metadata.creation_timestamp = Some(Time(Timestamp::from_second(s).unwrap()));
            r.metadata.name = Some(name.into());
        };
        let mut a = rev(json!({"a": 1}), 2, None);
        at(&mut a, 10, "a");
        let mut b = rev(json!({"b": 1}), 1, None);
        at(&mut b, 20, "b");
        let mut c = rev(json!({"c": 1}), 2, None);
        at(&mut c, 5, "c");
        let mut d = rev(json!({"d": 1}), 2, None);
        at(&mut d, 5, "b2");
        let mut all = vec![a, b, c, d];
        sort_revisions(&mut all);
        let names: Vec<_> = all
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["b", "b2", "c", "a"]);
        assert_eq!(next_revision(&all), 3);
        assert_eq!(next_revision::<ControllerRevision>(&[]), 1);
    }
}
