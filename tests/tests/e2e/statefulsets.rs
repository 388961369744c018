//! The StatefulSet controller against a Sandbox: a set of 3 with a claim template gets web-0..2
//! created in order, each only once the one before is Ready, with their claims; scaling down
//! removes the highest ordinal first; a template change rolls the pods in reverse ordinal order
//! and stops at the partition; and the real `kubectl rollout status|history|undo` work on
//! the ControllerRevisions the controller keeps.
//!
//! Order is observed on one pod watch (events arrive in resourceVersion order), never inferred
//! from timestamps.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use tests::eventually;

use futures::StreamExt;
use minik8s::client::{Api, ListParams, Patch, WatchEvent};
use minik8s::k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use minik8s::k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap()
}

fn web(replicas: i32, image: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "www"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }]
        }
    }))
    .unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Pod transitions in watch order: "+web-0" created, "ready web-0", "-web-0" terminating.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<String>>>);

impl Timeline {
    fn start(pods: Api<Pod>, stop: CancellationToken) -> Self {
        let t = Self::default();
        let out = t.clone();
        tokio::spawn(async move {
            let mut seen_ready = std::collections::BTreeSet::new();
            let mut seen_term = std::collections::BTreeSet::new();
            let mut rv = pods
                .list(&ListParams::default())
                .await
                .unwrap()
                .resource_version;
            while !stop.is_cancelled() {
                let Ok(mut w) = pods.watch(&ListParams::default(), &rv).await else {
                    continue;
                };
                loop {
                    let ev = tokio::select! {
                        () = stop.cancelled() => return,
                        ev = w.next() => ev,
                    };
                    let (added, p) = match ev {
                        Some(Ok(WatchEvent::Added(p))) => (true, p),
                        Some(Ok(WatchEvent::Modified(p) | WatchEvent::Deleted(p))) => (false, p),
                        Some(Ok(_)) => continue,
                        _ => break,
                    };
                    rv = p.metadata.resource_version.clone().unwrap_or_default();
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let mut log = out.0.lock().unwrap();
                    if added {
                        log.push(format!("+{name}"));
                        seen_ready.remove(&name);
                        seen_term.remove(&name);
                    }
                    if ready(&p) && seen_ready.insert(name.clone()) {
                        log.push(format!("ready {name}"));
                    }
                    if p.metadata.deletion_timestamp.is_some() && seen_term.insert(name.clone()) {
                        log.push(format!("-{name}"));
                    }
                }
            }
        });
        t
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

async fn wait_rolled_out(sets: &Api<StatefulSet>, replicas: i32) -> StatefulSet {
    eventually(&format!("web rolled out at {replicas}"), || async {
        let s = sets.get("web").await.ok()?;
        let st = s.status.clone()?;
        (st.ready_replicas == Some(replicas)
            && st.replicas == replicas
            && st.updated_replicas == Some(replicas)
            && st.current_revision == st.update_revision
            && st.observed_generation == s.metadata.generation)
            .then_some(s)
    })
    .await
}

fn revision_of(p: &Pod) -> String {
    p.metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_creation_scale_down_and_partitioned_rolling_update() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let sets: Api<StatefulSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    let stop = CancellationToken::new();
    let timeline = Timeline::start(pods.clone(), stop.clone());

    sets.create(&web(3, "nginx:1")).await.unwrap();
    let first = wait_rolled_out(&sets, 3).await;
    let log = timeline.take();
    let at = |e: &str| {
        log.iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e} in {log:?}"))
    };
    assert!(
        at("+web-0") < at("ready web-0") && at("ready web-0") < at("+web-1"),
        "{log:?}"
    );
    assert!(at("ready web-1") < at("+web-2"), "{log:?}");
    for i in 0..3 {
        let p = pods.get(&format!("web-{i}")).await.unwrap();
        let labels = p.metadata.labels.clone().unwrap();
        assert_eq!(
            labels["statefulset.kubernetes.io/pod-name"],
            format!("web-{i}")
        );
        assert_eq!(labels["apps.kubernetes.io/pod-index"], i.to_string());
        let spec = p.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(&*format!("web-{i}")));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let vol = &spec.volumes.unwrap()[0];
        assert_eq!(
            vol.persistent_volume_claim.as_ref().unwrap().claim_name,
            format!("www-web-{i}")
        );
        let c = claims.get(&format!("www-web-{i}")).await.unwrap();
        assert_eq!(c.metadata.labels.unwrap()["app"], "nginx");
    }
    let first_rev = first.status.unwrap().current_revision.unwrap();
    let revs: Api<ControllerRevision> = client.api(Some("default"));
    let r = revs.get(&first_rev).await.unwrap();
    assert_eq!(r.revision, 1);
    assert_eq!(r.metadata.owner_references.unwrap()[0].name, "web");
    let events: Api<Event> = client.api(Some("default"));
    eventually("creation events", || async {
        let evs = events.list(&ListParams::default()).await.ok()?.items;
        let has = |m: &str| evs.iter().any(|e| e.message.as_deref() == Some(m));
        (has("create Pod web-0 in StatefulSet web successful")
            && has("create Claim www-web-0 Pod web-0 in StatefulSet web success"))
        .then_some(())
    })
    .await;

    // Scale down to 1: web-2 goes before web-1; the claims stay (Retain).
    let scale = |n: i32| Patch::Merge(json!({"spec": {"replicas": n}}));
    sets.patch("web", &scale(1)).await.unwrap();
    wait_rolled_out(&sets, 1).await;
    eventually("web-1 and web-2 gone", || async {
        let names: Vec<_> = pods
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        (names == ["web-0"]).then_some(())
    })
    .await;
    let log = timeline.take();
    let at = |e: &str| {
        log.iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e} in {log:?}"))
    };
    assert!(at("-web-2") < at("-web-1"), "{log:?}");
    assert!(
        claims.get("www-web-2").await.is_ok(),
        "whenScaled Retain keeps the claim"
    );

    // Back to 3, then a new image with partition 1: web-2 then web-1 roll, web-0 stays.
    sets.patch("web", &scale(3)).await.unwrap();
    wait_rolled_out(&sets, 3).await;
    timeline.take();
    sets.patch(
        "web",
        &Patch::Merge(json!({"spec": {
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}
        }})),
    )
    .await
    .unwrap();
    let partial = eventually("web-1 and web-2 updated", || async {
        let s = sets.get("web").await.ok()?;
        let st = s.status.clone()?;
        (st.updated_replicas == Some(2)
            && st.ready_replicas == Some(3)
            && st.current_replicas == Some(1))
        .then_some(st)
    })
    .await;
    assert_ne!(partial.current_revision, partial.update_revision);
    let update_rev = partial.update_revision.unwrap();
    assert_eq!(revision_of(&pods.get("web-0").await.unwrap()), first_rev);
    for i in 1..3 {
        let p = pods.get(&format!("web-{i}")).await.unwrap();
        assert_eq!(revision_of(&p), update_rev);
        assert_eq!(
            p.spec.unwrap().containers[0].image.as_deref(),
            Some("nginx:2")
        );
    }
    let log = timeline.take();
    let at = |e: &str| {
        log.iter()
            .position(|x| x == e)
            .unwrap_or_else(|| panic!("{e} in {log:?}"))
    };
    assert!(
        at("-web-2") < at("ready web-2") && at("ready web-2") < at("-web-1"),
        "{log:?}"
    );
    assert!(!log.contains(&"-web-0".to_string()), "{log:?}");

    // Partition 0: web-0 rolls too and the update completes.
    sets.patch(
        "web",
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .unwrap();
    let done = wait_rolled_out(&sets, 3).await;
    assert_eq!(
        done.status.unwrap().current_revision.as_deref(),
        Some(&*update_rev)
    );
    stop.cancel();
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_status_history_and_undo() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let sets: Api<StatefulSet> = client.api(Some("default"));
    sets.create(&web(2, "nginx:1")).await.unwrap();
    let kubectl = |args: &'static [&'static str]| {
        let k = tests::Kubectl::new(sandbox.kubeconfig_path());
        tokio::task::spawn_blocking(move || k.ok(args))
    };
    let out = kubectl(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await
        .unwrap();
    assert!(
        out.contains("partitioned roll out complete") || out.contains("roll out complete"),
        "{out}"
    );

    kubectl(&["set", "image", "statefulset/web", "nginx=nginx:2"])
        .await
        .unwrap();
    let out = kubectl(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await
        .unwrap();
    assert!(out.contains("roll out complete"), "{out}");
    let image = |s: &StatefulSet| {
        s.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone()
            .unwrap()
    };

    let history = kubectl(&["rollout", "history", "statefulset/web"])
        .await
        .unwrap();
    let numbers: Vec<&str> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(numbers, ["1", "2"], "{history}");
    let rev1 = kubectl(&["rollout", "history", "statefulset/web", "--revision=1"])
        .await
        .unwrap();
    assert!(rev1.contains("nginx:1"), "{rev1}");

    let out = kubectl(&["rollout", "undo", "statefulset/web"])
        .await
        .unwrap();
    assert!(out.contains("rolled back"), "{out}");
    assert_eq!(image(&sets.get("web").await.unwrap()), "nginx:1");
    let out = kubectl(&["rollout", "status", "statefulset/web", "--timeout=60s"])
        .await
        .unwrap();
    assert!(out.contains("roll out complete"), "{out}");
    let done = wait_rolled_out(&sets, 2).await;
    // The old revision was renumbered to the top rather than copied.
    let revs: Api<ControllerRevision> = client.api(Some("default"));
    let current = revs
        .get(
            done.status
                .as_ref()
                .unwrap()
                .current_revision
                .as_deref()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(current.revision, 3);
    let history = kubectl(&["rollout", "history", "statefulset/web"])
        .await
        .unwrap();
    let numbers: Vec<&str> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(numbers, ["2", "3"], "{history}");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_policy_delete_removes_claims_on_scale_down_and_deletion() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let sets: Api<StatefulSet> = client.api(Some("default"));
    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let revs: Api<ControllerRevision> = client.api(Some("default"));
    let mut s = web(2, "nginx:1");
    s.spec
        .as_mut()
        .unwrap()
        .persistent_volume_claim_retention_policy = Some(
        serde_json::from_value(json!({"whenDeleted": "Delete", "whenScaled": "Delete"})).unwrap(),
    );
    sets.create(&s).await.unwrap();
    wait_rolled_out(&sets, 2).await;
    // Claims of live pods are controlled by the set.
    let owner_kinds = |c: &PersistentVolumeClaim| -> Vec<String> {
        c.metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.controller == Some(true))
            .map(|r| r.kind.clone())
            .collect()
    };
    let c1 = eventually("www-web-1 owned by the set", || async {
        let c = claims.get("www-web-1").await.ok()?;
        (owner_kinds(&c) == ["StatefulSet"]).then_some(c)
    })
    .await;
    assert_eq!(c1.metadata.owner_references.unwrap()[0].name, "web");

    // Scale to 1: the claim of web-1 goes over to the pod and is collected with it.
    sets.patch("web", &Patch::Merge(json!({"spec": {"replicas": 1}})))
        .await
        .unwrap();
    eventually("www-web-1 deleted", || async {
        claims
            .get_opt("www-web-1")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(claims.get("www-web-0").await.is_ok());

    // Deleting the set collects its pods, the remaining claim and the revisions.
    sets.delete("web", &Default::default()).await.unwrap();
    eventually("pods, claims and revisions collected", || async {
        let p = pods.list(&ListParams::default()).await.ok()?.items.len();
        let c = claims.list(&ListParams::default()).await.ok()?.items.len();
        let r = revs.list(&ListParams::default()).await.ok()?.items.len();
        (p + c + r == 0).then_some(())
    })
    .await;
    sandbox.stop().await;
}

/// A pod that lost its identity label gets it back (`UpdateStatefulPod`): the controller writes
/// the whole pod, as upstream's does, so it starts from the stored pod, not from its informer's
/// copy, which lacks what only a kubelet reads (the service account's token volume, mounts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_lost_its_identity_label_gets_it_back() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let sets: Api<StatefulSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let mut s = web(1, "nginx:1");
    s.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .env = Some(vec![serde_json::from_value(
        json!({"name": "A", "value": "1"}),
    )
    .unwrap()]);
    sets.create(&s).await.unwrap();
    wait_rolled_out(&sets, 1).await;
    let before = pods.get("web-0").await.unwrap();
    let label = "statefulset.kubernetes.io/pod-name";
    pods.patch(
        "web-0",
        &Patch::Merge(json!({"metadata": {"labels": {label: null}}})),
    )
    .await
    .unwrap();
    let after = eventually("web-0 labelled again", || async {
        let p = pods.get("web-0").await.ok()?;
        let labels = p.metadata.labels.clone().unwrap_or_default();
        (labels.get(label).map(String::as_str) == Some("web-0")).then_some(p)
    })
    .await;
    assert_eq!(after.metadata.uid, before.metadata.uid, "the same pod");
    assert_eq!(after.spec, before.spec, "its spec untouched");
    sandbox.stop().await;
}
