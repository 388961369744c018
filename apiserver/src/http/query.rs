//! Query-parameter parsing and validation for list, watch, write and delete requests
//! (spec §7.2-§7.7).
//!
//! Parsing never panics on any input (T7): bad numbers and bad booleans are 400 BadRequest,
//! forbidden combinations of `resourceVersion`/`resourceVersionMatch`/`continue`/
//! `sendInitialEvents` are 422 Invalid on `ListOptions`, exactly as `ValidateListOptions`.
//! Empty query segments (`?&a=b`, a bare `?`) are tolerated.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use api::validation::FieldError;

use crate::error::{ApiError, Result};
pub use crate::registry::options::{DeleteOptions, FieldValidation, Preconditions, Propagation};

/// Decoded query string, in order, with repeated keys kept.
#[derive(Debug, Default, Clone)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string (without `?`).
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .map(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .filter(|(k, _)| !k.is_empty())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Query { pairs }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// All values of `key`.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter, read as the apiserver's parameter codec reads it (`Convert_Slice_string_To_bool`):
    /// the first value counts; `0` and `false` in any case are false, every other value (the empty string
    /// and `f` included) is true. Request info reads `watch` with [`query_bool`] too, so a request is
    /// authorized for the verb it is served as.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.get(key).map(query_bool)
    }

    /// A non-negative integer parameter.
    pub fn u64(&self, key: &str) -> Result<Option<u64>> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for {key}: {v:?}: expected an integer"
                ))
            }),
        }
    }

    /// A signed integer parameter.
    pub fn i64(&self, key: &str) -> Result<Option<i64>> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for {key}: {v:?}: expected an integer"
                ))
            }),
        }
    }
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// `includeObject` of Table requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Rows carry no object.
    None,
    /// Rows carry `PartialObjectMetadata` (default).
    #[default]
    Metadata,
    /// Rows carry the full object.
    Object,
}

/// Options of LIST and WATCH (`metav1.ListOptions`).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 = none).
    pub limit: Option<u64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`, parsed; `None` when unset or empty.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<RvMatch>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `includeObject`.
    pub include_object: IncludeObject,
}

/// One boolean query value as the parameter codec converts it: false for `0` and any case of `false`, true
/// for everything else.
pub fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

fn list_forbidden(field: &str, message: &str) -> ApiError {
    ApiError::invalid_options("ListOptions", FieldError::forbidden(field, message))
}

/// Parses a `resourceVersion` value: empty = unset, otherwise a decimal revision.
pub fn parse_resource_version(raw: Option<&str>) -> Result<Option<u64>> {
    match raw {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}"))),
    }
}

impl ListOptions {
    /// Parses and validates list/watch options.
    pub fn from_query(q: &Query) -> Result<Self> {
        let watch = q.bool("watch").unwrap_or(false);
        let resource_version = parse_resource_version(q.get("resourceVersion"))?;
        let rv_match = match q.get("resourceVersionMatch") {
            None | Some("") => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(ApiError::invalid_options(
                    "ListOptions",
                    FieldError::not_supported(
                        "resourceVersionMatch",
                        &serde_json::Value::String(other.to_string()),
                        &["Exact", "NotOlderThan"],
                    ),
                ))
            }
        };
        let include_object = match q.get("includeObject") {
            None | Some("") | Some("Metadata") => IncludeObject::Metadata,
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "invalid value for includeObject: {other:?}"
                )))
            }
        };
        let continue_token = q
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(String::from);
        let opts = ListOptions {
            label_selector: q.get("labelSelector").map(String::from),
            field_selector: q.get("fieldSelector").map(String::from),
            // An int64 as upstream's parameter codec reads it: beyond it a 400, zero or
            // negative no limit.
            limit: q
                .i64("limit")?
                .and_then(|l| u64::try_from(l).ok())
                .filter(|l| *l > 0),
            continue_token,
            resource_version,
            rv_match,
            timeout_seconds: q.u64("timeoutSeconds")?,
            watch,
            allow_bookmarks: q.bool("allowWatchBookmarks").unwrap_or(false),
            send_initial_events: q.bool("sendInitialEvents"),
            include_object,
        };
        opts.validate(q.get("resourceVersion").unwrap_or(""))?;
        Ok(opts)
    }

    fn validate(&self, raw_rv: &str) -> Result<()> {
        if !self.watch {
            if self.send_initial_events.is_some() {
                return Err(list_forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
            if let Some(m) = self.rv_match {
                if raw_rv.is_empty() {
                    return Err(list_forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token.is_some() {
                    return Err(list_forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m == RvMatch::Exact && raw_rv == "0" {
                    return Err(list_forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.continue_token.is_some() && !raw_rv.is_empty() && raw_rv != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        } else {
            match (self.send_initial_events, self.rv_match) {
                (Some(true), Some(RvMatch::NotOlderThan)) => {}
                (Some(true), _) => {
                    return Err(list_forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
                }
                (_, Some(_)) if self.send_initial_events != Some(false) => {
                    return Err(list_forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Opaque `continue` token: the list's revision and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Revision of the list snapshot.
    pub rv: u64,
    /// Key of the last item already returned; the next page starts after it.
    pub start: String,
}

impl ContinueToken {
    /// Encodes the token (URL-safe base64 of JSON).
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Decodes a token; malformed tokens are 400 BadRequest.
    pub fn decode(raw: &str) -> Result<Self> {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(raw.trim_end_matches('='))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| ApiError::bad_request("continue key is not valid: illegal base64 data"))
    }
}

/// Options of create, update and patch (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (apply only).
    pub force: Option<bool>,
}

/// Parses `dryRun` values: only `All` is defined.
fn parse_dry_run<'a>(values: impl Iterator<Item = &'a str>, kind: &str) -> Result<bool> {
    let mut dry = false;
    for v in values {
        match v {
            "All" => dry = true,
            "" => {}
            other => {
                return Err(ApiError::invalid_options(
                    kind,
                    FieldError::not_supported(
                        "dryRun",
                        &serde_json::Value::String(other.to_string()),
                        &["All"],
                    ),
                ))
            }
        }
    }
    Ok(dry)
}

impl WriteOptions {
    /// Parses write options; `kind` names the options type for 422 messages.
    pub fn from_query(q: &Query, kind: &str) -> Result<Self> {
        let field_validation = match q.get("fieldValidation") {
            None | Some("") | Some("Ignore") => FieldValidation::Ignore,
            Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
                )))
            }
        };
        let field_manager = q.get("fieldManager").filter(|m| !m.is_empty());
        if let Some(m) = field_manager {
            if m.len() > 128 || m.chars().any(|c| c.is_control()) {
                return Err(ApiError::invalid_options(
                    kind,
                    FieldError::invalid(
                        "fieldManager",
                        m,
                        "must be at most 128 printable characters",
                    ),
                ));
            }
        }
        Ok(WriteOptions {
            dry_run: parse_dry_run(q.all("dryRun"), kind)?,
            field_manager: field_manager.map(String::from),
            field_validation,
            force: q.bool("force"),
        })
    }
}

fn parse_propagation(raw: &str) -> Result<Propagation> {
    match raw {
        "Background" => Ok(Propagation::Background),
        "Foreground" => Ok(Propagation::Foreground),
        "Orphan" => Ok(Propagation::Orphan),
        other => Err(ApiError::invalid_options(
            "DeleteOptions",
            FieldError::not_supported(
                "propagationPolicy",
                &serde_json::Value::String(other.to_string()),
                &["Foreground", "Background", "Orphan", "nil"],
            ),
        )),
    }
}

fn combine_orphan(
    propagation: Option<Propagation>,
    orphan: Option<bool>,
) -> Result<Option<Propagation>> {
    match (propagation, orphan) {
        (Some(_), Some(_)) => Err(ApiError::invalid_options(
            "DeleteOptions",
            FieldError::invalid(
                "propagationPolicy",
                "propagationPolicy",
                "orphanDependents and deletionPropagation cannot be both set",
            ),
        )),
        (p, None) => Ok(p),
        (None, Some(true)) => Ok(Some(Propagation::Orphan)),
        (None, Some(false)) => Ok(Some(Propagation::Background)),
    }
}

impl DeleteOptions {
    /// Decodes delete options from a body of `content_type` (JSON, YAML or a protobuf
    /// `DeleteOptions`, as client-go sends it when it speaks protobuf), possibly empty, and the
    /// query: the body wins. An unsupported content type is 415.
    pub fn decode(content_type: Option<&str>, body: &[u8], q: &Query) -> Result<Self> {
        use crate::http::negotiate::{body_format, BodyFormat};
        if !body.iter().any(|b| !b.is_ascii_whitespace()) {
            return Self::parse(body, q);
        }
        match body_format(content_type) {
            Some(BodyFormat::Json) => Self::parse(body, q),
            Some(BodyFormat::Yaml) => Self::from_json(&crate::http::body::parse_yaml(body)?),
            Some(BodyFormat::Protobuf) => {
                let v = crate::protobuf::decode_object(body).map_err(|e| {
                    ApiError::bad_request(format!("error decoding DeleteOptions: {e}"))
                })?;
                if v.get("kind").and_then(|k| k.as_str()) != Some("DeleteOptions") {
                    return Err(ApiError::bad_request(
                        "error decoding DeleteOptions: the body is not a DeleteOptions",
                    ));
                }
                Self::from_json(&v)
            }
            None => Err(ApiError::unsupported_media_type()),
        }
    }

    /// Parses delete options: `body` (JSON, possibly empty) wins over the query.
    pub fn parse(body: &[u8], q: &Query) -> Result<Self> {
        if body.iter().any(|b| !b.is_ascii_whitespace()) {
            let v: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            return Self::from_json(&v);
        }
        let propagation = q
            .get("propagationPolicy")
            .map(parse_propagation)
            .transpose()?;
        Ok(DeleteOptions {
            grace_period_seconds: q.i64("gracePeriodSeconds")?,
            propagation: combine_orphan(propagation, q.bool("orphanDependents"))?,
            preconditions: Preconditions::default(),
            dry_run: parse_dry_run(q.all("dryRun"), "DeleteOptions")?,
            user: None,
        })
    }

    /// Reads a `DeleteOptions` JSON object.
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        if !v.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        }
        let grace =
            match v.get("gracePeriodSeconds") {
                None | Some(serde_json::Value::Null) => None,
                Some(g) => Some(g.as_i64().ok_or_else(|| {
                    ApiError::bad_request("gracePeriodSeconds must be an integer")
                })?),
            };
        let propagation = match v.get("propagationPolicy") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(parse_propagation(s)?),
            Some(_) => return Err(ApiError::bad_request("propagationPolicy must be a string")),
        };
        let orphan = v.get("orphanDependents").and_then(|o| o.as_bool());
        let pre = v.get("preconditions");
        let field = |name: &str| {
            pre.and_then(|p| p.get(name))
                .and_then(|x| x.as_str())
                .map(String::from)
        };
        let dry_run = match v.get("dryRun") {
            Some(serde_json::Value::Array(a)) => {
                parse_dry_run(a.iter().filter_map(|x| x.as_str()), "DeleteOptions")?
            }
            _ => false,
        };
        Ok(DeleteOptions {
            grace_period_seconds: grace,
            propagation: combine_orphan(propagation, orphan)?,
            preconditions: Preconditions {
                uid: field("uid"),
                resource_version: field("resourceVersion"),
            },
            dry_run,
            user: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo(q: &str) -> Result<ListOptions> {
        ListOptions::from_query(&Query::parse(Some(q)))
    }

    #[test]
    fn tolerates_empty_segments() {
        let o = lo("&&limit=2&").unwrap_or_default();
        assert_eq!(o.limit, Some(2));
        assert!(lo("").is_ok());
    }

    #[test]
    fn list_option_validation() {
        assert_eq!(
            lo("resourceVersionMatch=Exact").err().map(|e| e.code()),
            Some(422)
        );
        assert_eq!(
            lo("resourceVersion=0&resourceVersionMatch=Exact")
                .err()
                .map(|e| e.code()),
            Some(422)
        );
        assert_eq!(
            lo("sendInitialEvents=true").err().map(|e| e.code()),
            Some(422)
        );
        assert_eq!(
            lo("watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=0")
                .err()
                .map(|e| e.code()),
            Some(422)
        );
        assert!(lo("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").is_ok());
        assert_eq!(lo("limit=abc").err().map(|e| e.code()), Some(400));
        // An int64: past it a 400 (never "no limit" further down), negative no limit.
        assert_eq!(
            lo("limit=9223372036854775808").err().map(|e| e.code()),
            Some(400)
        );
        assert_eq!(lo("limit=-5").ok().map(|o| o.limit), Some(None));
        assert_eq!(lo("limit=7").ok().map(|o| o.limit), Some(Some(7)));
        assert_eq!(lo("resourceVersion=x").err().map(|e| e.code()), Some(400));
        let o = lo("watch=1&resourceVersion=106&allowWatchBookmarks=true&timeoutSeconds=443")
            .unwrap_or_default();
        assert!(o.watch && o.allow_bookmarks);
        // The parameter codec's rule (request info reads `watch` with the same function).
        for (q, watch) in [
            ("watch=f", true),
            ("watch=", true),
            ("watch=yes", true),
            ("watch=FALSE", false),
            ("watch=0&watch=1", false),
        ] {
            assert_eq!(lo(q).map(|o| o.watch).ok(), Some(watch), "{q}");
        }
        assert_eq!(
            (o.resource_version, o.timeout_seconds),
            (Some(106), Some(443))
        );
    }

    #[test]
    fn continue_round_trip() {
        let t = ContinueToken {
            rv: 7,
            start: "/registry/pods/a/b".into(),
        };
        assert_eq!(ContinueToken::decode(&t.encode()).ok(), Some(t));
        assert_eq!(
            ContinueToken::decode("!!").err().map(|e| e.code()),
            Some(400)
        );
    }

    #[test]
    fn delete_options_body_wins() {
        let q = Query::parse(Some("propagationPolicy=Orphan"));
        let d = DeleteOptions::parse(
            br#"{"propagationPolicy":"Foreground","preconditions":{"uid":"u"}}"#,
            &q,
        )
        .unwrap_or_default();
        assert_eq!(d.propagation, Some(Propagation::Foreground));
        assert_eq!(d.preconditions.uid.as_deref(), Some("u"));
        let d = DeleteOptions::parse(b"", &q).unwrap_or_default();
        assert_eq!(d.propagation, Some(Propagation::Orphan));
        assert_eq!(
            DeleteOptions::parse(br#"{"propagationPolicy":"Nope"}"#, &q)
                .err()
                .map(|e| e.code()),
            Some(422)
        );
        assert_eq!(
            DeleteOptions::parse(
                br#"{"propagationPolicy":"Orphan","orphanDependents":true}"#,
                &q
            )
            .err()
            .map(|e| e.code()),
            Some(422)
        );
    }
}
