//! Table-driven tests of the batch/v1 strategies: Job and CronJob defaults, validation messages
//! and field paths, update rules and printers, as kube-apiserver 1.33 answers.

use super::*;
use crate::registry::{builtin, Resource};
use serde_json::json;
use std::sync::Arc;

fn res(plural: &str) -> Arc<Resource> {
    match builtin::find("batch", plural) {
        Some(r) => r,
        None => panic!("no strategy for batch/{plural}"),
    }
}

fn rendered(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn now() -> jiff::Timestamp {
    api::meta::parse_time("2026-12-02T16:00:00Z").unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// What `kubectl create job pi --image=perl` sends, with the uid the store assigns.
fn job(restart_policy: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-12-02T15:00:00Z"},
        "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": restart_policy}}},
        "status": {"succeeded": 9},
    })
}

fn created(restart_policy: &str) -> Value {
    let mut j = job(restart_policy);
    res("jobs").prepare_for_create(&mut j);
    j
}

#[test]
fn job_defaults_and_the_generated_selector() {
    let j = created("Never");
    let spec = &j["spec"];
    for (k, v) in [
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("manualSelector", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        (
            "selector",
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}),
        ),
    ] {
        assert_eq!(spec[k], v, "{k}");
    }
    let labels = json!({"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi", "controller-uid": "u-1", "job-name": "pi"});
    assert_eq!(spec.pointer("/template/metadata/labels"), Some(&labels));
    assert_eq!(j.pointer("/metadata/labels"), Some(&labels));
    assert_eq!(
        spec.pointer("/template/spec/dnsPolicy"),
        Some(&json!("ClusterFirst"))
    );
    assert_eq!(j["status"], json!({}));
    assert_eq!(j.pointer("/metadata/generation"), Some(&json!(1)));
    let errs = res("jobs").validate_create(&j);
    assert!(errs.is_empty(), "{:?}", rendered(&errs));

    // Only parallelism given: completions stay unset (a work queue).
    let mut q = job("OnFailure");
    q["spec"]["parallelism"] = json!(3);
    res("jobs").prepare_for_create(&mut q);
    assert_eq!(q.pointer("/spec/completions"), None);
    // backoffLimitPerIndex makes the default backoffLimit unlimited; a failure policy makes
    // replacement wait for Failed pods; its pod-condition patterns default to True.
    let mut p = job("Never");
    p["spec"]["completionMode"] = json!("Indexed");
    p["spec"]["completions"] = json!(3);
    p["spec"]["backoffLimitPerIndex"] = json!(1);
    p["spec"]["podFailurePolicy"] =
        json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]});
    res("jobs").prepare_for_create(&mut p);
    assert_eq!(p.pointer("/spec/backoffLimit"), Some(&json!(2147483647)));
    assert_eq!(
        p.pointer("/spec/podReplacementPolicy"),
        Some(&json!("Failed"))
    );
    assert_eq!(
        p.pointer("/spec/podFailurePolicy/rules/0/onPodConditions/0/status"),
        Some(&json!("True"))
    );
    assert!(res("jobs").validate_create(&p).is_empty());
    // The client's own labels are kept on the Job.
    let mut l = job("Never");
    l["metadata"]["labels"] = json!({"team": "a"});
    res("jobs").prepare_for_create(&mut l);
    assert_eq!(l.pointer("/metadata/labels"), Some(&json!({"team": "a"})));
}

#[test]
fn job_restart_policy_and_spec_messages() {
    let st = res("jobs");
    let errs = rendered(&st.validate_create(&created("Always")));
    assert_eq!(
        errs,
        vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    // Unset is defaulted to Always: the same answer.
    let mut unset = job("Never");
    if let Some(s) = unset
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    {
        s.remove("restartPolicy");
    }
    st.prepare_for_create(&mut unset);
    assert_eq!(rendered(&st.validate_create(&unset)), errs);
    let errs = rendered(&st.validate_create(&created("Sometimes")));
    assert!(errs.contains(&"spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"".to_string()), "{errs:?}");
    assert!(errs.contains(&"spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".to_string()), "{errs:?}");

    let mut bad = job("Never");
    for (k, v) in [
        ("parallelism", json!(-1)),
        ("backoffLimit", json!(-2)),
        ("activeDeadlineSeconds", json!(-3)),
        ("completionMode", json!("Sometimes")),
        ("podReplacementPolicy", json!("Never")),
        ("managedBy", json!("nodomain")),
    ] {
        bad["spec"][k] = v;
    }
    bad["spec"]["template"]["spec"]["containers"] = json!([]);
    st.prepare_for_create(&mut bad);
    let errs = rendered(&st.validate_create(&bad));
    for want in [
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0",
        "spec.activeDeadlineSeconds: Invalid value: -3: must be greater than or equal to 0",
        "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\"",
        "spec.podReplacementPolicy: Unsupported value: \"Never\": supported values: \"Failed\", \"TerminatingOrFailed\"",
        "spec.managedBy: Invalid value: \"nodomain\": must be a domain-prefixed path (such as \"acme.io/foo\")",
        "spec.template.spec.containers: Required value",
    ] {
        assert!(errs.contains(&want.to_string()), "missing {want}: {errs:?}");
    }

    let mut indexed = job("Never");
    indexed["metadata"]["name"] = json!("a".repeat(62));
    indexed["spec"]["completionMode"] = json!("Indexed");
    indexed["spec"]["completions"] = json!(10);
    indexed["spec"]["maxFailedIndexes"] = json!(11);
    st.prepare_for_create(&mut indexed);
    let errs = rendered(&st.validate_create(&indexed));
    for want in [
        format!("metadata.name: Invalid value: \"{0}\": will not able to create pod with invalid DNS label: {0}-9", "a".repeat(62)),
        "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified".to_string(),
        "spec.maxFailedIndexes: Invalid value: 11: must be less than or equal to completions".to_string(),
    ] {
        assert!(errs.contains(&want), "missing {want}: {errs:?}");
    }
    let mut no_completions = job("Never");
    no_completions["spec"]["completionMode"] = json!("Indexed");
    no_completions["spec"]["parallelism"] = json!(2);
    no_completions["spec"]["backoffLimitPerIndex"] = json!(1);
    st.prepare_for_create(&mut no_completions);
    let errs = rendered(&st.validate_create(&no_completions));
    assert!(
        errs.contains(
            &"spec.completions: Required value: when completion mode is Indexed".to_string()
        ),
        "{errs:?}"
    );
    let mut non_indexed = job("Never");
    non_indexed["spec"]["backoffLimitPerIndex"] = json!(1);
    st.prepare_for_create(&mut non_indexed);
    assert_eq!(
        rendered(&st.validate_create(&non_indexed)),
        vec!["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
    );
}

#[test]
fn job_pod_failure_and_success_policies() {
    let st = res("jobs");
    let mut j = job("OnFailure");
    j["spec"]["podFailurePolicy"] = json!({"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 0, 1, 1]}, "onPodConditions": [{"type": "X"}]},
        {"action": "Explode", "onExitCodes": {"containerName": "nope", "operator": "Is", "values": []}},
        {},
    ]});
    st.prepare_for_create(&mut j);
    let errs = rendered(&st.validate_create(&j));
    for want in [
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
        "spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value: 1",
        "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{3, 0, 1, 1}: must be ordered",
        "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
        "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Explode\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
        "spec.podFailurePolicy.rules[1].onExitCodes.operator: Unsupported value: \"Is\": supported values: \"In\", \"NotIn\"",
        "spec.podFailurePolicy.rules[1].onExitCodes.containerName: Invalid value: \"nope\": must be one of the container or initContainer names in the pod template",
        "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []int32{}: at least one value is required",
        "spec.podFailurePolicy.rules[2].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
        "spec.podFailurePolicy.rules[2]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
    ] {
        assert!(errs.contains(&want.to_string()), "missing {want}: {errs:?}");
    }

    let mut s = job("Never");
    s["spec"]["successPolicy"] = json!({"rules": [{"succeededIndexes": "0-2,1"}]});
    st.prepare_for_create(&mut s);
    assert_eq!(
        rendered(&st.validate_create(&s)),
        vec!["spec.successPolicy: Invalid value: {\"rules\":[{\"succeededIndexes\":\"0-2,1\"}]}: requires indexed completion mode"]
    );
    s["spec"]["completionMode"] = json!("Indexed");
    s["spec"]["completions"] = json!(3);
    let errs = rendered(&st.validate_create(&s));
    assert_eq!(
        errs,
        vec!["spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-2,1\": error parsing succeededIndexes: non-increasing order, previous: 2, current: 1"]
    );
    s["spec"]["successPolicy"] =
        json!({"rules": [{"succeededIndexes": "0,2", "succeededCount": 3}, {}]});
    let errs = rendered(&st.validate_create(&s));
    for want in [
        "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
        "spec.successPolicy.rules[1]: Required value: at least one of succeededCount or succeededIndexes must be specified",
    ] {
        assert!(errs.contains(&want.to_string()), "missing {want}: {errs:?}");
    }
    assert_eq!(job_spec::validate_indexes_format("1,3-5", 6), Ok(4));
    assert_eq!(
        job_spec::validate_indexes_format("1-6", 6),
        Err("too large index: \"6\"".to_string())
    );
    assert_eq!(
        job_spec::validate_indexes_format("x", 6),
        Err("cannot convert string to integer for index: \"x\"".to_string())
    );
}

#[test]
fn job_selectors_generated_or_manual() {
    let st = res("jobs");
    // A template label that contradicts the generated one.
    let mut j = job("Never");
    j["spec"]["template"]["metadata"]["labels"] = json!({"controller-uid": "other"});
    st.prepare_for_create(&mut j);
    let errs = rendered(&st.validate_create(&j));
    assert!(errs.contains(&"spec.template.metadata.labels[controller-uid]: Invalid value: map[string]string{\"batch.kubernetes.io/controller-uid\":\"u-1\", \"batch.kubernetes.io/job-name\":\"pi\", \"controller-uid\":\"other\", \"job-name\":\"pi\"}: must be 'u-1'".to_string()), "{errs:?}");
    // A selector of the client's own without manualSelector.
    let mut own = job("Never");
    own["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    own["spec"]["template"]["metadata"]["labels"] = json!({"app": "x"});
    st.prepare_for_create(&mut own);
    let errs = rendered(&st.validate_create(&own));
    assert!(errs.contains(&"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"x\", \"batch.kubernetes.io/controller-uid\":\"u-1\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` not auto-generated".to_string()), "{errs:?}");
    // manualSelector: nothing generated, the selector is required and must match.
    let mut manual = job("Never");
    manual["spec"]["manualSelector"] = json!(true);
    st.prepare_for_create(&mut manual);
    assert_eq!(manual.pointer("/spec/selector"), None);
    let errs = rendered(&st.validate_create(&manual));
    assert_eq!(
        errs,
        vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does not match template `labels`"
        ]
    );
    manual["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
    manual["spec"]["template"]["metadata"]["labels"] = json!({"app": "x"});
    assert!(st.validate_create(&manual).is_empty());
}

#[test]
fn job_update_rules() {
    let st = res("jobs");
    let old = created("Never");
    let mut labels = old.clone();
    labels["metadata"]["labels"]["extra"] = json!("1");
    labels["spec"]["parallelism"] = json!(4);
    st.prepare_for_update(&mut labels, &old);
    assert!(st.validate_update(&labels, &old).is_empty());
    assert_eq!(labels.pointer("/metadata/generation"), Some(&json!(2)));

    let mut image = old.clone();
    image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5");
    image["spec"]["completions"] = json!(2);
    image["spec"]["selector"]["matchLabels"]["x"] = json!("y");
    image["spec"]["completionMode"] = json!("Indexed");
    st.prepare_for_update(&mut image, &old);
    let errs = st.validate_update(&image, &old);
    let fields: Vec<(&str, &str)> = errs
        .iter()
        .filter(|e| e.message == "field is immutable")
        .map(|e| (e.field.as_str(), e.kind.reason()))
        .collect();
    for f in ["spec.selector", "spec.template", "spec.completionMode"] {
        assert!(
            fields.contains(&(f, "FieldValueInvalid")),
            "{f}: {:?}",
            rendered(&errs)
        );
    }
    assert!(rendered(&errs).contains(&"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"batch.kubernetes.io/controller-uid\":\"u-1\", \"x\":\"y\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".to_string()));
    let mut nonindexed = old.clone();
    nonindexed["spec"]["completions"] = json!(2);
    st.prepare_for_update(&mut nonindexed, &old);
    assert_eq!(
        rendered(&st.validate_update(&nonindexed, &old)),
        vec!["spec.completions: Invalid value: 2: field is immutable"]
    );

    // A suspended Job that never started may change where its pods run; once started, not.
    let mut suspended = old.clone();
    suspended["spec"]["suspend"] = json!(true);
    let mut moved = suspended.clone();
    moved["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
    moved["spec"]["template"]["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
    moved["spec"]["template"]["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}});
    moved["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
    st.prepare_for_update(&mut moved, &suspended);
    let errs = st.validate_update(&moved, &suspended);
    assert!(errs.is_empty(), "{:?}", rendered(&errs));
    let mut started = suspended.clone();
    started["status"]["startTime"] = json!("2026-12-02T15:01:00Z");
    let errs = st.validate_update(&moved, &started);
    assert!(
        errs.iter().any(|e| e.field == "spec.template"),
        "{:?}",
        rendered(&errs)
    );

    // Elastic indexed Jobs: completions change together with parallelism.
    let mut idx = job("Never");
    idx["spec"]["completionMode"] = json!("Indexed");
    idx["spec"]["completions"] = json!(4);
    idx["spec"]["parallelism"] = json!(4);
    st.prepare_for_create(&mut idx);
    let mut both = idx.clone();
    both["spec"]["completions"] = json!(2);
    both["spec"]["parallelism"] = json!(2);
    assert!(st.validate_update(&both, &idx).is_empty());
    let mut one = idx.clone();
    one["spec"]["completions"] = json!(2);
    assert_eq!(
        rendered(&st.validate_update(&one, &idx)),
        vec!["spec.completions: Invalid value: 2: can only be modified in tandem with spec.parallelism"]
    );
    // Jobs stored before the prefixed labels existed stay updatable.
    let mut legacy = old.clone();
    for l in [
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
    ] {
        if let Some(m) = legacy
            .pointer_mut("/spec/template/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            m.remove(l);
        }
    }
    legacy["spec"]["selector"] = json!({"matchLabels": {"controller-uid": "u-1"}});
    let mut relabel = legacy.clone();
    relabel["metadata"]["labels"] = json!({"x": "y"});
    assert!(st.validate_update(&relabel, &legacy).is_empty());
}

#[test]
fn job_table_field_selectors_and_deletion() {
    let st = res("jobs");
    let mut j = created("Never");
    let cells = |j: &Value| st.strategy.table_cells(j, now());
    assert_eq!(
        cells(&j),
        vec![
            json!("pi"),
            json!("Running"),
            json!("0/1"),
            json!(""),
            json!("60m"),
            json!("pi"),
            json!("perl"),
            json!("batch.kubernetes.io/controller-uid=u-1")
        ]
    );
    j["status"] = json!({"succeeded": 1, "startTime": "2026-12-02T15:00:00Z", "completionTime": "2026-12-02T15:00:42Z",
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
    assert_eq!(
        &cells(&j)[1..4],
        &[json!("Complete"), json!("1/1"), json!("42s")]
    );
    j["status"] = json!({"startTime": "2026-12-02T15:58:00Z", "conditions": [{"type": "Failed", "status": "True"}]});
    assert_eq!(
        &cells(&j)[1..4],
        &[json!("Failed"), json!("0/1"), json!("2m")]
    );
    j["status"] = json!({"conditions": [{"type": "Suspended", "status": "True"}]});
    assert_eq!(cells(&j)[1], json!("Suspended"));
    j["metadata"]["deletionTimestamp"] = json!("2026-12-02T15:59:00Z");
    assert_eq!(cells(&j)[1], json!("Terminating"));
    let mut queue = job("Never");
    queue["spec"]["parallelism"] = json!(3);
    st.prepare_for_create(&mut queue);
    assert_eq!(cells(&queue)[2], json!("0/1 of 3"));
    assert_eq!(
        st.field_value(&json!({"status": {"succeeded": 2}}), "status.successful")
            .as_deref(),
        Some("2")
    );
    assert_eq!(st.field_value(&j, "status.active"), None);
    assert_eq!(
        st.strategy.default_propagation_policy(),
        Propagation::Orphan
    );
    assert_eq!(
        st.strategy
            .table_columns()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].clone())
            .collect::<Vec<_>>(),
        vec![
            json!("Name"),
            json!("Status"),
            json!("Completions"),
            json!("Duration"),
            json!("Age")
        ]
    );
}

fn cronjob() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "hello", "namespace": "default", "uid": "c-1", "creationTimestamp": "2026-12-02T15:00:00Z"},
        "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"metadata": {"name": "hello"}, "spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}},
    })
}

fn cron_errors(mutate: impl Fn(&mut Value)) -> Vec<String> {
    let st = res("cronjobs");
    let mut c = cronjob();
    mutate(&mut c);
    st.prepare_for_create(&mut c);
    rendered(&st.validate_create(&c))
}

#[test]
fn cronjob_defaults_and_validation() {
    let st = res("cronjobs");
    let mut c = cronjob();
    st.prepare_for_create(&mut c);
    for (k, v) in [
        ("concurrencyPolicy", json!("Allow")),
        ("suspend", json!(false)),
        ("successfulJobsHistoryLimit", json!(3)),
        ("failedJobsHistoryLimit", json!(1)),
    ] {
        assert_eq!(c["spec"][k], v, "{k}");
    }
    assert_eq!(
        c.pointer("/spec/jobTemplate/spec/template/spec/schedulerName"),
        Some(&json!("default-scheduler"))
    );
    assert_eq!(
        c.pointer("/spec/jobTemplate/spec/completions"),
        None,
        "the template is not Job-defaulted"
    );
    assert_eq!(c["status"], json!({}));
    assert!(
        st.validate_create(&c).is_empty(),
        "{:?}",
        rendered(&st.validate_create(&c))
    );
    for schedule in ["@hourly", "0 0 * * MON-FRI", "@every 5m", "5 4 1 jan,jul *"] {
        assert!(
            cron_errors(|c| c["spec"]["schedule"] = json!(schedule)).is_empty(),
            "{schedule}"
        );
    }

    for (mutate, want) in [
        (Box::new(|c: &mut Value| c["spec"]["schedule"] = json!("every minute")) as Box<dyn Fn(&mut Value)>,
            "spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"),
        (Box::new(|c: &mut Value| c["spec"]["schedule"] = json!("61 * * * *")),
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"),
        (Box::new(|c: &mut Value| c["spec"]["schedule"] = json!("")), "spec.schedule: Required value"),
        (Box::new(|c: &mut Value| c["spec"]["schedule"] = json!("TZ=UTC 0 * * * *")),
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
        (Box::new(|c: &mut Value| c["spec"]["timeZone"] = json!("Mars/Base")),
            "spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base"),
        (Box::new(|c: &mut Value| c["spec"]["timeZone"] = json!("")),
            "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string"),
        (Box::new(|c: &mut Value| c["spec"]["timeZone"] = json!("Local")),
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
        (Box::new(|c: &mut Value| c["spec"]["timeZone"] = json!("Europe/Lon don")),
            "spec.timeZone: Invalid value: \"Europe/Lon don\": unknown time zone Europe/Lon don"),
        (Box::new(|c: &mut Value| c["spec"]["concurrencyPolicy"] = json!("Sometimes")),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\""),
        (Box::new(|c: &mut Value| c["spec"]["successfulJobsHistoryLimit"] = json!(-1)),
            "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"),
        (Box::new(|c: &mut Value| c["spec"]["startingDeadlineSeconds"] = json!(-5)),
            "spec.startingDeadlineSeconds: Invalid value: -5: must be greater than or equal to 0"),
        (Box::new(|c: &mut Value| c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always")),
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""),
        (Box::new(|c: &mut Value| c["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}})),
            "spec.jobTemplate.spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"b\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated"),
        (Box::new(|c: &mut Value| c["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true)),
            "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\""),
        (Box::new(|c: &mut Value| c["metadata"]["name"] = json!("x".repeat(53))),
            "metadata.name: Invalid value: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be no more than 52 characters"),
    ] {
        let errs = cron_errors(mutate);
        assert!(errs.contains(&want.to_string()), "missing {want}: {errs:?}");
    }
    assert!(cron_errors(|c| c["spec"]["timeZone"] = json!("America/New_York")).is_empty());
}

#[test]
fn cronjob_updates_and_table() {
    let st = res("cronjobs");
    let mut c = cronjob();
    st.prepare_for_create(&mut c);
    // A schedule stored with TZ (before the rule) stays updatable, but not with a timeZone too.
    let mut old = c.clone();
    old["spec"]["schedule"] = json!("TZ=UTC 0 * * * *");
    old["metadata"]["name"] = json!("x".repeat(60));
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(true);
    st.prepare_for_update(&mut new, &old);
    assert!(
        st.validate_update(&new, &old).is_empty(),
        "{:?}",
        rendered(&st.validate_update(&new, &old))
    );
    assert_eq!(new.pointer("/metadata/generation"), Some(&json!(2)));
    new["spec"]["timeZone"] = json!("UTC");
    assert_eq!(
        rendered(&st.validate_update(&new, &old)),
        vec!["spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"]
    );

    let cells = st.strategy.table_cells(&c, now());
    assert_eq!(
        cells,
        vec![
            json!("hello"),
            json!("*/1 * * * *"),
            json!("<none>"),
            json!("False"),
            json!(0),
            json!("<none>"),
            json!("60m"),
            json!("hello"),
            json!("busybox"),
            json!("<none>")
        ]
    );
    c["spec"]["timeZone"] = json!("Etc/UTC");
    c["spec"]["suspend"] = json!(true);
    c["status"] =
        json!({"active": [{"name": "hello-1"}], "lastScheduleTime": "2026-12-02T15:59:00Z"});
    let cells = st.strategy.table_cells(&c, now());
    assert_eq!(
        &cells[2..6],
        &[json!("Etc/UTC"), json!("True"), json!(1), json!("60s")]
    );
    assert_eq!(
        st.strategy.default_propagation_policy(),
        Propagation::Background
    );
}
