//! The orphaned-pod GC's node quarantine (upstream's `nodeQueue`, a delaying queue named
//! `orphaned_pods_nodes`): a node pods are bound to but the node cache lacks is only checked
//! against the apiserver once it has been missing for the whole quarantine, so a node the
//! informer has not seen yet (a fresh registration, a relist) is not mistaken for a deleted one.
//!
//! Each pass [`admit`](Quarantine::admit)s the nodes it finds missing; an entry already waiting
//! keeps its earlier due time, so the quarantine runs from the first pass that missed the node.
//! [`due`](Quarantine::due) takes every entry whose time has come, once: a node still missing is
//! admitted again by the next pass, with a fresh quarantine. Time is tokio's (paused in tests).
//! Bounded by the number of distinct node names pods are bound to.

use std::time::Duration;

use client::workqueue::WorkQueue;

/// Nodes waiting out their quarantine.
pub struct Quarantine {
    queue: WorkQueue<String>,
    time: Duration,
}

impl Quarantine {
    /// An empty quarantine of `time` (upstream's `quarantineTime`, 40 s).
    pub fn new(time: Duration) -> Self {
        Self {
            queue: WorkQueue::new("orphaned_pods_nodes"),
            time,
        }
    }

    /// Start (or keep) the quarantine of each missing node.
    pub fn admit(&self, missing: impl IntoIterator<Item = String>) {
        for node in missing {
            self.queue.add_after(node, self.time);
        }
    }

    /// The nodes whose quarantine has passed, each taken off the queue.
    pub fn due(&self) -> Vec<String> {
        let mut due = Vec::new();
        while let Some(node) = self.queue.try_get() {
            self.queue.done(&node);
            due.push(node);
        }
        due
    }

    /// Nodes still waiting.
    pub fn len(&self) -> usize {
        self.queue.waiting_len() + self.queue.len()
    }

    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop everything (shutdown).
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Duration = Duration::from_secs(40);
    const PASS: Duration = Duration::from_secs(20);

    fn missing(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_is_due_once_missing_for_the_whole_quarantine() {
        let q = Quarantine::new(Q);
        // Passes every 20 s, the node missing from each: the first one starts the clock.
        q.admit(missing(&["n1"]));
        assert!(q.due().is_empty(), "t=0");
        tokio::time::advance(PASS).await;
        q.admit(missing(&["n1"]));
        assert!(
            q.due().is_empty(),
            "t=20 s: a later admit does not restart the quarantine"
        );
        tokio::time::advance(PASS).await;
        q.admit(missing(&["n1"]));
        assert_eq!(q.due(), ["n1"], "t=40 s");
        assert!(q.due().is_empty(), "taken once");
        // Still missing at the next pass (its GET failed, say): a fresh quarantine.
        tokio::time::advance(PASS).await;
        q.admit(missing(&["n1"]));
        assert!(q.due().is_empty(), "t=60 s");
        tokio::time::advance(Q).await;
        assert_eq!(q.due(), ["n1"], "t=100 s");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn each_node_has_its_own_clock() {
        let q = Quarantine::new(Q);
        q.admit(missing(&["a"]));
        tokio::time::advance(Duration::from_secs(30)).await;
        q.admit(missing(&["a", "b"]));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(q.due(), ["a"]);
        assert_eq!(q.len(), 1, "b waits 30 s more");
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(q.due(), ["b"]);
    }
}
