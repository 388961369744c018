//! `JobSpec` validation shared by Jobs and CronJobs' job templates (upstream's `validateJobSpec`,
//! Kubernetes 1.33): counts, completion modes and their index limits, the pod failure and success
//! policies, the pod replacement policy, the pod template and the restart policies a Job's pods
//! may have. Messages and field paths are upstream's; `path` is where the spec sits (`spec` or
//! `spec.jobTemplate.spec`).

use super::common::validate_nonnegative;
use super::gofmt;
use super::podtemplate;
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Value};
use std::collections::BTreeSet;

// Limits copied from pkg/apis/batch/validation/validation.go (1.33).
const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;

const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const EXIT_CODE_OPERATORS: &[&str] = &["In", "NotIn"];
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];
const JOB_RESTART_POLICIES: &[&str] = &["OnFailure", "Never"];

fn int(v: Option<&Value>, key: &str) -> Option<i64> {
    v.and_then(|m| m.get(key)).and_then(Value::as_i64)
}

fn string<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a str> {
    v.and_then(|m| m.get(key)).and_then(Value::as_str)
}

/// `fmt.Sprintf("valid values: %q", list)`: `valid values: ["a" "b"]`.
fn valid_values(list: &[&str]) -> String {
    let q: Vec<String> = list.iter().map(|s| validation::go_quote(s)).collect();
    format!("valid values: [{}]", q.join(" "))
}

/// `field.TooMany`: `Too many: 21: must have at most 20 items`.
fn too_many(path: String, actual: usize, max: usize) -> FieldError {
    FieldError {
        field: path,
        kind: FieldErrorKind::TooMany,
        message: format!("must have at most {max} items"),
        value: Some(actual.to_string()),
    }
}

/// `field.Invalid` with `field.OmitValueType{}`: no value in the message.
fn invalid_omit(path: String, msg: &str) -> FieldError {
    FieldError {
        field: path,
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: None,
    }
}

/// Validates the spec of a Job (or of a CronJob's job template) at `path`.
pub fn validate(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        validate_nonnegative(spec, key, &format!("{path}.{key}"), &mut errs);
    }
    let parallelism = int(spec, "parallelism");
    let completions = int(spec, "completions");
    let per_index = int(spec, "backoffLimitPerIndex");
    let max_failed = int(spec, "maxFailedIndexes");
    if max_failed.is_some() && per_index.is_none() {
        errs.push(FieldError::required(
            format!("{path}.backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    if let Some(m) = string(spec, "managedBy") {
        errs.extend(domain_prefixed_path(&format!("{path}.managedBy"), m));
        if m.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(
                format!("{path}.managedBy"),
                format!("may not be more than {MAX_MANAGED_BY_LENGTH} bytes"),
            ));
        }
    }
    let mode = string(spec, "completionMode");
    let indexed = mode == Some("Indexed");
    if let Some(m) = mode {
        if m != "NonIndexed" && m != "Indexed" {
            errs.push(FieldError::not_supported(
                format!("{path}.completionMode"),
                &json!(m),
                &["NonIndexed", "Indexed"],
            ));
        }
    }
    if indexed {
        if completions.is_none() {
            errs.push(FieldError::required(
                format!("{path}.completions"),
                "when completion mode is Indexed",
            ));
        }
        if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
            errs.push(FieldError::invalid_value(format!("{path}.parallelism"), &json!(p), format!("must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed")));
        }
        if let (Some(c), Some(m)) = (completions, max_failed) {
            if m > c {
                errs.push(FieldError::invalid_value(
                    format!("{path}.maxFailedIndexes"),
                    &json!(m),
                    "must be less than or equal to completions",
                ));
            }
        }
        if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB) {
            errs.push(FieldError::invalid_value(
                format!("{path}.maxFailedIndexes"),
                &json!(m),
                format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
            ));
        }
        if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
            if max_failed.is_none() {
                errs.push(FieldError::required(
                    format!("{path}.maxFailedIndexes"),
                    format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
                ));
            }
            if let Some(p) = parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
                errs.push(FieldError::invalid_value(format!("{path}.parallelism"), &json!(p), format!("must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index")));
            }
            if let Some(m) =
                max_failed.filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS)
            {
                errs.push(FieldError::invalid_value(format!("{path}.maxFailedIndexes"), &json!(m), format!("must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index")));
            }
        }
    } else {
        for (key, v) in [
            ("backoffLimitPerIndex", per_index),
            ("maxFailedIndexes", max_failed),
        ] {
            if let Some(v) = v {
                errs.push(FieldError::invalid_value(
                    format!("{path}.{key}"),
                    &json!(v),
                    "requires indexed completion mode",
                ));
            }
        }
    }
    let failure_policy = spec
        .and_then(|s| s.get("podFailurePolicy"))
        .filter(|p| !p.is_null());
    if let Some(p) = failure_policy {
        validate_pod_failure_policy(spec, p, &format!("{path}.podFailurePolicy"), &mut errs);
    }
    if let Some(sp) = spec
        .and_then(|s| s.get("successPolicy"))
        .filter(|p| !p.is_null())
    {
        if indexed {
            validate_success_policy(sp, completions, &format!("{path}.successPolicy"), &mut errs);
        } else {
            errs.push(FieldError::invalid_value(
                format!("{path}.successPolicy"),
                sp,
                "requires indexed completion mode",
            ));
        }
    }
    if let Some(r) = string(spec, "podReplacementPolicy") {
        let allowed: &[&str] = if failure_policy.is_some() {
            &["Failed"]
        } else {
            &["Failed", "TerminatingOrFailed"]
        };
        if !allowed.contains(&r) {
            errs.push(FieldError::not_supported(
                format!("{path}.podReplacementPolicy"),
                &json!(r),
                allowed,
            ));
        }
    }
    let template = spec.and_then(|s| s.get("template"));
    errs.extend(podtemplate::validate(template, &format!("{path}.template")));
    let rp_path = format!("{path}.template.spec.restartPolicy");
    match podtemplate::restart_policy(template) {
        // Unset is defaulted to Always, so both read as "not chosen".
        "Always" | "" => errs.push(FieldError::required(
            rp_path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        rp if !JOB_RESTART_POLICIES.contains(&rp) => errs.push(FieldError::not_supported(
            rp_path,
            &json!(rp),
            JOB_RESTART_POLICIES,
        )),
        rp if failure_policy.is_some() && rp != "Never" => errs.push(FieldError::invalid_value(
            rp_path,
            &json!(rp),
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        _ => {}
    }
    errs
}

/// `IsDomainPrefixedPath`: `acme.io/foo`.
pub(super) fn domain_prefixed_path(path: &str, v: &str) -> Vec<FieldError> {
    let Some((host, rest)) = v
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        return vec![FieldError::invalid(
            path,
            v,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs: Vec<FieldError> = validation::is_dns1123_subdomain(host)
        .into_iter()
        .map(|m| FieldError::invalid(path, host, m))
        .collect();
    let path_char = |c: char| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c);
    if !rest.chars().all(path_char) {
        errs.push(FieldError::invalid(
            path,
            rest,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
    errs
}

fn container_names(spec: Option<&Value>) -> BTreeSet<String> {
    ["containers", "initContainers"]
        .iter()
        .filter_map(|k| {
            spec.and_then(|s| s.pointer(&format!("/template/spec/{k}")))
                .and_then(Value::as_array)
        })
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

fn validate_pod_failure_policy(
    spec: Option<&Value>,
    policy: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let rules_path = format!("{path}.rules");
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(too_many(
            rules_path.clone(),
            rules.len(),
            MAX_POD_FAILURE_POLICY_RULES,
        ));
    }
    let names = container_names(spec);
    let per_index = int(spec, "backoffLimitPerIndex").is_some();
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("{rules_path}[{i}]");
        match rule.get("action").and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required(
                format!("{rp}.action"),
                valid_values(ACTIONS),
            )),
            "FailIndex" if !per_index => errs.push(FieldError::invalid(
                format!("{rp}.action"),
                "FailIndex",
                "requires the backoffLimitPerIndex to be set",
            )),
            a if !ACTIONS.contains(&a) => errs.push(FieldError::not_supported(
                format!("{rp}.action"),
                &json!(a),
                ACTIONS,
            )),
            _ => {}
        }
        let exit_codes = rule.get("onExitCodes").filter(|v| !v.is_null());
        let conditions = rule
            .get("onPodConditions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if let Some(ec) = exit_codes {
            validate_on_exit_codes(ec, &format!("{rp}.onExitCodes"), &names, errs);
        }
        if !conditions.is_empty() {
            validate_on_pod_conditions(conditions, &format!("{rp}.onPodConditions"), errs);
        }
        match (exit_codes.is_some(), conditions.is_empty()) {
            (true, false) => errs.push(invalid_omit(
                rp,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, true) => errs.push(invalid_omit(
                rp,
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
    }
}

fn validate_on_exit_codes(
    ec: &Value,
    path: &str,
    names: &BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let operator = ec.get("operator").and_then(Value::as_str).unwrap_or("");
    if operator.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.operator"),
            valid_values(EXIT_CODE_OPERATORS),
        ));
    } else if !EXIT_CODE_OPERATORS.contains(&operator) {
        errs.push(FieldError::not_supported(
            format!("{path}.operator"),
            &json!(operator),
            EXIT_CODE_OPERATORS,
        ));
    }
    if let Some(c) = ec.get("containerName").and_then(Value::as_str) {
        if !names.contains(c) {
            errs.push(FieldError::invalid(
                format!("{path}.containerName"),
                c,
                "must be one of the container or initContainer names in the pod template",
            ));
        }
    }
    let values_path = format!("{path}.values");
    let raw = ec.get("values");
    let values: Vec<i64> = raw
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_i64().unwrap_or(0)).collect())
        .unwrap_or_default();
    let rendered = || gofmt::int32_slice(raw.filter(|v| v.is_array()));
    if values.is_empty() {
        errs.push(FieldError {
            field: values_path.clone(),
            kind: FieldErrorKind::Invalid,
            message: "at least one value is required".to_string(),
            value: Some(rendered()),
        });
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        errs.push(too_many(
            values_path.clone(),
            values.len(),
            MAX_ON_EXIT_CODES_VALUES,
        ));
    }
    let mut seen = BTreeSet::new();
    for (j, v) in values.iter().enumerate() {
        let vp = format!("{values_path}[{j}]");
        if operator == "In" && *v == 0 {
            errs.push(FieldError::invalid_value(
                vp.clone(),
                &json!(0),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(vp, &json!(v)));
        }
    }
    if values.windows(2).any(|w| w[0] > w[1]) {
        errs.push(FieldError {
            field: values_path,
            kind: FieldErrorKind::Invalid,
            message: "must be ordered".to_string(),
            value: Some(rendered()),
        });
    }
}

fn validate_on_pod_conditions(patterns: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if patterns.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
        errs.push(too_many(
            path.to_string(),
            patterns.len(),
            MAX_ON_POD_CONDITIONS_PATTERNS,
        ));
    }
    for (j, p) in patterns.iter().enumerate() {
        let pp = format!("{path}[{j}]");
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
        for m in validation::is_qualified_name(ty) {
            errs.push(FieldError::invalid(format!("{pp}.type"), ty, m));
        }
        match p.get("status").and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required(
                format!("{pp}.status"),
                valid_values(CONDITION_STATUSES),
            )),
            s if !CONDITION_STATUSES.contains(&s) => errs.push(FieldError::not_supported(
                format!("{pp}.status"),
                &json!(s),
                CONDITION_STATUSES,
            )),
            _ => {}
        }
    }
}

fn validate_success_policy(
    policy: &Value,
    completions: Option<i64>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let rules_path = format!("{path}.rules");
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rules.is_empty() {
        errs.push(FieldError::required(
            rules_path.clone(),
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(too_many(
            rules_path.clone(),
            rules.len(),
            MAX_SUCCESS_POLICY_RULES,
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("{rules_path}[{i}]");
        let count = rule.get("succeededCount").filter(|v| !v.is_null());
        let indexes = rule.get("succeededIndexes").and_then(Value::as_str);
        if count.is_none() && indexes.is_none() {
            errs.push(FieldError::required(
                rp.clone(),
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(ix) = indexes {
            let ip = format!("{rp}.succeededIndexes");
            if ix.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(
                    ip.clone(),
                    format!("may not be more than {MAX_SUCCEEDED_INDEXES_LENGTH} bytes"),
                ));
            }
            match validate_indexes_format(ix, completions.unwrap_or(0)) {
                Ok(t) => total = t,
                Err(e) => errs.push(FieldError::invalid(
                    ip,
                    ix,
                    format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(c) = count {
            let cp = format!("{rp}.succeededCount");
            let n = c.as_i64().unwrap_or(-1);
            if n < 0 {
                errs.push(FieldError::invalid_value(
                    cp.clone(),
                    c,
                    "must be greater than or equal to 0",
                ));
            }
            if let Some(comp) = completions.filter(|comp| n > *comp) {
                errs.push(FieldError::invalid_value(
                    cp.clone(),
                    c,
                    format!("must be less than or equal to {comp} (the number of specified completions)"),
                ));
            }
            if indexes.is_some() && n > total {
                errs.push(FieldError::invalid_value(cp, c, format!("must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)")));
            }
        }
    }
}

/// `validateIndexesFormat`: comma-separated increasing indexes or `a-b` intervals below
/// `completions`; returns how many indexes they cover.
pub fn validate_indexes_format(s: &str, completions: i64) -> Result<i64, String> {
    if s.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in s.split(',') {
        let (x, y) = parse_index_interval(interval, completions)?;
        if let Some(l) = last.filter(|l| *l >= x) {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

fn parse_index_interval(s: &str, completions: i64) -> Result<(i64, i64), String> {
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() > 2 {
        return Err(format!("the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'", validation::go_quote(s)));
    }
    let index = |p: &str| -> Result<i64, String> {
        let v: i64 = p.parse().map_err(|_| {
            format!(
                "cannot convert string to integer for index: {}",
                validation::go_quote(p)
            )
        })?;
        if v >= completions {
            return Err(format!("too large index: {}", validation::go_quote(p)));
        }
        Ok(v)
    };
    let x = index(parts[0])?;
    match parts.get(1) {
        Some(p) => {
            let y = index(p)?;
            if x >= y {
                return Err(format!("non-increasing order, previous: {x}, current: {y}"));
            }
            Ok((x, y))
        }
        None => Ok((x, x)),
    }
}
