//! The dynamic client: objects of any kind as JSON with their group/version/kind, resources
//! resolved through discovery (client-go's `dynamic` client and `restmapper`; kube-rs's
//! `DynamicObject`, `ApiResource` and `Discovery`).
//!
//! * [`DynamicObject`]: `apiVersion`, `kind`, decoded `metadata`, the rest as JSON.
//! * [`Discovery`] / [`RestMapper`]: GVK → [`ApiResource`] (plural, scope, subresources),
//!   rediscovering when a kind is not found (a CRD installed after the mapper last looked).
//! * [`Client::dynamic`](crate::Client::dynamic) gives an [`Api<DynamicObject>`](crate::Api) with
//!   every verb a typed `Api` has (get, list, watch, create, replace, patch, delete, status).
//! * The informer framework is generic over [`Object`](crate::Object), so
//!   [`SharedInformerFactory::dynamic_informer`](crate::SharedInformerFactory::dynamic_informer)
//!   gives a `SharedIndexInformer<DynamicObject>` whose listers, handlers and work queues are the
//!   ones typed controllers use.

pub mod discovery;
pub mod object;

pub use discovery::{ApiGroup, Discovery, GroupVersionResources, RestMapper};
pub use object::DynamicObject;
