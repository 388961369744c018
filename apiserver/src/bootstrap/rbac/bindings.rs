//! The default ClusterRoleBindings (upstream's `ClusterRoleBindings()`) and the Roles and
//! RoleBindings of `kube-system` and `kube-public` (`namespace_policy.go`).

use super::{cluster_binding, events_rule, role_binding, rule, Binding, Role, Subject, READ};

const SYSTEM: &str = "kube-system";
const PUBLIC: &str = "kube-public";

const CONTROLLER_MANAGER: Subject = Subject::User("system:kube-controller-manager");
const SCHEDULER: Subject = Subject::User("system:kube-scheduler");
const AUTHENTICATED: Subject = Subject::Group("system:authenticated");

/// The default cluster role bindings, in upstream's order.
pub(super) fn cluster_role_bindings() -> Vec<Binding> {
    vec![
        cluster_binding("cluster-admin", vec![Subject::Group("system:masters")]),
        cluster_binding(
            "system:monitoring",
            vec![Subject::Group("system:monitoring")],
        ),
        cluster_binding("system:discovery", vec![AUTHENTICATED]),
        cluster_binding("system:basic-user", vec![AUTHENTICATED]),
        cluster_binding(
            "system:public-info-viewer",
            vec![AUTHENTICATED, Subject::Group("system:unauthenticated")],
        ),
        cluster_binding(
            "system:node-proxier",
            vec![Subject::User("system:kube-proxy")],
        ),
        cluster_binding("system:kube-controller-manager", vec![CONTROLLER_MANAGER]),
        cluster_binding(
            "system:kube-dns",
            vec![Subject::ServiceAccount(SYSTEM, "kube-dns")],
        ),
        cluster_binding("system:kube-scheduler", vec![SCHEDULER]),
        cluster_binding("system:volume-scheduler", vec![SCHEDULER]),
        // Kept without subjects since the Node authorizer took over (1.7), so that tightening
        // reconciliation could drop the old `system:nodes` subject.
        cluster_binding("system:node", Vec::new()),
        // Every service account may read the OIDC discovery documents of their tokens' issuer.
        cluster_binding(
            "system:service-account-issuer-discovery",
            vec![Subject::Group("system:serviceaccounts")],
        ),
    ]
}

/// The roles of the `kube-` namespaces.
pub(super) fn namespace_roles() -> Vec<Role> {
    let role = |namespace, name, rules| Role {
        namespace,
        name,
        rules,
    };
    vec![
        role(
            SYSTEM,
            // Reads the authentication configuration extension apiservers start from.
            "extension-apiserver-authentication-reader",
            vec![rule(READ)
                .groups(&[""])
                .resources(&["configmaps"])
                .names(&["extension-apiserver-authentication"])],
        ),
        role(
            SYSTEM,
            "system:controller:bootstrap-signer",
            vec![rule(READ).groups(&[""]).resources(&["secrets"])],
        ),
        role(
            SYSTEM,
            // Deprecated since 1.10, still created.
            "system:controller:cloud-provider",
            vec![rule(&["create", "get", "list", "watch"])
                .groups(&[""])
                .resources(&["configmaps"])],
        ),
        role(
            SYSTEM,
            "system:controller:token-cleaner",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[""])
                    .resources(&["secrets"]),
                events_rule(),
            ],
        ),
        role(
            SYSTEM,
            "system::leader-locking-kube-controller-manager",
            vec![
                rule(&["watch"]).groups(&[""]).resources(&["configmaps"]),
                rule(&["get", "update"])
                    .groups(&[""])
                    .resources(&["configmaps"])
                    .names(&["kube-controller-manager"]),
                rule(&["get", "watch", "list", "create", "update"])
                    .groups(&["coordination.k8s.io"])
                    .resources(&["leases"]),
            ],
        ),
        role(
            SYSTEM,
            "system::leader-locking-kube-scheduler",
            vec![
                rule(&["watch"]).groups(&[""]).resources(&["configmaps"]),
                rule(&["get", "update"])
                    .groups(&[""])
                    .resources(&["configmaps"])
                    .names(&["kube-scheduler"]),
            ],
        ),
        role(
            PUBLIC,
            // Writes the signed `cluster-info` configmap.
            "system:controller:bootstrap-signer",
            vec![
                rule(READ).groups(&[""]).resources(&["configmaps"]),
                rule(&["update"])
                    .groups(&[""])
                    .resources(&["configmaps"])
                    .names(&["cluster-info"]),
                events_rule(),
            ],
        ),
    ]
}

/// The role bindings of the `kube-` namespaces.
pub(super) fn namespace_role_bindings() -> Vec<Binding> {
    let sa = |name| Subject::ServiceAccount(SYSTEM, name);
    vec![
        role_binding(
            SYSTEM,
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            vec![CONTROLLER_MANAGER, SCHEDULER],
        ),
        role_binding(
            SYSTEM,
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            vec![
                CONTROLLER_MANAGER,
                sa("kube-controller-manager"),
                sa("leader-election-controller"),
            ],
        ),
        role_binding(
            SYSTEM,
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            vec![SCHEDULER, sa("kube-scheduler")],
        ),
        role_binding(
            SYSTEM,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![sa("bootstrap-signer")],
        ),
        role_binding(
            SYSTEM,
            "system:controller:cloud-provider",
            "system:controller:cloud-provider",
            vec![sa("cloud-provider")],
        ),
        role_binding(
            SYSTEM,
            "system:controller:token-cleaner",
            "system:controller:token-cleaner",
            vec![sa("token-cleaner")],
        ),
        role_binding(
            PUBLIC,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![sa("bootstrap-signer")],
        ),
    ]
}
