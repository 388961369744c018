//! The compiled rules of a schema, in a tree parallel to it (upstream's `cel.Validator`): one
//! [`Tree`] per schema node that has rules or has descendants with rules, built from the
//! validation schema (which may be an `allOf` branch) and the node schema it applies to.
//!
//! Compilation reports upstream's CRD validation errors (`apiextensions/validation`,
//! `ValidateCustomResourceDefinitionOpenAPISchema`) for each rule at
//! `<path>.x-kubernetes-validations[i].<field>`, and the estimated cost per expression (times how
//! often the node can occur) and for the whole schema.

use crate::compile::{compile, Compiled, Want};
use crate::cost::{
    cost_error_message, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT,
};
use crate::errors::rule_go_syntax;
use crate::schema::{self, Node};
use api::validation::{FieldError, FieldErrorKind};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use serde_json::Value;
use std::sync::Arc;

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub struct Rule {
    pub source: ValidationRule,
    pub program: Compiled,
    pub message: Option<Compiled>,
    /// The normalized `fieldPath` (`field.Path.String()` of the validated path).
    pub field_path: Option<String>,
    pub optional_old_self: bool,
}

impl Rule {
    /// upstream's `ruleErrorString`: the message if there is one, else the rule.
    pub fn error_string(&self) -> &str {
        match self.source.message.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => m,
            _ => self.source.rule.trim(),
        }
    }

    /// The reason's error kind (`fieldErrorForReason`).
    pub fn kind(&self) -> FieldErrorKind {
        match self.source.reason.as_deref() {
            Some("FieldValueForbidden") => FieldErrorKind::Forbidden,
            Some("FieldValueRequired") => FieldErrorKind::Required,
            Some("FieldValueDuplicate") => FieldErrorKind::Duplicate,
            _ => FieldErrorKind::Invalid,
        }
    }
}

#[derive(Debug)]
pub struct Tree {
    pub node: Arc<Node>,
    pub rules: Vec<Rule>,
    /// (JSON name, escaped CEL name if it has one, subtree).
    pub properties: Vec<(String, Option<String>, Tree)>,
    pub items: Option<Box<Tree>>,
    pub additional: Option<Box<Tree>>,
    pub all_of: Vec<Tree>,
}

impl Tree {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.properties.is_empty()
            && self.items.is_none()
            && self.additional.is_none()
            && self.all_of.is_empty()
    }
}

const SUPPORTED_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn items_of(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &p.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
        Some(JSONSchemaPropsOrArray::Schemas(v)) => v.first(),
        None => None,
    }
}

fn additional_of(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &p.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s),
        _ => None,
    }
}

/// Where the schema walk is.
pub struct At<'a> {
    path: String,
    /// How many times this node can occur in one object.
    cardinality: u64,
    /// The path of the nearest list without `x-kubernetes-list-type: map` (or atomic map) above,
    /// where `oldSelf` cannot be correlated.
    uncorrelatable: Option<&'a str>,
}

pub struct Compiler {
    pub errors: Vec<FieldError>,
    pub total_cost: u64,
}

impl Compiler {
    pub fn new() -> Self {
        Compiler {
            errors: Vec::new(),
            total_cost: 0,
        }
    }

    /// Compiles the rules at `validation` (applying to the node `node_props`) and below.
    pub fn tree(
        &mut self,
        validation: &JSONSchemaProps,
        node_props: &JSONSchemaProps,
        node: Arc<Node>,
        at: &At<'_>,
    ) -> Option<Tree> {
        let mut tree = Tree {
            node: node.clone(),
            rules: self.rules(validation, node_props, &node, at),
            properties: Vec::new(),
            items: None,
            additional: None,
            all_of: Vec::new(),
        };
        if let (Some(vprops), Some(nprops)) = (&validation.properties, &node_props.properties) {
            for (name, vp) in vprops {
                let Some(np) = nprops.get(name) else { continue };
                let escaped = schema::escape(name);
                let child = match (&escaped, &node.kind) {
                    (Some(e), schema::Kind::Object { fields, .. }) => match fields.get(e) {
                        Some(f) => f.node.clone(),
                        None => continue,
                    },
                    _ => schema::node(np, false),
                };
                let path = format!("{}.properties[{name}]", at.path);
                let sub = At {
                    path,
                    cardinality: at.cardinality,
                    uncorrelatable: at.uncorrelatable,
                };
                if let Some(t) = self.tree(vp, np, child, &sub) {
                    tree.properties.push((name.clone(), escaped, t));
                }
            }
        }
        if let (Some(vi), Some(ni), schema::Kind::List(item)) =
            (items_of(validation), items_of(node_props), &node.kind)
        {
            let path = format!("{}.items", at.path);
            let correlatable = node.list_type.as_deref() == Some("map");
            let sub = At {
                path,
                cardinality: at.cardinality.saturating_mul(node.max_elements.max(1)),
                uncorrelatable: if correlatable {
                    at.uncorrelatable
                } else {
                    Some(&at.path)
                },
            };
            tree.items = self.tree(vi, ni, item.clone(), &sub).map(Box::new);
        }
        if let (Some(va), Some(na), schema::Kind::Map(value)) = (
            additional_of(validation),
            additional_of(node_props),
            &node.kind,
        ) {
            let path = format!("{}.additionalProperties", at.path);
            let correlatable = node.map_type.as_deref() != Some("atomic");
            let sub = At {
                path,
                cardinality: at.cardinality.saturating_mul(node.max_elements.max(1)),
                uncorrelatable: if correlatable {
                    at.uncorrelatable
                } else {
                    Some(&at.path)
                },
            };
            tree.additional = self.tree(va, na, value.clone(), &sub).map(Box::new);
        }
        for (i, branch) in validation.all_of.iter().flatten().enumerate() {
            let sub = At {
                path: format!("{}.allOf[{i}]", at.path),
                cardinality: at.cardinality,
                uncorrelatable: at.uncorrelatable,
            };
            if let Some(t) = self.tree(branch, node_props, node.clone(), &sub) {
                tree.all_of.push(t);
            }
        }
        (!tree.is_empty()).then_some(tree)
    }

    fn observe(&mut self, path: &str, cost: u64, what: &str) {
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            self.errors.push(FieldError::forbidden(
                path,
                cost_error_message(what, cost, STATIC_ESTIMATED_COST_LIMIT),
            ));
        }
        self.total_cost = self.total_cost.saturating_add(cost);
    }

    fn rules(
        &mut self,
        validation: &JSONSchemaProps,
        node_props: &JSONSchemaProps,
        node: &Arc<Node>,
        at: &At<'_>,
    ) -> Vec<Rule> {
        let mut out = Vec::new();
        for (i, rule) in validation
            .x_kubernetes_validations
            .iter()
            .flatten()
            .enumerate()
        {
            let base = format!("{}.x-kubernetes-validations[{i}]", at.path);
            let before = self.errors.len();
            self.rule_fields(rule, node_props, &base);
            let trimmed = rule.rule.trim();
            if trimmed.is_empty() {
                continue;
            }
            let program = match compile(&rule.rule, node, Want::Bool) {
                Ok(p) => p,
                Err(detail) => {
                    let detail = if detail.starts_with("ERROR:") {
                        format!("compilation failed: {detail}")
                    } else {
                        detail
                    };
                    self.errors
                        .push(invalid_rule(&format!("{base}.rule"), rule, detail));
                    continue;
                }
            };
            let cost = program.max_cost.saturating_mul(at.cardinality);
            self.observe(&format!("{base}.rule"), cost, "estimated rule cost");
            if program.uses_old_self {
                if let Some(list) = at.uncorrelatable {
                    self.errors.push(FieldError {
                        field: format!("{base}.rule"),
                        kind: FieldErrorKind::Invalid,
                        value: Some(crate::errors::go_quote(&rule.rule)),
                        message: format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"),
                    });
                }
            } else if rule.optional_old_self == Some(true) {
                self.errors.push(FieldError {
                    field: format!("{base}.optionalOldSelf"),
                    kind: FieldErrorKind::Invalid,
                    value: Some("true".to_owned()),
                    message: "may not be set if oldSelf is not used in rule".to_owned(),
                });
            }
            let message = match rule.message_expression.as_deref().map(str::trim) {
                Some(m) if !m.is_empty() => match compile(m, node, Want::String) {
                    Ok(p) => {
                        let cost = p.max_cost.saturating_mul(at.cardinality);
                        self.observe(
                            &format!("{base}.messageExpression"),
                            cost,
                            "estimated messageExpression cost",
                        );
                        Some(p)
                    }
                    Err(detail) => {
                        let detail = if detail.starts_with("ERROR:") {
                            format!("messageExpression compilation failed: {detail}")
                        } else {
                            detail
                        };
                        self.errors.push(FieldError {
                            field: format!("{base}.messageExpression"),
                            kind: FieldErrorKind::Invalid,
                            value: Some(rule_go_syntax(rule)),
                            message: detail,
                        });
                        None
                    }
                },
                _ => None,
            };
            if self.errors.len() > before {
                continue;
            }
            let field_path = rule
                .field_path
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .and_then(|p| valid_field_path(p, node_props).ok());
            out.push(Rule {
                source: rule.clone(),
                program,
                message,
                field_path,
                optional_old_self: rule.optional_old_self == Some(true),
            });
        }
        out
    }

    /// The checks on a rule's other fields.
    fn rule_fields(&mut self, rule: &ValidationRule, node_props: &JSONSchemaProps, base: &str) {
        let msg = rule.message.as_deref().unwrap_or("");
        let trimmed_rule = rule.rule.trim();
        let trimmed_msg = msg.trim();
        if trimmed_rule.is_empty() {
            self.errors.push(FieldError::required(
                format!("{base}.rule"),
                "rule is not specified",
            ));
        } else if !msg.is_empty() && trimmed_msg.is_empty() {
            self.errors.push(FieldError::invalid(
                format!("{base}.message"),
                msg,
                "message must be non-empty if specified",
            ));
        } else if trimmed_msg.contains('\n') {
            self.errors.push(FieldError::invalid(
                format!("{base}.message"),
                msg,
                "message must not contain line breaks",
            ));
        } else if trimmed_rule.contains('\n') && trimmed_msg.is_empty() {
            self.errors.push(FieldError::required(
                format!("{base}.message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if let Some(me) = &rule.message_expression {
            if !me.is_empty() && me.trim().is_empty() {
                self.errors.push(FieldError::required(
                    format!("{base}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
        }
        if let Some(reason) = &rule.reason {
            if !SUPPORTED_REASONS.contains(&reason.as_str()) {
                self.errors.push(FieldError::not_supported(
                    format!("{base}.reason"),
                    &Value::String(reason.clone()),
                    SUPPORTED_REASONS,
                ));
            }
        }
        if let Some(fp) = &rule.field_path {
            if !fp.is_empty() && fp.trim().is_empty() {
                self.errors.push(FieldError::invalid(
                    format!("{base}.fieldPath"),
                    fp,
                    "fieldPath must be non-empty if specified",
                ));
            }
            if fp.contains('\n') {
                self.errors.push(FieldError::invalid(
                    format!("{base}.fieldPath"),
                    fp,
                    "fieldPath must not contain line breaks",
                ));
            }
            if !fp.trim().is_empty() && valid_field_path(fp, node_props).is_err() {
                self.errors.push(FieldError::invalid(
                    format!("{base}.fieldPath"),
                    fp,
                    "fieldPath must be a valid path",
                ));
            }
        }
    }

    /// The CRD-wide budget check, at the schema root's path.
    pub fn finish(&mut self, path: &str) {
        if self.total_cost > STATIC_ESTIMATED_CRD_COST_LIMIT {
            self.errors.push(FieldError::forbidden(
                path,
                cost_error_message(
                    "total CRD cost",
                    self.total_cost,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                ),
            ));
        }
    }
}

impl Default for Compiler {
    fn default() -> Self {
        Self::new()
    }
}

pub fn root_at(path: &str) -> At<'static> {
    At {
        path: path.to_owned(),
        cardinality: 1,
        uncorrelatable: None,
    }
}

fn invalid_rule(field: &str, rule: &ValidationRule, detail: String) -> FieldError {
    FieldError {
        field: field.to_owned(),
        kind: FieldErrorKind::Invalid,
        value: Some(rule_go_syntax(rule)),
        message: detail,
    }
}

/// upstream's `ValidFieldPath`: a JSON path of `.field` and `['key']` steps into the schema, as the
/// `field.Path` string it names (`spec.x[key]`).
pub fn valid_field_path(path: &str, schema: &JSONSchemaProps) -> Result<String, String> {
    let mut out = String::new();
    let mut node = schema;
    let mut rest = path;
    let step = |name: &str, out: &mut String, node: &mut &JSONSchemaProps| -> Result<(), String> {
        if let Some(props) = &node.properties {
            let sub = props.get(name).ok_or("does not refer to a valid field")?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            *node = sub;
        } else if let Some(ap) = additional_of(node) {
            out.push_str(&format!("[{name}]"));
            *node = ap;
        } else {
            return Err("does not refer to a valid field".to_owned());
        }
        Ok(())
    };
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err("unexpected end of JSON path".to_owned());
            }
            step(&r[..end], &mut out, &mut node)?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut end = None;
            let bytes = r.as_bytes();
            for i in 0..bytes.len() {
                if bytes[i] == b'\'' && (i == 0 || bytes[i - 1] != b'\\') {
                    end = Some(i);
                    break;
                }
            }
            let end = end.ok_or("unexpected end of JSON path")?;
            let key = r[..end].replace("\\'", "'").replace("\\\\", "\\");
            let after = r[end + 1..].strip_prefix(']').ok_or("expected ]")?;
            step(&key, &mut out, &mut node)?;
            rest = after;
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        }
    }
    Ok(out)
}
