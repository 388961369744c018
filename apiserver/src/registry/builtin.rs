//! The built-in kinds: each [`api::resources::builtin`] entry with its strategy and its typed schema
//! (from `k8s-openapi`), registered at start-up.

use std::sync::Arc;

use k8s_openapi::api::{
    admissionregistration, apps, authentication, authorization, autoscaling, batch, certificates,
    coordination, core, discovery, events, flowcontrol, networking, node, policy, rbac, scheduling,
    storage,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use schemars::generate::SchemaGenerator;
use schemars::Schema;

use super::resources::{RegisterError, Resource, ResourceRegistry, SchemaFn};
use super::strategy::{ApiServiceStrategy, CertificateSigningRequestStrategy, GenericStrategy};
use super::strategy::{
    BindingStrategy, ComponentStatusStrategy, EndpointSliceStrategy, EndpointsStrategy,
    LimitRangeStrategy, PersistentVolumeClaimStrategy, PersistentVolumeStrategy,
    PodTemplateStrategy, ResourceQuotaStrategy,
};
use super::strategy::{
    ClusterRoleBindingStrategy, ClusterRoleStrategy, ConfigMapStrategy, ControllerRevisionStrategy,
    CronJobStrategy, DaemonSetStrategy, DeploymentStrategy, EventStrategy, JobStrategy,
    LeaseStrategy, NamespaceStrategy, NodeStrategy, PodDisruptionBudgetStrategy, PodStrategy,
    PriorityClassStrategy, ReplicaSetStrategy, ReplicationControllerStrategy, RoleBindingStrategy,
    RoleStrategy, SecretStrategy, ServiceAccountStrategy, ServiceStrategy, StatefulSetStrategy,
};
use super::strategy::{
    CsiDriverStrategy, CsiNodeStrategy, CsiStorageCapacityStrategy, IngressClassStrategy,
    IngressStrategy, IpAddressStrategy, NetworkPolicyStrategy, RuntimeClassStrategy,
    ServiceCidrStrategy, StorageClassStrategy, VolumeAttachmentStrategy,
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
        "apiregistration.k8s.io" => apiregistration_group(plural),
        "apiextensions.k8s.io" => apiextensions_group(plural),
        "authentication.k8s.io" => authentication_group(plural),
        "authorization.k8s.io" => authorization_group(plural),
        "certificates.k8s.io" => certificates_group(plural),
        "apps" => apps(plural),
        "batch" => batch(plural),
        "autoscaling" => autoscaling(version, plural),
        "flowcontrol.apiserver.k8s.io" => flowcontrol(plural),
        "admissionregistration.k8s.io" => admissionregistration(plural),
        "coordination.k8s.io" => coordination(plural),
        "discovery.k8s.io" => discovery_group(plural),
        "events.k8s.io" => events(plural),
        "rbac.authorization.k8s.io" => rbac(plural),
        "scheduling.k8s.io" => scheduling(plural),
        "networking.k8s.io" => networking(plural),
        "node.k8s.io" => node(plural),
        "storage.k8s.io" => storage(plural),
        "policy" => policy(plural),
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
        _ => return core_storage_and_policy(plural),
    };
    Some(parts)
}

/// The core kinds of issue 14: volumes and claims, templates, limits and quotas, endpoints, and
/// the two kinds that are not stored (component statuses, bindings).
fn core_storage_and_policy(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "persistentvolumes" => (
            Arc::new(PersistentVolumeStrategy),
            schema::<core::v1::PersistentVolume>,
        ),
        "persistentvolumeclaims" => (
            Arc::new(PersistentVolumeClaimStrategy),
            schema::<core::v1::PersistentVolumeClaim>,
        ),
        "podtemplates" => (
            Arc::new(PodTemplateStrategy),
            schema::<core::v1::PodTemplate>,
        ),
        "limitranges" => (Arc::new(LimitRangeStrategy), schema::<core::v1::LimitRange>),
        "resourcequotas" => (
            Arc::new(ResourceQuotaStrategy),
            schema::<core::v1::ResourceQuota>,
        ),
        "endpoints" => (Arc::new(EndpointsStrategy), schema::<core::v1::Endpoints>),
        "componentstatuses" => (
            Arc::new(ComponentStatusStrategy),
            schema::<core::v1::ComponentStatus>,
        ),
        "bindings" => (Arc::new(BindingStrategy), schema::<core::v1::Binding>),
        _ => return None,
    };
    Some(parts)
}

fn discovery_group(plural: &str) -> Option<Parts> {
    match plural {
        "endpointslices" => Some((
            Arc::new(EndpointSliceStrategy),
            schema::<discovery::v1::EndpointSlice>,
        )),
        _ => None,
    }
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

fn networking(plural: &str) -> Option<Parts> {
    use networking::v1 as n;
    let parts: Parts = match plural {
        "ingressclasses" => (Arc::new(IngressClassStrategy), schema::<n::IngressClass>),
        "ingresses" => (Arc::new(IngressStrategy), schema::<n::Ingress>),
        "ipaddresses" => (Arc::new(IpAddressStrategy), schema::<n::IPAddress>),
        "networkpolicies" => (Arc::new(NetworkPolicyStrategy), schema::<n::NetworkPolicy>),
        "servicecidrs" => (Arc::new(ServiceCidrStrategy), schema::<n::ServiceCIDR>),
        _ => return None,
    };
    Some(parts)
}

fn node(plural: &str) -> Option<Parts> {
    match plural {
        "runtimeclasses" => Some((
            Arc::new(RuntimeClassStrategy),
            schema::<node::v1::RuntimeClass>,
        )),
        _ => None,
    }
}

fn policy(plural: &str) -> Option<Parts> {
    match plural {
        "poddisruptionbudgets" => Some((
            Arc::new(PodDisruptionBudgetStrategy),
            schema::<policy::v1::PodDisruptionBudget>,
        )),
        _ => None,
    }
}

fn storage(plural: &str) -> Option<Parts> {
    use storage::v1 as s;
    let parts: Parts = match plural {
        "csidrivers" => (Arc::new(CsiDriverStrategy), schema::<s::CSIDriver>),
        "csinodes" => (Arc::new(CsiNodeStrategy), schema::<s::CSINode>),
        "csistoragecapacities" => (
            Arc::new(CsiStorageCapacityStrategy),
            schema::<s::CSIStorageCapacity>,
        ),
        "storageclasses" => (Arc::new(StorageClassStrategy), schema::<s::StorageClass>),
        "volumeattachments" => (
            Arc::new(VolumeAttachmentStrategy),
            schema::<s::VolumeAttachment>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn apiregistration_group(plural: &str) -> Option<Parts> {
    match plural {
        "apiservices" => Some((
            Arc::new(ApiServiceStrategy),
            schema::<apiregistration::v1::APIService>,
        )),
        _ => None,
    }
}

fn apiextensions_group(plural: &str) -> Option<Parts> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    match plural {
        "customresourcedefinitions" => Some((
            Arc::new(super::strategy::CustomResourceDefinitionStrategy),
            schema::<ext::CustomResourceDefinition>,
        )),
        _ => None,
    }
}

/// The reviews are never stored: their POST is answered by `handlers::review`; the strategy
/// only serves the generic parts (schema, discovery).
fn authentication_group(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "selfsubjectreviews" => (
            Arc::new(GenericStrategy),
            schema::<authentication::v1::SelfSubjectReview>,
        ),
        "tokenreviews" => (
            Arc::new(GenericStrategy),
            schema::<authentication::v1::TokenReview>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn authorization_group(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "localsubjectaccessreviews" => (
            Arc::new(GenericStrategy),
            schema::<authorization::v1::LocalSubjectAccessReview>,
        ),
        "selfsubjectaccessreviews" => (
            Arc::new(GenericStrategy),
            schema::<authorization::v1::SelfSubjectAccessReview>,
        ),
        "selfsubjectrulesreviews" => (
            Arc::new(GenericStrategy),
            schema::<authorization::v1::SelfSubjectRulesReview>,
        ),
        "subjectaccessreviews" => (
            Arc::new(GenericStrategy),
            schema::<authorization::v1::SubjectAccessReview>,
        ),
        _ => return None,
    };
    Some(parts)
}

fn certificates_group(plural: &str) -> Option<Parts> {
    match plural {
        "certificatesigningrequests" => Some((
            Arc::new(CertificateSigningRequestStrategy),
            schema::<certificates::v1::CertificateSigningRequest>,
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
