//! The garbage collector's dependency graph and its decisions (kubernetes `garbagecollector/`).
//!
//! The graph maps every observed object (by UID) to its owner references and, in reverse, every owner
//! UID to the set of its observed dependents. Observing an object change returns the UIDs whose
//! decisions may have changed; the collector re-evaluates exactly those.
//!
//! Decisions, as upstream's `attemptToDeleteItem` / `processDeletingDependentsItem` /
//! `orphanDependents`, are pure functions returning values:
//! * a dependent whose owners are all gone is deleted (Background unless its own finalizers say
//!   otherwise); one with a live owner only loses the references to vanished or foreground-deleting
//!   owners; one whose remaining owners all wait for their dependents is deleted in the foreground if it
//!   has dependents itself;
//! * an owner with the `orphan` finalizer has its reference removed from every dependent, then the
//!   finalizer; an owner with `foregroundDeletion` waits until no dependent blocks it
//!   (`blockOwnerDeletion: true`), then loses the finalizer.
//!
//! An owner the graph has not observed must be verified with a live GET before it is called absent
//! (the cache may lag its dependents); [`OwnerState::Unverified`] makes that explicit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::interned::RecentLists;

/// Finalizer of `propagationPolicy: Orphan`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// Finalizer of `propagationPolicy: Foreground`.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// Identity of an object the collector can act on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectId {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

/// What the graph keeps about one observed object.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphNode {
    /// Who it is.
    pub id: ObjectId,
    /// Its `ownerReferences`, shared with the nodes that carry the same list (every pod of one
    /// ReplicaSet: [`crate::interned`]).
    pub owners: Arc<[OwnerReference]>,
    /// It has a deletionTimestamp.
    pub deleting: bool,
    /// Its finalizers.
    pub finalizers: Vec<String>,
}

/// The owner lists nodes share: the objects observed together (a ReplicaSet's pods, as it
/// creates them) carry a few distinct lists at a time.
static OWNER_LISTS: RecentLists<OwnerReference> = RecentLists::new(16);

impl GraphNode {
    /// Build from an object's metadata; `None` if it has no UID or name.
    pub fn from_meta(api_version: &str, kind: &str, meta: &ObjectMeta) -> Option<Self> {
        Some(Self {
            id: ObjectId {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
                name: meta.name.clone()?,
                uid: meta.uid.clone()?,
            },
            owners: OWNER_LISTS.share(meta.owner_references.as_deref().unwrap_or_default()),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        })
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    /// Being deleted with `foregroundDeletion`: its dependents must go first.
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FINALIZER_FOREGROUND)
    }

    /// Being deleted with `orphan`: its dependents must be released first.
    pub fn orphaning(&self) -> bool {
        self.deleting && self.has_finalizer(FINALIZER_ORPHAN)
    }
}

/// Observed objects and the reverse owner index.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, GraphNode>,
    // owner UID → dependent UIDs; entries removed when empty (bounded by observed objects).
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node for `uid`, if observed.
    pub fn get(&self, uid: &str) -> Option<&GraphNode> {
        self.nodes.get(uid)
    }

    /// Observed dependents of `owner_uid`.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<&GraphNode> {
        self.dependents
            .get(owner_uid)
            .into_iter()
            .flatten()
            .filter_map(|d| self.nodes.get(d))
            .collect()
    }

    /// Whether `owner_uid` has any observed dependent (O(1)).
    pub fn has_dependents(&self, owner_uid: &str) -> bool {
        self.dependents
            .get(owner_uid)
            .is_some_and(|s| !s.is_empty())
    }

    /// Number of observed objects.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// No observed objects.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn unlink(&mut self, node: &GraphNode) {
        for o in node.owners.iter() {
            if let Some(set) = self.dependents.get_mut(&o.uid) {
                set.remove(&node.id.uid);
                if set.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
    }

    /// Record an added or updated object; returns the UIDs to (re)evaluate.
    pub fn observe(&mut self, node: GraphNode) -> Vec<String> {
        if self.nodes.get(&node.id.uid) == Some(&node) {
            // Nothing a decision reads changed (owners, deletion, finalizers): as upstream's
            // `processGraphChanges`, such an update is no work. Without this, every status write
            // of an RC re-queued all of its pods, and every pod write its RC.
            return Vec::new();
        }
        let uid = node.id.uid.clone();
        let mut dirty = HashSet::new();
        if let Some(old) = self.nodes.get(&uid).cloned() {
            self.unlink(&old);
            // Owners it no longer references may be waiting on it.
            for o in old.owners.iter() {
                dirty.insert(o.uid.clone());
            }
        }
        for o in node.owners.iter() {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
            dirty.insert(o.uid.clone());
        }
        if node.deleting_dependents() || node.orphaning() || !node.deleting {
            dirty.extend(self.dependents.get(&uid).into_iter().flatten().cloned());
        }
        dirty.insert(uid.clone());
        self.nodes.insert(uid, node);
        dirty.retain(|u| self.nodes.contains_key(u) || self.dependents.contains_key(u));
        dirty.into_iter().collect()
    }

    /// Record a deletion; returns the UIDs to (re)evaluate (its dependents and its owners).
    pub fn forget(&mut self, uid: &str) -> Vec<String> {
        let Some(old) = self.nodes.remove(uid) else {
            return Vec::new();
        };
        self.unlink(&old);
        let mut dirty: HashSet<String> = old.owners.iter().map(|o| o.uid.clone()).collect();
        dirty.extend(self.dependents.get(uid).into_iter().flatten().cloned());
        dirty.retain(|u| self.nodes.contains_key(u));
        dirty.into_iter().collect()
    }
}

/// What the collector knows about one owner reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// Exists with the referenced UID and is not waiting for its dependents.
    Solid,
    /// Exists and is being deleted in the foreground.
    WaitingForDependents,
    /// Does not exist (or exists with another UID).
    Absent,
    /// Not in the graph and not verified yet: the caller must GET it live first.
    Unverified,
}

/// The state of `r` as far as the graph knows.
pub fn owner_state_in_graph(graph: &Graph, r: &OwnerReference) -> OwnerState {
    match graph.get(&r.uid) {
        Some(o) if o.deleting_dependents() => OwnerState::WaitingForDependents,
        Some(_) => OwnerState::Solid,
        None => OwnerState::Unverified,
    }
}

/// A deletion propagation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete now, dependents later.
    Background,
    /// Dependents first.
    Foreground,
    /// Release dependents first.
    Orphan,
}

impl Propagation {
    /// The `propagationPolicy` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Background => "Background",
            Self::Foreground => "Foreground",
            Self::Orphan => "Orphan",
        }
    }
}

/// What to do with a dependent.
#[derive(Debug, Clone, PartialEq)]
pub enum DependentDecision {
    /// Leave it.
    Keep,
    /// Some owner is unverified: GET these owners and decide again.
    Verify(Vec<OwnerReference>),
    /// Remove the owner references with these UIDs (a live owner remains).
    RemoveOwnerRefs(Vec<String>),
    /// Delete it with this policy (UID precondition).
    Delete(Propagation),
}

/// `attemptToDeleteItem` for one dependent; `state` classifies each of its owner references.
pub fn decide_dependent(
    item: &GraphNode,
    has_dependents: bool,
    state: impl Fn(&OwnerReference) -> OwnerState,
) -> DependentDecision {
    if item.owners.is_empty() || (item.deleting && !item.deleting_dependents()) {
        return DependentDecision::Keep;
    }
    let mut solid = 0;
    let mut dangling = Vec::new();
    let mut waiting = Vec::new();
    let mut unverified = Vec::new();
    for r in item.owners.iter() {
        match state(r) {
            OwnerState::Solid => solid += 1,
            OwnerState::Absent => dangling.push(r.uid.clone()),
            OwnerState::WaitingForDependents => waiting.push(r.uid.clone()),
            OwnerState::Unverified => unverified.push(r.clone()),
        }
    }
    if !unverified.is_empty() {
        return DependentDecision::Verify(unverified);
    }
    if solid > 0 {
        if dangling.is_empty() && waiting.is_empty() {
            return DependentDecision::Keep;
        }
        dangling.extend(waiting);
        return DependentDecision::RemoveOwnerRefs(dangling);
    }
    if item.deleting {
        // Already deleting its own dependents in the foreground: nothing more to do here.
        return DependentDecision::Keep;
    }
    if !waiting.is_empty() && has_dependents {
        return DependentDecision::Delete(Propagation::Foreground);
    }
    let policy = if item.has_finalizer(FINALIZER_ORPHAN) {
        Propagation::Orphan
    } else if item.has_finalizer(FINALIZER_FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    DependentDecision::Delete(policy)
}

/// What to do with an owner that is being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerDecision {
    /// Not a GC-managed deletion.
    Nothing,
    /// Remove this owner's reference from these dependents, then the `orphan` finalizer.
    Orphan(Vec<ObjectId>),
    /// Dependents still block it: evaluate these (they will be deleted).
    AwaitDependents(Vec<String>),
    /// No dependent blocks it any more: remove this finalizer.
    RemoveFinalizer(&'static str),
}

/// Decide for an owner being deleted (`orphan` first, as upstream processes it first).
pub fn decide_owner(owner: &GraphNode, dependents: &[&GraphNode]) -> OwnerDecision {
    if owner.orphaning() {
        let refs: Vec<ObjectId> = dependents
            .iter()
            .filter(|d| d.owners.iter().any(|o| o.uid == owner.id.uid))
            .map(|d| d.id.clone())
            .collect();
        return if refs.is_empty() {
            OwnerDecision::RemoveFinalizer(FINALIZER_ORPHAN)
        } else {
            OwnerDecision::Orphan(refs)
        };
    }
    if owner.deleting_dependents() {
        let blocking = dependents.iter().any(|d| {
            d.owners
                .iter()
                .any(|o| o.uid == owner.id.uid && o.block_owner_deletion == Some(true))
        });
        if !blocking {
            return OwnerDecision::RemoveFinalizer(FINALIZER_FOREGROUND);
        }
        let pending = dependents
            .iter()
            .filter(|d| !d.deleting || d.deleting_dependents())
            .map(|d| d.id.uid.clone())
            .collect();
        return OwnerDecision::AwaitDependents(pending);
    }
    OwnerDecision::Nothing
}

/// Strategic-merge patch removing the owner references with `owner_uids`, only if the object UID is
/// still `uid` (`deleteOwnerRefStrategicMergePatch`).
pub fn remove_owner_refs_patch(uid: &str, owner_uids: &[String]) -> serde_json::Value {
    let refs: Vec<serde_json::Value> = owner_uids
        .iter()
        .map(|u| serde_json::json!({"$patch": "delete", "uid": u}))
        .collect();
    serde_json::json!({"metadata": {"ownerReferences": refs, "uid": uid}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oref(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ReplicationController".into(),
            name: format!("name-{uid}"),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        }
    }

    fn gnode(
        uid: &str,
        owners: Vec<OwnerReference>,
        deleting: bool,
        finalizers: &[&str],
    ) -> GraphNode {
        GraphNode {
            id: ObjectId {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: uid.into(),
                uid: uid.into(),
            },
            owners: owners.into(),
            deleting,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The pods of one owner hold one owner list.
    #[test]
    fn nodes_with_equal_owners_share_the_list() {
        let meta = |name: &str| ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            owner_references: Some(vec![oref("rc", true)]),
            ..Default::default()
        };
        let a = GraphNode::from_meta("v1", "Pod", &meta("a")).unwrap();
        let b = GraphNode::from_meta("v1", "Pod", &meta("b")).unwrap();
        assert!(Arc::ptr_eq(&a.owners, &b.owners));
        assert_eq!(*a.owners, [oref("rc", true)]);
        let mut other = meta("c");
        other.owner_references = Some(vec![oref("rs", true)]);
        let c = GraphNode::from_meta("v1", "Pod", &other).unwrap();
        assert!(!Arc::ptr_eq(&a.owners, &c.owners));
    }

    #[test]
    fn graph_tracks_dependents_and_reports_dirty_uids() {
        let mut g = Graph::new();
        g.observe(gnode("rc", vec![], false, &[]));
        let dirty = g.observe(gnode("p1", vec![oref("rc", true)], false, &[]));
        assert!(dirty.contains(&"rc".to_string()) && dirty.contains(&"p1".to_string()));
        g.observe(gnode("p2", vec![oref("rc", true)], false, &[]));
        assert_eq!(g.dependents_of("rc").len(), 2);
        // Owner deleted: both dependents must be re-evaluated.
        let mut d = g.forget("rc");
        d.sort();
        assert_eq!(d, ["p1", "p2"]);
        // Dependent loses its owner ref: index cleaned.
        g.observe(gnode("p1", vec![], false, &[]));
        assert_eq!(g.dependents_of("rc").len(), 1);
        g.forget("p2");
        assert!(g.dependents_of("rc").is_empty());
    }

    #[test]
    fn an_unchanged_observation_is_no_work() {
        let mut g = Graph::new();
        g.observe(gnode("rc", vec![], false, &[]));
        g.observe(gnode("p1", vec![oref("rc", true)], false, &[]));
        // A status write of either: same owners, deletion state and finalizers.
        assert!(g.observe(gnode("rc", vec![], false, &[])).is_empty());
        assert!(g
            .observe(gnode("p1", vec![oref("rc", true)], false, &[]))
            .is_empty());
        // A change a decision reads is still reported.
        let mut d = g.observe(gnode("rc", vec![], true, &["orphan"]));
        d.sort();
        assert_eq!(d, ["p1", "rc"]);
    }

    #[test]
    fn dependent_of_vanished_owner_is_deleted_background() {
        let item = gnode("p", vec![oref("rc", true)], false, &[]);
        assert_eq!(
            decide_dependent(&item, false, |_| OwnerState::Absent),
            DependentDecision::Delete(Propagation::Background)
        );
        assert_eq!(
            decide_dependent(&item, false, |_| OwnerState::Unverified),
            DependentDecision::Verify(vec![oref("rc", true)])
        );
        let orphaner = gnode("p", vec![oref("rc", true)], false, &[FINALIZER_ORPHAN]);
        assert_eq!(
            decide_dependent(&orphaner, false, |_| OwnerState::Absent),
            DependentDecision::Delete(Propagation::Orphan)
        );
    }

    #[test]
    fn live_owner_keeps_dependent_but_drops_dangling_refs() {
        let item = gnode("p", vec![oref("a", true), oref("b", false)], false, &[]);
        let st = |r: &OwnerReference| {
            if r.uid == "a" {
                OwnerState::Solid
            } else {
                OwnerState::Absent
            }
        };
        assert_eq!(
            decide_dependent(&item, false, st),
            DependentDecision::RemoveOwnerRefs(vec!["b".into()])
        );
        assert_eq!(
            decide_dependent(&item, false, |_| OwnerState::Solid),
            DependentDecision::Keep
        );
    }

    #[test]
    fn foreground_owner_deletes_dependents_recursively() {
        let mid = gnode("rs", vec![oref("dep", true)], false, &[]);
        assert_eq!(
            decide_dependent(&mid, true, |_| OwnerState::WaitingForDependents),
            DependentDecision::Delete(Propagation::Foreground)
        );
        assert_eq!(
            decide_dependent(&mid, false, |_| OwnerState::WaitingForDependents),
            DependentDecision::Delete(Propagation::Background)
        );
        let terminating = gnode("p", vec![oref("rc", true)], true, &[]);
        assert_eq!(
            decide_dependent(&terminating, false, |_| OwnerState::Absent),
            DependentDecision::Keep
        );
    }

    #[test]
    fn owner_decisions_orphan_and_foreground() {
        let orphaning = gnode("rc", vec![], true, &[FINALIZER_ORPHAN]);
        let p1 = gnode("p1", vec![oref("rc", true)], false, &[]);
        assert_eq!(
            decide_owner(&orphaning, &[&p1]),
            OwnerDecision::Orphan(vec![p1.id.clone()])
        );
        assert_eq!(
            decide_owner(&orphaning, &[]),
            OwnerDecision::RemoveFinalizer(FINALIZER_ORPHAN)
        );

        let fg = gnode("rc", vec![], true, &[FINALIZER_FOREGROUND]);
        let nonblocking = gnode("p2", vec![oref("rc", false)], false, &[]);
        assert_eq!(
            decide_owner(&fg, &[&p1]),
            OwnerDecision::AwaitDependents(vec!["p1".into()])
        );
        assert_eq!(
            decide_owner(&fg, &[&nonblocking]),
            OwnerDecision::RemoveFinalizer(FINALIZER_FOREGROUND)
        );
        let p1_terminating = gnode("p1", vec![oref("rc", true)], true, &[]);
        assert_eq!(
            decide_owner(&fg, &[&p1_terminating]),
            OwnerDecision::AwaitDependents(vec![]),
            "a terminating blocker still blocks until it is gone"
        );
        let live = gnode("rc", vec![], false, &[]);
        assert_eq!(decide_owner(&live, &[&p1]), OwnerDecision::Nothing);
    }

    #[test]
    fn owner_state_from_graph() {
        let mut g = Graph::new();
        g.observe(gnode("rc", vec![], true, &[FINALIZER_FOREGROUND]));
        g.observe(gnode("rs", vec![], false, &[]));
        assert_eq!(
            owner_state_in_graph(&g, &oref("rc", true)),
            OwnerState::WaitingForDependents
        );
        assert_eq!(
            owner_state_in_graph(&g, &oref("rs", true)),
            OwnerState::Solid
        );
        assert_eq!(
            owner_state_in_graph(&g, &oref("zz", true)),
            OwnerState::Unverified
        );
    }
}
