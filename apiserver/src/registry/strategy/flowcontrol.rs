//! `flowcontrol.apiserver.k8s.io/v1`: FlowSchemas and PriorityLevelConfigurations, as upstream's
//! `pkg/apis/flowcontrol/v1/defaults.go`, `pkg/apis/flowcontrol/validation` and
//! `pkg/registry/flowcontrol/*` define them. Stored and validated only: this server's own
//! priority and fairness does not read them (yet).
//!
//! - Defaults: a FlowSchema's `matchingPrecedence` 1000; a Limited level's
//!   `nominalConcurrencyShares` 30 and `lendablePercent` 0, its queuing 64 queues, hand size 8,
//!   queue length limit 50; an Exempt level's shares and lendable percent 0.
//! - Validation with upstream's messages. The mandatory objects (`exempt`, `catch-all`) must keep
//!   their fixed spec (`spec of 'exempt' must equal the fixed value`).
//! - Status is a subresource (conditions with unique, non-empty types); generation is tracked.
//! - Tables: FlowSchemas NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL
//!   (the `Dangling` condition), sorted by matching precedence as kubectl shows them; levels NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE
//!   QUEUELENGTHLIMIT AGE.

use super::common::{default_field, object_at, semantically_equal};
use super::table::{age_cell, age_column, column, name_column};
use super::{Forbidden, Objects, Strategy};
use api::validation::{self, FieldError, FieldErrorKind};
use k8s_openapi::api::flowcontrol::v1 as fc;
use serde_json::{json, Value};

/// `FlowSchemaMaxMatchingPrecedence`.
const MAX_MATCHING_PRECEDENCE: i32 = 10000;
/// `priorityLevelConfigurationQueuingMaxQueues`: 10^7.
const MAX_QUEUES: i32 = 10_000_000;
/// `shufflesharding.MaxHashBits`.
const MAX_HASH_BITS: f64 = 60.0;
const SUPPORTED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];
const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// An Invalid error whose value is already rendered as Go renders it.
fn invalid_rendered(field: String, rendered: String, msg: impl Into<String>) -> FieldError {
    FieldError {
        field,
        kind: FieldErrorKind::Invalid,
        message: msg.into(),
        value: Some(rendered),
    }
}

/// Go's `%#v` of a `[]string`.
fn go_strings(items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|s| validation::go_quote(s)).collect();
    format!("[]string{{{}}}", q.join(", "))
}

fn decode_error(e: serde_json::Error) -> Vec<FieldError> {
    vec![FieldError::invalid(
        "spec",
        "",
        format!("cannot be decoded: {e}"),
    )]
}

fn has_wildcard(items: &[String]) -> bool {
    items.iter().any(|s| s == "*")
}

// ---- FlowSchema ----

/// The mandatory FlowSchemas' fixed specs (`internalbootstrap.MandatoryFlowSchemas`).
fn mandatory_flow_schema_spec(name: &str) -> Option<Value> {
    if !crate::bootstrap::flowcontrol::is_mandatory(name) {
        return None;
    }
    crate::bootstrap::flowcontrol::flow_schemas()
        .into_iter()
        .find(|fs| {
            fs["metadata"]["name"] == name && crate::bootstrap::flowcontrol::is_mandatory(name)
        })
        .map(|fs| fs["spec"].clone())
}

fn mandatory_priority_level_spec(name: &str) -> Option<Value> {
    if !crate::bootstrap::flowcontrol::is_mandatory(name) {
        return None;
    }
    crate::bootstrap::flowcontrol::priority_levels()
        .into_iter()
        .find(|pl| {
            pl["metadata"]["name"] == name && crate::bootstrap::flowcontrol::is_mandatory(name)
        })
        .map(|pl| pl["spec"].clone())
}

fn validate_verbs(verbs: &[String], path: &str, errs: &mut Vec<FieldError>) {
    if verbs.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    } else if has_wildcard(verbs) {
        if verbs.len() > 1 {
            errs.push(invalid_rendered(
                format!("{path}.verbs"),
                go_strings(verbs),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs.iter().all(|v| SUPPORTED_VERBS.contains(&v.as_str())) {
        let mut e = FieldError::not_supported(format!("{path}.verbs"), &json!(""), SUPPORTED_VERBS);
        e.value = Some(go_strings(verbs));
        errs.push(e);
    }
}

fn validate_namespace_name(ns: &str) -> Vec<String> {
    validation::is_dns1123_label(ns)
}

fn validate_subject(s: &fc::Subject, path: &str, errs: &mut Vec<FieldError>) {
    let forbid = |errs: &mut Vec<FieldError>, present: bool, field: &str, kind: &str| {
        if present {
            errs.push(FieldError::forbidden(
                format!("{path}.{field}"),
                format!("{field} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    };
    match s.kind.as_str() {
        "ServiceAccount" => {
            let p = format!("{path}.serviceAccount");
            match &s.service_account {
                None => errs.push(FieldError::required(
                    p,
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(sa) => {
                    if sa.name.is_empty() {
                        errs.push(FieldError::required(format!("{p}.name"), ""));
                    } else if sa.name != "*" {
                        for msg in validation::is_dns1123_subdomain(&sa.name) {
                            errs.push(FieldError::invalid(format!("{p}.name"), &sa.name, msg));
                        }
                    }
                    if sa.namespace.is_empty() {
                        errs.push(FieldError::required(
                            format!("{p}.namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for msg in validate_namespace_name(&sa.namespace) {
                            errs.push(FieldError::invalid(
                                format!("{p}.namespace"),
                                &sa.namespace,
                                msg,
                            ));
                        }
                    }
                }
            }
            forbid(errs, s.user.is_some(), "user", "User");
            forbid(errs, s.group.is_some(), "group", "Group");
        }
        "User" => {
            match &s.user {
                None => errs.push(FieldError::required(
                    format!("{path}.user"),
                    "user is required when subject kind is 'User'",
                )),
                Some(u) if u.name.is_empty() => {
                    errs.push(FieldError::required(format!("{path}.user.name"), ""))
                }
                Some(_) => {}
            }
            forbid(
                errs,
                s.service_account.is_some(),
                "serviceAccount",
                "ServiceAccount",
            );
            forbid(errs, s.group.is_some(), "group", "Group");
        }
        "Group" => {
            match &s.group {
                None => errs.push(FieldError::required(
                    format!("{path}.group"),
                    "group is required when subject kind is 'Group'",
                )),
                Some(g) if g.name.is_empty() => {
                    errs.push(FieldError::required(format!("{path}.group.name"), ""))
                }
                Some(_) => {}
            }
            forbid(
                errs,
                s.service_account.is_some(),
                "serviceAccount",
                "ServiceAccount",
            );
            forbid(errs, s.user.is_some(), "user", "User");
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            &json!(other),
            SUBJECT_KINDS,
        )),
    }
}

fn validate_resource_rule(r: &fc::ResourcePolicyRule, path: &str, errs: &mut Vec<FieldError>) {
    validate_verbs(&r.verbs, path, errs);
    if r.api_groups.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    } else if r.api_groups.len() > 1 && has_wildcard(&r.api_groups) {
        errs.push(invalid_rendered(
            format!("{path}.apiGroups"),
            go_strings(&r.api_groups),
            "if '*' is present, must not specify other api groups",
        ));
    }
    if r.resources.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    } else if r.resources.len() > 1 && has_wildcard(&r.resources) {
        errs.push(invalid_rendered(
            format!("{path}.resources"),
            go_strings(&r.resources),
            "if '*' is present, must not specify other resources",
        ));
    }
    let namespaces = r.namespaces.as_deref().unwrap_or_default();
    if namespaces.is_empty() && !r.cluster_scope.unwrap_or(false) {
        errs.push(FieldError::required(
            format!("{path}.namespaces"),
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(namespaces) {
        if namespaces.len() > 1 {
            errs.push(invalid_rendered(
                format!("{path}.namespaces"),
                go_strings(namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            for msg in validate_namespace_name(ns) {
                errs.push(FieldError::invalid(
                    format!("{path}.namespaces[{i}]"),
                    ns,
                    format!("{NS_ERR_INTRO}{msg}"),
                ));
            }
        }
    }
}

/// `ValidateNonResourceURLPath`.
fn non_resource_url_error(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        return Some("must start with slash");
    }
    if url.contains(' ') {
        return Some("must not contain white-space");
    }
    if url.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = url.matches('*').count();
    if stars > 1 || (stars == 1 && !url.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

fn validate_non_resource_rule(
    r: &fc::NonResourcePolicyRule,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    validate_verbs(&r.verbs, path, errs);
    let urls = &r.non_resource_urls;
    if urls.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.nonResourceURLs"),
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(urls) {
        if urls.len() > 1 {
            errs.push(invalid_rendered(
                format!("{path}.nonResourceURLs"),
                go_strings(urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, u) in urls.iter().enumerate() {
            if let Some(msg) = non_resource_url_error(u) {
                errs.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs[{i}]"),
                    u,
                    msg,
                ));
            }
        }
    }
}

fn validate_flow_schema_spec(name: &str, spec: &fc::FlowSchemaSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let prec = spec.matching_precedence.unwrap_or(0);
    let p = "spec.matchingPrecedence";
    if prec <= 0 {
        errs.push(FieldError::invalid_value(
            p,
            &json!(prec),
            "must be a positive value",
        ));
    }
    if prec > MAX_MATCHING_PRECEDENCE {
        errs.push(FieldError::invalid_value(
            p,
            &json!(prec),
            format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if prec == 1 && name != "exempt" {
        errs.push(FieldError::invalid_value(
            p,
            &json!(prec),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(dm) = &spec.distinguisher_method {
        if !matches!(dm.type_.as_str(), "ByNamespace" | "ByUser") {
            let mut e = FieldError::not_supported(
                "spec.distinguisherMethod.type",
                &json!(""),
                &["ByNamespace", "ByUser"],
            );
            e.value = Some(format!(
                "flowcontrol.FlowDistinguisherMethod{{Type:{}}}",
                validation::go_quote(&dm.type_)
            ));
            errs.push(e);
        }
    }
    let pl = &spec.priority_level_configuration.name;
    if pl.is_empty() {
        errs.push(FieldError::required(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    } else {
        for msg in validation::is_dns1123_subdomain(pl) {
            errs.push(FieldError::invalid(
                "spec.priorityLevelConfiguration.name",
                pl,
                msg,
            ));
        }
    }
    for (i, rule) in spec.rules.as_deref().unwrap_or_default().iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        if rule.subjects.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.subjects"),
                "subjects must contain at least one value",
            ));
        }
        for (j, s) in rule.subjects.iter().enumerate() {
            validate_subject(s, &format!("{path}.subjects[{j}]"), &mut errs);
        }
        let res = rule.resource_rules.as_deref().unwrap_or_default();
        let non = rule.non_resource_rules.as_deref().unwrap_or_default();
        if res.is_empty() && non.is_empty() {
            errs.push(FieldError::required(
                path.clone(),
                "at least one of resourceRules and nonResourceRules has to be non-empty",
            ));
        }
        for (j, r) in res.iter().enumerate() {
            validate_resource_rule(r, &format!("{path}.resourceRules[{j}]"), &mut errs);
        }
        for (j, r) in non.iter().enumerate() {
            validate_non_resource_rule(r, &format!("{path}.nonResourceRules[{j}]"), &mut errs);
        }
    }
    errs
}

/// Conditions of either kind's status: unique, non-empty types.
fn validate_conditions(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let conds = obj.pointer("/status/conditions").and_then(Value::as_array);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conds.into_iter().flatten().enumerate() {
        let t = c.get("type").and_then(Value::as_str).unwrap_or("");
        let p = format!("status.conditions[{i}]");
        if seen.contains(&t) {
            errs.push(FieldError::duplicate(format!("{p}.type"), &json!(t)));
        }
        seen.push(t);
        if t.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.type"),
                "must not be empty",
            ));
        }
    }
    errs
}

/// A mandatory object's spec must stay the fixed one.
fn validate_mandatory(name: &str, obj: &Value, fixed: Option<Value>) -> Option<FieldError> {
    let fixed = fixed?;
    if semantically_equal(obj.get("spec"), Some(&fixed)) {
        return None;
    }
    let shown = obj
        .get("spec")
        .map(Value::to_string)
        .unwrap_or_else(|| "null".into());
    Some(invalid_rendered(
        "spec".into(),
        shown,
        format!("spec of '{name}' must equal the fixed value"),
    ))
}

fn condition_status(obj: &Value, ty: &str) -> Option<String> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        .map(|c| {
            c.get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
}

/// `FlowSchemaSequence`: matching precedence, then name.
fn flow_schema_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    let key = |v: &Value| {
        (
            v.pointer("/spec/matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            api::meta::name(v).unwrap_or("").to_string(),
        )
    };
    key(a).cmp(&key(b))
}

/// FlowSchemas.
pub struct FlowSchemaStrategy;

impl FlowSchemaStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = api::meta::name(obj).unwrap_or("");
        let mut errs = match serde_json::from_value::<fc::FlowSchema>(obj.clone()) {
            Ok(fs) => validate_flow_schema_spec(name, &fs.spec.unwrap_or_default()),
            Err(e) => return decode_error(e),
        };
        errs.extend(validate_mandatory(
            name,
            obj,
            mandatory_flow_schema_spec(name),
        ));
        errs.extend(validate_conditions(obj));
        errs
    }
}

/// The API group of both kinds.
const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// The `Dangling` condition upstream's APF configuration controller keeps on every FlowSchema
/// (`pkg/util/flowcontrol/apf_controller.go`): whether the referenced level exists. There is no
/// It is computed whenever a FlowSchema is written, and again for every FlowSchema when levels
/// come and go (`crate::flowcontrol::status`); an unchanged condition keeps its transition time.
pub(crate) fn set_dangling(obj: &mut Value, objects: &dyn Objects) {
    let level = obj
        .pointer("/spec/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let found = !level.is_empty()
        && objects
            .get(GROUP, "prioritylevelconfigurations", None, &level)
            .is_some();
    let (status, reason, message) = if found {
        ("False", "Found", format!("This FlowSchema references the PriorityLevelConfiguration object named {} and it exists", validation::go_quote(&level)))
    } else {
        ("True", "NotFound", format!("This FlowSchema references the PriorityLevelConfiguration object named {} but there is no such object", validation::go_quote(&level)))
    };
    let Some(st) = object_at(obj, "status") else {
        return;
    };
    let mut conditions: Vec<Value> = st
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let existing = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some("Dangling"));
    let unchanged = existing.is_some_and(|i| {
        let c = &conditions[i];
        c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
            && c.get("message").and_then(Value::as_str) == Some(message.as_str())
    });
    if unchanged {
        return;
    }
    let cond = json!({
        "type": "Dangling",
        "status": status,
        "lastTransitionTime": api::meta::now_rfc3339(),
        "reason": reason,
        "message": message,
    });
    match existing {
        Some(i) => conditions[i] = cond,
        None => conditions.push(cond),
    }
    st.insert("conditions".into(), Value::Array(conditions));
}

impl Strategy for FlowSchemaStrategy {
    fn admit(
        &self,
        obj: &mut Value,
        _old: Option<&Value>,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        set_dangling(obj, objects);
        Ok(())
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(spec) = object_at(obj, "spec") {
            if spec
                .get("matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0
            {
                spec.insert("matchingPrecedence".into(), json!(1000));
            }
        }
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| self.prepare_for_create(obj))
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.prepare_for_create(new);
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn table_row_order(&self) -> Option<fn(&Value, &Value) -> std::cmp::Ordering> {
        Some(flow_schema_order)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("PriorityLevel", "string", "", "`name` is the name of the priority level configuration being referenced Required.", 0),
            column("MatchingPrecedence", "string", "", "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.", 0),
            column("DistinguisherMethod", "string", "", "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.", 0),
            age_column(),
            column("MissingPL", "string", "", "references a broken or non-existent PriorityLevelConfiguration", 0),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let text = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let dm = obj
            .pointer("/spec/distinguisherMethod/type")
            .and_then(Value::as_str)
            .map_or_else(|| "<none>".to_string(), str::to_string);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(text("/spec/priorityLevelConfiguration/name")),
            Value::from(
                obj.pointer("/spec/matchingPrecedence")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            ),
            Value::from(dm),
            age_cell(obj, now),
            Value::from(condition_status(obj, "Dangling").unwrap_or_else(|| "?".into())),
        ]
    }
}

// ---- PriorityLevelConfiguration ----

fn validate_queuing(q: &fc::QueuingConfiguration, path: &str, errs: &mut Vec<FieldError>) {
    let (queues, hand, limit) = (
        q.queues.unwrap_or(0),
        q.hand_size.unwrap_or(0),
        q.queue_length_limit.unwrap_or(0),
    );
    if limit <= 0 {
        errs.push(FieldError::invalid_value(
            format!("{path}.queueLengthLimit"),
            &json!(limit),
            "must be positive",
        ));
    }
    if queues <= 0 {
        errs.push(FieldError::invalid_value(
            format!("{path}.queues"),
            &json!(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(FieldError::invalid_value(
            format!("{path}.queues"),
            &json!(queues),
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let entropy = (f64::from(queues.max(1))).log2() * f64::from(hand);
    if hand <= 0 {
        errs.push(FieldError::invalid_value(
            format!("{path}.handSize"),
            &json!(hand),
            "must be positive",
        ));
    } else if hand > queues {
        errs.push(FieldError::invalid_value(
            format!("{path}.handSize"),
            &json!(hand),
            format!("should not be greater than queues ({queues})"),
        ));
    } else if entropy.ceil() > MAX_HASH_BITS {
        errs.push(FieldError::invalid_value(format!("{path}.handSize"), &json!(hand), format!("required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}")));
    }
}

fn validate_percent(v: Option<i32>, path: String, errs: &mut Vec<FieldError>) {
    if let Some(p) = v.filter(|p| !(0..=100).contains(p)) {
        errs.push(FieldError::invalid_value(
            path,
            &json!(p),
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_priority_level_spec(
    name: &str,
    spec: &fc::PriorityLevelConfigurationSpec,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = spec.type_.as_str();
    if (name == "exempt") != (ty == "Exempt") {
        errs.push(FieldError::invalid(
            "spec.type",
            ty,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match ty {
        "Exempt" => {
            if spec.limited.is_some() {
                errs.push(FieldError::forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(e) = &spec.exempt {
                if let Some(n) = e.nominal_concurrency_shares.filter(|n| *n < 0) {
                    errs.push(FieldError::invalid_value(
                        "spec.exempt.nominalConcurrencyShares",
                        &json!(n),
                        "must be a non-negative integer",
                    ));
                }
                validate_percent(
                    e.lendable_percent,
                    "spec.exempt.lendablePercent".into(),
                    &mut errs,
                );
            }
        }
        "Limited" => {
            if spec.exempt.is_some() {
                errs.push(FieldError::forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match &spec.limited {
                None => errs.push(FieldError::required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(l) => {
                    let n = l.nominal_concurrency_shares.unwrap_or(0);
                    if n < 0 {
                        errs.push(FieldError::invalid_value(
                            "spec.limited.nominalConcurrencyShares",
                            &json!(n),
                            "must be a non-negative integer",
                        ));
                    }
                    let lr = l.limit_response.clone().unwrap_or_default();
                    let p = "spec.limited.limitResponse";
                    match lr.type_.as_str() {
                        "Reject" => {
                            if lr.queuing.is_some() {
                                errs.push(FieldError::forbidden(
                                    format!("{p}.queuing"),
                                    "must be nil if limited.limitResponse.type is not Limited",
                                ));
                            }
                        }
                        "Queue" => match &lr.queuing {
                            None => errs.push(FieldError::required(
                                format!("{p}.queuing"),
                                "must not be empty if limited.limitResponse.type is Limited",
                            )),
                            Some(q) => validate_queuing(q, &format!("{p}.queuing"), &mut errs),
                        },
                        other => errs.push(FieldError::not_supported(
                            format!("{p}.type"),
                            &json!(other),
                            &["Queue", "Reject"],
                        )),
                    }
                    validate_percent(
                        l.lendable_percent,
                        "spec.limited.lendablePercent".into(),
                        &mut errs,
                    );
                    if let Some(b) = l.borrowing_limit_percent.filter(|b| *b < 0) {
                        errs.push(FieldError::invalid_value(
                            "spec.limited.borrowingLimitPercent",
                            &json!(b),
                            "if specified, must be a non-negative integer",
                        ));
                    }
                }
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.type",
            &json!(other),
            &["Exempt", "Limited"],
        )),
    }
    errs
}

/// `SetDefaults_*` of a level's spec.
fn default_priority_level(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    if let Some(Value::Object(l)) = spec.get_mut("limited") {
        default_field(l, "nominalConcurrencyShares", json!(30));
        default_field(l, "lendablePercent", json!(0));
        if let Some(Value::Object(q)) = l
            .get_mut("limitResponse")
            .and_then(|r| r.get_mut("queuing"))
        {
            for (k, d) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
                if q.get(k).and_then(Value::as_i64).unwrap_or(0) == 0 {
                    q.insert(k.into(), json!(d));
                }
            }
        }
    }
    if let Some(Value::Object(e)) = spec.get_mut("exempt") {
        default_field(e, "nominalConcurrencyShares", json!(0));
        default_field(e, "lendablePercent", json!(0));
    }
}

/// PriorityLevelConfigurations.
pub struct PriorityLevelConfigurationStrategy;

impl PriorityLevelConfigurationStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = api::meta::name(obj).unwrap_or("");
        let mut errs = match serde_json::from_value::<fc::PriorityLevelConfiguration>(obj.clone()) {
            Ok(pl) => validate_priority_level_spec(name, &pl.spec.unwrap_or_default()),
            Err(e) => return decode_error(e),
        };
        errs.extend(validate_mandatory(
            name,
            obj,
            mandatory_priority_level_spec(name),
        ));
        errs.extend(validate_conditions(obj));
        errs
    }
}

fn int_or_none(v: Option<&Value>) -> Value {
    match v.and_then(Value::as_i64) {
        Some(n) => Value::from(n),
        None => Value::from("<none>"),
    }
}

impl Strategy for PriorityLevelConfigurationStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_priority_level(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_priority_level)
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_priority_level(new);
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Type", "string", "", "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required.", 0),
            column("NominalConcurrencyShares", "string", "", "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level. The server's concurrency limit (ServerCL) is divided among the Limited priority levels in proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a larger nominal concurrency limit, at the expense of every other priority level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting this field to zero supports the construction of a \"jail\" for this priority level that is used to hold some request(s)", 0),
            column("Queues", "string", "", "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64.", 0),
            column("HandSize", "string", "", "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8.", 0),
            column("QueueLengthLimit", "string", "", "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let limited = obj.pointer("/spec/limited").filter(|l| l.is_object());
        let queuing = limited
            .and_then(|l| l.pointer("/limitResponse/queuing"))
            .filter(|q| q.is_object());
        let ncs = match limited {
            Some(l) => Value::from(
                l.get("nominalConcurrencyShares")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            ),
            None => Value::from("<none>"),
        };
        let q = |k: &str| int_or_none(queuing.and_then(|q| q.get(k)));
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(
                obj.pointer("/spec/type")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            ncs,
            q("queues"),
            q("handSize"),
            q("queueLengthLimit"),
            age_cell(obj, now),
        ]
    }
}
