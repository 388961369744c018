//! The Kubernetes API vocabulary shared by the apiserver and its clients.
//!
//! This crate knows neither HTTP nor the store. It provides:
//! * descriptions of served resources ([`ResourceInfo`]: group, version, kind, plural, scope, short
//!   names, verbs, subresources, storage segment) and the built-in ones ([`resources::builtin`]), which
//!   the apiserver's runtime resource registry serves;
//! * label and field selectors ([`labels`], [`fields`]) with apimachinery's grammar;
//! * CronJob schedules ([`cron`]): parsed as kube-apiserver parses them, next activations as the
//!   CronJob controller computes them;
//! * resource quantities as exact numbers ([`quantity`]) and a pod's QoS class ([`qos`]);
//! * resource quota arithmetic and usage evaluators ([`quota`]), shared by admission and the controller;
//! * name, label and object-meta validation with apimachinery's exact messages ([`validation`]);
//! * builders for error `Status` objects with the exact reasons, codes and messages of the apiserver
//!   ([`status`]);
//! * Kubernetes' wire order of every type's fields, and putting JSON objects into it ([`wire`]);
//! * helpers over JSON objects' `metadata` ([`meta`]) and kubectl's human durations ([`duration_short`]).
//!
//! Guarantees: nothing here panics on any input (parsers return errors as values).

pub use k8s_openapi;

pub mod cron;
pub mod duration;
pub mod fields;
pub mod labels;
pub mod meta;
pub mod qos;
pub mod quantity;
pub mod quota;
pub mod resources;
pub mod status;
pub mod taints;
pub mod validation;
pub mod wire;

pub use duration::{duration_short, human_duration_since};
pub use resources::{ResourceInfo, Subresource};
