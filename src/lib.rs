//! minik8s: a Kubernetes-compatible control plane in one binary, and the same pieces as a library.
//!
//! - [`control_plane`]: starts the apiserver, controller manager and fake kubelets in one process.
//! - [`Sandbox`]: the same for a Rust test, on an ephemeral port, in memory.
//! - [`kubeconfig`], [`datadir`]: the files `minik8s up` writes and locks.
//! - [`crds`]: CustomResourceDefinitions installed from directories (`--crds`, `crds_from_dir`).
//! - [`addons`]: what kind installs beside the control plane (the default StorageClass).

pub mod addons;
pub mod bench;
pub mod cli;
pub mod control_plane;
pub mod crds;
pub mod datadir;
pub mod kubeconfig;
pub mod sandbox;

/// The client-go-style client the components use, re-exported for tests.
pub use client;
pub use k8s_openapi;

pub use control_plane::{ControlPlane, ControlPlaneConfig, Storage};
pub use sandbox::{Sandbox, SandboxBuilder};
