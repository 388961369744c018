//! Cluster add-ons a kind cluster has once `kind create cluster` returns: the default
//! StorageClass `standard` (kind's `manifests/default-storage.yaml`: provisioner
//! `rancher.io/local-path`, `WaitForFirstConsumer`, `Delete`, annotated as the default class).
//!
//! Why here, in the wiring, rather than in the apiserver's bootstrap or a controller: kind applies
//! it as a manifest after the control plane is up (it is not something kube-apiserver or
//! kube-controller-manager create), and `minik8s apiserver` alone (or a Sandbox without
//! controllers, envtest's shape) stays a bare apiserver: the class is installed only with the
//! controller manager, whose fake local-path provisioner serves it.
//! It is created over HTTP as a client would, concurrently with the components' start, and
//! [`ControlPlane::start`](crate::ControlPlane::start) returns only once it exists, so a claim
//! created right after start gets the default class from the DefaultStorageClass admission plugin,
//! as on kind. The cost is one in-process create (well under a millisecond in memory). If the class
//! exists (a restart on a data directory, or the user's own), it is left alone.

use k8s_openapi::api::storage::v1::StorageClass;

/// The default class's name.
pub const DEFAULT_STORAGE_CLASS: &str = "standard";

/// kind's default StorageClass.
pub fn default_storage_class() -> StorageClass {
    StorageClass {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(DEFAULT_STORAGE_CLASS.into()),
            annotations: Some(
                [(
                    "storageclass.kubernetes.io/is-default-class".to_string(),
                    "true".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        provisioner: "rancher.io/local-path".into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..Default::default()
    }
}

/// Creates the add-ons that are missing.
pub async fn install(client: &client::Client) -> Result<(), client::Error> {
    match client
        .api::<StorageClass>(None)
        .create(&default_storage_class())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}
