//! The client's integration tests, one binary: each file is a module and reads as it did (a
//! binary per file linked the client and its dependencies nine times). Run one file's tests
//! with `cargo test -p client --test integration <file>::`.

mod common;

mod apiserver;
mod discovery;
mod events;
mod informer;
mod informer_http;
mod leader_election;
mod reflector;
mod rest;
mod send_futures;
