//! The store's conversion step for a resource with a webhook converter
//! ([`crate::registry::conversion`]): where upstream's storage codec decodes into the request's
//! version and encodes into the storage version, the store converts here.
//!
//! - Stored objects (any version) → the endpoint's version: [`Store::get`], list pages (one
//!   review per page), the current object a read-modify-write starts from, and every write's
//!   result ([`Store::outcome_to_endpoint_version`]).
//! - The endpoint's version → the storage version: a created object after it was defaulted,
//!   admitted and validated, and each [`Attempt::Write`](super::Attempt::Write) of a
//!   read-modify-write (not for a dry run, which stores nothing: upstream does not encode it).
//!
//! Every step returns at once, without a copy, for resources without a converter: the
//! built-in kinds' reads stay a byte copy of the stored text.

use std::sync::Arc;

use serde_json::Value;

use super::{Current, Outcome, Store, Written};
use crate::error::Result;
use crate::registry::conversion::Batch;
use crate::watch_cache::Listed;

impl Store<'_> {
    /// A stored object in the endpoint's version.
    pub(crate) async fn to_endpoint_version(&self, obj: Arc<Value>) -> Result<Arc<Value>> {
        let Some(converter) = self.resource.converter() else {
            return Ok(obj);
        };
        let api_version = self.resource.info.api_version();
        Ok(converter.convert_one(obj, &api_version).await?)
    }

    /// The stored objects of one response in the endpoint's version, in one review.
    pub(crate) async fn items_to_endpoint_version(
        &self,
        items: Vec<Listed>,
    ) -> Result<Vec<Listed>> {
        let Some(converter) = self.resource.converter() else {
            return Ok(items);
        };
        let api_version = self.resource.info.api_version();
        let objects: Vec<Arc<Value>> = items.iter().filter_map(Listed::object).collect();
        let converted = converter
            .convert(&objects, &api_version, Batch::Items)
            .await?;
        Ok(converted.into_iter().map(Listed::object_of).collect())
    }

    /// An object of the endpoint's version in the storage version, ready to store.
    pub(crate) async fn to_storage_version(&self, obj: Value) -> Result<Value> {
        let Some(converter) = self.resource.converter() else {
            return Ok(obj);
        };
        let storage = converter.storage_api_version().to_string();
        let converted = converter.convert_one(Arc::new(obj), &storage).await?;
        Ok(Arc::unwrap_or_clone(converted))
    }

    /// The current object of a read-modify-write as the request's version sees it; `None`
    /// when it needs no conversion (the stored object is the view).
    pub(crate) async fn view_of(&self, current: Option<&Current>) -> Result<Option<Current>> {
        match current {
            Some(c) if self.resource.converter().is_some() => Ok(Some(Current {
                object: self.to_endpoint_version(c.object.clone()).await?,
                revision: c.revision,
            })),
            _ => Ok(None),
        }
    }

    /// A written object in the endpoint's version (its stored text kept when no conversion
    /// was needed).
    pub(crate) async fn written_to_endpoint_version(&self, written: Written) -> Result<Written> {
        if self.resource.converter().is_none() {
            return Ok(written);
        }
        let object = self.to_endpoint_version(written.object.clone()).await?;
        if Arc::ptr_eq(&object, &written.object) {
            return Ok(written);
        }
        Ok(Written::shared(object))
    }

    /// What a read-modify-write did, with its object in the endpoint's version.
    pub(crate) async fn outcome_to_endpoint_version(&self, outcome: Outcome) -> Result<Outcome> {
        if self.resource.converter().is_none() {
            return Ok(outcome);
        }
        Ok(match outcome {
            Outcome::Stored(w) => Outcome::Stored(self.written_to_endpoint_version(w).await?),
            Outcome::Created(w) => Outcome::Created(self.written_to_endpoint_version(w).await?),
            Outcome::Removed(obj, revision, json) => {
                let shown = self.to_endpoint_version(obj.clone()).await?;
                let json = if Arc::ptr_eq(&shown, &obj) {
                    json
                } else {
                    None
                };
                Outcome::Removed(shown, revision, json)
            }
        })
    }
}
