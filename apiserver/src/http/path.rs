//! Resource path parsing (spec §2.1).
//!
//! `/api/v1/...` and `/apis/<group>/<version>/...` are split into a [`ResourcePath`] by segment
//! count. `namespaces` is itself cluster-scoped, so `/api/v1/namespaces/x` is a namespace object
//! while `/api/v1/namespaces/x/pods` is a collection; the only subresources of a namespace are
//! `status` and `finalize`, which is how a three-segment path under `namespaces` is disambiguated.
//! Whether the resource exists and how it is scoped is decided later against the resource table.

/// A parsed resource path below a group-version root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group; `""` for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from `namespaces/{ns}/...`, if the path has one.
    pub namespace: Option<String>,
    /// Resource plural; `None` for the group-version discovery document itself.
    pub resource: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`, `binding`, `finalize`, …; `proxy` also with a proxied
    /// path after it, which is not kept).
    pub subresource: Option<String>,
}

/// Subresources that `namespaces/{name}/{sub}` may carry.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Parses the segments that follow the group-version root (`rest` without a leading slash).
/// Returns `None` for a shape that is no resource path (404).
pub fn parse_rest(group: &str, version: &str, rest: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if segs.iter().any(|s| *s == "." || *s == "..") {
        return None;
    }
    let mut path = ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace: None,
        resource: None,
        name: None,
        subresource: None,
    };
    let own = |s: &str| Some(s.to_string());
    match segs.as_slice() {
        [] => {}
        [res] => path.resource = own(res),
        [res, name] => {
            path.resource = own(res);
            path.name = own(name);
        }
        ["namespaces", ns, third] if !NAMESPACE_SUBRESOURCES.contains(third) => {
            path.namespace = own(ns);
            path.resource = own(third);
        }
        [res, name, sub] => {
            path.resource = own(res);
            path.name = own(name);
            path.subresource = own(sub);
        }
        ["namespaces", ns, res, name] => {
            path.namespace = own(ns);
            path.resource = own(res);
            path.name = own(name);
        }
        ["namespaces", ns, res, name, sub] => {
            path.namespace = own(ns);
            path.resource = own(res);
            path.name = own(name);
            path.subresource = own(sub);
        }
        // `proxy` takes the rest of the path as the proxied path (`pods/web/proxy/healthz`).
        ["namespaces", ns, res, name, "proxy", _, ..] => {
            path.namespace = own(ns);
            path.resource = own(res);
            path.name = own(name);
            path.subresource = own("proxy");
        }
        [res, name, "proxy", _, ..] if *res != "namespaces" => {
            path.resource = own(res);
            path.name = own(name);
            path.subresource = own("proxy");
        }
        _ => return None,
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(rest: &str) -> ResourcePath {
        parse_rest("", "v1", rest).unwrap_or_else(|| panic!("{rest} should parse"))
    }

    #[test]
    fn shapes() {
        assert_eq!(p("").resource, None);
        let all = p("pods");
        assert_eq!(
            (all.resource.as_deref(), all.namespace),
            (Some("pods"), None)
        );
        let ns = p("namespaces/foo");
        assert_eq!(
            (ns.resource.as_deref(), ns.name.as_deref()),
            (Some("namespaces"), Some("foo"))
        );
        let coll = p("namespaces/foo/pods");
        assert_eq!(coll.namespace.as_deref(), Some("foo"));
        assert_eq!(coll.resource.as_deref(), Some("pods"));
        assert_eq!(coll.name, None);
        let fin = p("namespaces/foo/finalize");
        assert_eq!(fin.resource.as_deref(), Some("namespaces"));
        assert_eq!(fin.subresource.as_deref(), Some("finalize"));
        let node = p("nodes/n1/status");
        assert_eq!(node.name.as_deref(), Some("n1"));
        assert_eq!(node.subresource.as_deref(), Some("status"));
        let obj = p("namespaces/d/replicationcontrollers/web/scale");
        assert_eq!(obj.namespace.as_deref(), Some("d"));
        assert_eq!(obj.name.as_deref(), Some("web"));
        assert_eq!(obj.subresource.as_deref(), Some("scale"));
        assert!(parse_rest("", "v1", "a/b/c/d/e/f").is_none());
        let proxied = p("namespaces/d/pods/web:8080/proxy/healthz/x");
        assert_eq!(proxied.name.as_deref(), Some("web:8080"));
        assert_eq!(proxied.subresource.as_deref(), Some("proxy"));
        assert_eq!(
            p("nodes/n1/proxy/metrics").subresource.as_deref(),
            Some("proxy")
        );
        assert!(parse_rest("", "v1", "pods/..").is_none());
    }
}
