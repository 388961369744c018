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
use super::typed::DecodeFn;
use super::{ClusterIpAllocator, Strategy};

fn schema<T: schemars::JsonSchema>(gen: &mut SchemaGenerator) -> Schema {
    gen.subschema_for::<T>()
}

/// A built-in kind's type: its schema and its decoding, both from the `k8s-openapi` type.
#[derive(Clone, Copy)]
struct Typed {
    schema: SchemaFn,
    decode: DecodeFn,
}

fn typed<T: schemars::JsonSchema + serde::de::DeserializeOwned>() -> Typed {
    Typed {
        schema: schema::<T>,
        decode: super::typed::decode::<T>,
    }
}

/// A built-in kind's strategy and type.
type Parts = (Arc<dyn Strategy>, Typed);

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
        "namespaces" => (Arc::new(NamespaceStrategy), typed::<core::v1::Namespace>()),
        "pods" => (Arc::new(PodStrategy), typed::<core::v1::Pod>()),
        "replicationcontrollers" => (
            Arc::new(ReplicationControllerStrategy),
            typed::<core::v1::ReplicationController>(),
        ),
        "nodes" => (Arc::new(NodeStrategy), typed::<core::v1::Node>()),
        "events" => (
            Arc::new(EventStrategy { new_api: false }),
            typed::<core::v1::Event>(),
        ),
        "services" => (
            Arc::new(ServiceStrategy::new(ips.clone())),
            typed::<core::v1::Service>(),
        ),
        "configmaps" => (Arc::new(ConfigMapStrategy), typed::<core::v1::ConfigMap>()),
        "secrets" => (Arc::new(SecretStrategy), typed::<core::v1::Secret>()),
        "serviceaccounts" => (
            Arc::new(ServiceAccountStrategy),
            typed::<core::v1::ServiceAccount>(),
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
            typed::<core::v1::PersistentVolume>(),
        ),
        "persistentvolumeclaims" => (
            Arc::new(PersistentVolumeClaimStrategy),
            typed::<core::v1::PersistentVolumeClaim>(),
        ),
        "podtemplates" => (
            Arc::new(PodTemplateStrategy),
            typed::<core::v1::PodTemplate>(),
        ),
        "limitranges" => (
            Arc::new(LimitRangeStrategy),
            typed::<core::v1::LimitRange>(),
        ),
        "resourcequotas" => (
            Arc::new(ResourceQuotaStrategy),
            typed::<core::v1::ResourceQuota>(),
        ),
        "endpoints" => (Arc::new(EndpointsStrategy), typed::<core::v1::Endpoints>()),
        "componentstatuses" => (
            Arc::new(ComponentStatusStrategy),
            typed::<core::v1::ComponentStatus>(),
        ),
        "bindings" => (Arc::new(BindingStrategy), typed::<core::v1::Binding>()),
        _ => return None,
    };
    Some(parts)
}

fn discovery_group(plural: &str) -> Option<Parts> {
    match plural {
        "endpointslices" => Some((
            Arc::new(EndpointSliceStrategy),
            typed::<discovery::v1::EndpointSlice>(),
        )),
        _ => None,
    }
}

fn apps(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "replicasets" => (
            Arc::new(ReplicaSetStrategy),
            typed::<apps::v1::ReplicaSet>(),
        ),
        "deployments" => (
            Arc::new(DeploymentStrategy),
            typed::<apps::v1::Deployment>(),
        ),
        "statefulsets" => (
            Arc::new(StatefulSetStrategy),
            typed::<apps::v1::StatefulSet>(),
        ),
        "daemonsets" => (Arc::new(DaemonSetStrategy), typed::<apps::v1::DaemonSet>()),
        "controllerrevisions" => (
            Arc::new(ControllerRevisionStrategy),
            typed::<apps::v1::ControllerRevision>(),
        ),
        _ => return None,
    };
    Some(parts)
}

fn batch(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "jobs" => (Arc::new(JobStrategy), typed::<batch::v1::Job>()),
        "cronjobs" => (Arc::new(CronJobStrategy), typed::<batch::v1::CronJob>()),
        _ => return None,
    };
    Some(parts)
}

fn coordination(plural: &str) -> Option<Parts> {
    match plural {
        "leases" => Some((Arc::new(LeaseStrategy), typed::<coordination::v1::Lease>())),
        _ => None,
    }
}

fn events(plural: &str) -> Option<Parts> {
    match plural {
        "events" => Some((
            Arc::new(EventStrategy { new_api: true }),
            typed::<events::v1::Event>(),
        )),
        _ => None,
    }
}

fn rbac(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "clusterrolebindings" => (
            Arc::new(ClusterRoleBindingStrategy),
            typed::<rbac::v1::ClusterRoleBinding>(),
        ),
        "clusterroles" => (
            Arc::new(ClusterRoleStrategy),
            typed::<rbac::v1::ClusterRole>(),
        ),
        "rolebindings" => (
            Arc::new(RoleBindingStrategy),
            typed::<rbac::v1::RoleBinding>(),
        ),
        "roles" => (Arc::new(RoleStrategy), typed::<rbac::v1::Role>()),
        _ => return None,
    };
    Some(parts)
}

fn scheduling(plural: &str) -> Option<Parts> {
    match plural {
        "priorityclasses" => Some((
            Arc::new(PriorityClassStrategy),
            typed::<scheduling::v1::PriorityClass>(),
        )),
        _ => None,
    }
}

fn networking(plural: &str) -> Option<Parts> {
    use networking::v1 as n;
    let parts: Parts = match plural {
        "ingressclasses" => (Arc::new(IngressClassStrategy), typed::<n::IngressClass>()),
        "ingresses" => (Arc::new(IngressStrategy), typed::<n::Ingress>()),
        "ipaddresses" => (Arc::new(IpAddressStrategy), typed::<n::IPAddress>()),
        "networkpolicies" => (Arc::new(NetworkPolicyStrategy), typed::<n::NetworkPolicy>()),
        "servicecidrs" => (Arc::new(ServiceCidrStrategy), typed::<n::ServiceCIDR>()),
        _ => return None,
    };
    Some(parts)
}

fn node(plural: &str) -> Option<Parts> {
    match plural {
        "runtimeclasses" => Some((
            Arc::new(RuntimeClassStrategy),
            typed::<node::v1::RuntimeClass>(),
        )),
        _ => None,
    }
}

fn policy(plural: &str) -> Option<Parts> {
    match plural {
        "poddisruptionbudgets" => Some((
            Arc::new(PodDisruptionBudgetStrategy),
            typed::<policy::v1::PodDisruptionBudget>(),
        )),
        _ => None,
    }
}

fn storage(plural: &str) -> Option<Parts> {
    use storage::v1 as s;
    let parts: Parts = match plural {
        "csidrivers" => (Arc::new(CsiDriverStrategy), typed::<s::CSIDriver>()),
        "csinodes" => (Arc::new(CsiNodeStrategy), typed::<s::CSINode>()),
        "csistoragecapacities" => (
            Arc::new(CsiStorageCapacityStrategy),
            typed::<s::CSIStorageCapacity>(),
        ),
        "storageclasses" => (Arc::new(StorageClassStrategy), typed::<s::StorageClass>()),
        "volumeattachments" => (
            Arc::new(VolumeAttachmentStrategy),
            typed::<s::VolumeAttachment>(),
        ),
        _ => return None,
    };
    Some(parts)
}

fn apiregistration_group(plural: &str) -> Option<Parts> {
    match plural {
        "apiservices" => Some((
            Arc::new(ApiServiceStrategy),
            typed::<apiregistration::v1::APIService>(),
        )),
        _ => None,
    }
}

fn apiextensions_group(plural: &str) -> Option<Parts> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    match plural {
        "customresourcedefinitions" => Some((
            Arc::new(super::strategy::CustomResourceDefinitionStrategy),
            typed::<ext::CustomResourceDefinition>(),
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
            typed::<authentication::v1::SelfSubjectReview>(),
        ),
        "tokenreviews" => (
            Arc::new(GenericStrategy),
            typed::<authentication::v1::TokenReview>(),
        ),
        _ => return None,
    };
    Some(parts)
}

fn authorization_group(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "localsubjectaccessreviews" => (
            Arc::new(GenericStrategy),
            typed::<authorization::v1::LocalSubjectAccessReview>(),
        ),
        "selfsubjectaccessreviews" => (
            Arc::new(GenericStrategy),
            typed::<authorization::v1::SelfSubjectAccessReview>(),
        ),
        "selfsubjectrulesreviews" => (
            Arc::new(GenericStrategy),
            typed::<authorization::v1::SelfSubjectRulesReview>(),
        ),
        "subjectaccessreviews" => (
            Arc::new(GenericStrategy),
            typed::<authorization::v1::SubjectAccessReview>(),
        ),
        _ => return None,
    };
    Some(parts)
}

fn certificates_group(plural: &str) -> Option<Parts> {
    match plural {
        "certificatesigningrequests" => Some((
            Arc::new(CertificateSigningRequestStrategy),
            typed::<certificates::v1::CertificateSigningRequest>(),
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
            typed::<autoscaling::v2::HorizontalPodAutoscaler>(),
        )),
        ("v1", "horizontalpodautoscalers") => Some((
            Arc::new(HorizontalPodAutoscalerStrategy { v1: true }),
            typed::<autoscaling::v1::HorizontalPodAutoscaler>(),
        )),
        _ => None,
    }
}

fn flowcontrol(plural: &str) -> Option<Parts> {
    let parts: Parts = match plural {
        "flowschemas" => (
            Arc::new(FlowSchemaStrategy),
            typed::<flowcontrol::v1::FlowSchema>(),
        ),
        "prioritylevelconfigurations" => (
            Arc::new(PriorityLevelConfigurationStrategy),
            typed::<flowcontrol::v1::PriorityLevelConfiguration>(),
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
            typed::<ar::MutatingWebhookConfiguration>(),
        ),
        "validatingwebhookconfigurations" => (
            Arc::new(WebhookConfigurationStrategy { mutating: false }),
            typed::<ar::ValidatingWebhookConfiguration>(),
        ),
        "validatingadmissionpolicies" => (
            Arc::new(ValidatingAdmissionPolicyStrategy),
            typed::<ar::ValidatingAdmissionPolicy>(),
        ),
        "validatingadmissionpolicybindings" => (
            Arc::new(ValidatingAdmissionPolicyBindingStrategy),
            typed::<ar::ValidatingAdmissionPolicyBinding>(),
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
            let (strategy, typed) = parts(&info.group, &info.version, &info.plural, ips)?;
            Some(
                Resource::new(info, strategy)
                    .with_schema(typed.schema)
                    .with_decode(typed.decode),
            )
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
