//! The Table of a custom resource (upstream's `registry/customresource/tableconvertor`): a `Name`
//! column, then the version's `additionalPrinterColumns` (or `Age` on
//! `.metadata.creationTimestamp` when it has none, `serveDefaultColumnsIfEmpty`), each cell the
//! first result of the column's JSONPath.
//!
//! JSONPath is evaluated on the subset printer columns and selectable fields use, with Kubernetes'
//! semantics (missing keys give no result): `.field`, `['field']`, `[n]` (negative counts from the
//! end), `[*]`, `..`-free paths, and filters `[?(@.a.b == "x")]` / `!=` over string, number and
//! boolean literals. A path outside the subset yields no cell. Evaluation is bounded by the
//! object: every step visits each value at most once.

use serde_json::Value;

use super::table::{column, name_column};

/// One step of a parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        path: Vec<String>,
        equal: bool,
        literal: Value,
    },
}

/// A parsed JSONPath of the supported subset.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

fn parse_literal(s: &str) -> Option<Value> {
    let s = s.trim();
    if let Some(q) = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
    {
        return Some(Value::from(q));
    }
    match s {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ => s.parse::<f64>().ok().map(Value::from),
    }
}

fn parse_filter(inner: &str) -> Option<Step> {
    let (lhs, rhs, equal) = if let Some((l, r)) = inner.split_once("==") {
        (l, r, true)
    } else {
        let (l, r) = inner.split_once("!=")?;
        (l, r, false)
    };
    let lhs = lhs.trim().strip_prefix('@')?;
    let path = lhs
        .split('.')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    Some(Step::Filter {
        path,
        equal,
        literal: parse_literal(rhs)?,
    })
}

impl JsonPath {
    /// Parses `expr` (with or without the `{…}` template braces); `None` outside the subset.
    pub fn parse(expr: &str) -> Option<JsonPath> {
        let mut s = expr.trim();
        if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            s = inner.trim();
        }
        let s = s.strip_prefix('$').unwrap_or(s);
        let bytes = s.as_bytes();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'.' => {
                    if bytes.get(i + 1) == Some(&b'.') {
                        return None;
                    }
                    let start = i + 1;
                    let mut end = start;
                    while end < bytes.len() && bytes[end] != b'.' && bytes[end] != b'[' {
                        end += 1;
                    }
                    let name = &s[start..end];
                    if name == "*" {
                        steps.push(Step::All);
                    } else if !name.is_empty() {
                        steps.push(Step::Field(name.to_string()));
                    }
                    i = end;
                }
                b'[' => {
                    let close = s[i..].find(']')? + i;
                    let inner = s[i + 1..close].trim();
                    let step = if inner == "*" {
                        Step::All
                    } else if let Some(f) =
                        inner.strip_prefix("?(").and_then(|r| r.strip_suffix(')'))
                    {
                        parse_filter(f)?
                    } else if let Some(Value::String(name)) = parse_literal(inner)
                        .filter(|_| inner.starts_with('\'') || inner.starts_with('"'))
                    {
                        Step::Field(name)
                    } else {
                        Step::Index(inner.parse().ok()?)
                    };
                    steps.push(step);
                    i = close + 1;
                }
                _ => {
                    // A path without a leading dot (`spec.x`), as selectable fields may be read.
                    if !steps.is_empty() {
                        return None;
                    }
                    let mut end = i;
                    while end < bytes.len() && bytes[end] != b'.' && bytes[end] != b'[' {
                        end += 1;
                    }
                    steps.push(Step::Field(s[i..end].to_string()));
                    i = end;
                }
            }
        }
        Some(JsonPath { steps })
    }

    /// Every value the path selects in `obj`, in document order.
    pub fn find<'a>(&self, obj: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![obj];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in current {
                match (step, v) {
                    (Step::Field(name), Value::Object(m)) => next.extend(m.get(name)),
                    (Step::Index(n), Value::Array(a)) => {
                        let idx = if *n < 0 { a.len() as i64 + n } else { *n };
                        if idx >= 0 {
                            next.extend(a.get(idx as usize));
                        }
                    }
                    (Step::All, Value::Array(a)) => next.extend(a.iter()),
                    (Step::All, Value::Object(m)) => next.extend(m.values()),
                    (
                        Step::Filter {
                            path,
                            equal,
                            literal,
                        },
                        Value::Array(a),
                    ) => next.extend(a.iter().filter(|item| {
                        let mut x = Some(*item);
                        for p in path {
                            x = x.and_then(|x| x.get(p));
                        }
                        x.is_some_and(|x| literal_eq(x, literal) == *equal)
                    })),
                    _ => {}
                }
            }
            current = next;
        }
        current
    }
}

fn literal_eq(x: &Value, literal: &Value) -> bool {
    match (x, literal) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// A value as Kubernetes' JSONPath prints it: strings bare, everything else as JSON.
pub fn print_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i32,
    path: Option<JsonPath>,
}

impl PrinterColumn {
    /// From the CRD's JSON of one column.
    pub fn from_crd(c: &Value) -> PrinterColumn {
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let json_path = text("jsonPath");
        let description = match text("description") {
            d if d.is_empty() => {
                format!("Custom resource definition column (in JSONPath format): {json_path}")
            }
            d => d,
        };
        PrinterColumn {
            name: text("name"),
            ty: text("type"),
            format: text("format"),
            description,
            priority: c
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            path: JsonPath::parse(&json_path),
        }
    }

    /// The columns of a CRD version (`additionalPrinterColumns`), `Age` when it has none.
    pub fn of_version(version: &Value) -> Vec<PrinterColumn> {
        let columns: Vec<PrinterColumn> = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| cols.iter().map(PrinterColumn::from_crd).collect())
            .unwrap_or_default();
        if columns.is_empty() {
            return vec![PrinterColumn::from_crd(&serde_json::json!({
                "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
            }))];
        }
        columns
    }

    fn definition(&self) -> Value {
        column(
            &self.name,
            &self.ty,
            &self.format,
            &self.description,
            self.priority,
        )
    }

    fn cell(&self, obj: &Value, now: jiff::Timestamp) -> Value {
        let Some(value) = self
            .path
            .as_ref()
            .and_then(|p| p.find(obj).first().copied())
        else {
            return Value::Null;
        };
        match (self.ty.as_str(), value) {
            (_, Value::Null) => Value::Null,
            ("string", v) => Value::from(print_value(v)),
            ("integer", Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
            ("boolean", Value::Bool(b)) => Value::Bool(*b),
            ("date", Value::String(s)) => match api::meta::parse_time(s) {
                Some(t) => Value::from(api::human_duration_since(t, now)),
                None => Value::from("<invalid>"),
            },
            _ => Value::Null,
        }
    }
}

/// The Table columns of a version: `Name`, then its printer columns.
pub fn columns(printer: &[PrinterColumn]) -> Vec<Value> {
    std::iter::once(name_column())
        .chain(printer.iter().map(PrinterColumn::definition))
        .collect()
}

/// One row's cells.
pub fn cells(printer: &[PrinterColumn], obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    std::iter::once(Value::from(api::meta::name(obj).unwrap_or("")))
        .chain(printer.iter().map(|c| c.cell(obj, now)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_of_printer_columns_select_as_kubernetes_jsonpath() {
        let obj = json!({
            "spec": {"replicas": 3, "items": [{"name": "a"}, {"name": "b"}], "ratio": 1.5,
                     "labels": {"app.kubernetes.io/name": "x"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "Synced", "status": "False"}]},
        });
        let find = |p: &str| -> Vec<Value> {
            JsonPath::parse(p)
                .map(|p| p.find(&obj).into_iter().cloned().collect())
                .unwrap_or_default()
        };
        assert_eq!(find(".spec.replicas"), [json!(3)]);
        assert_eq!(find("{.spec.items[1].name}"), [json!("b")]);
        assert_eq!(find(".spec.items[-1].name"), [json!("b")]);
        assert_eq!(find(".spec.items[*].name"), [json!("a"), json!("b")]);
        assert_eq!(
            find(".status.conditions[?(@.type==\"Ready\")].status"),
            [json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].type"),
            [json!("Synced")]
        );
        assert_eq!(find(".spec.labels['app.kubernetes.io/name']"), [json!("x")]);
        assert_eq!(find("spec.replicas"), [json!(3)]);
        assert!(find(".spec.missing.deeper").is_empty());
        assert!(JsonPath::parse("..spec").is_none());
        assert_eq!(print_value(&json!(3.0)), "3");
        assert_eq!(print_value(&json!({"a": 1})), "{\"a\":1}");
    }

    #[test]
    fn cells_follow_the_column_types_and_missing_values_are_null() {
        let version = json!({"additionalPrinterColumns": [
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "priority": 1},
            {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing", "description": "d"},
        ]});
        let cols = PrinterColumn::of_version(&version);
        let defs = columns(&cols);
        assert_eq!(defs.len(), 5);
        assert_eq!(defs[2]["priority"], 1);
        assert_eq!(
            defs[1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
        assert_eq!(defs[4]["description"], "d");
        let obj = json!({"metadata": {"name": "w"}, "spec": {"replicas": 2.0, "on": true},
                         "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let row = cells(&cols, &obj, jiff::Timestamp::now());
        assert_eq!(
            row,
            [
                json!("w"),
                json!(2),
                json!("True"),
                json!(true),
                Value::Null
            ]
        );
        let age = PrinterColumn::of_version(&json!({}));
        assert_eq!(columns(&age)[1]["name"], "Age");
        assert_eq!(columns(&age)[1]["type"], "date");
    }
}
