//! The `Recreate` strategy (upstream `recreate.go`): every old ReplicaSet to zero, wait until their
//! pods are gone, then scale the new one up.

use api::labels::Selector;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::controller::{Inner, Rollout};
use super::progress;
use super::util::*;
use crate::pod_util::{controller_of, phase};
use crate::Result;

impl Inner {
    /// `rolloutRecreate`.
    pub(super) async fn rollout_recreate(
        &self,
        ro: &mut Rollout,
        rss: Vec<ReplicaSet>,
    ) -> Result<()> {
        let (new_rs, mut old) = self.get_all(ro, rss, false).await?;
        let mut scaled = false;
        for rs in old.iter_mut() {
            if rs_replicas(rs) != 0 {
                let (_, w) = self.scale_rs(ro, rs, 0).await?;
                *rs = w;
                scaled = true;
            }
        }
        if scaled || self.old_pods_running(new_rs.as_ref(), &old) {
            return self.sync_status_opt(ro, new_rs.as_ref(), &old).await;
        }
        let new_rs = match new_rs {
            Some(rs) => rs,
            None => {
                let all = old.clone();
                match self.get_all(ro, all, true).await? {
                    (Some(rs), _) => rs,
                    (None, _) => return Ok(()),
                }
            }
        };
        let (_, new_rs) = self.scale_rs(ro, &new_rs, replicas(&ro.d)).await?;
        let stored = ro.d.status.clone().unwrap_or_default();
        if progress::is_complete(&ro.d, &stored) {
            self.cleanup(ro, &old).await?;
        }
        self.sync_rollout_status(ro, &new_rs, &old).await
    }

    /// `oldPodsRunning`: any old RS still reports replicas, or any pod of an old RS is not terminal.
    fn old_pods_running(&self, new_rs: Option<&ReplicaSet>, old: &[ReplicaSet]) -> bool {
        if old
            .iter()
            .any(|r| r.status.as_ref().is_some_and(|s| s.replicas > 0))
        {
            return true;
        }
        let new_uid = new_rs.and_then(|r| r.metadata.uid.clone());
        let old_uids: std::collections::HashSet<String> = old
            .iter()
            .filter_map(|r| r.metadata.uid.clone())
            .filter(|u| Some(u) != new_uid.as_ref())
            .collect();
        let Some(ns) = old.first().and_then(|r| r.metadata.namespace.clone()) else {
            return false;
        };
        self.pods
            .namespace(&ns)
            .list(&Selector::everything())
            .iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid)))
            .any(|p| !matches!(phase(p), "Failed" | "Succeeded"))
    }
}
