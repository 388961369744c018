//! The root CA certificate publisher (kube-controller-manager's
//! `root-ca-certificate-publisher-controller`, alias `root-ca-cert-publisher`; upstream
//! `pkg/controller/certificates/rootcacertpublisher/publisher.go`, 1.33): every namespace has the
//! ConfigMap `kube-root-ca.crt` whose `ca.crt` is the cluster's CA bundle (pods' projected
//! `kube-api-access-*` volumes mount it), with upstream's description annotation.
//!
//! Keys are namespace names, queued when a namespace is added or becomes `Active` again and when
//! the ConfigMap is changed or deleted. A sync creates the ConfigMap if the cache has none, and puts
//! back its data and annotation if someone changed them; a create into a namespace that is gone or
//! terminating is not retried.

use std::collections::BTreeMap;
use std::sync::Arc;

use client::{
    Action, Client, DeletedObject, HandlerRegistration, Lister, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

use crate::{Error, Result};

/// The ConfigMap's name (`RootCACertConfigMapName`).
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The annotation saying what it is for (`DescriptionAnnotation`).
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Its text (`Description`).
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other \
usage is guaranteed across distributions of Kubernetes clusters.";

struct Inner {
    client: Client,
    config_maps: Lister<ConfigMap>,
    root_ca: String,
    queue: RateLimitingQueue<String>,
}

/// The root CA certificate publisher.
pub struct Publisher {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl Publisher {
    /// Publish `root_ca` (PEM) into every namespace, on the shared informers.
    pub fn new(
        client: Client,
        namespaces: SharedIndexInformer<Namespace>,
        config_maps: SharedIndexInformer<ConfigMap>,
        root_ca: String,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            config_maps: config_maps.lister(),
            root_ca,
            queue: RateLimitingQueue::with_default_controller_rate_limiter(
                "root_ca_cert_publisher",
            ),
        });
        let registrations = [
            namespaces.add_event_handler(NamespaceHandler(inner.queue.clone())),
            config_maps.add_event_handler(ConfigMapHandler(inner.queue.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        let [a, b] = &self.registrations;
        Runner::new("root-ca-cert-publisher")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[a, b],
                &shutdown,
                move |ns: String| {
                    let inner = inner.clone();
                    async move {
                        inner.sync(&ns).await?;
                        Ok::<_, Error>(Action::AwaitChange)
                    }
                },
            )
            .await;
    }
}

impl Inner {
    fn data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("ca.crt".to_string(), self.root_ca.clone())])
    }

    async fn sync(&self, ns: &str) -> Result<()> {
        let api = self.client.api::<ConfigMap>(Some(ns));
        let Some(cm) = self.config_maps.namespace(ns).get(ROOT_CA_CONFIG_MAP) else {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(ROOT_CA_CONFIG_MAP.to_string()),
                    namespace: Some(ns.to_string()),
                    annotations: Some(BTreeMap::from([(
                        DESCRIPTION_ANNOTATION.to_string(),
                        DESCRIPTION.to_string(),
                    )])),
                    ..Default::default()
                },
                data: Some(self.data()),
                ..Default::default()
            };
            return match api.create(&cm).await {
                Ok(_) => Ok(()),
                // Gone or terminating (403, `NamespaceTerminating`): not retried. Already there:
                // the cache was behind; its update event brings the key back if it differs.
                Err(e) if e.is_not_found() || e.code() == Some(403) || e.is_already_exists() => {
                    Ok(())
                }
                Err(e) => Err(Error::api("create root CA config map", e)),
            };
        };
        let annotated = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .is_some_and(|d| !d.is_empty());
        if cm.data.as_ref() == Some(&self.data()) && annotated {
            return Ok(());
        }
        let mut fixed = (*cm).clone();
        fixed.data = Some(self.data());
        fixed
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string());
        match api.replace(ROOT_CA_CONFIG_MAP, &fixed).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("update root CA config map", e)),
        }
    }
}

struct NamespaceHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<Namespace> for NamespaceHandler {
    fn on_add(&self, obj: &Arc<Namespace>, _in_initial_list: bool) {
        self.0.add(obj.metadata.name.clone().unwrap_or_default());
    }

    fn on_update(&self, _old: &Arc<Namespace>, new: &Arc<Namespace>) {
        let phase = new.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase.is_none_or(|p| p == "Active") {
            self.0.add(new.metadata.name.clone().unwrap_or_default());
        }
    }

    fn on_delete(&self, _obj: DeletedObject<Namespace>) {}
}

struct ConfigMapHandler(RateLimitingQueue<String>);

impl ConfigMapHandler {
    fn queue_if_ours(&self, cm: &ConfigMap) {
        if cm.metadata.name.as_deref() == Some(ROOT_CA_CONFIG_MAP) {
            if let Some(ns) = cm.metadata.namespace.clone() {
                self.0.add(ns);
            }
        }
    }
}

impl ResourceEventHandler<ConfigMap> for ConfigMapHandler {
    fn on_add(&self, _obj: &Arc<ConfigMap>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.queue_if_ours(new);
    }

    fn on_delete(&self, obj: DeletedObject<ConfigMap>) {
        self.queue_if_ours(obj.object());
    }
}
