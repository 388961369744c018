//! Content negotiation (spec §2.3, §2.4): which representation a response takes, and how a
//! request body is decoded.
//!
//! The `Accept` header is a comma-separated list of media types with `as`/`g`/`v` parameters; the
//! first entry the server supports wins. `application/vnd.kubernetes.protobuf` is never produced,
//! so a list that also carries JSON is answered in JSON. An `Accept` with nothing supported is a
//! 406 (an expected outcome: [`Negotiated::NotAcceptable`]).

/// The representation of an object or list response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Plain JSON.
    Json,
    /// YAML.
    Yaml,
    /// `meta.k8s.io/v1` Table.
    Table,
    /// `PartialObjectMetadata` (single object or item of a watch).
    PartialObjectMetadata,
    /// `PartialObjectMetadataList`.
    PartialObjectMetadataList,
}

/// The representation of a discovery response at `/api` or `/apis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryOutput {
    /// Legacy `APIVersions` / `APIGroupList`.
    Legacy,
    /// Aggregated `apidiscovery.k8s.io/v2`.
    AggregatedV2,
    /// Aggregated `apidiscovery.k8s.io/v2beta1`.
    AggregatedV2Beta1,
}

/// Outcome of negotiating an `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated<T> {
    /// The chosen representation.
    Chosen(T),
    /// Nothing acceptable was listed: answer 406.
    NotAcceptable,
}

/// Content-Type of Table responses.
pub const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// Content-Type of aggregated discovery v2.
pub const DISCOVERY_V2_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// Content-Type of aggregated discovery v2beta1.
pub const DISCOVERY_V2BETA1_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
/// Content-Type of PartialObjectMetadata responses.
pub const POM_CONTENT_TYPE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// Content-Type of PartialObjectMetadataList responses.
pub const POM_LIST_CONTENT_TYPE: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

impl Output {
    /// The Content-Type header value of this representation.
    pub fn content_type(self) -> &'static str {
        match self {
            Output::Json => "application/json",
            Output::Yaml => "application/yaml",
            Output::Table => TABLE_CONTENT_TYPE,
            Output::PartialObjectMetadata => POM_CONTENT_TYPE,
            Output::PartialObjectMetadataList => POM_LIST_CONTENT_TYPE,
        }
    }
}

/// One parsed entry of an `Accept` header.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MediaRange {
    /// `type/subtype`, lower-cased.
    pub essence: String,
    /// The `as` parameter.
    pub as_kind: Option<String>,
    /// The `g` parameter.
    pub group: Option<String>,
    /// The `v` parameter.
    pub version: Option<String>,
}

/// Parses an `Accept` header value into its media ranges, in order. Never fails: malformed
/// entries become ranges that match nothing.
pub fn parse_accept(header: &str) -> Vec<MediaRange> {
    header
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_media_range)
        .collect()
}

fn parse_media_range(entry: &str) -> MediaRange {
    let mut parts = entry.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut range = MediaRange {
        essence,
        ..MediaRange::default()
    };
    for param in parts {
        let Some((k, v)) = param.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "as" => range.as_kind = Some(v),
            "g" => range.group = Some(v),
            "v" => range.version = Some(v),
            _ => {}
        }
    }
    range
}

fn is_json_like(essence: &str) -> bool {
    matches!(essence, "application/json" | "application/*" | "*/*" | "*")
}

/// Negotiates the representation of an object/list response. `list` selects between
/// `PartialObjectMetadata` and `PartialObjectMetadataList` when the client asks for either.
pub fn negotiate_output(accept: Option<&str>) -> Negotiated<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Negotiated::Chosen(Output::Json);
    };
    for range in parse_accept(accept) {
        let meta = range.group.as_deref() == Some("meta.k8s.io");
        match (range.essence.as_str(), range.as_kind.as_deref()) {
            ("application/json", Some("Table"))
                if meta && matches!(range.version.as_deref(), Some("v1") | Some("v1beta1")) =>
            {
                return Negotiated::Chosen(Output::Table)
            }
            ("application/json", Some("PartialObjectMetadata")) if meta => {
                return Negotiated::Chosen(Output::PartialObjectMetadata)
            }
            ("application/json", Some("PartialObjectMetadataList")) if meta => {
                return Negotiated::Chosen(Output::PartialObjectMetadataList)
            }
            (essence, None) if is_json_like(essence) => return Negotiated::Chosen(Output::Json),
            ("application/yaml", None) => return Negotiated::Chosen(Output::Yaml),
            _ => {}
        }
    }
    Negotiated::NotAcceptable
}

/// Negotiates the representation of `/api` and `/apis`: aggregated only when listed exactly.
pub fn negotiate_discovery(accept: Option<&str>) -> Negotiated<DiscoveryOutput> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Negotiated::Chosen(DiscoveryOutput::Legacy);
    };
    for range in parse_accept(accept) {
        match (range.essence.as_str(), range.as_kind.as_deref()) {
            ("application/json", Some("APIGroupDiscoveryList"))
                if range.group.as_deref() == Some("apidiscovery.k8s.io") =>
            {
                match range.version.as_deref() {
                    Some("v2") => return Negotiated::Chosen(DiscoveryOutput::AggregatedV2),
                    Some("v2beta1") => {
                        return Negotiated::Chosen(DiscoveryOutput::AggregatedV2Beta1)
                    }
                    _ => {}
                }
            }
            (essence, None) if is_json_like(essence) => {
                return Negotiated::Chosen(DiscoveryOutput::Legacy)
            }
            _ => {}
        }
    }
    Negotiated::NotAcceptable
}

/// How a request body is to be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// JSON (also: no Content-Type at all, spec §0.6).
    Json,
    /// YAML.
    Yaml,
    /// Kubernetes protobuf envelope.
    Protobuf,
}

/// The body format of a non-PATCH request, or `None` for an unsupported type (415).
pub fn body_format(content_type: Option<&str>) -> Option<BodyFormat> {
    let Some(ct) = content_type else {
        return Some(BodyFormat::Json);
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "" | "application/json" => Some(BodyFormat::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Some(BodyFormat::Yaml),
        "application/vnd.kubernetes.protobuf" => Some(BodyFormat::Protobuf),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGG: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn discovery_negotiation_is_exact() {
        assert_eq!(
            negotiate_discovery(Some(AGG)),
            Negotiated::Chosen(DiscoveryOutput::AggregatedV2)
        );
        assert_eq!(
            negotiate_discovery(Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")),
            Negotiated::Chosen(DiscoveryOutput::AggregatedV2Beta1)
        );
        assert_eq!(
            negotiate_discovery(Some("application/json, */*")),
            Negotiated::Chosen(DiscoveryOutput::Legacy)
        );
        assert_eq!(
            negotiate_discovery(None),
            Negotiated::Chosen(DiscoveryOutput::Legacy)
        );
    }

    #[test]
    fn output_negotiation() {
        assert_eq!(
            negotiate_output(Some(TABLE)),
            Negotiated::Chosen(Output::Table)
        );
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf,application/json")),
            Negotiated::Chosen(Output::Json)
        );
        assert_eq!(
            negotiate_output(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Negotiated::Chosen(Output::PartialObjectMetadataList)
        );
        assert_eq!(
            negotiate_output(Some("text/html")),
            Negotiated::NotAcceptable
        );
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf")),
            Negotiated::NotAcceptable
        );
        assert_eq!(negotiate_output(None), Negotiated::Chosen(Output::Json));
        assert_eq!(
            negotiate_output(Some("*/*")),
            Negotiated::Chosen(Output::Json)
        );
    }

    #[test]
    fn body_formats() {
        assert_eq!(body_format(None), Some(BodyFormat::Json));
        assert_eq!(
            body_format(Some("application/json; charset=utf-8")),
            Some(BodyFormat::Json)
        );
        assert_eq!(
            body_format(Some("application/vnd.kubernetes.protobuf")),
            Some(BodyFormat::Protobuf)
        );
        assert_eq!(body_format(Some("text/plain")), None);
    }
}
