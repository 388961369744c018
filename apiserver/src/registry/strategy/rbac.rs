//! `rbac.authorization.k8s.io/v1`: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, as
//! upstream's `pkg/apis/rbac/validation` and `pkg/registry/rbac/*` define them.
//!
//! - Names are path segments (`ValidateRBACName`), not DNS names: `system:node` is a valid name.
//! - Rules: verbs are required; a rule is either about resources (apiGroups and resources
//!   required) or about non-resource URLs (cluster roles only, and then nothing else).
//! - A ClusterRole's `aggregationRule` needs at least one valid label selector. Its `rules` are
//!   whatever the client sends: upstream's clusterrole-aggregation controller (not run here) keeps
//!   them equal to the union of the selected roles' rules.
//! - Bindings: `roleRef.apiGroup` defaults to the RBAC group and `roleRef` can never change
//!   (`cannot change roleRef`); a subject is a User, Group (RBAC group) or ServiceAccount (core
//!   group, with a namespace in cluster bindings); subjects' apiGroups are defaulted per kind.
//! - PUT may create (`AllowCreateOnUpdate`), as upstream, since roles are reconciled that way.
//! - Tables: roles use upstream's default table convertor (NAME, CREATED AT); bindings show ROLE
//!   (`Kind/name`) and, wide, USERS, GROUPS, SERVICEACCOUNTS.

use super::common::object_at;
use super::table::{age_cell, age_column, column, created_at_cell, created_at_column, name_column};
use super::Strategy;
use api::validation::{self, FieldError, FieldErrorKind, NameValidator};
use serde_json::{Map, Value};

/// The RBAC API group, the only group a roleRef may name.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

const SUBJECT_KINDS: &[&str] = &["ServiceAccount", "User", "Group"];

/// The strings of an array field (`verbs`, `apiGroups`, …); other values count as absent.
fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn text<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Go's `%#v` of a `[]string`, how upstream renders a rule's `nonResourceURLs` in messages.
fn go_string_slice(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| validation::go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn invalid_rendered(field: String, rendered: String, msg: &str) -> FieldError {
    FieldError {
        field,
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(rendered),
    }
}

/// `ValidatePolicyRule`: one rule at `path` (`rules[0]`).
fn validate_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if strings(rule.get("verbs")).is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = strings(rule.get("nonResourceURLs"));
    let groups = strings(rule.get("apiGroups"));
    let resources = strings(rule.get("resources"));
    if !urls.is_empty() {
        let field = format!("{path}.nonResourceURLs");
        if namespaced {
            errs.push(invalid_rendered(
                field.clone(),
                go_string_slice(&urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !groups.is_empty()
            || !resources.is_empty()
            || !strings(rule.get("resourceNames")).is_empty()
        {
            errs.push(invalid_rendered(
                field,
                go_string_slice(&urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if groups.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if resources.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

fn validate_rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let rules = obj.get("rules").and_then(Value::as_array);
    rules
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, r)| validate_rule(r, namespaced, &format!("rules[{i}]")))
        .collect()
}

/// A ClusterRole's `aggregationRule`; `allow_invalid_values` keeps label values in selectors
/// that were stored before upstream checked them (an update of such a role).
fn validate_aggregation(obj: &Value, allow_invalid_values: bool) -> Vec<FieldError> {
    let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) else {
        return Vec::new();
    };
    let selectors = rule
        .get("clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errs = Vec::new();
    if selectors.is_empty() {
        errs.push(FieldError::required(
            "aggregationRule.clusterRoleSelectors",
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, sel) in selectors.iter().enumerate() {
        let path = format!("aggregationRule.clusterRoleSelectors[{i}]");
        errs.extend(validation::validate_label_selector(
            sel,
            &path,
            allow_invalid_values,
        ));
        if api::labels::from_label_selector_json(sel).is_err() {
            // Upstream reports the selector it could not build: a nil one.
            errs.push(FieldError::invalid(path, "null", "invalid label selector."));
        }
    }
    errs
}

/// Whether a stored ClusterRole has a selector upstream's strict selector validation refuses
/// (`hasInvalidLabelValueInLabelSelector`): an update may then keep invalid label values.
fn has_invalid_selector_values(obj: &Value) -> bool {
    let selectors = obj
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array);
    selectors
        .into_iter()
        .flatten()
        .any(|sel| !validation::validate_label_selector(sel, "", false).is_empty())
}

/// Roles: namespaced, rules without non-resource URLs.
pub struct RoleStrategy;

/// ClusterRoles: rules (non-resource URLs allowed) and `aggregationRule`.
pub struct ClusterRoleStrategy;

fn role_columns() -> Vec<Value> {
    vec![name_column(), created_at_column()]
}

fn role_cells(obj: &Value) -> Vec<Value> {
    vec![
        Value::from(api::meta::name(obj).unwrap_or("")),
        created_at_cell(obj),
    ]
}

impl Strategy for RoleStrategy {
    fn name_validation(&self) -> NameValidator {
        validation::name_is_path_segment
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_rules(obj, true)
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_rules(new, true)
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn table_columns(&self) -> Vec<Value> {
        role_columns()
    }
    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        role_cells(obj)
    }
}

impl Strategy for ClusterRoleStrategy {
    fn name_validation(&self) -> NameValidator {
        validation::name_is_path_segment
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_rules(obj, false);
        errs.extend(validate_aggregation(obj, false));
        errs
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_rules(new, false);
        errs.extend(validate_aggregation(new, has_invalid_selector_values(old)));
        errs
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn table_columns(&self) -> Vec<Value> {
        role_columns()
    }
    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        role_cells(obj)
    }
}

/// `SetDefaults_RoleBinding` / `SetDefaults_ClusterRoleBinding` and `SetDefaults_Subject`: the
/// roleRef's group, and the subjects' groups by kind.
fn default_binding(obj: &mut Value) {
    if let Some(role_ref) = object_at(obj, "roleRef") {
        if text_of(role_ref, "apiGroup").is_empty() {
            role_ref.insert("apiGroup".into(), Value::from(RBAC_GROUP));
        }
    }
    let subjects = obj.get_mut("subjects").and_then(Value::as_array_mut);
    for s in subjects
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        let rbac_kind = matches!(text_of(s, "kind"), "User" | "Group");
        if rbac_kind && text_of(s, "apiGroup").is_empty() {
            s.insert("apiGroup".into(), Value::from(RBAC_GROUP));
        }
    }
}

fn text_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `roleRef` checks of a binding: the RBAC group, one of `kinds`, a path-segment name.
fn validate_role_ref(obj: &Value, kinds: &[&str]) -> Vec<FieldError> {
    let null = Value::Null;
    let r = obj.get("roleRef").unwrap_or(&null);
    let mut errs = Vec::new();
    let group = text(r, "apiGroup");
    if group != RBAC_GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &Value::from(group),
            &[RBAC_GROUP],
        ));
    }
    let kind = text(r, "kind");
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            &Value::from(kind),
            kinds,
        ));
    }
    let name = text(r, "name");
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in validation::is_valid_path_segment_name(name) {
            errs.push(FieldError::invalid("roleRef.name", name, msg));
        }
    }
    errs
}

/// `ValidateRoleBindingSubject` of `subjects[i]`.
fn validate_subject(s: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = text(s, "name");
    let group = text(s, "apiGroup");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    match text(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in validation::is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &Value::from(group),
                    &[""],
                ));
            }
            if !namespaced && text(s, "namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != RBAC_GROUP {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &Value::from(group),
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            &Value::from(other),
            SUBJECT_KINDS,
        )),
    }
    errs
}

fn validate_binding(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let mut errs = validate_role_ref(obj, kinds);
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        errs.extend(validate_subject(s, namespaced, &format!("subjects[{i}]")));
    }
    errs
}

/// The (apiGroup, kind, name) of a binding's roleRef.
fn role_ref(obj: &Value) -> (&str, &str, &str) {
    let field = |k: &str| {
        obj.get("roleRef")
            .and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    (field("apiGroup"), field("kind"), field("name"))
}

/// `roleRef` is immutable; the message shows the new one as Go's `%#v` of `rbac.RoleRef`.
fn validate_role_ref_unchanged(new: &Value, old: &Value) -> Option<FieldError> {
    let (group, kind, name) = role_ref(new);
    (role_ref(new) != role_ref(old)).then(|| {
        let q = validation::go_quote;
        invalid_rendered(
            "roleRef".to_string(),
            format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                q(group),
                q(kind),
                q(name)
            ),
            "cannot change roleRef",
        )
    })
}

/// `rbac.SubjectsStrings`: users, groups and service accounts (`namespace/name`), joined.
fn subject_cells(obj: &Value) -> [Value; 3] {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for s in subjects.into_iter().flatten() {
        let name = text(s, "name").to_string();
        match text(s, "kind") {
            "User" => users.push(name),
            "Group" => groups.push(name),
            "ServiceAccount" => sas.push(format!("{}/{name}", text(s, "namespace"))),
            _ => {}
        }
    }
    [users, groups, sas].map(|v| Value::from(v.join(", ")))
}

fn binding_columns(word: &str, role_ref_doc: &str) -> Vec<Value> {
    vec![
        name_column(),
        column("Role", "string", "", role_ref_doc, 0),
        age_column(),
        column("Users", "string", "", &format!("Users in the {word}"), 1),
        column("Groups", "string", "", &format!("Groups in the {word}"), 1),
        column(
            "ServiceAccounts",
            "string",
            "",
            &format!("ServiceAccounts in the {word}"),
            1,
        ),
    ]
}

fn binding_cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let (_, kind, name) = role_ref(obj);
    let [users, groups, sas] = subject_cells(obj);
    vec![
        Value::from(api::meta::name(obj).unwrap_or("")),
        Value::from(format!("{kind}/{name}")),
        age_cell(obj, now),
        users,
        groups,
        sas,
    ]
}

/// RoleBindings: a Role or ClusterRole granted in one namespace.
pub struct RoleBindingStrategy;

/// ClusterRoleBindings: a ClusterRole granted everywhere.
pub struct ClusterRoleBindingStrategy;

impl Strategy for RoleBindingStrategy {
    fn name_validation(&self) -> NameValidator {
        validation::name_is_path_segment
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        default_binding(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_binding)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_binding(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_binding(obj, true)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_binding(new, true);
        errs.extend(validate_role_ref_unchanged(new, old));
        errs
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn table_columns(&self) -> Vec<Value> {
        binding_columns(
            "roleBinding",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        )
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        binding_cells(obj, now)
    }
}

impl Strategy for ClusterRoleBindingStrategy {
    fn name_validation(&self) -> NameValidator {
        validation::name_is_path_segment
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        default_binding(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_binding)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_binding(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_binding(obj, false)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_binding(new, false);
        errs.extend(validate_role_ref_unchanged(new, old));
        errs
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn table_columns(&self) -> Vec<Value> {
        binding_columns(
            "clusterRoleBinding",
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        )
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        binding_cells(obj, now)
    }
}
