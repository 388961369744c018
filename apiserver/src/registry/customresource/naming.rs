//! The names a CRD may serve under (upstream's `controller/status` naming controller), as a
//! decision over values: the CRD and the accepted names of the other CRDs of its group.
//!
//! A requested name is accepted when it is already this CRD's accepted name or no other CRD of
//! the group has accepted it (plural, singular and short names share one space; kinds and list
//! kinds another). Every conflict is reported in `NamesAccepted=False` with upstream's reason
//! (`PluralConflict`, `SingularConflict`, `ShortNamesConflict`, `KindConflict`,
//! `ListKindConflict`) and message (`"widgets" is already in use`); the names that do not conflict
//! are accepted anyway, so the status is the best match possible. `Established` stays as it was
//! once true; otherwise it is `False` (`NotAccepted`, or `Installing` once the names are accepted).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

/// What the naming step decided for one CRD.
#[derive(Debug, Clone, PartialEq)]
pub struct Naming {
    /// The new `status.acceptedNames`.
    pub accepted: Value,
    /// The `NamesAccepted` condition (without `lastTransitionTime`).
    pub names_accepted: Value,
    /// The `Established` condition (without `lastTransitionTime`).
    pub established: Value,
}

fn text<'a>(names: &'a Map<String, Value>, key: &str) -> &'a str {
    names.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list(names: &Map<String, Value>, key: &str) -> Vec<String> {
    names
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `names` in a comparable form (absent lists are empty lists).
fn normal(names: &Map<String, Value>) -> Value {
    json!({
        "plural": text(names, "plural"),
        "singular": text(names, "singular"),
        "shortNames": list(names, "shortNames"),
        "kind": text(names, "kind"),
        "listKind": text(names, "listKind"),
        "categories": list(names, "categories"),
    })
}

/// Whether the CRD's requested names are exactly its accepted ones (nothing to decide).
pub fn settled(crd: &Value) -> bool {
    let spec = crd
        .pointer("/spec/names")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    normal(&spec) == normal(&super::super::strategy::accepted_names(crd))
}

fn in_use(requested: &str, accepted: &str, used: &BTreeSet<String>) -> Option<String> {
    (requested != accepted && used.contains(requested))
        .then(|| format!("{requested:?} is already in use"))
}

/// The naming decision for `crd` given the other CRDs of its group (`others`, itself excluded).
pub fn decide(crd: &Value, others: &[&Value]) -> Naming {
    let mut resources = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for other in others {
        let names = super::super::strategy::accepted_names(other);
        resources.insert(text(&names, "plural").to_string());
        resources.insert(text(&names, "singular").to_string());
        resources.extend(list(&names, "shortNames"));
        kinds.insert(text(&names, "kind").to_string());
        kinds.insert(text(&names, "listKind").to_string());
    }
    let requested = crd
        .pointer("/spec/names")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let accepted = super::super::strategy::accepted_names(crd);
    let mut new = accepted.clone();
    let mut conflict: Option<(&str, String)> = None;
    for (key, reason, used) in [
        ("plural", "PluralConflict", &resources),
        ("singular", "SingularConflict", &resources),
    ] {
        match in_use(text(&requested, key), text(&accepted, key), used) {
            Some(msg) => conflict = Some((reason, msg)),
            None => {
                new.insert(key.into(), Value::from(text(&requested, key)));
            }
        }
    }
    let (want_short, have_short) = (
        list(&requested, "shortNames"),
        list(&accepted, "shortNames"),
    );
    if want_short != have_short {
        let own = [text(&accepted, "plural"), text(&accepted, "singular")];
        let errs: Vec<String> = want_short
            .iter()
            .filter(|s| !have_short.contains(s) && !own.contains(&s.as_str()))
            .filter_map(|s| in_use(s, "", &resources))
            .collect();
        if errs.is_empty() {
            new.insert("shortNames".into(), json!(want_short));
        } else {
            // utilerrors.NewAggregate: one error as is, several as `[a, b]`.
            let msg = if errs.len() == 1 {
                errs[0].clone()
            } else {
                format!("[{}]", errs.join(", "))
            };
            conflict = Some(("ShortNamesConflict", msg));
        }
    }
    for (key, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        match in_use(text(&requested, key), text(&accepted, key), &kinds) {
            Some(msg) => conflict = Some((reason, msg)),
            None => {
                new.insert(key.into(), Value::from(text(&requested, key)));
            }
        }
    }
    match requested.get("categories") {
        Some(c) => new.insert("categories".into(), c.clone()),
        None => new.remove("categories"),
    };
    let names_accepted = match &conflict {
        Some((reason, message)) => {
            json!({"type": "NamesAccepted", "status": "False", "reason": reason, "message": message})
        }
        None => {
            json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"})
        }
    };
    let old_established = super::super::strategy::condition(crd, "Established").cloned();
    let established = match old_established {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => c,
        _ if conflict.is_none() => json!({"type": "Established", "status": "False",
            "reason": "Installing", "message": "the initial names have been accepted"}),
        Some(c) => c,
        None => json!({"type": "Established", "status": "False",
            "reason": "NotAccepted", "message": "not all names are accepted"}),
    };
    Naming {
        accepted: Value::Object(new),
        names_accepted,
        established,
    }
}

/// The `Established=True` condition the establishing controller sets.
pub fn established() -> Value {
    json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
           "message": "the initial names have been accepted"})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(plural: &str, kind: &str, accepted: Option<(&str, &str)>) -> Value {
        let mut c = json!({"spec": {"group": "example.com", "names": {
            "plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
            "listKind": format!("{kind}List"), "shortNames": ["w"]}}});
        if let Some((p, k)) = accepted {
            c["status"] = json!({"acceptedNames": {"plural": p, "singular": p.trim_end_matches('s'),
                "kind": k, "listKind": format!("{k}List"), "shortNames": ["w"]}});
        }
        c
    }

    #[test]
    fn fresh_names_are_accepted_and_established_waits_for_installing() {
        let n = decide(&crd("widgets", "Widget", None), &[]);
        assert_eq!(n.names_accepted["status"], "True");
        assert_eq!(n.names_accepted["reason"], "NoConflicts");
        assert_eq!(n.accepted["plural"], "widgets");
        assert_eq!(n.accepted["shortNames"], json!(["w"]));
        assert_eq!(n.established["reason"], "Installing");
    }

    #[test]
    fn a_plural_taken_in_the_group_is_a_conflict_and_other_names_still_count() {
        let first = crd("widgets", "Widget", Some(("widgets", "Widget")));
        let second = crd("widgets", "Gadget", None);
        let n = decide(&second, &[&first]);
        assert_eq!(n.names_accepted["status"], "False");
        // The last conflict found wins, as upstream (short names after plural and singular).
        assert_eq!(n.names_accepted["reason"], "ShortNamesConflict");
        assert_eq!(n.names_accepted["message"], "\"w\" is already in use");
        assert_eq!(n.accepted.get("plural"), None);
        assert_eq!(n.accepted["kind"], "Gadget");
        assert_eq!(n.established["reason"], "NotAccepted");
        let mut no_short = second.clone();
        no_short["spec"]["names"]["shortNames"] = json!([]);
        let n = decide(&no_short, &[&first]);
        assert_eq!(n.names_accepted["reason"], "SingularConflict");
        assert_eq!(n.names_accepted["message"], "\"widget\" is already in use");
    }

    #[test]
    fn settled_names_need_no_decision() {
        assert!(settled(&crd(
            "widgets",
            "Widget",
            Some(("widgets", "Widget"))
        )));
        assert!(!settled(&crd("widgets", "Widget", None)));
    }
}
