//! CRD validation with kube-apiserver's field paths and messages.

use super::*;
use serde_json::json;

fn crd(v: Value) -> CustomResourceDefinition {
    serde_json::from_value(v).expect("a CRD")
}

/// A valid single-version CRD, with the status `prepare_for_create` gives it.
fn widget() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }}},
                "subresources": {"status": {}}
            }],
            "conversion": {"strategy": "None"}
        },
        "status": {"storedVersions": ["v1"]}
    })
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.to_string()).collect()
}

#[test]
fn a_valid_crd_has_no_errors() {
    assert_eq!(
        messages(&validate_crd(&crd(widget()))),
        Vec::<String>::new()
    );
}

#[test]
fn the_name_must_be_plural_dot_group() {
    let mut v = widget();
    v["metadata"]["name"] = json!("gadgets.example.com");
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        [
            r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#
        ]
    );
}

#[test]
fn group_scope_and_names_are_checked_with_upstream_messages() {
    let mut v = widget();
    v["metadata"]["name"] = json!("Widgets.example");
    v["spec"]["group"] = json!("example");
    v["spec"]["scope"] = json!("Global");
    v["spec"]["names"] =
        json!({"plural": "Widgets", "kind": "Widget", "listKind": "Widget", "shortNames": ["w_1"]});
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(
        got,
        [
            r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#,
            r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#,
            "spec.names.singular: Required value",
            r#"spec.names.plural: Invalid value: "Widgets": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.names.shortNames[0]: Invalid value: "w_1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#,
        ]
    );
}

#[test]
fn exactly_one_storage_version_and_unique_names() {
    let mut v = widget();
    let version = v["spec"]["versions"][0].clone();
    v["spec"]["versions"] = json!([version.clone(), version]);
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("spec.versions: Invalid value: ")
            && got[0].ends_with(": must contain unique version names")
    );
    assert!(got[1].ends_with(": must have exactly one version marked as storage version"));
}

#[test]
fn a_missing_schema_is_required_per_version() {
    let mut v = widget();
    v["spec"]["versions"][0]
        .as_object_mut()
        .expect("version")
        .remove("schema");
    v["spec"]["versions"][0]
        .as_object_mut()
        .expect("version")
        .remove("subresources");
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
}

#[test]
fn identical_schemas_are_reported_at_the_top_level_and_different_ones_per_version() {
    let mut v = widget();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["nullable"] = json!(true);
    v["spec"]["versions"][0]
        .as_object_mut()
        .expect("version")
        .remove("subresources");
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        ["spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]
    );
    let mut second = v["spec"]["versions"][0].clone();
    second["name"] = json!("v2");
    second["storage"] = json!(false);
    second["schema"]["openAPIV3Schema"]["nullable"] = json!(false);
    v["spec"]["versions"]
        .as_array_mut()
        .expect("versions")
        .push(second);
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        ["spec.versions[0].schema.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]
    );
}

#[test]
fn the_root_schema_is_restricted_when_status_is_a_subresource() {
    let mut v = widget();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("array");
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            r#"spec.validation.openAPIV3Schema.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
            "spec.validation.openAPIV3Schema.items: Required value: must be specified",
            r#"spec.validation.openAPIV3Schema.type: Invalid value: "array": must be object at the root"#,
        ]
    );
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("object");
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["maxProperties"] = json!(3);
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("spec.validation.openAPIV3Schema: Invalid value: "));
    assert!(got[0].ends_with(
        "fields are allowed at the root of the schema if the status subresource is enabled"
    ));
}

#[test]
fn scale_paths_and_printer_columns() {
    let mut v = widget();
    v["spec"]["versions"][0]["subresources"]["scale"] = json!({
        "specReplicasPath": ".status.size", "statusReplicasPath": "status.replicas",
        "labelSelectorPath": ".metadata.labels"
    });
    v["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Size", "type": "int", "jsonPath": ".spec.size"},
        {"name": "", "type": "string", "format": "ipv4", "jsonPath": "spec.color"}
    ]);
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        [
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.size": should be a json path under .spec"#,
            r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path starting with ."#,
            r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#,
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string"#,
            "spec.additionalPrinterColumns[1].name: Required value",
            r#"spec.additionalPrinterColumns[1].format: Invalid value: "ipv4": must be one of byte,date,date-time,double,float,int32,int64,password"#,
            r#"spec.additionalPrinterColumns[1].JSONPath: Invalid value: "spec.color": must be a simple json path starting with ."#,
        ]
    );
}

#[test]
fn selectable_fields_name_scalar_fields_of_the_schema() {
    let mut v = widget();
    v["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}, {"jsonPath": ".spec"},
        {"jsonPath": ".spec.shape"}, {"jsonPath": ".spec[0]"}
    ]);
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        [
            r#"spec.selectableFields[1].jsonPath: Duplicate value: ".spec.color""#,
            r#"spec.selectableFields[2].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            r#"spec.selectableFields[3].jsonPath: Invalid value: ".spec.shape": is an invalid path: does not refer to a valid field"#,
            r#"spec.selectableFields[4].jsonPath: Invalid value: ".spec[0]": is an invalid path: array notation is not allowed"#,
        ]
    );
}

#[test]
fn webhook_conversion_needs_a_client_config_and_review_versions() {
    let mut v = widget();
    v["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2"], "clientConfig": {"url": "http://h/convert?x=1"}}});
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "x=1": query parameters are not permitted in the URL"#,
            r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1"#,
        ]
    );
    v["spec"]["conversion"] = json!({"strategy": "Webhook"});
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
            "spec.conversion.conversionReviewVersions: Required value",
        ]
    );
    v["spec"]["conversion"] = json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://h"}}});
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        [
            "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
            "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
        ]
    );
}

#[test]
fn protected_groups_need_the_approval_annotation() {
    let mut v = widget();
    v["metadata"]["name"] = json!("widgets.x-k8s.io");
    v["spec"]["group"] = json!("x-k8s.io");
    assert!(
        validate_crd(&crd(v.clone())).is_empty(),
        "x-k8s.io is not protected"
    );
    v["metadata"]["name"] = json!("widgets.sigs.k8s.io");
    v["spec"]["group"] = json!("sigs.k8s.io");
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#
        ]
    );
    v["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "yes"});
    assert_eq!(validate_crd(&crd(v.clone())).len(), 1);
    v["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/3328"});
    assert!(validate_crd(&crd(v.clone())).is_empty());
    v["metadata"]["annotations"] =
        json!({"api-approved.kubernetes.io": "unapproved, experimental"});
    assert!(validate_crd(&crd(v)).is_empty());
}

#[test]
fn a_built_in_group_is_refused() {
    let mut v = widget();
    v["metadata"]["name"] = json!("widgets.batch.k8s.io");
    v["spec"]["group"] = json!("networking.k8s.io");
    v["metadata"]["name"] = json!("widgets.networking.k8s.io");
    v["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "unapproved"});
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with(
        r#"spec.group: Invalid value: "networking.k8s.io": is served by the API server itself"#
    ));
}

#[test]
fn stored_versions_must_include_the_storage_version_and_stay_in_spec() {
    let mut v = widget();
    v["status"]["storedVersions"] = json!(["v0"]);
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            r#"status.storedVersions: Invalid value: ["v0"]: must have the storage version v1"#,
            r#"status.storedVersions[0]: Invalid value: "v0": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions"#,
        ]
    );
    v["status"]["storedVersions"] = json!([]);
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        ["status.storedVersions: Invalid value: []: must have at least one stored version"]
    );
}

#[test]
fn updates_keep_group_and_plural_and_once_established_scope_and_kind() {
    let old_v = widget();
    let mut new_v = widget();
    new_v["spec"]["scope"] = json!("Cluster");
    new_v["spec"]["names"]["kind"] = json!("Gadget");
    new_v["spec"]["names"]["listKind"] = json!("GadgetList");
    assert!(validate_crd_update(&crd(new_v.clone()), &crd(old_v.clone())).is_empty());
    let mut established = old_v;
    established["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
    assert_eq!(
        messages(&validate_crd_update(
            &crd(new_v.clone()),
            &crd(established.clone())
        )),
        [
            r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
            r#"spec.names.kind: Invalid value: "Gadget": field is immutable"#,
        ]
    );
    new_v["spec"]["group"] = json!("example.org");
    new_v["metadata"]["name"] = json!("widgets.example.org");
    let got = messages(&validate_crd_update(&crd(new_v), &crd(established)));
    assert!(
        got.contains(
            &r#"spec.group: Invalid value: "example.org": field is immutable"#.to_string()
        ),
        "{got:?}"
    );
}

#[test]
fn preserve_unknown_fields_true_is_refused_in_v1() {
    let mut v = widget();
    v["spec"]["preserveUnknownFields"] = json!(true);
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        ["spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"]
    );
}

#[test]
fn deprecation_warnings_only_on_deprecated_versions() {
    let mut v = widget();
    v["spec"]["versions"][0]["deprecationWarning"] = json!("old");
    assert_eq!(
        messages(&validate_crd(&crd(v.clone()))),
        [
            r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#
        ]
    );
    v["spec"]["versions"][0]["deprecated"] = json!(true);
    v["spec"]["versions"][0]["deprecationWarning"] = json!("bad\u{7}");
    assert_eq!(
        messages(&validate_crd(&crd(v))),
        [
            r#"spec.versions[0].deprecationWarning: Invalid value: "bad\a": must only contain printable UTF-8 characters; non-printable character found at index 3"#
        ]
    );
}

#[test]
fn schemas_must_be_structural_and_their_rules_compile() {
    let mut v = widget();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["size"] = json!({});
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(
        got,
        ["spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields"]
    );
    let mut v = widget();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"] = json!([{"rule": "self.sise > 1"}]);
    let got = messages(&validate_crd(&crd(v)));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ")
            && got[0].contains("compilation failed: ERROR: <input>:1:5: undefined field 'sise'"),
        "{got:?}"
    );
}
