//! PodSecurity's configuration in the plugin: defaults for unlabelled namespaces, and the
//! namespace, user and RuntimeClass exemptions, as upstream's `ValidatePod`,
//! `ValidatePodController` and `EvaluatePod`.

use serde_json::{json, Value};

use super::config::PodSecurityConfig;
use super::PodSecurity;
use crate::admission::tests_support::{attrs, Fixed};
use crate::admission::{Attributes, Operation, Plugin};
use crate::authn::UserInfo;
use crate::registry::{Forbidden, Warnings};

fn plugin() -> PodSecurity {
    let config = PodSecurityConfig::from_value(&json!({
        "defaults": {"enforce": "baseline", "warn": "restricted"},
        "exemptions": {"usernames": ["ci"], "namespaces": ["tools"], "runtimeClasses": ["kata"]},
    }));
    PodSecurity::new(&config.unwrap_or_default())
}

fn namespaces() -> Fixed {
    Fixed(vec![
        ("", "namespaces", json!({"metadata": {"name": "apps"}})),
        ("", "namespaces", json!({"metadata": {"name": "tools"}})),
    ])
}

fn privileged(runtime_class: Option<&str>) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "i",
        "securityContext": {"privileged": true}}]});
    if let Some(c) = runtime_class {
        spec["runtimeClassName"] = json!(c);
    }
    json!({"metadata": {"name": "p"}, "spec": spec})
}

fn in_namespace<'a>(
    resource: &'static str,
    group: &'static str,
    ns: &'a str,
    user: Option<&'a UserInfo>,
    warnings: &'a Warnings,
) -> Attributes<'a> {
    Attributes {
        namespace: Some(ns),
        user,
        warnings: Some(warnings),
        ..attrs(Operation::Create, group, resource, "")
    }
}

fn user(name: &str) -> UserInfo {
    UserInfo {
        username: name.into(),
        ..Default::default()
    }
}

#[test]
fn the_configured_defaults_apply_to_unlabelled_namespaces() {
    let w = Warnings::default();
    let refused = plugin().validate(
        &in_namespace("pods", "", "apps", None, &w),
        &privileged(None),
        &namespaces(),
    );
    assert_eq!(
        refused,
        Err(Forbidden(
            "violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)".into()
        ))
    );
}

#[test]
fn exempt_namespaces_users_and_runtime_classes_are_not_evaluated() {
    let p = plugin();
    let w = Warnings::default();
    let (alice, ci) = (user("alice"), user("ci"));
    let pod = privileged(None);
    for attrs in [
        in_namespace("pods", "", "tools", Some(&alice), &w),
        in_namespace("pods", "", "apps", Some(&ci), &w),
    ] {
        assert_eq!(p.validate(&attrs, &pod, &namespaces()), Ok(()));
    }
    let kata = privileged(Some("kata"));
    let attrs = in_namespace("pods", "", "apps", Some(&alice), &w);
    assert_eq!(p.validate(&attrs, &kata, &namespaces()), Ok(()));
    assert!(p
        .validate(&attrs, &privileged(Some("runc")), &namespaces())
        .is_err());
    assert!(w.all().is_empty(), "{:?}", w.all());

    // Templates: no warning for an exempt user or RuntimeClass, one otherwise.
    let deployment = |spec: &Value| json!({"spec": {"template": {"spec": spec["spec"].clone()}}});
    let d = in_namespace("deployments", "apps", "apps", Some(&ci), &w);
    assert_eq!(p.validate(&d, &deployment(&pod), &namespaces()), Ok(()));
    let d = in_namespace("deployments", "apps", "apps", Some(&alice), &w);
    assert_eq!(p.validate(&d, &deployment(&kata), &namespaces()), Ok(()));
    assert!(w.all().is_empty(), "{:?}", w.all());
    assert_eq!(p.validate(&d, &deployment(&pod), &namespaces()), Ok(()));
    assert_eq!(w.all().len(), 1, "{:?}", w.all());
}
