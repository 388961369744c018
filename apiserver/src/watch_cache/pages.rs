//! A watch's initial events that come after its first ones, a page at a time as the watcher sends
//! them: a watcher holds one page of decoded objects, never the whole collection.
//! - A cached resource's snapshot: the entries the cache held when the watch started (shared,
//!   not copied), each decoded from its text only when its page is sent ([`HeldPages`]); a
//!   replay of its ring's changes the same way.
//! - An uncached resource's snapshot: read from the store a page at a time, all at the first
//!   page's revision ([`StorePages`]).

use std::sync::Arc;

use super::ring::Change;
use super::uncached::StorePages;
use super::CacheEvent;

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

/// A cached resource's changes for a watcher, decoded as they are sent: the objects held when
/// a watch started (its snapshot), or the ring's changes after the resourceVersion it resumes
/// from (its replay).
pub struct HeldPages {
    changes: std::vec::IntoIter<Change>,
}

impl std::fmt::Debug for HeldPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldPages")
            .field("left", &self.changes.len())
            .finish()
    }
}

impl HeldPages {
    /// `changes`, in the order they are sent.
    pub(super) fn new(changes: Vec<Change>) -> Self {
        HeldPages {
            changes: changes.into_iter(),
        }
    }

    /// The next (up to) [`PAGE`] events, decoded; `None` once all were given.
    pub(super) fn next_page(&mut self) -> Option<Vec<Arc<CacheEvent>>> {
        if self.changes.len() == 0 {
            return None;
        }
        Some(
            self.changes
                .by_ref()
                .take(PAGE)
                .filter_map(|change| change.event().map(Arc::new))
                .collect(),
        )
    }

    /// Every event left, decoded at once.
    pub(super) fn rest(mut self) -> Vec<Arc<CacheEvent>> {
        let mut all = Vec::with_capacity(self.changes.len());
        while let Some(page) = self.next_page() {
            all.extend(page);
        }
        all
    }
}
