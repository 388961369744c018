//! The disruption controller against a real apiserver: a `DisruptionTarget=True` condition on a
//! pod that is still running after `stalePodDisruptionTimeout` (2 min) is reset to False, merged
//! into the condition as upstream's server-side apply does (its reason and message stay), the
//! rest of the status untouched.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use controller::EnabledControllers;
use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn only_disruption() -> EnabledControllers {
    let mut e = EnabledControllers::none();
    e.disruption = true;
    e
}

fn condition(type_: &str, status: &str, since: jiff::Timestamp) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: Some(Time(since)),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_disruption_target_is_reset_keeping_its_reason() {
    let env = start(only_disruption()).await;
    let api = env.pods("default");
    let mut p = api
        .create(&pod_on("web", Some("n"), None))
        .await
        .expect("create pod");
    // Three minutes ago, in whole seconds (what the API keeps).
    let then = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - 180).unwrap();
    let mut target = condition("DisruptionTarget", "True", then);
    target.reason = Some("EvictionByEvictionAPI".into());
    target.message = Some("Eviction API: evicting".into());
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![condition("Ready", "True", then), target]),
        ..Default::default()
    });
    api.replace_status("web", &p).await.expect("pod status");

    let reset = || async {
        let p = api.get("web").await.expect("get pod");
        let conds = p.status.and_then(|s| s.conditions).unwrap_or_default();
        conds
            .iter()
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "False")
            .then_some(conds)
    };
    assert!(
        eventually(Duration::from_secs(15), || async {
            reset().await.is_some()
        })
        .await,
        "DisruptionTarget not reset"
    );
    let reset = reset().await.unwrap();
    let target = reset
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(target.reason.as_deref(), Some("EvictionByEvictionAPI"));
    assert_eq!(target.message.as_deref(), Some("Eviction API: evicting"));
    assert!(target.last_transition_time.as_ref().unwrap().0 > then);
    let ready = reset.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.last_transition_time, Some(Time(then)));
    env.stop().await;
}
