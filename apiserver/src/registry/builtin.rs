//! The built-in kinds: each [`api::resources::builtin`] entry with its strategy and its typed schema
//! (from `k8s-openapi`), registered at start-up.

use std::sync::Arc;

use k8s_openapi::api::{
    admissionregistration, apps, autoscaling, batch, coordination, core, events, flowcontrol, rbac,
    scheduling,
};
use schemars::generate::SchemaGenerator;
use schemars::Schema;

use super::resources::{RegisterError, Resource, ResourceRegistry, SchemaFn};
use super::strategy::{
    ClusterRoleBindingStrategy, ClusterRoleStrategy, ConfigMapStrategy, ControllerRevisionStrategy,
    CronJobStrategy, DaemonSetStrategy, DeploymentStrategy, EventStrategy, JobStrategy,
    LeaseStrategy, NamespaceStrategy, NodeStrategy, PodStrategy, PriorityClassStrategy,
    ReplicaSetStrategy, ReplicationControllerStrategy, RoleBindingStrategy, RoleStrategy,
    SecretStrategy, ServiceAccountStrategy, ServiceStrategy, StatefulSetStrategy,
};
use super::strategy::{
    FlowSchemaStrategy, HorizontalPodAutoscalerStrategy, PriorityLevelConfigurationStrategy,
    ValidatingAdmissionPolicyBindingStrategy, ValidatingAdmissionPolicyStrategy,
    WebhookConfigurationStrategy,
};
use super::{ClusterIpAllocator, Strategy};

fn schema<T: schemars::JsonSchema>(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<T>()
}

/// A built-in kind's strategy and typed schema.
type Parts = (Arc<dyn Strategy>, SchemaFn);

/// The strategy and schema of a built-in (group, plural), or `None` for an unknown one.
fn parts(group: &str, version: &str, plural: &str, ips: &Arc<ClusterIpAllocator>) -> Option<Parts> {
    match group {
        "" => core(plural, ips),
        "apps" => apps(plural),
        "batch" => batch(plural),
        "coordination.k8s.io" => coordination(plural),
        "events.k8s.io" => events(plural),
        "rbac.authorization.k8s.io" => rbac(plural),
        "scheduling.k8s.io" => scheduling(plural),
        "autoscaling" => autoscaling(version, plural),
        "flowcontrol.apiserver.k8s.io" => flowcontrol(plural),
        "admissionregistration.k8s.io" => admissionregistration(plural),
        _ => None,
    }
}

fn core(plural: &str, ips: &Arc<ClusterIpAllocator>) -> Option<Parts> {
    let parts: Parts = match plural {
        "namespaces" => (Arc::new(NamespaceStrategy), schema::<core::v1::Namespace>),
        "pods" => (Arc::new(PodStrategy), schema::<core::v1::Pod>),
        "replicationcontrollers" => (
            Arc::new(ReplicationControllerStrategy),
            schema::<core::v1::ReplicationController>,
        ),
        "nodes" => (Arc::new(NodeStrategy), schema::<core::v1::Node>),
        "events" => (
            Arc::new(EventStrategy { new_api: false }),
            schema::<core::v1::Event>,
        ),
        "services" => (
            Arc::new(ServiceStrategy::new(ips.clone())),
            schema::<core::v1::Service>,
        ),
        "configmaps" => (Arc::new(ConfigMapStrategy), schema::<core::v1::ConfigMap>),
        "secrets" => (Arc::new(SecretStrategy), schema::<core::v1::Secret>),
        "serviceaccounts" => (
            Arc::new(ServiceAccountStrategy),
            schema::<core::v1::ServiceAccount>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn apps(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "replicasets" => (Arc::new(ReplicaSetStrategy), schema::<apps::v1::ReplicaSet>),
        "deployments" => (Arc::new(DeploymentStrategy), schema::<apps::v1::Deployment>),
        "statefulsets" => (
            Arc::new(StatefulSetStrategy),
            schema::<apps::v1::StatefulSet>,
        ),
        "daemonsets" => (Arc::new(DaemonSetStrategy), schema::<apps::v1::DaemonSet>),
        "controllerrevisions" => (
            Arc::new(ControllerRevisionStrategy),
            schema::<apps::v1::ControllerRevision>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn batch(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "jobs" => (Arc::new(JobStrategy), schema::<batch::v1::Job>),
        "cronjobs" => (Arc::new(CronJobStrategy), schema::<batch::v1::CronJob>),
        _ => return None,
    };
    Some(parts)
}

fn coordination(plural: &str) -> Option<Parts> {
    match plural {
        "leases" => Some((Arc::new(LeaseStrategy), schema::<coordination::v1::Lease>)),
        _ => None,
    }
}

fn events(plural: &str) -> Option<Parts> {
    match plural {
        "events" => Some((
            Arc::new(EventStrategy { new_api: true }),
            schema::<events::v1::Event>,
        )),
        _ => None,
    }
}

fn rbac(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "clusterrolebindings" => (
            Arc::new(ClusterRoleBindingStrategy),
            schema::<rbac::v1::ClusterRoleBinding>,
        ),
        "clusterroles" => (
            Arc::new(ClusterRoleStrategy),
            schema::<rbac::v1::ClusterRole>,
        ),
        "rolebindings" => (
            Arc::new(RoleBindingStrategy),
            schema::<rbac::v1::RoleBinding>,
        ),
        "roles" => (Arc::new(RoleStrategy), schema::<rbac::v1::Role>),
        _ => return None,
    };
    Some(parts)
}

fn scheduling(plural: &str) -> Option<Parts> {
    match plural {
        "priorityclasses" => Some((
            Arc::new(PriorityClassStrategy),
            schema::<scheduling::v1::PriorityClass>,
        )),
        _ => None,
    }
}

/// `autoscaling/v2` and `autoscaling/v1` HorizontalPodAutoscalers: one storage (v2), each version
/// with its own schema and its strategy converting to and from the stored form.
fn autoscaling(version: &str, plural: &str) -> Option<Parts> {
    match (version, plural) {
        ("v2", "horizontalpodautoscalers") => Some((
            Arc::new(HorizontalPodAutoscalerStrategy { v1: false }),
            schema::<autoscaling::v2::HorizontalPodAutoscaler>,
        )),
        ("v1", "horizontalpodautoscalers") => Some((
            Arc::new(HorizontalPodAutoscalerStrategy { v1: true }),
            schema::<autoscaling::v1::HorizontalPodAutoscaler>,
        )),
        _ => None,
    }
}

fn flowcontrol(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "flowschemas" => (
            Arc::new(FlowSchemaStrategy),
            schema::<flowcontrol::v1::FlowSchema>,
        ),
        "prioritylevelconfigurations" => (
            Arc::new(PriorityLevelConfigurationStrategy),
            schema::<flowcontrol::v1::PriorityLevelConfiguration>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn admissionregistration(plural: &str) -> Option<Parts> {
    use admissionregistration::v1 as ar;
    let parts: Parts = match plural {
        "mutatingwebhookconfigurations" => (
            Arc::new(WebhookConfigurationStrategy { mutating: true }),
            schema::<ar::MutatingWebhookConfiguration>,
        ),
        "validatingwebhookconfigurations" => (
            Arc::new(WebhookConfigurationStrategy { mutating: false }),
            schema::<ar::ValidatingWebhookConfiguration>,
        ),
        "validatingadmissionpolicies" => (
            Arc::new(ValidatingAdmissionPolicyStrategy),
            schema::<ar::ValidatingAdmissionPolicy>,
        ),
        "validatingadmissionpolicybindings" => (
            Arc::new(ValidatingAdmissionPolicyBindingStrategy),
            schema::<ar::ValidatingAdmissionPolicyBinding>,
        ),
        _ => return None,
    };
    Some(parts)
}

/// Every built-in resource, in discovery order; services allocate from `ips`.
pub fn resources(ips: &Arc<ClusterIpAllocator>) -> Vec<Resource> {
    api::resources::builtin()
        .into_iter()
        .filter_map(|info| {
            let (strategy, schema) = parts(&info.group, &info.version, &info.plural, ips)?;
            Some(Resource::new(info, strategy).with_schema(schema))
        })
        .collect()
}

/// The built-in resource (group, plural) of the preferred version, on its own (a fresh cluster-IP
/// allocator): for tests and tools that need one kind's rules without a server.
pub fn find(group: &str, plural: &str) -> Option<Arc<Resource>> {
    let ips = Arc::new(ClusterIpAllocator::new());
    resources(&ips)
        .into_iter()
        .find(|r| r.info.group == group && r.info.plural == plural)
        .map(Arc::new)
}

/// Registers every built-in resource.
pub fn register(
    registry: &ResourceRegistry,
    ips: &Arc<ClusterIpAllocator>,
) -> Result<(), RegisterError> {
    for r in resources(ips) {
        registry.register(r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_info_has_its_strategy() {
        let ips = Arc::new(ClusterIpAllocator::new());
        assert_eq!(
            resources(&ips).len(),
            api::resources::builtin().len(),
            "a built-in without a strategy"
        );
        let reg = ResourceRegistry::new();
        assert!(register(&reg, &ips).is_ok());
    }
}
