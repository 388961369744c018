//! The event correlator with full caches: what recording one more event costs a component that
//! has recorded thousands (a fake kubelet process at scale records several events per pod).
//!
//! `cargo bench -p client --bench correlator`. Figures go to BENCHMARKS.md, section "Event
//! correlator".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use client::record::correlator::{EventCorrelator, MAX_LRU_ENTRIES};
use criterion::{criterion_group, criterion_main, Criterion};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn event(object: usize, now: Timestamp) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("pod-{object}.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(format!("pod-{object}")),
            uid: Some(format!("uid-{object}")),
            api_version: Some("v1".into()),
            ..Default::default()
        },
        reason: Some("Pulled".into()),
        message: Some("Container image \"nginx\" already present on machine".into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some("Normal".into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("node-0".into()),
        }),
        ..Default::default()
    }
}

fn correlate_into_full_caches(c: &mut Criterion) {
    let now = Timestamp::now();
    let correlator = EventCorrelator::new();
    for i in 0..MAX_LRU_ENTRIES {
        correlator.correlate(event(i, now), now);
    }
    // Every iteration is an object not seen before: each of the three caches evicts one entry.
    let mut next = MAX_LRU_ENTRIES;
    c.bench_function("correlate a new object's event, caches full", |b| {
        b.iter(|| {
            next += 1;
            correlator.correlate(event(next, now), now)
        })
    });
}

criterion_group!(benches, correlate_into_full_caches);
criterion_main!(benches);
