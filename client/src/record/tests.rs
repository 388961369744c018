use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::correlator::{EventCorrelator, AGGREGATE_MAX_EVENTS, MAX_LRU_ENTRIES, SPAM_BURST};

fn ev(obj: &str, reason: &str, message: &str, now: Timestamp) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{obj}.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(obj.into()),
            uid: Some(format!("uid-{obj}")),
            api_version: Some("v1".into()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some("Normal".into()),
        source: Some(EventSource {
            component: Some("test".into()),
            host: None,
        }),
        ..Default::default()
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[tokio::test(start_paused = true)]
async fn identical_events_become_count_increments_via_patch() {
    let c = EventCorrelator::new();
    let first = c.correlate(ev("p", "Pulled", "image pulled", at(0)), at(0));
    assert!(!first.skip && first.patch.is_none());
    assert_eq!(first.event.count, Some(1));
    let second = c.correlate(ev("p", "Pulled", "image pulled", at(5)), at(5));
    assert_eq!(second.event.count, Some(2));
    assert_eq!(
        second.event.metadata.name, first.event.metadata.name,
        "patched under the first name"
    );
    assert_eq!(second.event.first_timestamp, first.event.first_timestamp);
    let patch = second.patch.clone().unwrap_or_default();
    assert_eq!(patch["count"], 2);
    assert_eq!(patch["message"], "image pulled");
    assert!(patch.get("lastTimestamp").is_some());
    // The server's answer (its RV) is remembered for the next repeat.
    let mut written = second.event.clone();
    written.metadata.resource_version = Some("77".into());
    c.update_state(second.key, &written);
    let third = c.correlate(ev("p", "Pulled", "image pulled", at(6)), at(6));
    assert_eq!(third.event.count, Some(3));
    assert_eq!(third.event.metadata.resource_version.as_deref(), Some("77"));
}

#[test]
fn the_least_recently_seen_event_is_forgotten_when_the_cache_is_full() {
    let c = EventCorrelator::new();
    // One event per object (its own spam bucket and aggregate key). The cache fills with the
    // first 4,096; the first is seen again, so the second is the least recently seen when one
    // more comes.
    let event = |i: usize| ev(&format!("p{i}"), "Pulled", "image pulled", at(0));
    for i in 0..MAX_LRU_ENTRIES {
        c.correlate(event(i), at(0));
    }
    assert_eq!(c.correlate(event(0), at(0)).event.count, Some(2));
    c.correlate(event(MAX_LRU_ENTRIES), at(0));
    assert_eq!(c.correlate(event(0), at(0)).event.count, Some(3), "kept");
    assert_eq!(
        c.correlate(event(1), at(0)).event.count,
        Some(1),
        "forgotten"
    );
    assert_eq!(
        c.correlate(event(MAX_LRU_ENTRIES), at(0)).event.count,
        Some(2)
    );
}

#[tokio::test(start_paused = true)]
async fn similar_events_are_aggregated_after_ten_distinct_messages() {
    let c = EventCorrelator::new();
    for i in 0..AGGREGATE_MAX_EVENTS - 1 {
        let r = c.correlate(
            ev("p", "Failed", &format!("attempt {i}"), at(i as i64)),
            at(i as i64),
        );
        assert!(
            !r.event
                .message
                .clone()
                .unwrap_or_default()
                .starts_with("(combined"),
            "event {i}"
        );
    }
    let tenth = c.correlate(ev("p", "Failed", "attempt 9", at(10)), at(10));
    let msg = tenth.event.message.clone().unwrap_or_default();
    assert_eq!(msg, "(combined from similar events): attempt 9");
    assert_eq!(tenth.event.count, Some(1));
    let eleventh = c.correlate(ev("p", "Failed", "attempt 10", at(11)), at(11));
    assert_eq!(eleventh.event.count, Some(2), "aggregated event counts up");
    assert_eq!(eleventh.event.metadata.name, tenth.event.metadata.name);
    assert!(eleventh.patch.is_some());
    // A different reason is a different aggregate.
    let other = c.correlate(ev("p", "Killing", "attempt 11", at(12)), at(12));
    assert_eq!(other.event.message.as_deref(), Some("attempt 11"));
    // After the 10-minute window the aggregate record starts over.
    let later = c.correlate(ev("p", "Failed", "attempt 12", at(11 + 601)), at(11 + 601));
    assert_eq!(later.event.message.as_deref(), Some("attempt 12"));
}

#[tokio::test(start_paused = true)]
async fn spam_filter_allows_burst_then_one_per_five_minutes_per_object() {
    let c = EventCorrelator::new();
    let mut passed = 0;
    for i in 0..40 {
        if !c.correlate(ev("p", "Same", "same", at(i)), at(i)).skip {
            passed += 1;
        }
    }
    assert_eq!(passed, SPAM_BURST as usize);
    assert!(
        c.correlate(ev("p", "Other", "other", at(45)), at(45)).skip,
        "one bucket per source and object, whatever the reason (upstream's getSpamKey)"
    );
    assert!(
        !c.correlate(ev("q", "Same", "same", at(50)), at(50)).skip,
        "other objects have their own bucket"
    );
    tokio::time::advance(Duration::from_secs(301)).await;
    assert!(
        !c.correlate(ev("p", "Same", "same", at(400)), at(400)).skip,
        "refilled after 300 s"
    );
    assert!(c.correlate(ev("p", "Same", "same", at(401)), at(401)).skip);
}

/// Regression: `minik8s bench scale` logged one warning per dropped event (thousands of lines when
/// 10,000 pods were created at once). Drops on a full queue are counted by every recorder of the
/// broadcaster; the queue keeps its bound.
#[tokio::test]
async fn a_full_queue_drops_and_counts_without_blocking() {
    let client = crate::Client::new(crate::Config::new("http://127.0.0.1:1")).expect("client");
    let b = super::EventBroadcaster::new(client, "test");
    let (r1, r2) = (b.recorder("a"), b.recorder("b"));
    let obj = ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some("p".into()),
        ..Default::default()
    };
    for i in 0..super::MAX_QUEUED_EVENTS + 250 {
        let r = if i % 2 == 0 { &r1 } else { &r2 };
        r.event(&obj, super::EventType::Normal, "Tested", "m");
    }
    assert_eq!(b.dropped(), 250);
}

/// Two containers of one pod with the same reason and message are two events (client-go's
/// `getEventKey` includes `involvedObject.fieldPath`), not one with count 2.
#[tokio::test(start_paused = true)]
async fn field_paths_are_part_of_the_event_key() {
    let c = EventCorrelator::new();
    let with_path = |path: &str, t: i64| {
        let mut e = ev(
            "p",
            "Pulled",
            "Container image \"x\" already present on machine",
            at(t),
        );
        e.involved_object.field_path = Some(path.into());
        e
    };
    let a = c.correlate(with_path("spec.containers{a}", 0), at(0));
    let b = c.correlate(with_path("spec.containers{b}", 0), at(0));
    assert!(a.patch.is_none() && b.patch.is_none());
    assert_eq!(b.event.count, Some(1));
    let again = c.correlate(with_path("spec.containers{a}", 1), at(1));
    assert_eq!(again.event.count, Some(2));
}

/// Events recorded about one shared reference hold it once while they wait, and each is written
/// with the whole reference.
#[tokio::test]
async fn events_about_one_reference_share_it_in_the_queue() {
    let client = crate::Client::new(crate::Config::new("http://127.0.0.1:1")).expect("client");
    let mut b = super::EventBroadcaster::new(client, "kubelet").with_host("node-0");
    let r = b.recorder("");
    let obj = std::sync::Arc::new(ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some("p".into()),
        uid: Some("u".into()),
        field_path: Some("spec.containers{c}".into()),
        ..Default::default()
    });
    for reason in ["Pulled", "Created", "Started"] {
        r.event_about(&obj, super::EventType::Normal, reason, "m");
    }
    assert_eq!(
        std::sync::Arc::strong_count(&obj),
        4,
        "held once per queued event"
    );
    let mut reasons = Vec::new();
    while let Ok(queued) = b.rx.try_recv() {
        assert!(std::sync::Arc::ptr_eq(&queued.involved_object, &obj));
        let event = queued.into_event();
        assert_eq!(event.involved_object, *obj);
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        reasons.extend(event.reason);
    }
    assert_eq!(reasons, ["Pulled", "Created", "Started"]);
    assert_eq!(std::sync::Arc::strong_count(&obj), 1);
}
