//! Error text as upstream renders it: cel-go's runtime error strings, cel-go's issue format for
//! compile errors (`ERROR: <input>:1:5: msg` with the source line and a caret), and Go's `%#v` of
//! an `apiextensions.ValidationRule`, the value of the rule-level `field.Invalid` errors.

use crate::env::COST_EXCEEDED;
use cel::common::ast::SourceInfo;
use cel::ExecutionError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;

pub use api::validation::go_quote;

/// cel-go's text for a runtime error.
pub fn runtime_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(_) | ExecutionError::UnsupportedBinaryOperator(..) => {
            "no such overload".to_owned()
        }
        ExecutionError::ValuesNotComparable(..) => "no such overload".to_owned(),
        ExecutionError::UnexpectedType { .. } => "no such overload".to_owned(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", render(i)),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::FunctionError { message, .. } if message == COST_EXCEEDED => {
            COST_EXCEEDED.to_owned()
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::UndeclaredReference(name) => format!("no such attribute: {name}"),
        other => other.to_string(),
    }
}

fn render(v: &cel::Value) -> String {
    match v {
        cel::Value::Int(i) => i.to_string(),
        cel::Value::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}

/// One cel-go issue: `ERROR: <input>:line:col: msg`, the source line and a caret under `col`.
pub fn issue(source: &str, offset: Option<u32>, msg: &str) -> String {
    let offset = offset.map(|o| o as usize).unwrap_or(0).min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..offset].chars().count() + 1;
    let text = source[line_start..].lines().next().unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{col}: {msg}\n | {text}\n | {}^",
        ".".repeat(col - 1)
    )
}

/// The offset of an expression id, for [`issue`].
pub fn offset(info: &SourceInfo, id: u64) -> Option<u32> {
    info.offset_for(id).map(|(start, _)| start)
}

/// Go's `%#v` of the internal `apiextensions.ValidationRule`. Pointer fields that are set print
/// an address in Go; a fixed one stands in for it.
pub fn rule_go_syntax(rule: &ValidationRule) -> String {
    let ptr = |set: bool, ty: &str| {
        if set {
            format!("(*{ty})(0xc000000000)")
        } else {
            format!("(*{ty})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        go_quote(&rule.rule),
        go_quote(rule.message.as_deref().unwrap_or("")),
        go_quote(rule.message_expression.as_deref().unwrap_or("")),
        ptr(rule.reason.is_some(), "apiextensions.FieldValueErrorReason"),
        go_quote(rule.field_path.as_deref().unwrap_or("")),
        ptr(rule.optional_old_self.is_some(), "bool"),
    )
}
