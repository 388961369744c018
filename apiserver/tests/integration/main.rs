//! The apiserver's integration tests, in one test binary: a binary per file linked the whole
//! server (about 120 MB of debug build) once per file. Each file is a module and reads as it
//! did; the reliability suites and the input fuzzer, which load the machine, stay beside this
//! folder as binaries of their own. Run one file's tests with
//! `cargo test -p apiserver --test integration <file>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
// The conversion webhook server the conversion tests (and the e2e tests) run.
#[path = "../conversion/server.rs"]
mod conversion_server;

mod admission;
mod authn_authz;
mod autoscaling_flowcontrol;
mod conversion_serving;
mod conversion_webhook;
mod core_storage;
mod crd_validation;
mod crds;
mod discovery_fidelity;
mod every_resource;
mod guaranteed_update;
mod handlers;
mod kube_rs;
mod kubectl;
mod kubectl_authn;
mod kubectl_autoscaling;
mod kubectl_core;
mod kubectl_crds;
mod kubectl_net_storage;
mod kubectl_pods_policy;
mod kubectl_rbac;
mod kubectl_wire;
mod kubectl_workloads;
mod net_storage;
mod pods_policy;
mod priority_and_fairness;
mod rbac_and_priority;
mod resource_quota;
mod shutdown;
mod smoke;
mod storage_defaults;
mod uncached_events;
mod wire;
mod workloads;
