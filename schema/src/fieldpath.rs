//! `cel.ValidFieldPath` (upstream `apiserver/schema/cel/validation.go`): the `fieldPath` of an
//! `x-kubernetes-validations` rule, a JSON path of field (`.name`) and map (`['key']`) accessors
//! resolved against the schema the rule sits on, rendered as a field path (`spec.ports`,
//! `labels[app]`). List indices are not accessors.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrBool,
};

/// The tokens upstream's scanner yields: `.`, `[`, `]` and the text between them.
fn tokens(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in path.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if in_quote => escaped = true,
            '\'' => in_quote = !in_quote,
            '.' | '[' | ']' if !in_quote => {
                if start < i {
                    out.push(&path[start..i]);
                }
                out.push(&path[i..i + 1]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < path.len() {
        out.push(&path[start..]);
    }
    out
}

fn unescape_single_quote(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | '\'')) => out.push(e),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => return Err(format!("invalid escape sequence '\\{other}'")),
                None => return Err("unterminated escape sequence".into()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Resolves `json_path` from `schema`: the rendered field path and the schema it ends at, or
/// upstream's error text (`does not refer to a valid field`, …).
pub fn valid_field_path<'a>(
    json_path: &str,
    schema: &'a JSONSchemaProps,
) -> Result<(String, &'a JSONSchemaProps), String> {
    let mut path = String::new();
    let mut cur = schema;
    let toks = tokens(json_path);
    let mut it = toks.into_iter();
    let step = |cur: &'a JSONSchemaProps,
                name: &str,
                path: &mut String|
     -> Result<&'a JSONSchemaProps, String> {
        if let Some(props) = &cur.properties {
            let p = props.get(name).ok_or("does not refer to a valid field")?;
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
            Ok(p)
        } else if let Some(JSONSchemaPropsOrBool::Schema(a)) = &cur.additional_properties {
            path.push_str(&format!("[{name}]"));
            Ok(a)
        } else {
            Err("does not refer to a valid field".into())
        }
    };
    while let Some(tok) = it.next() {
        match tok {
            "[" => {
                let lit = it.next().ok_or("unexpected end of JSON path")?;
                if lit.len() < 2 || !lit.starts_with('\'') || !lit.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {lit}"));
                }
                let name = unescape_single_quote(&lit[1..lit.len() - 1])
                    .map_err(|e| format!("invalid string literal: {e}"))?;
                cur = step(cur, &name, &mut path)?;
                match it.next() {
                    Some("]") => {}
                    Some(t) => return Err(format!("expected ] but got {t}")),
                    None => return Err("unexpected end of JSON path".into()),
                }
            }
            "." => {
                let name = it.next().ok_or("unexpected end of JSON path")?;
                cur = step(cur, name, &mut path)?;
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((path, cur))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_resolve_like_upstream() {
        let s: JSONSchemaProps = serde_json::from_value(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a.b": {"type": "string"},
                     "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}))
        .unwrap_or_default();
        assert_eq!(
            valid_field_path(".spec['a.b']", &s).map(|r| r.0),
            Ok("spec.a.b".to_string())
        );
        assert_eq!(
            valid_field_path(".spec.labels['app']", &s).map(|r| r.0),
            Ok("spec.labels[app]".to_string())
        );
        assert_eq!(
            valid_field_path(".spec.nope", &s).map(|r| r.0),
            Err("does not refer to a valid field".to_string())
        );
        assert_eq!(
            valid_field_path("spec", &s).map(|r| r.0),
            Err("expected [ or . but got: spec".to_string())
        );
        assert_eq!(
            valid_field_path(".spec.", &s).map(|r| r.0),
            Err("unexpected end of JSON path".to_string())
        );
    }
}
