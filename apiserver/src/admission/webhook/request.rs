//! The `AdmissionReview` a webhook is sent and what its answer may be (upstream's
//! `webhook/request/admissionreview.go`: `CreateAdmissionObjects` and
//! `VerifyAdmissionResponse`).
//!
//! - The review is `admission.k8s.io/v1`, or `v1beta1` when that is the first version of the
//!   hook's `admissionReviewVersions` this server speaks (upstream picks the first it knows).
//! - The request carries a fresh `uid`, `kind`/`resource` and `requestKind`/`requestResource`
//!   (equal, but for a subresource of its own kind matched through an equivalent resource:
//!   `resource` is the matched one; an object of the resource's own kind is sent in the
//!   request's version, unconverted), `subResource`, `name`,
//!   `namespace`, `operation`, `userInfo`, `object`/`oldObject`, `dryRun` and `options`
//!   (`CreateOptions`, `UpdateOptions` or `DeleteOptions`).
//! - A v1 answer must be `admission.k8s.io/v1, Kind=AdmissionReview` with the request's `uid`;
//!   every answer needs a `response`. A patch needs `patchType: JSONPatch` (v1beta1 defaults
//!   it) and only mutating webhooks may return one.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::authn::UserInfo;

/// What a request does (`admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    /// A connect subresource (`pods/exec`, `attach`, `portforward`, `proxy`).
    Connect,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// A served group, version and resource stored with the request's own (upstream's
/// `EquivalentResourcesFor`: resources sharing a storage prefix, the versions of a kind and the
/// two `Event` groups), for `matchPolicy: Equivalent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    pub group: String,
    pub version: String,
    pub resource: String,
}

/// What webhooks know of a request (`admission.Attributes`).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub operation: Operation,
    /// API group, version and plural of the resource, as the request addressed it.
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    /// The group, version and kind of `object`: the resource's own, or a subresource's
    /// (`autoscaling/v1` `Scale` of `deployments/scale`, `v1` `Binding` of `pods/binding`).
    pub kind_group: &'a str,
    pub kind_version: &'a str,
    pub kind: &'a str,
    /// `""` for the main resource.
    pub subresource: &'a str,
    /// The object's name (`""` when the server generates it).
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    /// The new object (none for a delete).
    pub object: Option<&'a Value>,
    /// The stored object an update or delete acts on.
    pub old: Option<&'a Value>,
    pub user: &'a UserInfo,
    pub dry_run: bool,
    /// The options of the request, as JSON without type meta.
    pub options: &'a Value,
    /// The resources equivalent to the request's (its own among them), for rules under
    /// `matchPolicy: Equivalent`.
    pub equivalents: &'a [Equivalent],
    /// The group, version and resource the client addressed, when a webhook matched the request
    /// through an equivalent one and `group`/`version`/`resource` name that one
    /// ([`Hook::invocation`](super::matching::Hook::invocation)); none: they are the addressed.
    pub requested: Option<(&'a str, &'a str, &'a str)>,
}

/// An `AdmissionReview` version this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

/// The first of `versions` this server speaks.
pub fn review_version(versions: &[String]) -> Option<ReviewVersion> {
    versions.iter().find_map(|v| match v.as_str() {
        "v1" => Some(ReviewVersion::V1),
        "v1beta1" => Some(ReviewVersion::V1beta1),
        _ => None,
    })
}

impl Request<'_> {
    /// `userInfo` as `authentication.k8s.io/v1` UserInfo.
    fn user_info(&self) -> Value {
        let mut u = Map::new();
        u.insert("username".into(), json!(self.user.username));
        if !self.user.uid.is_empty() {
            u.insert("uid".into(), json!(self.user.uid));
        }
        if !self.user.groups.is_empty() {
            u.insert("groups".into(), json!(self.user.groups));
        }
        if !self.user.extra.is_empty() {
            let extra: BTreeMap<_, _> = self.user.extra.iter().collect();
            u.insert("extra".into(), json!(extra));
        }
        Value::Object(u)
    }

    /// The options object with its type meta; none for a connect (upstream sends none).
    fn typed_options(&self) -> Value {
        let kind = match self.operation {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
            Operation::Connect => return Value::Null,
        };
        let mut o = Map::new();
        o.insert("kind".into(), json!(kind));
        o.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
        if let Value::Object(m) = self.options {
            o.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Value::Object(o)
    }

    /// `request` of an AdmissionReview with `uid` (also the `request` variable of match
    /// conditions).
    pub fn admission_request(&self, uid: &str) -> Value {
        let kind =
            json!({"group": self.kind_group, "version": self.kind_version, "kind": self.kind});
        let resource =
            json!({"group": self.group, "version": self.version, "resource": self.resource});
        let mut r = Map::new();
        r.insert("uid".into(), json!(uid));
        r.insert("kind".into(), kind.clone());
        r.insert("resource".into(), resource.clone());
        if !self.subresource.is_empty() {
            r.insert("subResource".into(), json!(self.subresource));
        }
        r.insert("requestKind".into(), kind);
        let requested = self.requested.map_or(resource, |(group, version, resource)| {
            json!({"group": group, "version": version, "resource": resource})
        });
        r.insert("requestResource".into(), requested);
        if !self.subresource.is_empty() {
            r.insert("requestSubResource".into(), json!(self.subresource));
        }
        if !self.name.is_empty() {
            r.insert("name".into(), json!(self.name));
        }
        if let Some(ns) = self.namespace.filter(|n| !n.is_empty()) {
            r.insert("namespace".into(), json!(ns));
        }
        r.insert("operation".into(), json!(self.operation.as_str()));
        r.insert("userInfo".into(), self.user_info());
        r.insert("object".into(), self.object.cloned().unwrap_or(Value::Null));
        r.insert("oldObject".into(), self.old.cloned().unwrap_or(Value::Null));
        r.insert("dryRun".into(), json!(self.dry_run));
        r.insert("options".into(), self.typed_options());
        Value::Object(r)
    }

    /// The whole review in `version`.
    pub fn review(&self, uid: &str, version: ReviewVersion) -> Value {
        let api_version = match version {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        };
        json!({
            "kind": "AdmissionReview",
            "apiVersion": api_version,
            "request": self.admission_request(uid),
        })
    }
}

/// A verified `response` of a review.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    /// `status` when not allowed (a `metav1.Status`).
    pub result: Option<Value>,
    /// The decoded JSONPatch (empty: none).
    pub patch: Vec<u8>,
    pub audit_annotations: BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

/// `VerifyAdmissionResponse`: the error text follows upstream's `received invalid webhook
/// response: `.
pub fn verify(
    answer: &Value,
    uid: &str,
    version: ReviewVersion,
    mutating: bool,
) -> Result<Verdict, String> {
    let Some(r) = answer.get("response").filter(|r| r.is_object()) else {
        return Err("webhook response was absent".into());
    };
    let patch_type = r.get("patchType").and_then(Value::as_str).unwrap_or("");
    let patch = match r.get("patch").and_then(Value::as_str) {
        None | Some("") => Vec::new(),
        Some(b64) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?
        }
    };
    if version == ReviewVersion::V1 {
        let got = r.get("uid").and_then(Value::as_str).unwrap_or("");
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
        let av = answer
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = answer.get("kind").and_then(Value::as_str).unwrap_or("");
        if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (g, v) = av.split_once('/').unwrap_or(("", av));
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
            ));
        }
        if !patch.is_empty() && patch_type.is_empty() {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
    }
    if !patch.is_empty() && !mutating {
        return Err("validating webhook may not return response.patch".into());
    }
    if !patch.is_empty() && !patch_type.is_empty() && patch_type != "JSONPatch" {
        return Err(format!(
            "webhook returned invalid response.patchType of {patch_type:?}"
        ));
    }
    let strings = |field: &str| -> BTreeMap<String, String> {
        r.get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let warnings = r
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok(Verdict {
        allowed: r.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        result: r.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        audit_annotations: strings("auditAnnotations"),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> UserInfo {
        UserInfo::admin()
    }

    #[test]
    fn a_review_names_the_request() {
        let obj = json!({"metadata": {"name": "p"}});
        let user = admin();
        let opts = json!({"fieldManager": "kubectl"});
        let req = Request {
            operation: Operation::Create,
            group: "",
            version: "v1",
            resource: "pods",
            kind_group: "",
            kind_version: "v1",
            kind: "Pod",
            subresource: "",
            name: "p",
            namespace: Some("default"),
            object: Some(&obj),
            old: None,
            user: &user,
            dry_run: true,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        let review = req.review("u1", ReviewVersion::V1);
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        let r = &review["request"];
        assert_eq!(r["uid"], "u1");
        assert_eq!(
            r["kind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(r["requestResource"]["resource"], "pods");
        assert_eq!(r["operation"], "CREATE");
        assert_eq!(r["userInfo"]["username"], "system:admin");
        assert_eq!(r["oldObject"], Value::Null);
        assert_eq!(r["dryRun"], true);
        assert_eq!(
            r["options"],
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl"})
        );
    }

    /// A subresource whose object is of its own kind: `kind` is the Scale's, `resource` the
    /// parent's, with the subresource named twice (`subResource`, `requestSubResource`).
    #[test]
    fn a_scale_review_names_the_scale_kind_and_the_parent_resource() {
        let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web"}, "spec": {"replicas": 3}});
        let old = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web"}, "spec": {"replicas": 1}});
        let user = admin();
        let opts = json!({});
        let req = Request {
            operation: Operation::Update,
            group: "apps",
            version: "v1",
            resource: "deployments",
            kind_group: "autoscaling",
            kind_version: "v1",
            kind: "Scale",
            subresource: "scale",
            name: "web",
            namespace: Some("default"),
            object: Some(&scale),
            old: Some(&old),
            user: &user,
            dry_run: false,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        let r = req.admission_request("u");
        let kind = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
        let resource = json!({"group": "apps", "version": "v1", "resource": "deployments"});
        assert_eq!((&r["kind"], &r["requestKind"]), (&kind, &kind));
        assert_eq!(
            (&r["resource"], &r["requestResource"]),
            (&resource, &resource)
        );
        assert_eq!(
            (&r["subResource"], &r["requestSubResource"]),
            (&json!("scale"), &json!("scale"))
        );
        assert_eq!(r["operation"], "UPDATE");
        assert_eq!(r["object"]["spec"]["replicas"], 3);
        assert_eq!(r["oldObject"]["spec"]["replicas"], 1);
        assert_eq!(r["options"]["kind"], "UpdateOptions");

        // A connect: the options are the object, `options` is null.
        let exec = json!({"kind": "PodExecOptions", "apiVersion": "v1", "command": ["ls"]});
        let connect = Request {
            operation: Operation::Connect,
            resource: "pods",
            group: "",
            kind_group: "",
            kind: "PodExecOptions",
            subresource: "exec",
            object: Some(&exec),
            old: None,
            ..req
        };
        let r = connect.admission_request("u");
        assert_eq!(r["operation"], "CONNECT");
        assert_eq!(r["kind"]["kind"], "PodExecOptions");
        assert_eq!(r["object"]["command"], json!(["ls"]));
        assert_eq!(r["options"], Value::Null);
        assert_eq!(r["oldObject"], Value::Null);
    }

    #[test]
    fn answers_are_verified_as_upstream() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "warnings": ["w"],
                "auditAnnotations": {"k": "v"}}});
        let v = verify(&ok, "u", ReviewVersion::V1, false);
        assert_eq!(v.as_ref().map(|v| v.allowed), Ok(true));
        assert_eq!(
            v.as_ref().map(|v| v.warnings.clone()),
            Ok(vec!["w".to_string()])
        );
        assert_eq!(
            verify(&ok, "x", ReviewVersion::V1, false),
            Err(r#"expected response.uid="x", got "u""#.into())
        );
        assert_eq!(
            verify(&json!({}), "u", ReviewVersion::V1, false),
            Err("webhook response was absent".into())
        );
        let wrong = json!({"apiVersion": "v1", "kind": "Status", "response": {"uid": "u"}});
        assert_eq!(
            verify(&wrong, "u", ReviewVersion::V1, false),
            Err("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /v1, Kind=Status".into())
        );
        let patch = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "patch": "W10="}});
        assert_eq!(
            verify(&patch, "u", ReviewVersion::V1, true),
            Err("webhook returned response.patch but not response.patchType".into())
        );
        // v1beta1: no uid or type check, a patch without a type is a JSONPatch.
        let beta = json!({"response": {"allowed": true, "patch": "W10="}});
        assert_eq!(
            verify(&beta, "u", ReviewVersion::V1beta1, true).map(|v| v.patch),
            Ok(b"[]".to_vec())
        );
        assert_eq!(
            verify(&beta, "u", ReviewVersion::V1beta1, false),
            Err("validating webhook may not return response.patch".into())
        );
    }
}
