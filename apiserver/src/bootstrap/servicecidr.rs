//! The `kubernetes` ServiceCIDR: upstream's default-ServiceCIDR controller
//! (`pkg/controlplane/controller/defaultservicecidr`) creates it at start-up for the apiserver's
//! service cluster IP range and sets its `Ready` condition (type, status, message and time, no
//! reason). Here the range is the cluster-IP allocator's ([`SERVICE_CIDR`]); the allocator keeps
//! its own fixed range, so further ServiceCIDRs are stored and validated but do not widen it.
//! Once created, the object is left alone (no reconciliation of a changed range).

use serde_json::{json, Value};

use crate::error::Result;
use crate::registry::SERVICE_CIDR;
use crate::state::AppState;

/// `DefaultServiceCIDRName`.
pub const DEFAULT_SERVICE_CIDR_NAME: &str = "kubernetes";

/// The default ServiceCIDR object as the controller writes it.
pub fn default_service_cidr() -> Value {
    json!({
        "metadata": { "name": DEFAULT_SERVICE_CIDR_NAME },
        "spec": { "cidrs": [SERVICE_CIDR] },
        "status": { "conditions": [{
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": api::meta::now_rfc3339(),
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready",
        }] },
    })
}

/// Creates the default ServiceCIDR unless it exists.
pub async fn seed(state: &AppState) -> Result<()> {
    super::ensure_all(
        state,
        "networking.k8s.io",
        "servicecidrs",
        &[default_service_cidr()],
    )
    .await
}
