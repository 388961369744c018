//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message carrying the `TypeMeta`
//! (apiVersion, kind) and the raw protobuf of the object. The raw bytes are decoded with the `k8s-pb`
//! prost types and converted to the JSON object the registry stores. Kinds decoded: Namespace,
//! ConfigMap, Secret, ServiceAccount, Service, Deployment, ReplicaSet, ReplicationController, Pod,
//! Job, CronJob (in [`batch`]), the RBAC kinds and PriorityClass ([`rbac`]), the networking.k8s.io
//! kinds ([`networking`]), the storage.k8s.io kinds and RuntimeClass ([`storage`]), PodDisruptionBudget,
//! Eviction, DeleteOptions and Binding ([`policy`]), TokenRequest, the review kinds,
//! CertificateSigningRequest and APIService ([`authn`]), HorizontalPodAutoscalers at autoscaling/v1
//! and v2 ([`autoscaling`]) — the objects `kubectl create <generator>`, `create token`, `auth`,
//! `certificate` and `autoscale` send. Conversion covers ObjectMeta and the spec fields
//! those generators and common manifests use (pod spec: containers with name, image, command, args,
//! workingDir, ports, env, resources, volumeMounts, imagePullPolicy; restartPolicy, grace period,
//! dnsPolicy, nodeSelector, serviceAccountName, nodeName, hostNetwork, schedulerName, tolerations,
//! imagePullSecrets); other fields are dropped. Status is never decoded (the strategies reset it).
//! Any other kind is [`ProtobufError::UnsupportedKind`] (the HTTP side answers 415).

mod authn;
mod autoscaling;
mod batch;
mod core_policy;
mod core_storage;
mod networking;
mod policy;
mod rbac;
mod storage;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";
const NETWORKING_V1: &str = "networking.k8s.io/v1";
const STORAGE_V1: &str = "storage.k8s.io/v1";

/// The protobuf media type.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope magic.
pub const MAGIC: &[u8; 4] = b"k8s\0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// Missing magic or undecodable `runtime.Unknown` (400).
    #[error("the protobuf envelope is invalid")]
    BadEnvelope,
    /// A kind this server does not decode from protobuf (415).
    #[error("protobuf decoding is not supported for {api_version}, Kind={kind}")]
    UnsupportedKind { api_version: String, kind: String },
    /// The raw object bytes are not a valid message of the kind (400).
    #[error("unable to decode protobuf object: {0}")]
    Decode(String),
}

/// Decodes a protobuf request body into the JSON object (with `apiVersion` and `kind`).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtobufError::BadEnvelope)?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest)
        .map_err(|_| ProtobufError::BadEnvelope)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(ProtobufError::Decode(
            "content encodings are not supported".into(),
        ));
    }
    let raw = unknown.raw.unwrap_or_default();
    let d = |e: prost::DecodeError| ProtobufError::Decode(e.to_string());
    let mut obj = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => namespace(core::Namespace::decode(raw.as_slice()).map_err(d)?),
        ("v1", "ConfigMap") => config_map(core::ConfigMap::decode(raw.as_slice()).map_err(d)?),
        ("v1", "Secret") => secret(core::Secret::decode(raw.as_slice()).map_err(d)?),
        ("v1", "ServiceAccount") => {
            service_account(core::ServiceAccount::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "Service") => service(core::Service::decode(raw.as_slice()).map_err(d)?),
        ("v1", "Pod") => pod(core::Pod::decode(raw.as_slice()).map_err(d)?),
        ("v1", "ResourceQuota") => {
            core_policy::resource_quota(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "LimitRange") => {
            core_policy::limit_range(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "PersistentVolume") => {
            core_storage::persistent_volume(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "Binding") => core_storage::binding(Message::decode(raw.as_slice()).map_err(d)?),
        ("v1", "PodTemplate") => {
            core_storage::pod_template(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "Endpoints") => core_storage::endpoints(Message::decode(raw.as_slice()).map_err(d)?),
        ("discovery.k8s.io/v1", "EndpointSlice") => {
            core_storage::endpoint_slice(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "PersistentVolumeClaim") => {
            core_policy::persistent_volume_claim(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("v1", "ReplicationController") => {
            replication_controller(core::ReplicationController::decode(raw.as_slice()).map_err(d)?)
        }
        ("apps/v1", "Deployment") => {
            deployment(apps::Deployment::decode(raw.as_slice()).map_err(d)?)
        }
        ("apps/v1", "ReplicaSet") => {
            replica_set(apps::ReplicaSet::decode(raw.as_slice()).map_err(d)?)
        }
        ("batch/v1", "Job") => {
            batch::job(k8s_pb::api::batch::v1::Job::decode(raw.as_slice()).map_err(d)?)
        }
        ("batch/v1", "CronJob") => {
            batch::cron_job(k8s_pb::api::batch::v1::CronJob::decode(raw.as_slice()).map_err(d)?)
        }
        (RBAC_V1, "Role") => rbac::role(Message::decode(raw.as_slice()).map_err(d)?),
        (RBAC_V1, "ClusterRole") => rbac::cluster_role(Message::decode(raw.as_slice()).map_err(d)?),
        (RBAC_V1, "RoleBinding") => rbac::role_binding(Message::decode(raw.as_slice()).map_err(d)?),
        (RBAC_V1, "ClusterRoleBinding") => {
            rbac::cluster_role_binding(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            autoscaling::hpa_v1(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            autoscaling::hpa_v2(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            rbac::priority_class(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (NETWORKING_V1, "Ingress") => {
            networking::ingress(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (NETWORKING_V1, "IngressClass") => {
            networking::ingress_class(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (NETWORKING_V1, "NetworkPolicy") => {
            networking::network_policy(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (NETWORKING_V1, "IPAddress") => {
            networking::ip_address(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (NETWORKING_V1, "ServiceCIDR") => {
            networking::service_cidr(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("node.k8s.io/v1", "RuntimeClass") => {
            storage::runtime_class(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (STORAGE_V1, "StorageClass") => {
            storage::storage_class(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (STORAGE_V1, "CSIDriver") => {
            storage::csi_driver(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (STORAGE_V1, "CSINode") => storage::csi_node(Message::decode(raw.as_slice()).map_err(d)?),
        (STORAGE_V1, "CSIStorageCapacity") => {
            storage::csi_storage_capacity(Message::decode(raw.as_slice()).map_err(d)?)
        }
        (STORAGE_V1, "VolumeAttachment") => {
            storage::volume_attachment(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("policy/v1", "PodDisruptionBudget") => {
            policy::pod_disruption_budget(Message::decode(raw.as_slice()).map_err(d)?)
        }
        // The v1beta1 Eviction has the same fields (`EvictionREST` accepts both).
        ("policy/v1" | "policy/v1beta1", "Eviction") => {
            policy::eviction(Message::decode(raw.as_slice()).map_err(d)?)
        }
        // Registered in every group-version: client-go envelopes it under the client's.
        (_, "DeleteOptions") => policy::delete_options(Message::decode(raw.as_slice()).map_err(d)?),
        ("authentication.k8s.io/v1", "TokenRequest") => {
            authn::token_request(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authentication.k8s.io/v1", "TokenReview") => {
            authn::token_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            authn::self_subject_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            authn::subject_access_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            authn::local_subject_access_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            authn::self_subject_access_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            authn::self_subject_rules_review(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            authn::certificate_signing_request(Message::decode(raw.as_slice()).map_err(d)?)
        }
        ("apiregistration.k8s.io/v1", "APIService") => {
            authn::api_service(Message::decode(raw.as_slice()).map_err(d)?)
        }
        _ => return Err(ProtobufError::UnsupportedKind { api_version, kind }),
    };
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

/// A JSON object builder that skips empty values (Go's `omitempty`).
#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    fn s(mut self, k: &str, v: Option<String>) -> Self {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            self.0.insert(k.into(), json!(v));
        }
        self
    }
    fn i(mut self, k: &str, v: Option<i64>) -> Self {
        if let Some(v) = v {
            self.0.insert(k.into(), json!(v));
        }
        self
    }
    /// Integers Go omits when zero.
    fn i_nz(self, k: &str, v: Option<i64>) -> Self {
        self.i(k, v.filter(|n| *n != 0))
    }
    fn b(mut self, k: &str, v: Option<bool>) -> Self {
        if let Some(v) = v {
            self.0.insert(k.into(), json!(v));
        }
        self
    }
    /// Booleans Go omits when false.
    fn b_t(self, k: &str, v: Option<bool>) -> Self {
        self.b(k, v.filter(|b| *b))
    }
    fn v(mut self, k: &str, v: Option<Value>) -> Self {
        if let Some(v) = v {
            self.0.insert(k.into(), v);
        }
        self
    }
    fn strs(mut self, k: &str, v: Vec<String>) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), json!(v));
        }
        self
    }
    fn map(mut self, k: &str, v: BTreeMap<String, String>) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), json!(v));
        }
        self
    }
    fn list(mut self, k: &str, v: Vec<Value>) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), Value::Array(v));
        }
        self
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn time(t: Option<meta::Time>) -> Option<Value> {
    let t = t?;
    let secs = t.seconds.unwrap_or(0);
    if secs == 0 && t.nanos.unwrap_or(0) == 0 {
        return None;
    }
    jiff::Timestamp::from_second(secs)
        .ok()
        .map(|ts| json!(api::meta::format_time(ts)))
}

fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let owners: Vec<Value> = m
        .owner_references
        .into_iter()
        .map(|o| {
            Obj::default()
                .s("apiVersion", o.api_version)
                .s("kind", o.kind)
                .s("name", o.name)
                .s("uid", o.uid)
                .b("controller", o.controller)
                .b("blockOwnerDeletion", o.block_owner_deletion)
                .done()
        })
        .collect();
    Obj::default()
        .s("name", m.name)
        .s("generateName", m.generate_name)
        .s("namespace", m.namespace)
        .s("uid", m.uid)
        .s("resourceVersion", m.resource_version)
        .i_nz("generation", m.generation)
        .v("creationTimestamp", time(m.creation_timestamp))
        .map("labels", m.labels)
        .map("annotations", m.annotations)
        .list("ownerReferences", owners)
        .strs("finalizers", m.finalizers)
        .done()
}

fn b64(bytes: Vec<u8>) -> Value {
    use base64::Engine;
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn namespace(n: core::Namespace) -> Value {
    let spec = n
        .spec
        .map(|s| Obj::default().strs("finalizers", s.finalizers).done());
    Obj::default()
        .v("metadata", Some(object_meta(n.metadata)))
        .v("spec", spec)
        .done()
}

fn config_map(c: core::ConfigMap) -> Value {
    let binary: Map<String, Value> = c
        .binary_data
        .into_iter()
        .map(|(k, v)| (k, b64(v)))
        .collect();
    let mut o = Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .b_t("immutable", c.immutable)
        .map("data", c.data);
    if !binary.is_empty() {
        o = o.v("binaryData", Some(Value::Object(binary)));
    }
    o.done()
}

fn secret(s: core::Secret) -> Value {
    let data: Map<String, Value> = s.data.into_iter().map(|(k, v)| (k, b64(v))).collect();
    let mut o = Obj::default()
        .v("metadata", Some(object_meta(s.metadata)))
        .b_t("immutable", s.immutable)
        .map("stringData", s.string_data)
        .s("type", s.r#type);
    if !data.is_empty() {
        o = o.v("data", Some(Value::Object(data)));
    }
    o.done()
}

fn local_ref(r: core::LocalObjectReference) -> Value {
    Obj::default().s("name", r.name).done()
}

fn service_account(sa: core::ServiceAccount) -> Value {
    let secrets = sa
        .secrets
        .into_iter()
        .map(|r| {
            Obj::default()
                .s("kind", r.kind)
                .s("namespace", r.namespace)
                .s("name", r.name)
                .s("uid", r.uid)
                .s("apiVersion", r.api_version)
                .done()
        })
        .collect();
    Obj::default()
        .v("metadata", Some(object_meta(sa.metadata)))
        .list("secrets", secrets)
        .list(
            "imagePullSecrets",
            sa.image_pull_secrets.into_iter().map(local_ref).collect(),
        )
        .b(
            "automountServiceAccountToken",
            sa.automount_service_account_token,
        )
        .done()
}

fn int_or_string(v: Option<k8s_pb::apimachinery::pkg::util::intstr::IntOrString>) -> Option<Value> {
    let v = v?;
    match v.r#type {
        Some(1) => v.str_val.map(|s| json!(s)),
        _ => Some(json!(v.int_val.unwrap_or(0))),
    }
}

fn service(s: core::Service) -> Value {
    let spec = s.spec.map(|sp| {
        let ports = sp
            .ports
            .into_iter()
            .map(|p| {
                Obj::default()
                    .s("name", p.name)
                    .s("protocol", p.protocol)
                    .s("appProtocol", p.app_protocol)
                    .i("port", p.port.map(i64::from))
                    .v(
                        "targetPort",
                        int_or_string(p.target_port).filter(|v| v != &json!(0) && v != &json!("")),
                    )
                    .i_nz("nodePort", p.node_port.map(i64::from))
                    .done()
            })
            .collect();
        Obj::default()
            .list("ports", ports)
            .map("selector", sp.selector)
            .s("clusterIP", sp.cluster_ip)
            .strs("clusterIPs", sp.cluster_ips)
            .s("type", sp.r#type)
            .strs("externalIPs", sp.external_ips)
            .s("sessionAffinity", sp.session_affinity)
            .s("loadBalancerIP", sp.load_balancer_ip)
            .s("externalName", sp.external_name)
            .s("externalTrafficPolicy", sp.external_traffic_policy)
            .strs("ipFamilies", sp.ip_families)
            .s("ipFamilyPolicy", sp.ip_family_policy)
            .s("internalTrafficPolicy", sp.internal_traffic_policy)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(s.metadata)))
        .v("spec", spec)
        .done()
}

fn quantities(
    m: BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>,
) -> Option<Value> {
    let out: Map<String, Value> = m
        .into_iter()
        .filter_map(|(k, q)| q.string.map(|s| (k, json!(s))))
        .collect();
    (!out.is_empty()).then_some(Value::Object(out))
}

fn container(c: core::Container) -> Value {
    let ports = c
        .ports
        .into_iter()
        .map(|p| {
            Obj::default()
                .s("name", p.name)
                .i_nz("hostPort", p.host_port.map(i64::from))
                .i("containerPort", p.container_port.map(i64::from))
                .s("protocol", p.protocol)
                .s("hostIP", p.host_ip)
                .done()
        })
        .collect();
    let env = c
        .env
        .into_iter()
        .map(|e| Obj::default().s("name", e.name).s("value", e.value).done())
        .collect();
    let mounts = c
        .volume_mounts
        .into_iter()
        .map(|m| {
            Obj::default()
                .s("name", m.name)
                .b_t("readOnly", m.read_only)
                .s("mountPath", m.mount_path)
                .s("subPath", m.sub_path)
                .done()
        })
        .collect();
    let resources = c.resources.map(|r| {
        Obj::default()
            .v("limits", quantities(r.limits))
            .v("requests", quantities(r.requests))
            .done()
    });
    Obj::default()
        .s("name", c.name)
        .s("image", c.image)
        .strs("command", c.command)
        .strs("args", c.args)
        .s("workingDir", c.working_dir)
        .list("ports", ports)
        .list("env", env)
        .v("resources", resources)
        .list("volumeMounts", mounts)
        .s("terminationMessagePath", c.termination_message_path)
        .s("terminationMessagePolicy", c.termination_message_policy)
        .s("imagePullPolicy", c.image_pull_policy)
        .s("restartPolicy", c.restart_policy)
        .b_t("stdin", c.stdin)
        .b_t("stdinOnce", c.stdin_once)
        .b_t("tty", c.tty)
        .done()
}

/// A pod toleration (pod specs, RuntimeClass scheduling).
fn toleration(t: core::Toleration) -> Value {
    Obj::default()
        .s("key", t.key)
        .s("operator", t.operator)
        .s("value", t.value)
        .s("effect", t.effect)
        .i("tolerationSeconds", t.toleration_seconds)
        .done()
}

fn pod_spec(s: core::PodSpec) -> Value {
    let tolerations = s.tolerations.into_iter().map(toleration).collect();
    Obj::default()
        .list(
            "initContainers",
            s.init_containers.into_iter().map(container).collect(),
        )
        .list(
            "containers",
            s.containers.into_iter().map(container).collect(),
        )
        .s("restartPolicy", s.restart_policy)
        .i(
            "terminationGracePeriodSeconds",
            s.termination_grace_period_seconds,
        )
        .i("activeDeadlineSeconds", s.active_deadline_seconds)
        .s("dnsPolicy", s.dns_policy)
        .map("nodeSelector", s.node_selector)
        .s("serviceAccountName", s.service_account_name)
        .s("serviceAccount", s.service_account)
        .b(
            "automountServiceAccountToken",
            s.automount_service_account_token,
        )
        .s("nodeName", s.node_name)
        .b_t("hostNetwork", s.host_network)
        .list(
            "imagePullSecrets",
            s.image_pull_secrets.into_iter().map(local_ref).collect(),
        )
        .s("hostname", s.hostname)
        .s("subdomain", s.subdomain)
        .s("schedulerName", s.scheduler_name)
        .list("tolerations", tolerations)
        .s("priorityClassName", s.priority_class_name)
        .done()
}

fn template(t: Option<core::PodTemplateSpec>) -> Option<Value> {
    let t = t?;
    Some(
        Obj::default()
            .v("metadata", Some(object_meta(t.metadata)))
            .v(
                "spec",
                Some(t.spec.map(pod_spec).unwrap_or_else(|| json!({}))),
            )
            .done(),
    )
}

fn label_selector(s: Option<meta::LabelSelector>) -> Option<Value> {
    let s = s?;
    let exprs = s
        .match_expressions
        .into_iter()
        .map(|e| {
            Obj::default()
                .s("key", e.key)
                .s("operator", e.operator)
                .strs("values", e.values)
                .done()
        })
        .collect();
    Some(
        Obj::default()
            .map("matchLabels", s.match_labels)
            .list("matchExpressions", exprs)
            .done(),
    )
}

fn pod(p: core::Pod) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(p.metadata)))
        .v("spec", p.spec.map(pod_spec))
        .done()
}

fn replication_controller(rc: core::ReplicationController) -> Value {
    let spec = rc.spec.map(|s| {
        Obj::default()
            .i("replicas", s.replicas.map(i64::from))
            .i_nz("minReadySeconds", s.min_ready_seconds.map(i64::from))
            .map("selector", s.selector)
            .v("template", template(s.template))
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(rc.metadata)))
        .v("spec", spec)
        .done()
}

fn replica_set(rs: apps::ReplicaSet) -> Value {
    let spec = rs.spec.map(|s| {
        Obj::default()
            .i("replicas", s.replicas.map(i64::from))
            .i_nz("minReadySeconds", s.min_ready_seconds.map(i64::from))
            .v("selector", label_selector(s.selector))
            .v("template", template(s.template))
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(rs.metadata)))
        .v("spec", spec)
        .done()
}

fn deployment(d: apps::Deployment) -> Value {
    let spec = d.spec.map(|s| {
        let strategy = s.strategy.map(|st| {
            let ru = st.rolling_update.map(|r| {
                Obj::default()
                    .v("maxUnavailable", int_or_string(r.max_unavailable))
                    .v("maxSurge", int_or_string(r.max_surge))
                    .done()
            });
            Obj::default()
                .s("type", st.r#type)
                .v("rollingUpdate", ru)
                .done()
        });
        Obj::default()
            .i("replicas", s.replicas.map(i64::from))
            .v("selector", label_selector(s.selector))
            .v("template", template(s.template))
            .v("strategy", strategy)
            .i_nz("minReadySeconds", s.min_ready_seconds.map(i64::from))
            .i(
                "revisionHistoryLimit",
                s.revision_history_limit.map(i64::from),
            )
            .b_t("paused", s.paused)
            .i(
                "progressDeadlineSeconds",
                s.progress_deadline_seconds.map(i64::from),
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(d.metadata)))
        .v("spec", spec)
        .done()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 54-byte body `kubectl create namespace foo` sent (spec Appendix A.31).
    const NS_FOO: &[u8] = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1b\n\x13\n\x03foo\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00\"\x00";
    /// `kubectl create configmap cm1 --from-literal=a=b` (A.32).
    const CM1: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x1d\x0a\x13\x0a\x03cm1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01a\x12\x01b\x1a\x00\"\x00";

    #[test]
    fn decodes_recorded_kubectl_bodies() {
        assert_eq!(
            decode_object(NS_FOO),
            Ok(json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"},"spec":{}}))
        );
        assert_eq!(
            decode_object(CM1),
            Ok(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"},"data":{"a":"b"}})
            )
        );
    }

    /// Bodies captured from the real `kubectl create <generator>` (v1.33, via the dispatcher).
    #[test]
    fn decodes_captured_kubectl_generator_bodies() {
        let deploy: &[u8] = b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xbd\x01\x0a\x1f\x0a\x03web\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\x8b\x01\x08\x02\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1aq\x0a\x1c\x0a\x00\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12Q\x123\x0a\x05nginx\x12\x0anginx:1.25*\x002\x0a\x0a\x00\x10\x00\x18P\x22\x00*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(deploy),
            Ok(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}], "resources": {}}]}
                    },
                    "strategy": {}
                }
            }))
        );
        // The decoded object is a valid create for its strategy.
        let mut obj = decode_object(deploy).unwrap_or_default();
        api::meta::set_namespace(&mut obj, "default");
        let st = crate::registry::builtin::find("apps", "deployments");
        st.iter().for_each(|st| st.prepare_for_create(&mut obj));
        assert_eq!(st.map(|st| st.validate_create(&obj)), Some(vec![]));
        let secret: &[u8] = b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x1e\x0a\x12\x0a\x02s1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01a\x12\x01b\x1a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(secret),
            Ok(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}})
            )
        );
        let docker: &[u8] = b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x8c\x01\x0a\x13\x0a\x03reg\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12U\x0a\x11.dockerconfigjson\x12@{\x22auths\x22:{\x22r.io\x22:{\x22username\x22:\x22u\x22,\x22password\x22:\x22p\x22,\x22auth\x22:\x22dTpw\x22}}}\x1a\x1ekubernetes.io/dockerconfigjson\x1a\x00\x22\x00";
        let d = decode_object(docker).unwrap_or_default();
        assert_eq!(
            d.pointer("/type"),
            Some(&json!("kubernetes.io/dockerconfigjson"))
        );
        assert!(d.pointer("/data/.dockerconfigjson").is_some());
        let svc: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12l\x0a!\x0a\x04svc1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0b\x0a\x03app\x12\x04svc1\x12C\x0a\x1b\x0a\x0780-8080\x12\x03TCP\x18P\x22\x07\x08\x00\x10\x90?\x1a\x00(\x00\x12\x0b\x0a\x03app\x12\x04svc1\x1a\x00\x22\x09ClusterIP:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(svc),
            Ok(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc1", "labels": {"app": "svc1"}},
                "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                         "selector": {"app": "svc1"}, "type": "ClusterIP"}
            }))
        );
        let np: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12j\x0a\x1f\x0a\x03np1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03np1\x12C\x0a\x1d\x0a\x0780-8080\x12\x03TCP\x18P\x22\x07\x08\x00\x10\x90?\x1a\x00(\x80\xeb\x01\x12\x0a\x0a\x03app\x12\x03np1\x1a\x00\x22\x08NodePort:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        let n = decode_object(np).unwrap_or_default();
        assert_eq!(n.pointer("/spec/ports/0/nodePort"), Some(&json!(30080)));
        assert_eq!(n.pointer("/spec/type"), Some(&json!("NodePort")));
        let ext: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12Z\x0a\x1f\x0a\x03ex1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03ex1\x123\x12\x0a\x0a\x03app\x12\x03ex1\x1a\x00\x22\x0cExternalName:\x00B\x00R\x0bexample.comZ\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        let e = decode_object(ext).unwrap_or_default();
        assert_eq!(e.pointer("/spec/externalName"), Some(&json!("example.com")));
        assert!(e.pointer("/spec/ports").is_none());
        let sa: &[u8] = b"k8s\x00\x0a\x14\x0a\x02v1\x12\x0eServiceAccount\x12\x15\x0a\x13\x0a\x03sa1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(sa),
            Ok(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}}))
        );
        let cm2: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12%\x0a\x13\x0a\x03cm2\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01x\x12\x01y\x12\x06\x0a\x01z\x12\x01w\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(cm2).ok().and_then(|c| c.get("data").cloned()),
            Some(json!({"x": "y", "z": "w"}))
        );
    }

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    #[test]
    fn decodes_a_deployment_like_kubectl_create_deployment() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let d = apps::Deployment {
            metadata: Some(meta::ObjectMeta {
                name: Some("web".into()),
                labels: labels.clone(),
                ..Default::default()
            }),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(2),
                selector: Some(meta::LabelSelector {
                    match_labels: labels.clone(),
                    match_expressions: vec![],
                }),
                template: Some(core::PodTemplateSpec {
                    metadata: Some(meta::ObjectMeta {
                        labels,
                        ..Default::default()
                    }),
                    spec: Some(core::PodSpec {
                        containers: vec![core::Container {
                            name: Some("nginx".into()),
                            image: Some("nginx:1.25".into()),
                            resources: Some(Default::default()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                strategy: Some(Default::default()),
                min_ready_seconds: Some(0),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        let got = decode_object(&envelope("apps/v1", "Deployment", d.encode_to_vec()));
        assert_eq!(
            got,
            Ok(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "resources": {}}]}},
                    "strategy": {}
                }
            }))
        );
    }

    #[test]
    fn secret_data_is_base64_and_service_ports_convert() {
        let s = core::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), b"v".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let got = decode_object(&envelope("v1", "Secret", s.encode_to_vec()));
        assert_eq!(
            got.ok().and_then(|v| v.pointer("/data/k").cloned()),
            Some(json!("dg=="))
        );
        let svc = core::Service {
            metadata: Some(meta::ObjectMeta {
                name: Some("svc".into()),
                ..Default::default()
            }),
            spec: Some(core::ServiceSpec {
                ports: vec![core::ServicePort {
                    name: Some("80-8080".into()),
                    port: Some(80),
                    protocol: Some("TCP".into()),
                    target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: Some(String::new()),
                    }),
                    ..Default::default()
                }],
                r#type: Some("ClusterIP".into()),
                selector: [("app".to_string(), "svc".to_string())].into(),
                ..Default::default()
            }),
            status: None,
        };
        let got =
            decode_object(&envelope("v1", "Service", svc.encode_to_vec())).unwrap_or_default();
        assert_eq!(
            got.pointer("/spec/ports/0"),
            Some(&json!({"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080}))
        );
        assert_eq!(got.pointer("/spec/type"), Some(&json!("ClusterIP")));
    }

    #[test]
    fn errors() {
        assert_eq!(decode_object(b"{}"), Err(ProtobufError::BadEnvelope));
        assert_eq!(
            decode_object(b"k8s\x00\xff\xff"),
            Err(ProtobufError::BadEnvelope)
        );
        assert_eq!(
            decode_object(&envelope("example.com/v1", "Widget", vec![])),
            Err(ProtobufError::UnsupportedKind {
                api_version: "example.com/v1".into(),
                kind: "Widget".into()
            })
        );
        assert!(matches!(
            decode_object(&envelope("v1", "Namespace", vec![0xff, 0xff, 0xff])),
            Err(ProtobufError::Decode(_))
        ));
    }
}
