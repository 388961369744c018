//! Server-side apply and `managedFields` bookkeeping.
//!
//! Field sets are the `FieldsV1` trees Kubernetes stores (`f:<field>`, `k:{<merge key>}` for keyed
//! list elements with `.` marking the element itself, `v:<value>` for set elements), handled here as
//! sets of leaf paths. Apply:
//! 1. computes the applied set from the applied configuration (schema from [`schema`](super::schema));
//! 2. finds conflicts: leaves owned by another manager whose live value differs from the applied one
//!    (409 unless `force`, which moves ownership to the applier);
//! 3. merges the applied configuration into the live object (strategic-merge semantics);
//! 4. removes fields this manager applied before and no longer applies, unless another manager owns them;
//! 5. records the manager's `Apply` entry (`apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`).
//!
//! Simplifications against structured-merge-diff: keyed-list keys are the single patch merge key
//! (`k:{"containerPort":80}` rather than `containerPort`+`protocol`); maps carry no `.` entries.

use super::schema::{key_segment, same_key, ListKind, PatchKind};
use super::strategic::merge_map;
use super::{PatchError, MAX_DEPTH};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// A leaf path of a field set: `["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]`.
pub type FieldPath = Vec<String>;
pub type FieldSet = BTreeSet<FieldPath>;

/// Metadata fields the system owns (never in a field set).
const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// The field set of `obj` (`status` excluded unless `with_status`, `spec`-side excluded when `only_status`).
pub fn field_set<'k>(kind: impl Into<PatchKind<'k>>, obj: &Value, scope: Scope) -> FieldSet {
    let kind = &kind.into();
    let mut out = FieldSet::new();
    let Some(m) = obj.as_object() else { return out };
    for (k, v) in m {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        let is_status = k == "status";
        match scope {
            Scope::Main if is_status && kind.has_status_subresource() => continue,
            Scope::Status if !is_status => continue,
            _ => {}
        }
        let mut names = vec![k.as_str()];
        let mut prefix = vec![format!("f:{k}")];
        if k == "metadata" {
            if let Some(mm) = v.as_object() {
                for (mk, mv) in mm {
                    if SYSTEM_META.contains(&mk.as_str()) {
                        continue;
                    }
                    names.push(mk);
                    prefix.push(format!("f:{mk}"));
                    collect(kind, mv, &mut names, &mut prefix, &mut out, 2);
                    names.pop();
                    prefix.pop();
                }
            }
            continue;
        }
        collect(kind, v, &mut names, &mut prefix, &mut out, 1);
    }
    out
}

/// Which part of an object a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Main resource: everything but `status` for kinds with a status subresource.
    Main,
    /// `/status`: only `status`.
    Status,
    /// Everything (apply of kinds without status split).
    All,
}

fn collect<'a>(
    kind: &PatchKind<'_>,
    v: &'a Value,
    names: &mut Vec<&'a str>,
    prefix: &mut FieldPath,
    out: &mut FieldSet,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        out.insert(prefix.clone());
        return;
    }
    match v {
        Value::Object(m) if !m.is_empty() && !kind.map_is_atomic(names) => {
            for (k, child) in m {
                names.push(k);
                prefix.push(format!("f:{k}"));
                collect(kind, child, names, prefix, out, depth + 1);
                names.pop();
                prefix.pop();
            }
        }
        Value::Array(items) => match kind.list_kind(names) {
            ListKind::Atomic => {
                out.insert(prefix.clone());
            }
            ListKind::Set => {
                for it in items {
                    prefix.push(format!("v:{it}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
                if items.is_empty() {
                    out.insert(prefix.clone());
                }
            }
            ListKind::Keyed(keys) => {
                for it in items {
                    let Some(seg) = key_segment(&keys, it) else {
                        continue;
                    };
                    prefix.push(seg);
                    prefix.push(".".to_string());
                    out.insert(prefix.clone());
                    prefix.pop();
                    if let Some(em) = it.as_object() {
                        for (k, child) in em {
                            names.push(k);
                            prefix.push(format!("f:{k}"));
                            collect(kind, child, names, prefix, out, depth + 2);
                            names.pop();
                            prefix.pop();
                        }
                    }
                    prefix.pop();
                }
                if items.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The leaves whose values differ between `old` and `new` (present in `new`), and the leaves of `old`
/// that `new` no longer has. Walks both objects together and skips equal subtrees, so the cost is
/// proportional to what changed.
pub fn diff_sets<'k>(
    kind: impl Into<PatchKind<'k>>,
    old: Option<&Value>,
    new: &Value,
    scope: Scope,
) -> (FieldSet, FieldSet) {
    let kind = &kind.into();
    let mut changed = FieldSet::new();
    let mut gone = FieldSet::new();
    let empty = Map::new();
    let o = old.and_then(Value::as_object).unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let wanted = |k: &str| {
        if k == "apiVersion" || k == "kind" {
            return false;
        }
        let is_status = k == "status";
        match scope {
            Scope::Main => !(is_status && kind.has_status_subresource()),
            Scope::Status => is_status,
            Scope::All => true,
        }
    };
    let mut keys: BTreeSet<&String> = n.keys().collect();
    keys.extend(o.keys());
    for k in keys.into_iter().filter(|k| wanted(k)) {
        let mut names = vec![k.as_str()];
        let mut prefix = vec![format!("f:{k}")];
        if k == "metadata" {
            let om = o.get(k).and_then(Value::as_object).unwrap_or(&empty);
            let nm = n.get(k).and_then(Value::as_object).unwrap_or(&empty);
            let mut mkeys: BTreeSet<&String> = nm.keys().collect();
            mkeys.extend(om.keys());
            for mk in mkeys
                .into_iter()
                .filter(|mk| !SYSTEM_META.contains(&mk.as_str()))
            {
                names.push(mk);
                prefix.push(format!("f:{mk}"));
                diff(
                    kind,
                    om.get(mk),
                    nm.get(mk),
                    &mut names,
                    &mut prefix,
                    &mut changed,
                    &mut gone,
                    2,
                );
                names.pop();
                prefix.pop();
            }
            continue;
        }
        diff(
            kind,
            o.get(k),
            n.get(k),
            &mut names,
            &mut prefix,
            &mut changed,
            &mut gone,
            1,
        );
    }
    (changed, gone)
}

#[allow(clippy::too_many_arguments)]
fn diff<'a>(
    kind: &PatchKind<'_>,
    old: Option<&'a Value>,
    new: Option<&'a Value>,
    names: &mut Vec<&'a str>,
    prefix: &mut FieldPath,
    changed: &mut FieldSet,
    gone: &mut FieldSet,
    depth: usize,
) {
    let (o, n) = match (old, new) {
        (None, None) => return,
        (Some(o), Some(n)) if o == n => return,
        (Some(o), None) => return collect(kind, o, names, prefix, gone, depth),
        (None, Some(n)) => return collect(kind, n, names, prefix, changed, depth),
        (Some(o), Some(n)) => (o, n),
    };
    if depth > MAX_DEPTH {
        changed.insert(prefix.clone());
        return;
    }
    match (o, n) {
        (Value::Object(om), Value::Object(nm))
            if !om.is_empty() && !nm.is_empty() && !kind.map_is_atomic(names) =>
        {
            let mut keys: BTreeSet<&String> = nm.keys().collect();
            keys.extend(om.keys());
            for k in keys {
                names.push(k);
                prefix.push(format!("f:{k}"));
                diff(
                    kind,
                    om.get(k),
                    nm.get(k),
                    names,
                    prefix,
                    changed,
                    gone,
                    depth + 1,
                );
                names.pop();
                prefix.pop();
            }
        }
        (Value::Array(oa), Value::Array(na)) if !oa.is_empty() && !na.is_empty() => {
            match kind.list_kind(names) {
                ListKind::Keyed(keys) => {
                    let seg = |e: &Value| key_segment(&keys, e);
                    for ne in na {
                        let Some(ks) = seg(ne) else { continue };
                        let oe = oa.iter().find(|e| same_key(&keys, e, ne));
                        prefix.push(ks);
                        match oe {
                            Some(oe) if oe == ne => {}
                            Some(oe) => {
                                let (om, nm) = (oe.as_object(), ne.as_object());
                                let mut keys: BTreeSet<&String> =
                                    nm.map(|m| m.keys().collect()).unwrap_or_default();
                                keys.extend(
                                    om.map(|m| m.keys().collect::<Vec<_>>()).unwrap_or_default(),
                                );
                                for k in keys {
                                    names.push(k);
                                    prefix.push(format!("f:{k}"));
                                    diff(
                                        kind,
                                        om.and_then(|m| m.get(k)),
                                        nm.and_then(|m| m.get(k)),
                                        names,
                                        prefix,
                                        changed,
                                        gone,
                                        depth + 2,
                                    );
                                    names.pop();
                                    prefix.pop();
                                }
                            }
                            None => {
                                prefix.push(".".to_string());
                                changed.insert(prefix.clone());
                                prefix.pop();
                                if let Some(nm) = ne.as_object() {
                                    for (k, child) in nm {
                                        names.push(k);
                                        prefix.push(format!("f:{k}"));
                                        collect(kind, child, names, prefix, changed, depth + 2);
                                        names.pop();
                                        prefix.pop();
                                    }
                                }
                            }
                        }
                        prefix.pop();
                    }
                    for oe in oa {
                        let Some(ks) = seg(oe) else { continue };
                        if na.iter().any(|e| same_key(&keys, e, oe)) {
                            continue;
                        }
                        prefix.push(ks);
                        prefix.push(".".to_string());
                        gone.insert(prefix.clone());
                        prefix.pop();
                        if let Some(om) = oe.as_object() {
                            for (k, child) in om {
                                names.push(k);
                                prefix.push(format!("f:{k}"));
                                collect(kind, child, names, prefix, gone, depth + 2);
                                names.pop();
                                prefix.pop();
                            }
                        }
                        prefix.pop();
                    }
                }
                ListKind::Set => {
                    for v in na.iter().filter(|v| !oa.contains(v)) {
                        prefix.push(format!("v:{v}"));
                        changed.insert(prefix.clone());
                        prefix.pop();
                    }
                    for v in oa.iter().filter(|v| !na.contains(v)) {
                        prefix.push(format!("v:{v}"));
                        gone.insert(prefix.clone());
                        prefix.pop();
                    }
                }
                ListKind::Atomic => {
                    changed.insert(prefix.clone());
                }
            }
        }
        _ => {
            // Type or shape change (or atomic value): new's leaves changed, old's other leaves gone.
            let mut nl = FieldSet::new();
            collect(kind, n, names, prefix, &mut nl, depth);
            let mut ol = FieldSet::new();
            collect(kind, o, names, prefix, &mut ol, depth);
            for p in ol {
                if !nl.contains(&p) {
                    gone.insert(p);
                }
            }
            changed.extend(nl);
        }
    }
}

/// The `FieldsV1` JSON tree of a set: each node's members in the set's (sorted) order.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let paths: Vec<&FieldPath> = set.iter().collect();
    Value::Object(fields_v1_level(&paths, 0))
}

/// The members at `depth` of the paths in `paths` (sorted, all sharing their first `depth`
/// segments): sorted paths with the same segment at `depth` are adjacent, so each member is
/// built once from its run of paths, with no lookups.
fn fields_v1_level(paths: &[&FieldPath], depth: usize) -> Map<String, Value> {
    let mut out = Map::new();
    let mut rest = paths;
    while let Some(first) = rest.first() {
        let Some(seg) = first.get(depth) else {
            // A path ending here only makes this node exist.
            rest = &rest[1..];
            continue;
        };
        let run = rest
            .iter()
            .position(|p| p.get(depth) != Some(seg))
            .unwrap_or(rest.len());
        let child = fields_v1_level(&rest[..run], depth + 1);
        out.insert(seg.clone(), Value::Object(child));
        rest = &rest[run..];
    }
    out
}

/// The leaf set of a `FieldsV1` tree.
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let mut stack: Vec<(FieldPath, &Value)> = vec![(Vec::new(), tree)];
    while let Some((path, v)) = stack.pop() {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                if path.len() > MAX_DEPTH {
                    continue;
                }
                for (k, child) in m {
                    let mut p = path.clone();
                    p.push(k.clone());
                    stack.push((p, child));
                }
            }
            _ if !path.is_empty() => {
                out.insert(path);
            }
            _ => {}
        }
    }
    out
}

fn element_matches(e: &Value, seg: &str) -> bool {
    if let Some(k) = seg.strip_prefix("k:") {
        let Ok(Value::Object(want)) = serde_json::from_str::<Value>(k) else {
            return false;
        };
        return want.iter().all(|(wk, wv)| e.get(wk) == Some(wv));
    }
    if let Some(v) = seg.strip_prefix("v:") {
        return serde_json::from_str::<Value>(v).is_ok_and(|want| &want == e);
    }
    false
}

/// The value at a field path (`.` = the element itself).
pub fn get_path<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path {
        cur = if seg == "." {
            cur
        } else if let Some(f) = seg.strip_prefix("f:") {
            cur.get(f)?
        } else if let Some(i) = seg.strip_prefix("i:") {
            cur.get(i.parse::<usize>().ok()?)?
        } else {
            cur.as_array()?.iter().find(|e| element_matches(e, seg))?
        };
    }
    Some(cur)
}

/// Removes the field or element a path names. Returns whether something was removed.
pub fn remove_path(v: &mut Value, path: &[String]) -> bool {
    let path = match path.split_last() {
        Some((last, rest)) if last == "." => rest,
        _ => path,
    };
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut cur = v;
    for seg in parent_path {
        let next = if seg == "." {
            Some(cur)
        } else if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|e| element_matches(e, seg)))
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        return cur.as_object_mut().and_then(|m| m.remove(f)).is_some();
    }
    match cur.as_array_mut() {
        Some(a) => {
            let before = a.len();
            a.retain(|e| !element_matches(e, last));
            a.len() != before
        }
        None => false,
    }
}

/// `.spec.containers[name="nginx"].image`: the path as conflict messages print it.
pub fn render_path(path: &[String]) -> String {
    let mut s = String::new();
    for seg in path {
        if let Some(f) = seg.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = seg.strip_prefix("k:") {
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(k) {
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
        } else if let Some(v) = seg.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = seg.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// One parsed `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    raw: Map<String, Value>,
    set: FieldSet,
    /// For an entry read from the stored object: its set's size as read. While the set keeps that
    /// size (sets only ever lose paths) `raw` still holds its exact `fieldsV1`, which is then
    /// written back as is instead of being rendered again.
    stored_len: Option<usize>,
    /// A stored entry a write cannot change (it owns none of the paths the write touches): its set
    /// is never built (left empty) and `raw` is written back as is.
    opaque: bool,
}

impl Entry {
    /// A new entry of `manager` for `operation` (on `subresource`, if any) at `time`, owning `set`.
    fn new(
        manager: &str,
        operation: &str,
        api_version: &str,
        time: &str,
        subresource: &str,
        set: FieldSet,
    ) -> Self {
        let mut raw = Map::new();
        raw.insert("manager".into(), json!(manager));
        raw.insert("operation".into(), json!(operation));
        raw.insert("apiVersion".into(), json!(api_version));
        raw.insert("time".into(), json!(time));
        if !subresource.is_empty() {
            raw.insert("subresource".into(), json!(subresource));
        }
        Entry {
            raw,
            set,
            stored_len: None,
            opaque: false,
        }
    }

    fn manager(&self) -> &str {
        self.raw
            .get("manager")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    fn operation(&self) -> &str {
        self.raw
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    fn subresource(&self) -> &str {
        self.raw
            .get("subresource")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    fn api_version(&self) -> &str {
        self.raw
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// Builds the set from `raw`'s `fieldsV1` (`stored`: `raw` is canonical, see `stored_len`).
    fn parse(&mut self, stored: bool) {
        self.set = self
            .raw
            .get("fieldsV1")
            .map(from_fields_v1)
            .unwrap_or_default();
        self.stored_len = stored.then_some(self.set.len());
        self.opaque = false;
    }

    fn render(mut self) -> Value {
        if self.opaque || self.stored_len == Some(self.set.len()) {
            return Value::Object(self.raw);
        }
        self.raw.insert("fieldsType".into(), json!("FieldsV1"));
        self.raw.insert("fieldsV1".into(), to_fields_v1(&self.set));
        Value::Object(self.raw)
    }
}

/// The entries of `obj`; `stored`: `obj` is the stored object (its entries are in canonical form).
fn entries(obj: Option<&Value>, stored: bool) -> Vec<Entry> {
    let mut list = entries_unparsed(obj);
    for e in &mut list {
        e.parse(stored);
    }
    list
}

/// The stored object's entries with their sets not built yet (`opaque`).
fn entries_unparsed(obj: Option<&Value>) -> Vec<Entry> {
    obj.and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_object)
                .filter(|m| !m.is_empty())
                .map(|m| Entry {
                    raw: m.clone(),
                    set: FieldSet::new(),
                    stored_len: None,
                    opaque: true,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `from_fields_v1(tree)` would contain `path`, without building the set.
pub(crate) fn fields_v1_contains(tree: &Value, path: &FieldPath) -> bool {
    if path.is_empty() || path.len() > MAX_DEPTH + 1 {
        return false;
    }
    let mut node = tree;
    for seg in path {
        match node.as_object().and_then(|m| m.get(seg)) {
            Some(n) => node = n,
            None => return false,
        }
    }
    node.as_object().is_none_or(Map::is_empty)
}

fn write_entries(obj: &mut Value, list: Vec<Entry>) {
    let rendered: Vec<Value> = list
        .into_iter()
        .filter(|e| e.opaque || !e.set.is_empty())
        .map(Entry::render)
        .collect();
    if let Some(m) = api::meta::metadata_mut(obj) {
        if rendered.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(rendered));
        }
    }
}

fn is_prefix_of(prefix: &[String], path: &[String]) -> bool {
    path.len() >= prefix.len() && path[..prefix.len()] == *prefix
}

/// After a removal, drops containers the removal left empty unless someone owns them as a leaf
/// (a list whose last applied element went away disappears, as with structured-merge-diff).
fn prune_empty_parents(obj: &mut Value, removed: &[String], others: &FieldSet, applied: &FieldSet) {
    let mut path = removed.to_vec();
    while path.pop().is_some() && !path.is_empty() {
        if path.last().is_some_and(|s| !s.starts_with("f:")) {
            // A list element: stop at elements (they carry their keys).
            return;
        }
        let empty = match get_path(obj, &path) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(m)) => m.is_empty(),
            _ => false,
        };
        let owned = others
            .iter()
            .chain(applied.iter())
            .any(|o| is_prefix_of(&path, o));
        if !empty || owned || !remove_path(obj, &path) {
            return;
        }
    }
}

/// The field manager of `kubectl apply --server-side`; only its applies take over from client-side
/// apply (upstream: "to opt-out of this behavior, users may specify a different field manager").
const KUBECTL_SERVER_SIDE: &str = "kubectl";

/// The manager that owns the fields of an object nobody managed before its first apply.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The annotation client-side apply records its configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The fields a server-side apply by `kubectl` may take without conflict from an object last
/// applied client-side (upstream's `allowedConflictsFromLastApplied`): those of the
/// last-applied configuration whose values the live object still has. `None` without a usable
/// annotation (absent, not JSON, or of another apiVersion).
fn allowed_from_last_applied(kind: &PatchKind<'_>, live: &Value, scope: Scope) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    if super::depth(&last) > MAX_DEPTH
        || last.get("apiVersion").and_then(Value::as_str) != Some(kind.api_version().as_str())
    {
        return None;
    }
    let mut set = field_set(kind, &last, scope);
    // Fields modified, added or removed since: no longer the last applier's.
    set.retain(|p| get_path(&last, p) == get_path(live, p));
    Some(set)
}

/// Parses an apply body (YAML or JSON) into an object.
fn parse_apply(patch: &[u8]) -> Result<Value, PatchError> {
    let v: Value = serde_yaml::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("error decoding YAML: {e}")))?;
    if super::depth(&v) > MAX_DEPTH {
        return Err(PatchError::Malformed(
            "the apply configuration is nested too deeply".into(),
        ));
    }
    if !v.is_object() {
        return Err(PatchError::Malformed(
            "the apply configuration must be an object".into(),
        ));
    }
    Ok(v)
}

/// Server-side apply of `patch` (an `application/apply-patch+yaml` body) by `field_manager`.
///
/// `live: None` means the object does not exist: the result is the applied object with its managed
/// fields, which the HTTP side creates (201). `now` is the `metav1.Time` text for the entry. The
/// caller still checks the URL name and runs the kind's strategy on the result.
pub fn server_side_apply<'k>(
    kind: impl Into<PatchKind<'k>>,
    live: Option<&Value>,
    patch: &[u8],
    field_manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    let kind = &kind.into();
    if field_manager.is_empty() {
        return Err(PatchError::FieldManagerRequired);
    }
    let applied = parse_apply(patch)?;
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let applied_kind = applied.get("kind").and_then(Value::as_str).unwrap_or("");
    if api_version.is_empty() || applied_kind.is_empty() {
        return Err(PatchError::Malformed(
            "apiVersion and kind must be set in an apply configuration".into(),
        ));
    }
    let expected = kind.api_version();
    if api_version != expected || applied_kind != kind.kind {
        return Err(PatchError::Malformed(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if applied.pointer("/metadata/managedFields").is_some() {
        return Err(PatchError::Malformed(
            "metadata.managedFields must be nil".into(),
        ));
    }
    let scope = if kind.has_status_subresource() {
        Scope::Main
    } else {
        Scope::All
    };
    let new_set = field_set(kind, &applied, scope);
    let mut list = entries(live, true);
    if let Some(live) = live.filter(|_| list.is_empty()) {
        // An object nobody manages yet (created before tracking, or its entries reset): its
        // fields are first recorded as `before-first-apply`'s, as upstream's
        // skipNonAppliedManager does, so the apply conflicts where it changes them.
        let set = field_set(kind, live, scope);
        if !set.is_empty() {
            list.push(Entry::new(
                BEFORE_FIRST_APPLY,
                "Update",
                &kind.api_version(),
                now,
                "",
                set,
            ));
        }
    }
    let is_mine = |e: &Entry| {
        e.manager() == field_manager && e.operation() == "Apply" && e.subresource().is_empty()
    };
    let prev_set = list
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e.set.clone())
        .unwrap_or_default();

    // Conflicts with other managers.
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    let mut conflicts: Vec<api::status::ManagerConflict> = Vec::new();
    let mut forced: Vec<(usize, FieldPath)> = Vec::new();
    for (i, e) in list.iter().enumerate() {
        if is_mine(e) {
            continue;
        }
        for p in e.set.intersection(&new_set) {
            if p.last().map(String::as_str) == Some(".") {
                continue;
            }
            if get_path(live_obj, p) != get_path(&applied, p) {
                conflicts.push(api::status::ManagerConflict {
                    manager: e.manager().to_string(),
                    operation: e.operation().to_string(),
                    api_version: e.api_version().to_string(),
                    subresource: e.subresource().to_string(),
                    field: render_path(p),
                });
                forced.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force && field_manager == KUBECTL_SERVER_SIDE {
        // Taking over from client-side apply (upstream's lastAppliedManager): conflicts on fields
        // that the last client-side apply set, to the values they still have, are no conflicts.
        // Otherwise (no usable annotation, or a conflict outside it) the conflicts stand.
        if let Some(allowed) = allowed_from_last_applied(kind, live_obj, scope) {
            if forced.iter().all(|(_, p)| allowed.contains(p)) {
                // Applied as if forced: the fields move to this manager.
                conflicts.clear();
            } else {
                let (kept, kept_forced): (Vec<_>, Vec<_>) = conflicts
                    .into_iter()
                    .zip(forced)
                    .filter(|(_, (_, p))| !allowed.contains(p))
                    .unzip();
                conflicts = kept;
                forced = kept_forced;
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(PatchError::Conflict { conflicts });
    }
    for (i, p) in forced {
        if let Some(e) = list.get_mut(i) {
            e.set.remove(&p);
        }
    }

    // Merge, then drop what this manager stopped applying (unless someone else owns it).
    let base = live_obj.as_object().cloned().unwrap_or_default();
    let patch_map = applied.as_object().cloned().unwrap_or_default();
    let mut merged = Value::Object(merge_map(kind, base, &patch_map, &mut Vec::new())?);
    let others: FieldSet = list
        .iter()
        .filter(|e| !is_mine(e))
        .flat_map(|e| e.set.iter().cloned())
        .collect();
    for p in prev_set.difference(&new_set) {
        let elem: &[String] = match p.split_last() {
            Some((last, rest)) if last == "." => rest,
            _ => p,
        };
        let owned_elsewhere = others.iter().any(|o| is_prefix_of(elem, o))
            || new_set.iter().any(|o| is_prefix_of(elem, o));
        if !owned_elsewhere && remove_path(&mut merged, p) {
            prune_empty_parents(&mut merged, elem, &others, &new_set);
        }
    }

    // Record the entry.
    let mine = Entry::new(field_manager, "Apply", api_version, now, "", new_set);
    match list.iter().position(is_mine) {
        Some(i) => list[i] = mine,
        None => list.push(mine),
    }
    write_entries(&mut merged, list);
    if field_manager == KUBECTL_SERVER_SIDE {
        sync_last_applied(&mut merged, &applied);
    }
    super::limits::check_result(&merged)?;
    Ok(merged)
}

/// After a server-side apply by `kubectl`, an object that carries a client-side-apply annotation
/// gets the applied configuration in it (upstream's lastAppliedUpdater), so that a later
/// client-side apply diffs against what was last applied: the configuration without the
/// annotation, with sorted keys and a trailing newline as `runtime.Encode` of an unstructured
/// object writes it.
fn sync_last_applied(obj: &mut Value, applied: &Value) {
    let has = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !has {
        return;
    }
    let mut config = applied.clone();
    if let Some(a) = config
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.shift_remove(LAST_APPLIED);
        if a.is_empty() {
            if let Some(m) = config.get_mut("metadata").and_then(Value::as_object_mut) {
                m.shift_remove("annotations");
            }
        }
    }
    sort_keys_deep(&mut config);
    let mut text = serde_json::to_string(&config).unwrap_or_default();
    text.push('\n');
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.insert(LAST_APPLIED.to_string(), Value::String(text));
    }
}

/// Sorts every object's keys, as Go's encoding/json writes maps.
fn sort_keys_deep(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.sort_keys();
            m.values_mut().for_each(sort_keys_deep);
        }
        Value::Array(a) => a.iter_mut().for_each(sort_keys_deep),
        _ => {}
    }
}

/// Records an `Update` entry for `manager` after a create, PUT or non-apply PATCH: the fields whose
/// values changed from `old` (all fields on create) move to `manager`; other managers lose them;
/// fields that disappeared leave every set. `managedFields` absent from `new` (or empty) are
/// carried over from `old`; `managedFields: [{}]` clears them (upstream's reset). `subresource` is
/// `Some("status")` for `/status` writes, whose request entries are ignored. An empty `manager` only carries the entries over. A create (`old: None`) whose
/// object already has entries (a server-side apply create) keeps exactly those.
pub fn update_managed_fields<'k>(
    kind: impl Into<PatchKind<'k>>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    subresource: Option<&str>,
) {
    let kind = &kind.into();
    // A subresource write never sets the entries: the stored ones are kept, as upstream's
    // `ignoreManagedFieldsFromRequestObject` for subresources.
    let from_request = subresource.is_none() || old.is_none();
    if from_request {
        if let Some(mf) = new
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
        {
            if mf.len() == 1 && mf[0].as_object().is_some_and(Map::is_empty) {
                api::meta::remove(new, "managedFields");
                return;
            }
        }
    }
    let sent = if from_request {
        entries(Some(new), false)
    } else {
        Vec::new()
    };
    if old.is_none() && !sent.is_empty() {
        // A create carrying its own entries (server-side apply creating the object): keep them.
        write_entries(new, sent);
        return;
    }
    // Absent or empty entries are carried over from the stored object, so that clients which do
    // not know the field (or caches that strip it) never erase them.
    let from_old = sent.is_empty();
    let (changed, gone) = if manager.is_empty() {
        Default::default()
    } else {
        let scope = match subresource {
            Some("status") => Scope::Status,
            _ => Scope::Main,
        };
        diff_sets(kind, old, new, scope)
    };
    if changed.is_empty() && gone.is_empty() {
        // Nothing this write owns changed: the entries stay exactly as they were.
        if from_old {
            let stored = old
                .and_then(|o| o.pointer("/metadata/managedFields"))
                .cloned();
            if let Some(m) = api::meta::metadata_mut(new) {
                match stored {
                    Some(mf) => m.insert("managedFields".into(), mf),
                    None => m.remove("managedFields"),
                };
            }
        } else {
            write_entries(new, sent);
        }
        return;
    }
    let sub = subresource.unwrap_or("");
    let is_mine =
        |e: &Entry| e.manager() == manager && e.operation() == "Update" && e.subresource() == sub;
    let mut list = if from_old {
        // Only the entries whose sets this write changes are parsed: those owning a path that
        // changed or went away, and the writer's own unless it already owns every changed path
        // (then only its time changes).
        let touched: Vec<&FieldPath> = changed.iter().chain(&gone).collect();
        let mut list = entries_unparsed(old);
        for e in list.iter_mut() {
            let fields = e.raw.get("fieldsV1").unwrap_or(&Value::Null);
            let holds = |p: &&FieldPath| fields_v1_contains(fields, p);
            let parse = if is_mine(e) {
                !changed.iter().all(|p| holds(&p)) || gone.iter().any(|p| holds(&p))
            } else {
                touched.iter().any(holds)
            };
            if parse {
                e.parse(true);
            }
        }
        list
    } else {
        sent
    };
    for e in list.iter_mut().filter(|e| !e.opaque) {
        if !is_mine(e) {
            e.set.retain(|p| !changed.contains(p));
        }
        e.set.retain(|p| !gone.contains(p));
    }
    if !changed.is_empty() || list.iter().any(is_mine) {
        let api_version = kind.api_version();
        let fresh = |set| Entry::new(manager, "Update", &api_version, now, sub, set);
        match list.iter().position(is_mine) {
            // Its set stays as stored: the write changed fields, so its time moves (as upstream).
            Some(i) if list[i].opaque => {
                if !changed.is_empty() {
                    list[i].raw.insert("time".into(), json!(now));
                }
            }
            // Something changed or went away (else the entries were kept above): a new time, and
            // the set grows by what changed.
            Some(i) => {
                let mut set = std::mem::take(&mut list[i].set);
                set.extend(changed);
                list[i] = fresh(set);
            }
            None => list.push(fresh(changed)),
        }
    }
    write_entries(new, list);
}
