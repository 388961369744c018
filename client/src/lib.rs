//! `client`: what client-go is to Kubernetes controllers, in Rust.
//!
//! It speaks plain Kubernetes HTTP/JSON to any apiserver and knows nothing of this project's
//! apiserver internals. The pieces follow client-go's architecture and vocabulary
//! (`/work/shared/spec/informer.md` §1–§5, §7):
//!
//! * [`rest`]: `Config`, `Client`, typed `Api<K>` (get/list/watch/create/replace/patch/delete),
//!   errors classified from `Status`, client-side token bucket, bounded retries.
//! * [`dynamic`]: `DynamicObject`, discovery and the `RestMapper`; `Client::dynamic` gives an
//!   `Api<DynamicObject>` for any resource (custom resources included), and every piece below
//!   works over dynamic objects as over typed ones.
//! * [`reflector`] → [`delta_fifo`] → [`indexer`] + [`processor`] listeners = [`shared_informer`];
//!   [`factory`] shares one informer per type; [`lister`] reads the cache.
//! * [`workqueue`]: dirty/processing queue, delaying queue, rate limiters, rate-limiting queue.
//! * [`runner`]: a controller's run loop, written once: wait for the caches, N workers off the
//!   work queue (or one periodic pass), drain on shutdown.
//! * [`record`]: event broadcaster/recorder with client-go's correlator.
//! * [`leaderelection`]: Lease-based leader election.
//! * [`testing`]: an in-process `ListerWatcher` with controllable resourceVersions, 410s and
//!   disconnects, for tests of anything built on informers.
//!
//! The canonical controller wiring (client-go style):
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use client::{Action, Client, Config, FnHandler, RateLimitingQueue, Runner, SharedInformerFactory};
//! use k8s_openapi::api::core::v1::Pod;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example() -> client::Result<()> {
//! let client = Client::new(Config::new("http://127.0.0.1:6443"))?;
//! let factory = SharedInformerFactory::new(client, Duration::ZERO);
//! let pods = factory.informer::<Pod>();
//! let queue = RateLimitingQueue::<String>::with_default_controller_rate_limiter("pods");
//! let q = queue.clone();
//! pods.add_event_handler(FnHandler::new().on_add(move |p: &Arc<Pod>, _| {
//!     q.add(client::meta_namespace_key(p.as_ref()))
//! }));
//! let shutdown = CancellationToken::new();
//! factory.start(shutdown.clone());
//! let lister = pods.lister();
//! // Waits for the cache, runs 2 workers until `shutdown`, then drains the queue.
//! Runner::new("pods")
//!     .workers(2)
//!     .run_workers(queue, &[&pods], &shutdown, move |key: String| {
//!         let _cached = lister.get(&key); // reconcile from the cache
//!         // Ok: forget the key's failures; Err: requeue it with back-off.
//!         async move { Ok::<_, client::Error>(Action::AwaitChange) }
//!     })
//!     .await;
//! # Ok(())
//! # }
//! ```
#![allow(clippy::result_large_err)]

pub mod delta_fifo;
pub mod dynamic;
pub mod error;
pub mod factory;
pub mod flowcontrol;
pub mod indexer;
pub mod leaderelection;
pub mod list_watch;
pub mod lister;
pub mod object;
pub mod processor;
pub mod record;
pub mod reflector;
pub mod rest;
pub mod runner;
pub mod shared_informer;
pub mod testing;
pub mod transform;
pub mod workqueue;

pub use delta_fifo::{
    DeletedFinalStateUnknown, DeletedObject, Delta, DeltaFifo, DeltaType, KnownObjects,
    ReflectorStore,
};
pub use dynamic::{DynamicObject, RestMapper};
pub use error::{Error, Result};
pub use factory::SharedInformerFactory;
pub use indexer::{
    controller_uid_index_func, key_of_meta, meta_namespace_key, namespace_index_func,
    split_meta_namespace_key, IndexFunc, Indexer, Indexers, CONTROLLER_UID_INDEX, NAMESPACE_INDEX,
};
pub use leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};
pub use list_watch::ListerWatcher;
pub use lister::{Lister, NamespaceLister};
pub use object::Object;
pub use processor::{FilteringHandler, FnHandler, HandlerRegistration, ResourceEventHandler};
pub use record::{EventBroadcaster, EventRecorder, EventType};
pub use reflector::Reflector;
pub use rest::{
    Api, ApiObject, ApiResource, Client, Config, DeleteParams, GroupVersionKind, ListParams,
    ObjectList, Patch, Preconditions, PropagationPolicy, Resource, WatchEvent, WatchStream,
};
pub use runner::{Action, Runner, Stopped};
pub use shared_informer::{wait_for_cache_sync, HasSynced, SharedIndexInformer};
pub use workqueue::{QueueMetrics, RateLimiter, RateLimitingQueue, WorkQueue};
