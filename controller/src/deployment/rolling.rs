//! The `RollingUpdate` strategy (upstream `rolling.go`): grow the new ReplicaSet within
//! `maxSurge`, shrink the old ones within `maxUnavailable`.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::controller::{Inner, Rollout};
use super::progress;
use super::util::*;
use crate::Result;

impl Inner {
    /// `rolloutRolling`.
    pub(super) async fn rollout_rolling(
        &self,
        ro: &mut Rollout,
        rss: Vec<ReplicaSet>,
    ) -> Result<()> {
        let (new_rs, old) = self.get_all(ro, rss, true).await?;
        let Some(mut new_rs) = new_rs else {
            return Ok(());
        };
        let desired = replicas(&ro.d);
        let mut old = old;
        // reconcileNewReplicaSet.
        let n = rs_replicas(&new_rs);
        // maxSurge bounds the pods, not only the specs: an RS counts with the pods it still has.
        let all_total: i32 = old.iter().map(rs_pods_bound).sum::<i32>() + rs_pods_bound(&new_rs);
        let target = if n > desired {
            desired
        } else {
            new_rs_new_replicas(&ro.d, all_total, n)
        };
        if target != n {
            let (_, w) = self.scale_rs(ro, &new_rs, target).await?;
            new_rs = w;
            return self.sync_rollout_status(ro, &new_rs, &old).await;
        }
        // reconcileOldReplicaSets.
        let (_, max_unavailable) = surge_and_unavailable(&ro.d);
        let view: Vec<OldRs> = old
            .iter()
            .map(|r| OldRs {
                replicas: rs_replicas(r),
                available: rs_available(r),
            })
            .collect();
        let targets = rolling_scale_down(&view, n, rs_available(&new_rs), desired, max_unavailable);
        let mut scaled = false;
        for (rs, to) in old.iter_mut().zip(targets) {
            if to != rs_replicas(rs) {
                let (_, w) = self.scale_rs(ro, rs, to).await?;
                *rs = w;
                scaled = true;
            }
        }
        if !scaled {
            let stored = ro.d.status.clone().unwrap_or_default();
            if progress::is_complete(&ro.d, &stored) {
                self.cleanup(ro, &old).await?;
            }
        }
        self.sync_rollout_status(ro, &new_rs, &old).await
    }
}
