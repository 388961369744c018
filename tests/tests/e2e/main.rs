//! The end-to-end tests of the whole product, in one test binary: a binary per file linked the
//! whole control plane (about 200 MB of debug build) once per file, which filled CI disks and
//! spent minutes linking. Each file is a module and reads as it did; tests that must have a
//! process to themselves (`hostile_conns`: thousands of sockets under a raised descriptor limit;
//! `watch_fanout`; `hostile_input`'s shared sandbox) stay beside this folder as binaries of their
//! own. Run one file's tests with `cargo test -p tests --test e2e <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared by the webhook tests: the conversion webhook of the apiserver's tests and the admission
// webhook server built on it.
#[path = "../../../apiserver/tests/conversion/server.rs"]
mod conversion_server;
mod webhook_server;

mod admission;
mod admission_plugins;
mod admission_policy;
mod admission_subresources;
mod admission_webhooks;
mod audit;
mod clients;
mod component_statuses;
mod components;
mod crd_cleanup;
mod crds;
mod cronjobs;
mod daemonsets;
mod disruption;
mod docs;
mod dynamic;
mod endpoints;
mod etcd;
mod first_contact;
mod hostile_edges;
mod jobs;
mod kube_rs_conversion;
mod kube_rs_crd;
mod kube_rs_secure;
mod kubelet_events;
mod least_privilege;
mod namespace_defaults;
mod node_lifecycle;
mod pod_security;
mod priority_and_fairness;
mod quota;
mod restart;
mod sandbox;
mod security;
mod statefulsets;
mod storage_defaults;
mod tour;
mod volumes;
