//! The service account controller (kube-controller-manager's `serviceaccount-controller`, alias
//! `serviceaccount`; upstream `pkg/controller/serviceaccount/serviceaccounts_controller.go`, 1.33):
//! every active namespace has a `default` ServiceAccount, created within moments of the namespace
//! and re-created if it is deleted.
//!
//! Keys are namespace names, queued when a namespace is added or updated and when a ServiceAccount
//! is deleted. A sync reads the caches only: nothing is done for a namespace that is gone or not
//! `Active`, nor when the ServiceAccount is already cached; otherwise it is created, and
//! `AlreadyExists` (the cache was behind) or a namespace that went away meanwhile is success.

use std::sync::Arc;

use client::{
    Action, Client, DeletedObject, HandlerRegistration, Lister, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

use crate::{Error, Result};

/// The ServiceAccounts every namespace gets (`--service-account-names` is not a flag upstream; the
/// controller's options name `default`).
pub const SERVICE_ACCOUNTS_TO_ENSURE: &[&str] = &["default"];

struct Inner {
    client: Client,
    namespaces: Lister<Namespace>,
    service_accounts: Lister<ServiceAccount>,
    queue: RateLimitingQueue<String>,
}

/// The service account controller.
pub struct ServiceAccountsController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl ServiceAccountsController {
    /// Build on the shared namespace and ServiceAccount informers.
    pub fn new(
        client: Client,
        namespaces: SharedIndexInformer<Namespace>,
        service_accounts: SharedIndexInformer<ServiceAccount>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            namespaces: namespaces.lister(),
            service_accounts: service_accounts.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("serviceaccount"),
        });
        let registrations = [
            namespaces.add_event_handler(NamespaceHandler(inner.queue.clone())),
            service_accounts.add_event_handler(DeletedHandler(inner.queue.clone())),
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

    /// Wait for both caches, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        let [a, b] = &self.registrations;
        Runner::new("serviceaccount")
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
    async fn sync(&self, ns: &str) -> Result<()> {
        let Some(namespace) = self.namespaces.get(ns) else {
            return Ok(());
        };
        let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
        // A namespace just created may not show its phase yet; `Active` is its default.
        if namespace.metadata.deletion_timestamp.is_some() || phase.is_some_and(|p| p != "Active") {
            return Ok(());
        }
        let api = self.client.api::<ServiceAccount>(Some(ns));
        for name in SERVICE_ACCOUNTS_TO_ENSURE {
            if self.service_accounts.namespace(ns).get(name).is_some() {
                continue;
            }
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some((*name).to_string()),
                    namespace: Some(ns.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match api.create(&sa).await {
                Ok(_) => tracing::debug!(namespace = ns, name, "service account created"),
                // The cache was behind, the namespace went away, or it is terminating (403 with
                // the `NamespaceTerminating` cause): nothing to retry.
                Err(e) if e.is_already_exists() || e.is_not_found() || e.code() == Some(403) => {}
                Err(e) => return Err(Error::api("create service account", e)),
            }
        }
        Ok(())
    }
}

struct NamespaceHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<Namespace> for NamespaceHandler {
    fn on_add(&self, obj: &Arc<Namespace>, _in_initial_list: bool) {
        self.0.add(obj.metadata.name.clone().unwrap_or_default());
    }

    fn on_update(&self, _old: &Arc<Namespace>, new: &Arc<Namespace>) {
        self.on_add(new, false);
    }

    fn on_delete(&self, _obj: DeletedObject<Namespace>) {}
}

struct DeletedHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<ServiceAccount> for DeletedHandler {
    fn on_add(&self, _obj: &Arc<ServiceAccount>, _in_initial_list: bool) {}

    fn on_update(&self, _old: &Arc<ServiceAccount>, _new: &Arc<ServiceAccount>) {}

    fn on_delete(&self, obj: DeletedObject<ServiceAccount>) {
        if let Some(ns) = obj.object().metadata.namespace.clone() {
            self.0.add(ns);
        }
    }
}
