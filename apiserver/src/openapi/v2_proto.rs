//! The `/openapi/v2` document in protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! the only form client-go's `OpenAPISchema` asks for: kubectl up to 1.27 reads it for `explain`
//! and `--validate`): gnostic's `openapi.v2.Document` (`openapiv2/OpenAPIv2.proto`), encoded from
//! the JSON document field by field with the proto's field numbers. Vendor extensions carry their
//! value as YAML text (`Any.yaml`), as gnostic does; JSON is YAML.
//!
//! Covered: what the served document uses (info, paths with their operations, parameters and
//! responses, definitions with the JSON Schema keywords and `x-` extensions of the kinds' schemas).

use serde_json::{Map, Value};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: Option<&Value>) {
    if let Some(s) = s.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        bytes_field(out, field, s.as_bytes());
    }
}

fn strings(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    match v {
        Some(Value::Array(a)) => {
            for s in a.iter().filter_map(Value::as_str) {
                bytes_field(out, field, s.as_bytes());
            }
        }
        Some(Value::String(s)) => bytes_field(out, field, s.as_bytes()),
        _ => {}
    }
}

fn boolean(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    if v.and_then(Value::as_bool) == Some(true) {
        key(out, field, 0);
        varint(out, 1);
    }
}

fn int64(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    if let Some(n) = v.and_then(Value::as_i64).filter(|n| *n != 0) {
        key(out, field, 0);
        varint(out, n as u64);
    }
}

fn double(out: &mut Vec<u8>, field: u32, v: Option<&Value>) {
    if let Some(n) = v.and_then(Value::as_f64) {
        key(out, field, 1);
        out.extend_from_slice(&n.to_le_bytes());
    }
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes_field(out, field, &inner);
}

/// `Any { yaml = 2 }` of a JSON value.
fn any(out: &mut Vec<u8>, field: u32, v: &Value) {
    let text = serde_json::to_string(v).unwrap_or_default();
    message(out, field, |m| bytes_field(m, 2, text.as_bytes()));
}

/// `NamedAny` vendor extensions (`x-...` keys) of `m`.
fn extensions(out: &mut Vec<u8>, field: u32, m: &Map<String, Value>) {
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        message(out, field, |n| {
            bytes_field(n, 1, k.as_bytes());
            any(n, 2, v);
        });
    }
}

/// `openapi.v2.Schema`.
fn schema(out: &mut Vec<u8>, v: &Value) {
    let Some(m) = v.as_object() else { return };
    string(out, 1, m.get("$ref"));
    string(out, 2, m.get("format"));
    string(out, 3, m.get("title"));
    string(out, 4, m.get("description"));
    if let Some(d) = m.get("default") {
        any(out, 5, d);
    }
    double(out, 6, m.get("multipleOf"));
    double(out, 7, m.get("maximum"));
    boolean(out, 8, m.get("exclusiveMaximum"));
    double(out, 9, m.get("minimum"));
    boolean(out, 10, m.get("exclusiveMinimum"));
    int64(out, 11, m.get("maxLength"));
    int64(out, 12, m.get("minLength"));
    string(out, 13, m.get("pattern"));
    int64(out, 14, m.get("maxItems"));
    int64(out, 15, m.get("minItems"));
    boolean(out, 16, m.get("uniqueItems"));
    int64(out, 17, m.get("maxProperties"));
    int64(out, 18, m.get("minProperties"));
    strings(out, 19, m.get("required"));
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        any(out, 20, e);
    }
    match m.get("additionalProperties") {
        Some(s @ Value::Object(_)) => message(out, 21, |a| message(a, 1, |x| schema(x, s))),
        Some(Value::Bool(b)) => message(out, 21, |a| {
            key(a, 2, 0);
            varint(a, u64::from(*b));
        }),
        _ => {}
    }
    if let Some(t) = m.get("type") {
        message(out, 22, |ti| strings(ti, 1, Some(t)));
    }
    match m.get("items") {
        Some(s @ Value::Object(_)) => message(out, 23, |i| message(i, 1, |x| schema(x, s))),
        Some(Value::Array(list)) => message(out, 23, |i| {
            for s in list {
                message(i, 1, |x| schema(x, s));
            }
        }),
        _ => {}
    }
    for s in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        message(out, 24, |x| schema(x, s));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        message(out, 25, |p| {
            for (name, s) in props {
                named_schema(p, 1, name, s);
            }
        });
    }
    boolean(out, 27, m.get("readOnly"));
    if let Some(e) = m.get("example") {
        any(out, 30, e);
    }
    extensions(out, 31, m);
}

fn named_schema(out: &mut Vec<u8>, field: u32, name: &str, s: &Value) {
    message(out, field, |n| {
        bytes_field(n, 1, name.as_bytes());
        message(n, 2, |x| schema(x, s));
    });
}

/// `ParametersItem { parameter = 1 }` of one parameter object, as field `field`.
fn parameter(out: &mut Vec<u8>, field: u32, p: &Value) {
    let Some(m) = p.as_object() else { return };
    message(out, field, |item| {
        message(item, 1, |param| match m.get("in").and_then(Value::as_str) {
            Some("body") => message(param, 1, |b| {
                string(b, 1, m.get("description"));
                string(b, 2, m.get("name"));
                string(b, 3, m.get("in"));
                boolean(b, 4, m.get("required"));
                if let Some(s) = m.get("schema") {
                    message(b, 5, |x| schema(x, s));
                }
                extensions(b, 6, m);
            }),
            Some("path") => message(param, 2, |nb| {
                message(nb, 4, |q| {
                    boolean(q, 1, m.get("required"));
                    string(q, 2, m.get("in"));
                    string(q, 3, m.get("description"));
                    string(q, 4, m.get("name"));
                    string(q, 5, m.get("type"));
                    boolean(q, 19, m.get("uniqueItems"));
                    extensions(q, 22, m);
                })
            }),
            _ => message(param, 2, |nb| {
                message(nb, 3, |q| {
                    boolean(q, 1, m.get("required"));
                    string(q, 2, m.get("in"));
                    string(q, 3, m.get("description"));
                    string(q, 4, m.get("name"));
                    string(q, 6, m.get("type"));
                    boolean(q, 20, m.get("uniqueItems"));
                    extensions(q, 23, m);
                })
            }),
        })
    });
}

/// `openapi.v2.Operation`.
fn operation(out: &mut Vec<u8>, op: &Value) {
    let Some(m) = op.as_object() else { return };
    strings(out, 1, m.get("tags"));
    string(out, 3, m.get("description"));
    string(out, 5, m.get("operationId"));
    strings(out, 6, m.get("produces"));
    strings(out, 7, m.get("consumes"));
    for p in m
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parameter(out, 8, p);
    }
    if let Some(responses) = m.get("responses").and_then(Value::as_object) {
        message(out, 9, |rs| {
            for (code, r) in responses {
                message(rs, 1, |named| {
                    bytes_field(named, 1, code.as_bytes());
                    message(named, 2, |rv| {
                        message(rv, 1, |resp| {
                            string(resp, 1, r.get("description"));
                            if let Some(s) = r.get("schema") {
                                message(resp, 2, |si| message(si, 1, |x| schema(x, s)));
                            }
                        })
                    });
                });
            }
        });
    }
    strings(out, 10, m.get("schemes"));
    extensions(out, 13, m);
}

/// The protobuf encoding of the Swagger 2.0 JSON document `doc`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, doc.get("swagger"));
    if let Some(info) = doc.get("info") {
        message(&mut out, 2, |i| {
            string(i, 1, info.get("title"));
            string(i, 2, info.get("version"));
        });
    }
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        message(&mut out, 8, |ps| {
            for (path, item) in paths {
                message(ps, 2, |named| {
                    bytes_field(named, 1, path.as_bytes());
                    message(named, 2, |pi| {
                        for (verb, field) in [
                            ("get", 2),
                            ("put", 3),
                            ("post", 4),
                            ("delete", 5),
                            ("options", 6),
                            ("head", 7),
                            ("patch", 8),
                        ] {
                            if let Some(op) = item.get(verb) {
                                message(pi, field, |o| operation(o, op));
                            }
                        }
                        for p in item
                            .get("parameters")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            parameter(pi, 9, p);
                        }
                    });
                });
            }
        });
    }
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        message(&mut out, 9, |d| {
            for (name, s) in defs {
                named_schema(d, 1, name, s);
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        let doc = serde_json::json!({"swagger": "2.0", "info": {"title": "K", "version": "v"}});
        assert_eq!(encode(&doc), b"\x0a\x032.0\x12\x06\x0a\x01K\x12\x01v");
    }
}
