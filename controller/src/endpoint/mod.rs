//! The endpoints controller (kube-controller-manager's `endpoints-controller`, alias `endpoint`;
//! upstream `pkg/controller/endpoint`, 1.33).
//!
//! Each Service is a key. A sync lists the pods its selector matches (from the informer's cache),
//! computes the Endpoints those pods make ([`subsets`]) and writes the Endpoints object named
//! after the Service if it differs ([`object`]). Services without a selector and ExternalName
//! Services are left alone (their Endpoints are the user's); a deleted Service's Endpoints is
//! deleted, and at start every Endpoints is checked once so those left behind while the
//! controller was down go too (leader-election locks excepted).
//!
//! Pod events queue the Services that select the pod, old labels and new (only changes that can
//! move an endpoint count: deletion, readiness, IPs, labels, hostname); Service events queue the
//! Service; deleting an Endpoints queues its Service so it is recreated. After an update the
//! replaced resourceVersion is remembered: a sync that still finds it in the cache retries later
//! rather than act on a stale copy. A key failing 15 times in a row is dropped until it next
//! changes.

pub mod controller;
pub mod object;
pub mod subsets;
#[cfg(test)]
mod tests;

pub use controller::EndpointController;
