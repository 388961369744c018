//! Scale-up and scale-down mechanics (informer.md §6.6, §6.10).
//!
//! * [`BURST_REPLICAS`]: at most 500 creates or deletes per sync.
//! * [`slow_start_batch`]: creates run in batches of 1, 2, 4, … (each batch concurrently) and stop at the
//!   first batch with a failure, so a failing create (quota, admission) costs one request, not hundreds.
//! * [`pod_from_template`]: the pod a controller creates: template labels/annotations/finalizers/spec,
//!   `generateName: <owner>-`, one controller ownerReference.

use std::future::Future;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::{Error, Result};

/// `BurstReplicas` (kubernetes `pkg/controller/replicaset/replica_set.go`).
pub const BURST_REPLICAS: usize = 500;

/// `SlowStartInitialBatchSize` (kubernetes `pkg/controller/controller_utils.go`).
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// Run `count` calls of `f` in growing batches; returns the number of successes and the first error of
/// the first failing batch (later batches are not attempted).
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial: usize,
    mut f: F,
) -> (usize, Option<E>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = initial.max(1).min(remaining);
    while batch > 0 {
        let results = join_all((0..batch).map(|_| f())).await;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(()) => successes += 1,
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        if first_err.is_some() {
            return (successes, first_err);
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    (successes, None)
}

/// The batch sizes [`slow_start_batch`] uses for `count` (for logs and tests): 10 → [1, 2, 4, 3].
pub fn batch_sizes(count: usize, initial: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut remaining = count;
    let mut batch = initial.max(1).min(remaining);
    while batch > 0 {
        out.push(batch);
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    out
}

/// `generateName` for pods of `owner_name`: `<owner>-` (`getPodsPrefix`), without the dash if it would
/// not be a valid name prefix.
pub fn generate_name_prefix(owner_name: &str) -> String {
    let prefix = format!("{owner_name}-");
    let valid = prefix.len() <= 253
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if valid {
        prefix
    } else {
        owner_name.to_string()
    }
}

/// The pod to create for an owner (`GetPodFromTemplate`). Template labels must be non-empty.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    owner_name: &str,
    controller_ref: OwnerReference,
) -> Result<Pod> {
    let tmeta = template.metadata.clone().unwrap_or_default();
    let labels = tmeta
        .labels
        .filter(|l| !l.is_empty())
        .ok_or(Error::NoTemplateLabels)?;
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name_prefix(owner_name)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![controller_ref]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::claim::controller_ref;
    use k8s_openapi::api::core::v1::PodSpec;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn batches_double_and_cap_at_remaining() {
        assert_eq!(batch_sizes(10, 1), [1, 2, 4, 3]);
        assert_eq!(batch_sizes(1, 1), [1]);
        assert_eq!(batch_sizes(0, 1), Vec::<usize>::new());
        assert_eq!(batch_sizes(500, 1), [1, 2, 4, 8, 16, 32, 64, 128, 245]);
    }

    #[tokio::test]
    async fn slow_start_stops_at_first_failing_batch() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        // Calls 1..=3 succeed (batches 1 and 2), call 5 fails inside batch 3 (calls 4..=7).
        let (ok, err) = slow_start_batch(10, 1, move || {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n == 5 {
                    Err("quota")
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            7,
            "the failing batch runs whole, the next never"
        );
        assert_eq!(ok, 6);
        assert_eq!(err, Some("quota"));
    }

    #[tokio::test]
    async fn slow_start_all_succeed() {
        let (ok, err) = slow_start_batch(37, 1, || async { Ok::<(), ()>(()) }).await;
        assert_eq!((ok, err), (37, None));
    }

    #[test]
    fn pod_from_template_copies_and_owns() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                annotations: Some([("a".to_string(), "b".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Default::default()],
                ..Default::default()
            }),
        };
        let r = controller_ref("v1", "ReplicationController", "web", "u1");
        let pod = pod_from_template(&template, "ns", "web", r.clone());
        let Ok(pod) = pod else {
            panic!("template with labels must build");
        };
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pod.metadata.owner_references, Some(vec![r.clone()]));
        assert_eq!(
            pod.metadata.annotations,
            template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone())
        );
        assert_eq!(pod.spec, template.spec);
        let no_labels = PodTemplateSpec::default();
        assert!(matches!(
            pod_from_template(&no_labels, "ns", "web", r),
            Err(Error::NoTemplateLabels)
        ));
    }

    #[test]
    fn invalid_prefix_drops_dash() {
        assert_eq!(generate_name_prefix("web"), "web-");
        assert_eq!(generate_name_prefix("Web"), "Web");
    }
}
