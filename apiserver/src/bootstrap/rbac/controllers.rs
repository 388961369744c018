//! The roles of kube-controller-manager's controllers (upstream's `controller_policy.go`): one
//! ClusterRole `system:controller:<name>` per controller, bound to the service account
//! `kube-system/<name>` by a ClusterRoleBinding of the same name.
//!
//! With 1.33's default feature gates: `service-cidrs-controller` (MultiCIDRServiceAllocator, GA)
//! and `selinux-warning-controller` (SELinuxChangePolicy, beta, on) are in; the roles of gates off
//! by default (DynamicResourceAllocation's `resource-claim-controller`, VolumeAttributesClass,
//! ClusterTrustBundle, StorageVersionAPI, StorageVersionMigrator) are not.

use super::READ;
use super::{
    cluster_binding, cluster_role, events_rule, rule, Binding, ClusterRole, Rule, Subject,
};

const CORE: &str = "";
const APPS_AND_EXTENSIONS: &[&str] = &["apps", "extensions"];

/// The controllers' roles and their bindings, in upstream's order.
pub(super) fn controller_roles() -> (Vec<ClusterRole>, Vec<Binding>) {
    let roles = [
        ("attachdetach-controller", attach_detach()),
        (
            "clusterrole-aggregation-controller",
            // It writes aggregated rules, so it may grant what it does not hold.
            vec![
                rule(&["escalate", "get", "list", "watch", "update", "patch"])
                    .groups(&["rbac.authorization.k8s.io"])
                    .resources(&["clusterroles"]),
            ],
        ),
        ("cronjob-controller", cronjob()),
        ("daemon-set-controller", daemon_set()),
        ("deployment-controller", deployment()),
        ("disruption-controller", disruption()),
        (
            "endpoint-controller",
            vec![
                rule(READ).groups(&[CORE]).resources(&["services", "pods"]),
                rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[CORE])
                    .resources(&["endpoints"]),
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["endpoints/restricted"]),
                events_rule(),
            ],
        ),
        ("endpointslice-controller", endpoint_slices(false)),
        ("endpointslicemirroring-controller", endpoint_slices(true)),
        (
            "expand-controller",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                rule(&["update", "patch"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims/status"]),
                rule(READ)
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                events_rule(),
                // The in-tree Portworx volume plugin reads its service.
                rule(&["get"]).groups(&[CORE]).resources(&["services"]),
            ],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(READ).groups(&[CORE]).resources(&["pods"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["pods/finalizers"]),
                rule(&["get", "list", "watch", "create"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                events_rule(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                rule(&["get", "list", "watch", "patch", "update", "delete"])
                    .groups(&["*"])
                    .resources(&["*"]),
                events_rule(),
            ],
        ),
        ("horizontal-pod-autoscaler", horizontal_pod_autoscaler()),
        (
            "job-controller",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&["batch"])
                    .resources(&["jobs"]),
                rule(&["update"])
                    .groups(&["batch"])
                    .resources(&["jobs/status"]),
                rule(&["update"])
                    .groups(&["batch"])
                    .resources(&["jobs/finalizers"]),
                rule(&["list", "watch", "create", "delete", "patch"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[CORE])
                    .resources(&["namespaces"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["namespaces/finalize", "namespaces/status"]),
                rule(&["get", "list", "watch", "delete", "deletecollection"])
                    .groups(&["*"])
                    .resources(&["*"]),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(&["get", "list", "watch", "update", "delete", "patch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                rule(&["patch", "update"])
                    .groups(&[CORE])
                    .resources(&["nodes/status"]),
                rule(&["patch", "update"])
                    .groups(&[CORE])
                    .resources(&["pods/status"]),
                rule(&["list", "watch", "get", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        ("persistent-volume-binder", persistent_volume_binder()),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                rule(READ).groups(&[CORE]).resources(&["nodes"]),
                rule(&["patch"]).groups(&[CORE]).resources(&["pods/status"]),
            ],
        ),
        (
            "replicaset-controller",
            replicas("replicasets", APPS_AND_EXTENSIONS),
        ),
        (
            "replication-controller",
            replicas("replicationcontrollers", &[CORE]),
        ),
        (
            "resourcequota-controller",
            vec![
                // Quota counts anything, so it reads everything.
                rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
                rule(&["update"])
                    .groups(&[CORE])
                    .resources(&["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "route-controller",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                rule(&["patch"])
                    .groups(&[CORE])
                    .resources(&["nodes/status"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"])
                    .groups(&[CORE])
                    .resources(&["serviceaccounts"]),
                events_rule(),
            ],
        ),
        (
            "service-controller",
            vec![
                rule(READ).groups(&[CORE]).resources(&["services"]),
                rule(&["patch", "update"])
                    .groups(&[CORE])
                    .resources(&["services/status"]),
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                events_rule(),
            ],
        ),
        ("service-cidrs-controller", service_cidrs()),
        ("statefulset-controller", stateful_set()),
        (
            "ttl-controller",
            vec![
                rule(&["update", "patch", "list", "watch"])
                    .groups(&[CORE])
                    .resources(&["nodes"]),
                events_rule(),
            ],
        ),
        ("certificate-controller", certificate()),
        (
            "pvc-protection-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                rule(&["list", "watch", "get"])
                    .groups(&[CORE])
                    .resources(&["pods"]),
                events_rule(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                events_rule(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&["batch"])
                    .resources(&["jobs"]),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"])
                    .groups(&[CORE])
                    .resources(&["configmaps"]),
                events_rule(),
            ],
        ),
        (
            "validatingadmissionpolicy-status-controller",
            vec![
                rule(READ)
                    .groups(&["admissionregistration.k8s.io"])
                    .resources(&["validatingadmissionpolicies"]),
                rule(&["get", "patch", "update"])
                    .groups(&["admissionregistration.k8s.io"])
                    .resources(&["validatingadmissionpolicies/status"]),
                events_rule(),
            ],
        ),
        (
            "legacy-service-account-token-cleaner",
            vec![
                rule(&["get"])
                    .groups(&[CORE])
                    .resources(&["configmaps"])
                    .names(&["kube-apiserver-legacy-service-account-token-tracking"]),
                rule(&["patch", "delete"])
                    .groups(&[CORE])
                    .resources(&["secrets"]),
            ],
        ),
        (
            "selinux-warning-controller",
            vec![
                events_rule(),
                rule(READ).groups(&[CORE]).resources(&["persistentvolumes"]),
                rule(READ)
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                rule(READ).groups(&[CORE]).resources(&["pods"]),
                rule(READ)
                    .groups(&["storage.k8s.io"])
                    .resources(&["csidrivers"]),
            ],
        ),
    ];
    let mut cluster_roles = Vec::with_capacity(roles.len());
    let mut bindings = Vec::with_capacity(roles.len());
    for (controller, rules) in roles {
        let name = format!("system:controller:{controller}");
        bindings.push(cluster_binding(
            name.clone(),
            vec![Subject::ServiceAccount("kube-system", controller)],
        ));
        cluster_roles.push(cluster_role(name, rules));
    }
    (cluster_roles, bindings)
}

fn attach_detach() -> Vec<Rule> {
    vec![
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["persistentvolumes", "persistentvolumeclaims"]),
        rule(READ).groups(&[CORE]).resources(&["nodes"]),
        rule(&["patch", "update"])
            .groups(&[CORE])
            .resources(&["nodes/status"]),
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["pods"]),
        events_rule(),
        rule(&["get", "create", "delete", "list", "watch"])
            .groups(&["storage.k8s.io"])
            .resources(&["volumeattachments"]),
        rule(READ)
            .groups(&["storage.k8s.io"])
            .resources(&["csidrivers"]),
        rule(READ)
            .groups(&["storage.k8s.io"])
            .resources(&["csinodes"]),
    ]
}

fn cronjob() -> Vec<Rule> {
    vec![
        rule(&["get", "list", "watch", "update"])
            .groups(&["batch"])
            .resources(&["cronjobs"]),
        rule(&[
            "get", "list", "watch", "create", "update", "delete", "patch",
        ])
        .groups(&["batch"])
        .resources(&["jobs"]),
        rule(&["update"])
            .groups(&["batch"])
            .resources(&["cronjobs/status"]),
        rule(&["update"])
            .groups(&["batch"])
            .resources(&["cronjobs/finalizers"]),
        rule(&["list", "watch", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        events_rule(),
    ]
}

fn daemon_set() -> Vec<Rule> {
    vec![
        rule(READ)
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["daemonsets"]),
        rule(&["update"])
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["daemonsets/status"]),
        rule(&["update"])
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["daemonsets/finalizers"]),
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["list", "watch", "create", "delete", "patch"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/binding"]),
        rule(&[
            "get", "list", "watch", "create", "delete", "update", "patch",
        ])
        .groups(&["apps"])
        .resources(&["controllerrevisions"]),
        events_rule(),
    ]
}

fn deployment() -> Vec<Rule> {
    vec![
        rule(&["get", "list", "watch", "update"])
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["deployments"]),
        rule(&["update"])
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["deployments/status"]),
        rule(&["update"])
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["deployments/finalizers"]),
        rule(&[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ])
        .groups(APPS_AND_EXTENSIONS)
        .resources(&["replicasets"]),
        rule(&["get", "list", "watch", "update"])
            .groups(&[CORE])
            .resources(&["pods"]),
        events_rule(),
    ]
}

fn disruption() -> Vec<Rule> {
    vec![
        rule(READ)
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["deployments"]),
        rule(READ)
            .groups(APPS_AND_EXTENSIONS)
            .resources(&["replicasets"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["replicationcontrollers"]),
        rule(READ)
            .groups(&["policy"])
            .resources(&["poddisruptionbudgets"]),
        rule(READ).groups(&["apps"]).resources(&["statefulsets"]),
        rule(&["update"])
            .groups(&["policy"])
            .resources(&["poddisruptionbudgets/status"]),
        rule(&["patch", "update"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        rule(&["get"]).groups(&["*"]).resources(&["*/scale"]),
        events_rule(),
    ]
}

/// The EndpointSlice controllers; the mirroring one reads Endpoints instead of pods and nodes
/// and may set their finalizers too (to own slices with `blockOwnerDeletion`).
fn endpoint_slices(mirroring: bool) -> Vec<Rule> {
    let read: &[&str] = if mirroring {
        &["services", "endpoints"]
    } else {
        &["services", "pods", "nodes"]
    };
    let mut rules = vec![
        rule(READ).groups(&[CORE]).resources(read),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["services/finalizers"]),
    ];
    if mirroring {
        rules.push(
            rule(&["update"])
                .groups(&[CORE])
                .resources(&["endpoints/finalizers"]),
        );
    }
    rules.push(
        rule(&["get", "list", "watch", "create", "update", "delete"])
            .groups(&["discovery.k8s.io"])
            .resources(&["endpointslices"]),
    );
    rules.push(events_rule());
    rules
}

fn horizontal_pod_autoscaler() -> Vec<Rule> {
    vec![
        rule(READ)
            .groups(&["autoscaling"])
            .resources(&["horizontalpodautoscalers"]),
        rule(&["update"])
            .groups(&["autoscaling"])
            .resources(&["horizontalpodautoscalers/status"]),
        rule(&["get", "update"])
            .groups(&["*"])
            .resources(&["*/scale"]),
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["pods"]),
        // Resource, custom and external metrics.
        rule(&["list", "watch"])
            .groups(&["metrics.k8s.io"])
            .resources(&["pods"]),
        rule(READ)
            .groups(&["custom.metrics.k8s.io"])
            .resources(&["*"]),
        rule(READ)
            .groups(&["external.metrics.k8s.io"])
            .resources(&["*"]),
        events_rule(),
    ]
}

fn persistent_volume_binder() -> Vec<Rule> {
    vec![
        rule(&["get", "list", "watch", "update", "create", "delete"])
            .groups(&[CORE])
            .resources(&["persistentvolumes"]),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["persistentvolumes/status"]),
        rule(&["get", "list", "watch", "update"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims"]),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims/status"]),
        rule(&["list", "watch", "get", "create", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(READ)
            .groups(&["storage.k8s.io"])
            .resources(&["storageclasses"]),
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        events_rule(),
        // The recycler watches its pod's events.
        rule(&["watch"]).groups(&[CORE]).resources(&["events"]),
        // The in-tree Portworx volume plugin reads its service.
        rule(&["get"]).groups(&[CORE]).resources(&["services"]),
    ]
}

/// The ReplicaSet and ReplicationController controllers, identical but for the kind.
fn replicas(plural: &str, groups: &[&str]) -> Vec<Rule> {
    let (status, finalizers) = (format!("{plural}/status"), format!("{plural}/finalizers"));
    vec![
        rule(&["get", "list", "watch", "update"])
            .groups(groups)
            .resources(&[plural]),
        rule(&["update"]).groups(groups).resources(&[&status]),
        rule(&["update"]).groups(groups).resources(&[&finalizers]),
        rule(&["list", "watch", "patch", "create", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        events_rule(),
    ]
}

fn service_cidrs() -> Vec<Rule> {
    const NET: &str = "networking.k8s.io";
    vec![
        rule(&["get", "list", "watch", "patch", "update"])
            .groups(&[NET])
            .resources(&["servicecidrs"]),
        rule(&["patch", "update"])
            .groups(&[NET])
            .resources(&["servicecidrs/finalizers"]),
        rule(&["patch", "update"])
            .groups(&[NET])
            .resources(&["servicecidrs/status"]),
        rule(READ).groups(&[NET]).resources(&["ipaddresses"]),
        events_rule(),
    ]
}

fn stateful_set() -> Vec<Rule> {
    vec![
        rule(&["list", "watch"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(READ).groups(&["apps"]).resources(&["statefulsets"]),
        rule(&["update"])
            .groups(&["apps"])
            .resources(&["statefulsets/status"]),
        rule(&["update"])
            .groups(&["apps"])
            .resources(&["statefulsets/finalizers"]),
        rule(&["get", "create", "delete", "update", "patch"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&[
            "get", "create", "delete", "update", "patch", "list", "watch",
        ])
        .groups(&["apps"])
        .resources(&["controllerrevisions"]),
        rule(&["get", "create", "list", "watch"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims"]),
        rule(&["update", "delete"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims"]),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["pods/finalizers"]),
        events_rule(),
    ]
}

fn certificate() -> Vec<Rule> {
    const CERTS: &str = "certificates.k8s.io";
    vec![
        rule(&["get", "list", "watch", "delete"])
            .groups(&[CERTS])
            .resources(&["certificatesigningrequests"]),
        rule(&["update"]).groups(&[CERTS]).resources(&[
            "certificatesigningrequests/status",
            "certificatesigningrequests/approval",
        ]),
        rule(&["approve"])
            .groups(&[CERTS])
            .resources(&["signers"])
            .names(&["kubernetes.io/kube-apiserver-client-kubelet"]),
        rule(&["sign"])
            .groups(&[CERTS])
            .resources(&["signers"])
            .names(&[
                "kubernetes.io/legacy-unknown",
                "kubernetes.io/kube-apiserver-client",
                "kubernetes.io/kube-apiserver-client-kubelet",
                "kubernetes.io/kubelet-serving",
            ]),
        rule(&["create"])
            .groups(&["authorization.k8s.io"])
            .resources(&["subjectaccessreviews"]),
        events_rule(),
    ]
}
