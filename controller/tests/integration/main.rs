//! The controller integration tests, one binary (each test starts its own apiserver on
//! 127.0.0.1:0; see `common`). One binary rather than one per file: each links the whole
//! workspace, and seven of them took 1.3 GB of a CI machine's disk.

mod common;

mod convergence;
mod deployment;
mod disruption;
mod gc_namespace;
mod podgc;
mod replication;
mod scheduling_nodes;
