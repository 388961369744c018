//! The requests of a StatefulSet sync (upstream `stateful_pod_control.go`): pods and their
//! claims, each recorded as an event on the set with upstream's reasons and messages
//! (`SuccessfulCreate` "create Pod web-0 in StatefulSet web successful", "create Claim
//! www-web-0 Pod web-0 in StatefulSet web success", `FailedCreate` "… failed error: …").
//!
//! Claims are created before their pod and never waited for (binding is the volume binder's
//! business); their owner references follow the retention policy ([`super::retention`]) once
//! the pod exists. Reads come from the informer caches; a pod update retries conflicts with a
//! fresh copy from the cache, as `retry.RetryOnConflict(retry.DefaultBackoff, …)` (4 tries).

use std::sync::Arc;

use client::record::EventType;
use client::{Api, DeleteParams};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};

use super::controller::Inner;
use super::identity::{
    claims_for, identity_matches, ordinal, storage_matches, update_identity, update_storage,
};
use super::retention::{
    has_unexpected_controller, is_claim_owner_up_to_date, update_claim_owner_refs,
};
use crate::cached_pod::CachedPod;
use crate::{Error, Result};

/// Tries of a pod update on conflict (`retry.DefaultBackoff.Steps`).
const UPDATE_TRIES: usize = 4;

fn name(o: &Option<String>) -> &str {
    o.as_deref().unwrap_or_default()
}

/// The event's object reference for a set.
pub(super) fn set_ref(set: &StatefulSet) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("StatefulSet".into()),
        namespace: set.metadata.namespace.clone(),
        name: set.metadata.name.clone(),
        uid: set.metadata.uid.clone(),
        resource_version: set.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// `strings.Title(verb)`.
fn title(verb: &str) -> String {
    let mut c = verb.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn err_text(e: &Error) -> String {
    match e {
        Error::Api { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

impl Inner {
    /// `recordPodEvent`.
    pub(super) fn pod_event(
        &self,
        verb: &str,
        set: &StatefulSet,
        pod: &CachedPod,
        err: Option<&Error>,
    ) {
        let (pod_name, set_name) = (name(&pod.metadata.name), name(&set.metadata.name));
        let (type_, reason, message) = match err {
            None => (
                EventType::Normal,
                format!("Successful{}", title(verb)),
                format!("{verb} Pod {pod_name} in StatefulSet {set_name} successful"),
            ),
            Some(e) => (
                EventType::Warning,
                format!("Failed{}", title(verb)),
                format!(
                    "{verb} Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                    err_text(e)
                ),
            ),
        };
        self.recorder.event(&set_ref(set), type_, &reason, &message);
    }

    /// `recordClaimEvent`.
    fn claim_event(&self, set: &StatefulSet, pod: &CachedPod, claim: &str, err: Option<&Error>) {
        let (pod_name, set_name) = (name(&pod.metadata.name), name(&set.metadata.name));
        let (type_, reason, message) = match err {
            None => (
                EventType::Normal,
                "SuccessfulCreate".to_string(),
                format!("create Claim {claim} Pod {pod_name} in StatefulSet {set_name} success"),
            ),
            Some(e) => (
                EventType::Warning,
                "FailedCreate".to_string(),
                format!(
                    "create Claim {claim} for Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                    err_text(e)
                ),
            ),
        };
        self.recorder.event(&set_ref(set), type_, &reason, &message);
    }

    fn claim(&self, ns: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.namespace(ns).get(name)
    }

    /// `createPersistentVolumeClaims`: create the pod's missing claims.
    async fn create_claims(&self, set: &StatefulSet, pod: &CachedPod) -> Result<()> {
        let ns = name(&set.metadata.namespace);
        let api: Api<PersistentVolumeClaim> = self.client.api(Some(ns));
        let mut failed: Vec<String> = Vec::new();
        for (_, claim) in claims_for(set, ordinal(pod)) {
            let cname = name(&claim.metadata.name).to_string();
            match self.claim(ns, &cname) {
                None => match api.create(&claim).await {
                    Ok(_) => self.claim_event(set, pod, &cname, None),
                    Err(e) if e.is_already_exists() => {
                        failed.push(format!("failed to create PVC {cname}: {e}"));
                    }
                    Err(e) => {
                        failed.push(format!("failed to create PVC {cname}: {e}"));
                        let e = Error::api("create claim", e);
                        self.claim_event(set, pod, &cname, Some(&e));
                    }
                },
                Some(found) if found.metadata.deletion_timestamp.is_some() => {
                    failed.push(format!("pvc {cname} is being deleted"));
                }
                Some(_) => {}
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::Claim(failed.join(", ")))
        }
    }

    /// `UpdatePodClaimForRetentionPolicy`: give the pod's existing claims the owners the policy
    /// wants.
    async fn fix_claim_owners(&self, set: &StatefulSet, pod: &CachedPod) -> Result<()> {
        let ns = name(&set.metadata.namespace);
        let api: Api<PersistentVolumeClaim> = self.client.api(Some(ns));
        for (_, wanted) in claims_for(set, ordinal(pod)) {
            let cname = name(&wanted.metadata.name).to_string();
            let Some(found) = self.claim(ns, &cname) else {
                continue; // picked up next time
            };
            if has_unexpected_controller(&found, set, pod) {
                let msg = format!("PersistentVolumeClaim {cname} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim");
                self.recorder.event(
                    &set_ref(set),
                    EventType::Warning,
                    "ConflictingController",
                    &msg,
                );
            }
            if !is_claim_owner_up_to_date(&found, set, pod) {
                let mut claim = (*found).clone();
                update_claim_owner_refs(&mut claim, set, pod);
                api.replace(&cname, &claim)
                    .await
                    .map_err(|e| Error::api("update claim for delete policy ownerRefs", e))?;
            }
        }
        Ok(())
    }

    /// `CreateStatefulPod`: claims, pod, claims' owners. `whole` is sent; the claims and events
    /// read `pod`, its cached view.
    pub(super) async fn create_pod(
        &self,
        set: &StatefulSet,
        whole: &Pod,
        pod: &CachedPod,
    ) -> Result<()> {
        if let Err(e) = self.create_claims(set, pod).await {
            self.pod_event("create", set, pod, Some(&e));
            return Err(e);
        }
        let api: Api<Pod> = self.client.api(pod.metadata.namespace.as_deref());
        let created = match api.create(whole).await {
            Ok(p) => CachedPod::from(p),
            Err(e) if e.is_already_exists() => return Err(Error::api("create pod", e)),
            Err(e) => {
                let e = Error::api("create pod", e);
                self.pod_event("create", set, pod, Some(&e));
                return Err(e);
            }
        };
        if let Err(e) = self.fix_claim_owners(set, &created).await {
            self.pod_event("update", set, pod, Some(&e));
            return Err(e);
        }
        self.pod_event("create", set, pod, None);
        Ok(())
    }

    /// `createMissingPersistentVolumeClaims`, for a pending pod.
    pub(super) async fn create_missing_claims(
        &self,
        set: &StatefulSet,
        pod: &CachedPod,
    ) -> Result<()> {
        self.create_claims(set, pod).await?;
        if let Err(e) = self.fix_claim_owners(set, pod).await {
            self.pod_event("update", set, pod, Some(&e));
            return Err(e);
        }
        Ok(())
    }

    /// `UpdateStatefulPod`: restore identity and storage, fix the claims' owners, write the pod.
    pub(super) async fn update_pod(&self, set: &StatefulSet, pod: &CachedPod) -> Result<()> {
        let ns = name(&set.metadata.namespace);
        let api: Api<Pod> = self.client.api(Some(ns));
        let mut pod = pod.clone();
        let mut attempted = false;
        let mut result = Ok(());
        for _ in 0..UPDATE_TRIES {
            // The cached pod is only read: its repair is made to the stored one below (the name,
            // ordinal and UID the claims read stay as they are).
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                consistent = false;
                if let Err(e) = self.create_claims(set, &pod).await {
                    self.pod_event("update", set, &pod, Some(&e));
                    return Err(e);
                }
            }
            let claims_ok = claims_for(set, ordinal(&pod)).iter().all(|(_, c)| {
                self.claim(ns, name(&c.metadata.name))
                    .is_none_or(|found| is_claim_owner_up_to_date(&found, set, &pod))
            });
            if !claims_ok {
                if let Err(e) = self.fix_claim_owners(set, &pod).await {
                    self.pod_event("update", set, &pod, Some(&e));
                    return Err(e);
                }
                consistent = false;
            }
            if consistent {
                return Ok(());
            }
            // The write is the whole pod, as upstream's: the stored one, since the informer's copy
            // holds only what the controllers read (`CachedPod`), with the repair made to it.
            let mut stored = match api.get(name(&pod.metadata.name)).await {
                Ok(stored) => stored,
                Err(e) => {
                    result = Err(Error::api("update pod", e));
                    break;
                }
            };
            if stored.metadata.uid != pod.metadata.uid {
                // Another pod of that name: the informer brings it, and a later sync decides.
                break;
            }
            let seen = CachedPod::from(stored.clone());
            if !identity_matches(set, &seen) {
                update_identity(set, &mut stored);
            }
            if !storage_matches(set, &seen) {
                update_storage(set, &mut stored);
            }
            attempted = true;
            match api.replace(name(&pod.metadata.name), &stored).await {
                Ok(_) => {
                    result = Ok(());
                    break;
                }
                Err(e) => {
                    let conflict = e.is_conflict();
                    result = Err(Error::api("update pod", e));
                    if !conflict {
                        break;
                    }
                    if let Some(fresh) = self.pods.namespace(ns).get(name(&pod.metadata.name)) {
                        pod = (*fresh).clone();
                    }
                }
            }
        }
        if attempted {
            self.pod_event("update", set, &pod, result.as_ref().err());
        }
        result
    }

    /// `UpdatePodClaimForRetentionPolicy` for a condemned pod.
    pub(super) async fn fix_condemned_claims(
        &self,
        set: &StatefulSet,
        pod: &CachedPod,
    ) -> Result<()> {
        self.fix_claim_owners(set, pod).await
    }

    /// `DeleteStatefulPod`. `Ok(false)` when the pod was already gone.
    pub(super) async fn delete_pod(&self, set: &StatefulSet, pod: &CachedPod) -> Result<bool> {
        let api: Api<Pod> = self.client.api(pod.metadata.namespace.as_deref());
        match api
            .delete(name(&pod.metadata.name), &DeleteParams::default())
            .await
        {
            Ok(()) => {
                self.pod_event("delete", set, pod, None);
                Ok(true)
            }
            Err(e) => {
                let gone = e.is_not_found();
                let e = Error::api("delete pod", e);
                self.pod_event("delete", set, pod, Some(&e));
                if gone {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }
}
