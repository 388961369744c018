//! `pods/eviction` through admission: a CREATE of a `policy/v1` Eviction, as upstream's
//! eviction REST admits it; its answer carries admission's warnings as `Warning` headers, as
//! every other write's.

use kube::api::PostParams;
use serde_json::{json, Value};

use super::webhook_server::Hooks;
use super::{create_pod, hook_on, sandbox};

/// `pods/eviction` is a CREATE of a `policy/v1` Eviction: a webhook refuses an eviction without
/// grace, another passes and evicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_pods_eviction_sees_the_eviction() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "eviction.example.com",
        "deny-eviction",
        "CREATE",
        "",
        "pods/eviction",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "eviction",
            vec![hook],
        )
        .await;
    let pods = create_pod(&client, "e").await;
    // Sent raw: kube-rs's `EvictParams` spells `delete_options` (dropped by the server).
    let evict = |grace: Value| {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "e"}, "deleteOptions": {"gracePeriodSeconds": grace},
            "notAField": 1});
        let pods = pods.clone();
        async move {
            pods.create_subresource::<Value, Value>("eviction", "e", &PostParams::default(), &body)
                .await
        }
    };
    match evict(json!(0)).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403);
            assert_eq!(
                e.message,
                r#"admission webhook "eviction.example.com" denied the request: evictions must be graceful"#
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(pods.get("e").await.is_ok());
    let review = hooks.last_call("deny-eviction", "e");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "policy", "version": "v1", "kind": "Eviction"})
    );
    assert_eq!(req["resource"]["resource"], "pods");
    assert_eq!(req["subResource"], "eviction");
    assert_eq!(req["object"]["apiVersion"], "policy/v1");
    assert_eq!(req["object"]["metadata"]["name"], "e");
    assert_eq!(req["object"]["deleteOptions"]["gracePeriodSeconds"], 0);
    // Sent as decoded: a field Eviction does not define is dropped.
    assert_eq!(req["object"].get("notAField"), None);
    evict(json!(30)).await.unwrap();
    assert_eq!(
        hooks.last_call("deny-eviction", "e")["request"]["object"]["deleteOptions"]
            ["gracePeriodSeconds"],
        30
    );
}

/// A webhook's warnings on an eviction reach the client as `299` `Warning` headers, on the
/// eviction's answer (a 201 Success), as on every other write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_answer_carries_the_webhooks_warnings() {
    let hooks = Hooks::start().await;
    let sandbox = sandbox().await;
    let client = sandbox.kube_client().unwrap();
    let hook = hook_on(
        &hooks,
        "warn-eviction.example.com",
        "warn",
        "CREATE",
        "",
        "pods/eviction",
    );
    hooks
        .install(
            &client,
            "ValidatingWebhookConfiguration",
            "warn-eviction",
            vec![hook],
        )
        .await;
    let pods = create_pod(&client, "w").await;
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w"}});
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/namespaces/default/pods/w/eviction",
            sandbox.url()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, vec![r#"299 - "careful: this is a test warning""#]);
    let status: Value = resp.json().await.unwrap();
    assert_eq!(status["status"], "Success");
    assert_eq!(
        hooks.last_call("warn", "w")["request"]["subResource"],
        "eviction"
    );
    tests::eventually("the evicted pod gone", || async {
        pods.get_opt("w").await.unwrap().is_none().then_some(())
    })
    .await;
}
