//! A watch's initial events that come after its first ones, a page at a time as the watcher sends
//! them: a watcher holds one page of decoded objects, never the whole collection.
//! - A cached resource's snapshot: the entries the cache held when the watch started (shared,
//!   not copied), each decoded from its text only when its page is sent ([`HeldPages`]).
//! - An uncached resource's snapshot: read from the store a page at a time, all at the first
//!   page's revision ([`StorePages`]).

use std::sync::Arc;

use store::Revision;

use super::entry::Entry;
use super::uncached::StorePages;
use super::{CacheEvent, EventType};

/// Objects decoded for a watcher at once, and keys read from the store per page when nothing
/// bounds the page (upstream's etcd3 storage reads at most 10,000 keys per request; smaller
/// pages keep the transient copies small).
pub(super) const PAGE: usize = 1000;

/// More initial events of a watch, read a page at a time.
#[derive(Debug)]
pub enum InitialPages {
    Held(HeldPages),
    Store(StorePages),
}

impl InitialPages {
    /// The next page's events; `None` once every page was read. An error (an uncached
    /// resource's revision was compacted since its first page) ends the watch: its client
    /// watches again.
    pub async fn next(&mut self) -> Option<Result<Vec<Arc<CacheEvent>>, store::Error>> {
        match self {
            InitialPages::Held(held) => held.next_page().map(Ok),
            InitialPages::Store(pages) => pages.next().await,
        }
    }
}

/// A cached resource's objects at the revision a watch started, decoded as they are sent.
pub struct HeldPages {
    entries: std::vec::IntoIter<(String, Arc<Entry>)>,
    revision: Revision,
}

impl std::fmt::Debug for HeldPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldPages")
            .field("left", &self.entries.len())
            .field("revision", &self.revision)
            .finish()
    }
}

impl HeldPages {
    /// `entries` (key order) as ADDED events at `revision`.
    pub(super) fn new(entries: Vec<(String, Arc<Entry>)>, revision: Revision) -> Self {
        HeldPages {
            entries: entries.into_iter(),
            revision,
        }
    }

    /// The next (up to) [`PAGE`] objects, decoded; `None` once all were given.
    pub(super) fn next_page(&mut self) -> Option<Vec<Arc<CacheEvent>>> {
        if self.entries.len() == 0 {
            return None;
        }
        let revision = self.revision;
        Some(
            self.entries
                .by_ref()
                .take(PAGE)
                .filter_map(|(key, entry)| {
                    let object = entry.object()?;
                    Some(Arc::new(CacheEvent::new(
                        EventType::Added,
                        key,
                        revision,
                        object,
                        None,
                    )))
                })
                .collect(),
        )
    }

    /// Every event left, decoded at once.
    pub(super) fn rest(mut self) -> Vec<Arc<CacheEvent>> {
        let mut all = Vec::with_capacity(self.entries.len());
        while let Some(page) = self.next_page() {
            all.extend(page);
        }
        all
    }
}
