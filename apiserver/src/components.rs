//! The health of the control plane's other components, as `componentstatuses` reports it.
//!
//! Upstream's apiserver probes etcd and the `/healthz` of kube-scheduler and
//! kube-controller-manager on fixed local ports. Here the components that run in the same
//! process register a [`Liveness`] flag with the [`Components`] of the apiserver's
//! configuration (`minik8s up` registers the controller manager and its scheduler) and clear it
//! when they stop; a component that was never registered runs elsewhere or not at all, and is
//! reported unhealthy with that reason. The store (`etcd-0`, upstream's name for it) is probed
//! with a read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

/// Whether a registered component is running: set at registration, cleared when it stops.
#[derive(Debug, Clone)]
pub struct Liveness(Arc<AtomicBool>);

impl Liveness {
    /// Marks the component stopped.
    pub fn stopped(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The in-process components, by their `componentstatuses` name.
#[derive(Debug, Clone, Default)]
pub struct Components {
    registered: Arc<RwLock<BTreeMap<String, Liveness>>>,
}

/// The component names upstream reports besides the store.
pub const CONTROL_PLANE_COMPONENTS: &[&str] = &["controller-manager", "scheduler"];

impl Components {
    /// Registers `name` as running in this process; the returned flag marks it stopped.
    pub fn register(&self, name: &str) -> Liveness {
        let live = Liveness(Arc::new(AtomicBool::new(true)));
        self.registered
            .write()
            .insert(name.to_string(), live.clone());
        live
    }

    /// The health of `name`: `Ok(())` when it runs in this process, else the reason.
    pub fn health(&self, name: &str) -> Result<(), String> {
        match self.registered.read().get(name) {
            Some(l) if l.is_running() => Ok(()),
            Some(_) => Err(format!("{name} has stopped")),
            None => Err(format!("{name} does not run in this process")),
        }
    }
}
