//! Each simulated node's own identity towards the apiserver.
//!
//! A real kubelet holds a client certificate `CN=system:node:<node>, O=system:nodes`, so the
//! Node authorizer and NodeRestriction admission see which node writes. Here every node has its
//! own [`Client`] for its writes (node registration and status, its Lease, its pods' statuses
//! and deletions, its events), made by [`NodeCredentials`] when the node is created; with no
//! credentials every node writes through the process's client (a plain server, or tests).
//!
//! The reads are shared (one pod informer and one node informer for every simulated node, the
//! point of this crate): they go through the process's client. In a secure control plane that
//! client is itself a node's (any node may list and watch pods and nodes under the bootstrap
//! `system:node` rules this server's Node authorizer applies).
//!
//! Cost: one connection pool (and TLS session) per node instead of one per process.

use std::sync::Arc;

use client::Client;

/// Makes the client node `name` writes with (e.g. a client certificate for
/// `system:node:<name>` in `system:nodes`); an error names what failed.
pub type NodeCredentials = Arc<dyn Fn(&str) -> Result<Client, String> + Send + Sync>;

/// The client of node `name`: its own under `credentials`, else the shared one.
pub(crate) fn node_client(
    credentials: Option<&NodeCredentials>,
    shared: &Client,
    name: &str,
) -> crate::Result<Client> {
    match credentials {
        Some(make) => make(name).map_err(|message| crate::Error::NodeCredentials {
            node: name.to_string(),
            message,
        }),
        None => Ok(shared.clone()),
    }
}
