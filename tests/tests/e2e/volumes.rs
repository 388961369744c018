//! Persistent volumes against a Sandbox, as on a kind cluster: the default class `standard` exists
//! and is given to claims without one; such a claim waits for its first consumer, then the
//! scheduler picks a node, the fake local-path provisioner creates `pvc-<uid>` there and the binder
//! binds it; an Immediate class binds at once; a pre-created volume binds to a matching claim;
//! reclaim policies (Delete removes a provisioned volume and fails a static one, Retain keeps it
//! Released); the scheduler's VolumeBinding reasons; expansion and the resize admission; `kubectl get pvc,pv` and
//! `describe pvc`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tests::eventually;

use minik8s::client::{Api, Patch};
use minik8s::k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use minik8s::k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Value};

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(2)
        .start()
        .await
        .unwrap()
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn claim(name: &str, class: Option<&str>, size: &str) -> PersistentVolumeClaim {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    });
    if let Some(c) = class {
        v["spec"]["storageClassName"] = json!(c);
    }
    from(v)
}

fn pod_with_claim(name: &str, claim: &str) -> Pod {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    }))
}

fn class(name: &str, provisioner: &str, mode: &str, expand: bool) -> StorageClass {
    from(json!({
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": expand
    }))
}

fn annotation<'a>(
    meta: &'a minik8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    k: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(k).map(String::as_str)
}

fn phase(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

async fn bound(claims: &Api<PersistentVolumeClaim>, name: &str) -> PersistentVolumeClaim {
    eventually(&format!("claim {name} Bound"), || async {
        let c = claims.get(name).await.ok()?;
        (phase(&c) == "Bound").then_some(c)
    })
    .await
}

fn storage(
    list: Option<
        &std::collections::BTreeMap<
            String,
            minik8s::k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> String {
    list.and_then(|m| m.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

async fn scheduled_message(pods: &Api<Pod>, name: &str, part: &str) -> String {
    eventually(
        &format!("pod {name} unschedulable with {part:?}"),
        || async {
            let p = pods.get(name).await.ok()?;
            let conds = p.status?.conditions?;
            let c = conds
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
            c.message.filter(|m| m.contains(part))
        },
    )
    .await
}

#[tokio::test]
async fn a_claim_of_the_default_class_binds_once_a_pod_uses_it() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let classes: Api<StorageClass> = client.api(None);
    let standard = classes.get("standard").await.unwrap();
    assert_eq!(standard.provisioner, "rancher.io/local-path");
    assert_eq!(
        standard.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    assert_eq!(
        annotation(
            &standard.metadata,
            "storageclass.kubernetes.io/is-default-class"
        ),
        Some("true")
    );

    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    let created = claims.create(&claim("data", None, "1Gi")).await.unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(
        spec.storage_class_name.as_deref(),
        Some("standard"),
        "DefaultStorageClass"
    );
    // Waits for its first consumer: still Pending, no volume.
    let events = client.api::<minik8s::k8s_openapi::api::core::v1::Event>(Some("default"));
    eventually("WaitForFirstConsumer event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("WaitForFirstConsumer"))
    })
    .await;
    assert_eq!(phase(&claims.get("data").await.unwrap()), "Pending");

    let pods: Api<Pod> = client.api(Some("default"));
    pods.create(&pod_with_claim("app", "data")).await.unwrap();
    let c = bound(&claims, "data").await;
    let uid = c.metadata.uid.clone().unwrap();
    let volume = c.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap();
    assert_eq!(volume, format!("pvc-{uid}"));
    assert_eq!(
        annotation(&c.metadata, "pv.kubernetes.io/bind-completed"),
        Some("yes")
    );
    assert_eq!(
        annotation(&c.metadata, "volume.kubernetes.io/storage-provisioner"),
        Some("rancher.io/local-path")
    );
    let node = annotation(&c.metadata, "volume.kubernetes.io/selected-node")
        .unwrap()
        .to_string();
    assert_eq!(
        storage(c.status.as_ref().and_then(|s| s.capacity.as_ref())),
        "1Gi"
    );

    let pv: PersistentVolume = client.api(None).get(&volume).await.unwrap();
    assert_eq!(
        annotation(&pv.metadata, "pv.kubernetes.io/provisioned-by"),
        Some("rancher.io/local-path")
    );
    let pv_spec = pv.spec.as_ref().unwrap();
    assert_eq!(
        pv_spec.claim_ref.as_ref().and_then(|r| r.uid.clone()),
        Some(uid)
    );
    assert_eq!(
        pv_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let affinity = serde_json::to_value(&pv_spec.node_affinity).unwrap();
    assert_eq!(
        affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        json!(node)
    );
    assert!(pv_spec
        .host_path
        .as_ref()
        .unwrap()
        .path
        .starts_with("/var/local-path-provisioner/pvc-"));

    // The pod runs on the claim's node.
    let p = eventually("pod Running", || async {
        let p = pods.get("app").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await;
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some(node.as_str()));

    // Delete reclaim: the claim goes, then its volume.
    pods.delete("app", &Default::default()).await.unwrap();
    claims.delete("data", &Default::default()).await.unwrap();
    let pvs: Api<PersistentVolume> = client.api(None);
    eventually("provisioned volume deleted", || async {
        pvs.get_opt(&volume).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn an_immediate_claim_binds_at_once_and_expands() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let classes: Api<StorageClass> = client.api(None);
    classes
        .create(&class("fast", "rancher.io/local-path", "Immediate", true))
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    claims
        .create(&claim("grow-me", Some("fast"), "1Gi"))
        .await
        .unwrap();
    let c = bound(&claims, "grow-me").await;
    let volume = c.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap();
    assert!(annotation(&c.metadata, "volume.kubernetes.io/selected-node").is_none());

    // An unbound claim may not grow: the claim's own validation refuses it (422) before the
    // PersistentVolumeClaimResize plugin, a validating one, would ("Only bound …").
    claims
        .create(&claim("stay-small", Some("standard"), "1Gi"))
        .await
        .unwrap();
    let grow =
        |size: &str| Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    let err = claims.patch("stay-small", &grow("2Gi")).await.unwrap_err();
    assert!(
        err.to_string().contains(
            "spec is immutable after creation except resources.requests and \
             volumeAttributesClassName for bound claims"
        ),
        "{err}"
    );
    let fixed = class("fixed", "rancher.io/local-path", "Immediate", false);
    classes.create(&fixed).await.unwrap();
    claims
        .create(&claim("fixed-size", Some("fixed"), "1Gi"))
        .await
        .unwrap();
    bound(&claims, "fixed-size").await;
    let err = claims.patch("fixed-size", &grow("2Gi")).await.unwrap_err();
    assert!(
        err.to_string().contains("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"),
        "{err}"
    );

    claims.patch("grow-me", &grow("2Gi")).await.unwrap();
    let pvs: Api<PersistentVolume> = client.api(None);
    eventually("volume expanded", || async {
        let pv = pvs.get(&volume).await.ok()?;
        (storage(pv.spec.as_ref()?.capacity.as_ref()) == "2Gi").then_some(())
    })
    .await;
    let c = eventually("claim capacity 2Gi", || async {
        let c = claims.get("grow-me").await.ok()?;
        (storage(c.status.as_ref()?.capacity.as_ref()) == "2Gi").then_some(c)
    })
    .await;
    let status = c.status.unwrap();
    assert_eq!(storage(status.allocated_resources.as_ref()), "2Gi");
    assert!(status.allocated_resource_statuses.is_none());
    assert!(status.conditions.unwrap_or_default().is_empty());
    assert_eq!(
        annotation(&c.metadata, "volume.kubernetes.io/storage-resizer"),
        Some("rancher.io/local-path")
    );
    // Shrinking below the capacity is refused by validation.
    let err = claims.patch("grow-me", &grow("1Gi")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("can not be less than status.capacity"),
        "{err}"
    );
}

fn static_volume(name: &str, class: &str, size: &str, policy: &str) -> PersistentVolume {
    from(json!({
        "metadata": {"name": name, "labels": {"disk": name}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "persistentVolumeReclaimPolicy": policy,
            "hostPath": {"path": format!("/mnt/{name}")}
        }
    }))
}

#[tokio::test]
async fn a_pre_created_volume_binds_and_is_reclaimed_by_its_policy() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let pvs: Api<PersistentVolume> = client.api(None);
    pvs.create(&static_volume("big", "manual", "10Gi", "Retain"))
        .await
        .unwrap();
    pvs.create(&static_volume("small", "manual", "1Gi", "Retain"))
        .await
        .unwrap();
    pvs.create(&static_volume("gone", "manual", "1Gi", "Delete"))
        .await
        .unwrap();
    eventually("volumes Available", || async {
        let list = pvs.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"))
            .then_some(())
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    // The smallest volume that fits, of the claim's class.
    claims
        .create(&claim("small-claim", Some("manual"), "500Mi"))
        .await
        .unwrap();
    let c = bound(&claims, "small-claim").await;
    let first = c.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap();
    assert!(first == "small" || first == "gone", "{first}");
    assert_eq!(
        annotation(&c.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );
    assert_eq!(
        storage(c.status.as_ref().and_then(|s| s.capacity.as_ref())),
        "1Gi"
    );
    let pv = pvs.get(&first).await.unwrap();
    assert_eq!(
        annotation(&pv.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );
    assert_eq!(pv.status.and_then(|s| s.phase).as_deref(), Some("Bound"));

    // A selector picks the other 1Gi volume.
    let other = if first == "small" { "gone" } else { "small" };
    let mut selecting = claim("selecting", Some("manual"), "1Gi");
    selecting.spec.as_mut().unwrap().selector = Some(from(json!({"matchLabels": {"disk": other}})));
    claims.create(&selecting).await.unwrap();
    let c = bound(&claims, "selecting").await;
    assert_eq!(c.spec.and_then(|s| s.volume_name).as_deref(), Some(other));

    // Retain keeps a Released volume; Delete of a volume nobody provisioned finds no deleter
    // (no volume plugins here): the volume goes Failed with upstream's message.
    claims
        .delete("small-claim", &Default::default())
        .await
        .unwrap();
    claims
        .delete("selecting", &Default::default())
        .await
        .unwrap();
    eventually("Retain volume Released", || async {
        let pv = pvs.get("small").await.ok()?;
        (pv.status?.phase.as_deref() == Some("Released")).then_some(())
    })
    .await;
    let status = eventually("Delete volume Failed", || async {
        let status = pvs.get("gone").await.ok()?.status?;
        (status.phase.as_deref() == Some("Failed")).then_some(status)
    })
    .await;
    assert_eq!(
        status.message.as_deref(),
        Some("error getting deleter volume plugin for volume \"gone\": no deletable volume plugin matched")
    );
    assert!(pvs.get_opt("big").await.unwrap().is_some());
}

#[tokio::test]
async fn the_scheduler_waits_for_claims() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let pods: Api<Pod> = client.api(Some("default"));
    pods.create(&pod_with_claim("waits", "later"))
        .await
        .unwrap();
    scheduled_message(&pods, "waits", "persistentvolumeclaim \"later\" not found").await;
    let msg = scheduled_message(&pods, "waits", "not found").await;
    assert_eq!(
        msg,
        "0/2 nodes are available: persistentvolumeclaim \"later\" not found."
    );

    // An Immediate class nobody provisions: the claim stays unbound, the pod unschedulable.
    let classes: Api<StorageClass> = client.api(None);
    classes
        .create(&class(
            "manual",
            "kubernetes.io/no-provisioner",
            "Immediate",
            false,
        ))
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = client.api(Some("default"));
    claims
        .create(&claim("later", Some("manual"), "1Gi"))
        .await
        .unwrap();
    scheduled_message(
        &pods,
        "waits",
        "pod has unbound immediate PersistentVolumeClaims",
    )
    .await;

    // A WaitForFirstConsumer class without a provisioner and no volume: no node fits.
    classes
        .create(&class(
            "local",
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
            false,
        ))
        .await
        .unwrap();
    claims
        .create(&claim("local-claim", Some("local"), "1Gi"))
        .await
        .unwrap();
    pods.create(&pod_with_claim("local-pod", "local-claim"))
        .await
        .unwrap();
    let msg = scheduled_message(&pods, "local-pod", "persistent volumes to bind").await;
    assert_eq!(
        msg,
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    );

    // A local volume on node-1 arrives: the pod goes there, its claim binds to it.
    let mut pv = static_volume("local-1", "local", "1Gi", "Retain");
    pv.spec.as_mut().unwrap().node_affinity = Some(from(
        json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}),
    ));
    client
        .api::<PersistentVolume>(None)
        .create(&pv)
        .await
        .unwrap();
    let c = bound(&claims, "local-claim").await;
    assert_eq!(
        c.spec.and_then(|s| s.volume_name).as_deref(),
        Some("local-1")
    );
    let p = eventually("local-pod bound", || async {
        let p = pods.get("local-pod").await.ok()?;
        p.spec?.node_name
    })
    .await;
    assert_eq!(p, "node-1");

    // A claim pre-bound by volumeName to a volume that does not exist is not the scheduler's to
    // bind, whatever its class: it counts as unbound immediate (upstream's GetPodVolumeClaims).
    let mut pre_bound = claim("pre-bound", Some("local"), "1Gi");
    pre_bound.spec.as_mut().unwrap().volume_name = Some("missing-pv".into());
    claims.create(&pre_bound).await.unwrap();
    pods.create(&pod_with_claim("pre-bound-pod", "pre-bound"))
        .await
        .unwrap();
    let msg = scheduled_message(&pods, "pre-bound-pod", "unbound immediate").await;
    assert_eq!(
        msg,
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    );
}

#[tokio::test]
async fn kubectl_shows_claims_and_volumes() {
    let sandbox = sandbox().await;
    let manifest = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: www
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 128Mi
---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: nginx
    volumeMounts: [{name: www, mountPath: /usr/share/nginx/html}]
  volumes:
  - name: www
    persistentVolumeClaim: {claimName: www}
"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("www.yaml");
    std::fs::write(&file, manifest).unwrap();
    let file = file.to_str().unwrap().to_string();
    kubectl(&sandbox, &["apply", "-f", &file]).await;
    let claims: Api<PersistentVolumeClaim> = sandbox.client().api(Some("default"));
    let c = bound(&claims, "www").await;
    let volume = c.spec.and_then(|s| s.volume_name).unwrap();
    let out = kubectl(&sandbox, &["get", "pvc,pv"]).await;
    assert!(out.contains("persistentvolumeclaim/www"), "{out}");
    assert!(out.contains(&format!("persistentvolume/{volume}")), "{out}");
    assert!(out.contains("Bound"), "{out}");
    assert!(out.contains("standard"), "{out}");
    let describe = eventually("describe pvc shows the provisioning events", || async {
        let d = kubectl(&sandbox, &["describe", "pvc", "www"]).await;
        d.contains("ProvisioningSucceeded").then_some(d)
    })
    .await;
    for want in [
        "StorageClass:  standard",
        "Status:        Bound",
        "Used By:       web",
        "ExternalProvisioning",
    ] {
        assert!(describe.contains(want), "missing {want:?} in\n{describe}");
    }
}

/// kubectl runs on a blocking thread: the sandbox shares this test's runtime.
async fn kubectl(sandbox: &minik8s::Sandbox, args: &[&str]) -> String {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        k.ok(&args)
    })
    .await
    .unwrap()
}
