//! The check registry of the Pod Security Standards (`k8s.io/pod-security-admission/policy`):
//! which checks a level runs at a version, and how their results read.
//!
//! Each check has an ID, a level and versioned implementations; at version `v1.X` a check runs
//! its newest implementation whose minimum version is at most X (none: the check does not
//! apply). `restricted` runs the baseline checks too, except those a restricted check in force
//! overrides (`capabilities_restricted` → `capabilities_baseline`, `restrictedVolumes` →
//! `hostPathVolumes`, `seccompProfile_restricted` → `seccompProfile_baseline`). Checks run in
//! upstream's order: baseline then restricted, each by ID in byte order, so messages read as
//! upstream's. Checks are pure functions of the pod's metadata and spec (JSON, any shape: a
//! field of the wrong type counts as unset).

use serde_json::Value;

use super::policy::{Level, LevelVersion};
use super::{baseline, restricted};

/// What a failed check says (`CheckResult` with `Allowed: false`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `host namespaces`.
    pub reason: String,
    /// `hostNetwork=true`; may be empty.
    pub detail: String,
}

impl Violation {
    pub fn new(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        Violation {
            reason: reason.into(),
            detail: detail.into(),
        }
    }
}

/// A check's implementation: the pod's metadata and spec, `None` when allowed.
pub type CheckPod = fn(&Value, &Value) -> Option<Violation>;

/// One implementation of a check, from `v1.<min_minor>` on.
pub struct Versioned {
    pub min_minor: u32,
    pub check: CheckPod,
    /// The baseline checks this one replaces at the restricted level.
    pub overrides: &'static [&'static str],
}

/// A check of the standards.
pub struct Check {
    pub id: &'static str,
    pub level: Level,
    /// Oldest first.
    pub versions: &'static [Versioned],
}

impl Check {
    /// The implementation in force at minor version `minor`.
    fn at(&self, minor: u32) -> Option<&Versioned> {
        self.versions.iter().rev().find(|v| v.min_minor <= minor)
    }
}

/// Every check, baseline then restricted, each sorted by ID.
fn all_checks() -> impl Iterator<Item = &'static Check> {
    baseline::CHECKS.iter().chain(restricted::CHECKS.iter())
}

/// The violations of the pod (`metadata`, `spec`) at `lv`, in upstream's order.
pub fn evaluate(lv: LevelVersion, metadata: &Value, spec: &Value) -> Vec<Violation> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let minor = lv.version.effective_minor();
    let overridden: Vec<&str> = if lv.level == Level::Restricted {
        restricted::CHECKS
            .iter()
            .filter_map(|c| c.at(minor))
            .flat_map(|v| v.overrides.iter().copied())
            .collect()
    } else {
        Vec::new()
    };
    all_checks()
        .filter(|c| c.level <= lv.level && !overridden.contains(&c.id))
        .filter_map(|c| c.at(minor))
        .filter_map(|v| (v.check)(metadata, spec))
        .collect()
}

/// `AggregateCheckResult.ForbiddenDetail`: `reason (detail), reason`.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| match v.detail.is_empty() {
            true => v.reason.clone(),
            false => format!("{} ({})", v.reason, v.detail),
        })
        .collect();
    parts.join(", ")
}

/// `AggregateCheckResult.ForbiddenReason`: the reasons, comma-separated.
pub fn forbidden_reason(violations: &[Violation]) -> String {
    let parts: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
    parts.join(", ")
}

/// `one` for a count of 1, else `many`.
pub fn pluralize<'s>(one: &'s str, many: &'s str, count: usize) -> &'s str {
    if count == 1 {
        one
    } else {
        many
    }
}

/// `"a", "b"`: each quoted as Go's `%q` (the names here are printable).
pub fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| serde_json::to_string(s.as_ref()).unwrap_or_default())
        .collect();
    quoted.join(", ")
}

/// `container "a"` / `containers "a", "b"`.
pub fn containers_named<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// The containers of a pod spec, as upstream's `visitContainers`: init containers, containers,
/// then ephemeral containers.
pub fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|k| spec.get(k).and_then(Value::as_array))
        .flatten()
}

/// A container's name (`""` when missing).
pub fn name(container: &Value) -> &str {
    container.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The pod-level `spec.securityContext.<field>`.
pub fn pod_sc<'v>(spec: &'v Value, field: &str) -> Option<&'v Value> {
    spec.get("securityContext")
        .and_then(|sc| sc.get(field))
        .filter(|v| !v.is_null())
}

/// A container's `securityContext.<field>`.
pub fn container_sc<'v>(container: &'v Value, field: &str) -> Option<&'v Value> {
    pod_sc(container, field)
}

/// Whether the pod declares itself a Windows pod (`spec.os.name: windows`), which the 1.25+
/// versions of the Linux-only restricted checks skip.
pub fn is_windows(spec: &Value) -> bool {
    spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
}

/// The sorted, deduplicated `items` (Go's `sets.NewString(...).List()`).
pub fn sorted_set(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items.dedup();
    items
}
