//! The bootstrap cluster roles other than the controllers' (upstream's `ClusterRoles()`), in its
//! order: the super-user, discovery and self-review roles, the aggregated user-facing roles and
//! the roles they aggregate, and the roles of the system components.

use super::{cluster_role, events_rule, rule, ClusterRole, READ, READ_WRITE, WRITE};

const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

const CORE: &str = "";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";
const CERTS: &str = "certificates.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const STORAGE: &str = "storage.k8s.io";

/// The cluster roles, in upstream's order.
pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles = vec![
        cluster_role(
            "cluster-admin",
            vec![
                rule(&["*"]).groups(&["*"]).resources(&["*"]),
                rule(&["*"]).urls(&["*"]),
            ],
        ),
        cluster_role(
            "system:discovery",
            vec![rule(&["get"]).urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ])],
        ),
        cluster_role(
            "system:monitoring",
            vec![rule(&["get"]).urls(&[
                "/metrics",
                "/metrics/slis",
                "/livez",
                "/readyz",
                "/healthz",
                "/livez/*",
                "/readyz/*",
                "/healthz/*",
            ])],
        ),
        cluster_role(
            "system:basic-user",
            vec![
                rule(&["create"])
                    .groups(&[AUTHZ])
                    .resources(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(&["create"])
                    .groups(&[AUTHN])
                    .resources(&["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            vec![rule(&["get"]).urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"])],
        ),
        cluster_role("admin", Vec::new()).aggregating(AGGREGATE_TO_ADMIN),
        cluster_role("edit", Vec::new())
            .aggregating(AGGREGATE_TO_EDIT)
            .labeled(AGGREGATE_TO_ADMIN),
        cluster_role("view", Vec::new())
            .aggregating(AGGREGATE_TO_VIEW)
            .labeled(AGGREGATE_TO_EDIT),
        cluster_role("system:aggregate-to-admin", aggregate_to_admin()).labeled(AGGREGATE_TO_ADMIN),
        cluster_role("system:aggregate-to-edit", aggregate_to_edit()).labeled(AGGREGATE_TO_EDIT),
        cluster_role("system:aggregate-to-view", aggregate_to_view()).labeled(AGGREGATE_TO_VIEW),
        cluster_role(
            "system:heapster",
            vec![
                rule(READ)
                    .groups(&[CORE])
                    .resources(&["events", "pods", "nodes", "namespaces"]),
                rule(READ)
                    .groups(&["extensions"])
                    .resources(&["deployments"]),
            ],
        ),
        cluster_role("system:node", node()),
        cluster_role(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"])
                    .groups(&[CORE])
                    .resources(&["services", "endpoints"]),
                rule(READ).groups(&[CORE]).resources(&["nodes"]),
                events_rule(),
                rule(&["list", "watch"])
                    .groups(&["discovery.k8s.io"])
                    .resources(&["endpointslices"]),
            ],
        ),
        cluster_role(
            "system:kubelet-api-admin",
            vec![
                rule(READ).groups(&[CORE]).resources(&["nodes"]),
                rule(&["proxy"]).groups(&[CORE]).resources(&["nodes"]),
                rule(&["*"]).groups(&[CORE]).resources(&[
                    "nodes/proxy",
                    "nodes/metrics",
                    "nodes/stats",
                    "nodes/log",
                ]),
            ],
        ),
        cluster_role(
            "system:node-bootstrapper",
            vec![rule(&["create", "get", "list", "watch"])
                .groups(&[CERTS])
                .resources(&["certificatesigningrequests"])],
        ),
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["create"])
                    .groups(&[AUTHN])
                    .resources(&["tokenreviews"]),
                rule(&["create"])
                    .groups(&[AUTHZ])
                    .resources(&["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:kube-aggregator",
            vec![rule(READ)
                .groups(&[CORE])
                .resources(&["services", "endpoints"])],
        ),
        cluster_role("system:kube-controller-manager", kube_controller_manager()),
        cluster_role(
            "system:kube-dns",
            vec![rule(&["list", "watch"])
                .groups(&[CORE])
                .resources(&["endpoints", "services"])],
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            vec![
                rule(&["get", "list", "watch", "create", "delete"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                rule(&["get", "list", "watch", "update"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
                rule(&["watch"]).groups(&[CORE]).resources(&["events"]),
                events_rule(),
            ],
        ),
    ];
    roles.extend(certificate_roles());
    roles.extend([
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![rule(&["get"]).urls(&["/.well-known/openid-configuration", "/openid/v1/jwks"])],
        ),
        cluster_role(
            "system:node-problem-detector",
            vec![
                rule(&["get"]).groups(&[CORE]).resources(&["nodes"]),
                rule(&["patch"])
                    .groups(&[CORE])
                    .resources(&["nodes/status"]),
                events_rule(),
            ],
        ),
        cluster_role(
            "system:volume-scheduler",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumes"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[CORE])
                    .resources(&["persistentvolumeclaims"]),
            ],
        ),
        cluster_role("system:kube-scheduler", kube_scheduler()),
    ]);
    roles
}

fn aggregate_to_admin() -> Vec<super::Rule> {
    vec![
        rule(&["create"])
            .groups(&[AUTHZ])
            .resources(&["localsubjectaccessreviews"]),
        rule(READ_WRITE)
            .groups(&["rbac.authorization.k8s.io"])
            .resources(&["roles", "rolebindings"]),
    ]
}

fn aggregate_to_edit() -> Vec<super::Rule> {
    let pod_subresources = [
        "pods",
        "pods/attach",
        "pods/proxy",
        "pods/exec",
        "pods/portforward",
    ];
    vec![
        // Read access to these escalates (secrets, exec), so only edit and admin have it.
        rule(READ).groups(&[CORE]).resources(&[
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
            "secrets",
            "services/proxy",
        ]),
        rule(&["impersonate"])
            .groups(&[CORE])
            .resources(&["serviceaccounts"]),
        rule(WRITE).groups(&[CORE]).resources(&pod_subresources),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/eviction"]),
        rule(WRITE).groups(&[CORE]).resources(&[
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
        rule(WRITE).groups(&["apps"]).resources(&[
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ]),
        rule(WRITE)
            .groups(&["autoscaling"])
            .resources(&["horizontalpodautoscalers"]),
        rule(WRITE)
            .groups(&["batch"])
            .resources(&["jobs", "cronjobs"]),
        rule(WRITE).groups(&["extensions"]).resources(&[
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "ingresses",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
            "networkpolicies",
        ]),
        rule(WRITE)
            .groups(&["policy"])
            .resources(&["poddisruptionbudgets"]),
        rule(WRITE)
            .groups(&["networking.k8s.io"])
            .resources(&["networkpolicies", "ingresses"]),
        rule(READ_WRITE)
            .groups(&[COORDINATION])
            .resources(&["leases"]),
    ]
}

fn aggregate_to_view() -> Vec<super::Rule> {
    vec![
        rule(READ).groups(&[CORE]).resources(&[
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ]),
        rule(READ).groups(&[CORE]).resources(&[
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ]),
        // Read access to namespaces at the namespace scope means reading *this* namespace.
        rule(READ).groups(&[CORE]).resources(&["namespaces"]),
        rule(READ)
            .groups(&["discovery.k8s.io"])
            .resources(&["endpointslices"]),
        rule(READ).groups(&["apps"]).resources(&[
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ]),
        rule(READ).groups(&["autoscaling"]).resources(&[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ]),
        rule(READ).groups(&["batch"]).resources(&[
            "jobs",
            "cronjobs",
            "cronjobs/status",
            "jobs/status",
        ]),
        rule(READ).groups(&["extensions"]).resources(&[
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
            "networkpolicies",
        ]),
        rule(READ)
            .groups(&["policy"])
            .resources(&["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(READ).groups(&["networking.k8s.io"]).resources(&[
            "ingresses",
            "ingresses/status",
            "networkpolicies",
        ]),
    ]
}

/// `system:node`: what kubelets need (the Node authorizer narrows it per node).
fn node() -> Vec<super::Rule> {
    vec![
        rule(&["create"])
            .groups(&[AUTHN])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHZ])
            .resources(&["subjectaccessreviews", "localsubjectaccessreviews"]),
        rule(READ).groups(&[CORE]).resources(&["services"]),
        rule(&["create", "get", "list", "watch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes/status"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["nodes"]),
        rule(&["create", "update", "patch"])
            .groups(&[CORE])
            .resources(&["events"]),
        rule(READ).groups(&[CORE]).resources(&["pods"]),
        rule(&["create", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["update", "patch"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/eviction"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["secrets", "configmaps"]),
        rule(&["get"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        rule(&["get"]).groups(&[CORE]).resources(&["endpoints"]),
        rule(&["create", "get", "list", "watch"])
            .groups(&[CERTS])
            .resources(&["certificatesigningrequests"]),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get"])
            .groups(&[STORAGE])
            .resources(&["volumeattachments"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
        rule(&["get", "update", "patch"])
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims/status"]),
        rule(READ).groups(&[STORAGE]).resources(&["csidrivers"]),
        rule(&["create", "delete", "get", "patch", "update"])
            .groups(&[STORAGE])
            .resources(&["csinodes"]),
        rule(READ)
            .groups(&["node.k8s.io"])
            .resources(&["runtimeclasses"]),
    ]
}

fn kube_controller_manager() -> Vec<super::Rule> {
    vec![
        events_rule(),
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-controller-manager"]),
        // It creates a service account and its token secret per controller.
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["secrets", "serviceaccounts"]),
        rule(&["delete"]).groups(&[CORE]).resources(&["secrets"]),
        rule(&["get"]).groups(&[CORE]).resources(&[
            "namespaces",
            "secrets",
            "serviceaccounts",
            "configmaps",
        ]),
        rule(&["update"])
            .groups(&[CORE])
            .resources(&["secrets", "serviceaccounts"]),
        rule(&["create"])
            .groups(&[AUTHN])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHZ])
            .resources(&["subjectaccessreviews"]),
        // Its shared informers watch everything.
        rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["serviceaccounts/token"]),
    ]
}

fn kube_scheduler() -> Vec<super::Rule> {
    vec![
        events_rule(),
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-scheduler"]),
        rule(READ).groups(&[CORE]).resources(&["nodes"]),
        rule(&["get", "list", "watch", "delete"])
            .groups(&[CORE])
            .resources(&["pods"]),
        rule(&["create"])
            .groups(&[CORE])
            .resources(&["pods/binding", "bindings"]),
        rule(&["patch", "update"])
            .groups(&[CORE])
            .resources(&["pods/status"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["replicationcontrollers", "services"]),
        rule(READ)
            .groups(&["apps", "extensions"])
            .resources(&["replicasets"]),
        rule(READ).groups(&["apps"]).resources(&["statefulsets"]),
        rule(READ)
            .groups(&["policy"])
            .resources(&["poddisruptionbudgets"]),
        rule(READ)
            .groups(&[CORE])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        rule(&["create"])
            .groups(&[AUTHN])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHZ])
            .resources(&["subjectaccessreviews"]),
        rule(READ).groups(&[STORAGE]).resources(&["csinodes"]),
        rule(READ).groups(&[CORE]).resources(&["namespaces"]),
        rule(READ).groups(&[STORAGE]).resources(&["csidrivers"]),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csistoragecapacities"]),
    ]
}

/// The node client certificate roles and one approver role per built-in signer.
fn certificate_roles() -> Vec<ClusterRole> {
    let mut roles = vec![
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(&["create"])
                .groups(&[CERTS])
                .resources(&["certificatesigningrequests/nodeclient"])],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(&["create"])
                .groups(&[CERTS])
                .resources(&["certificatesigningrequests/selfnodeclient"])],
        ),
    ];
    for (role, signer) in [
        (
            "system:certificates.k8s.io:legacy-unknown-approver",
            "kubernetes.io/legacy-unknown",
        ),
        (
            "system:certificates.k8s.io:kubelet-serving-approver",
            "kubernetes.io/kubelet-serving",
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "kubernetes.io/kube-apiserver-client",
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
    ] {
        roles.push(cluster_role(
            role,
            vec![rule(&["approve"])
                .groups(&[CERTS])
                .resources(&["signers"])
                .names(&[signer])],
        ));
    }
    roles
}
