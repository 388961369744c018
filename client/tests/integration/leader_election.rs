//! Lease leader election between real electors over HTTP (axum test server with optimistic
//! concurrency on PUT), with shortened timings (spec informer.md §7).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::TestServer;
use client::{Client, Config, LeaderCallbacks, LeaderElectionConfig, LeaderElector};
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

fn cfg(identity: &str) -> LeaderElectionConfig {
    let mut c = LeaderElectionConfig::new("kube-system", "controller", identity);
    c.lease_duration = Duration::from_secs(2);
    c.renew_deadline = Duration::from_millis(1500);
    c.retry_period = Duration::from_millis(250);
    c
}

#[derive(Default)]
struct Flags {
    leading: AtomicBool,
    started: AtomicBool,
    stopped: AtomicBool,
    leaders_seen: Mutex<Vec<String>>,
}

fn callbacks(f: &Arc<Flags>) -> LeaderCallbacks {
    let (a, b, c) = (f.clone(), f.clone(), f.clone());
    LeaderCallbacks {
        on_started_leading: Box::new(move |token: CancellationToken| {
            async move {
                a.started.store(true, Ordering::SeqCst);
                a.leading.store(true, Ordering::SeqCst);
                token.cancelled().await;
                a.leading.store(false, Ordering::SeqCst);
            }
            .boxed()
        }),
        on_stopped_leading: Box::new(move || b.stopped.store(true, Ordering::SeqCst)),
        on_new_leader: Some(Box::new(move |id: &str| {
            c.leaders_seen.lock().push(id.to_string())
        })),
    }
}

struct Candidate {
    flags: Arc<Flags>,
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    elector: Arc<LeaderElector>,
}

fn spawn(client: &Client, c: LeaderElectionConfig) -> Candidate {
    let elector = match LeaderElector::new(client.clone(), c) {
        Ok(e) => Arc::new(e),
        Err(e) => panic!("elector: {e}"),
    };
    let flags = Arc::new(Flags::default());
    let token = CancellationToken::new();
    let (e, t, cb) = (elector.clone(), token.clone(), callbacks(&flags));
    let task = tokio::spawn(async move { e.run(t, cb).await });
    Candidate {
        flags,
        token,
        task,
        elector,
    }
}

async fn eventually(what: &str, within: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn client_for(s: &TestServer) -> Client {
    match Client::new(Config::new(s.url())) {
        Ok(c) => c.with_max_retries(0),
        Err(e) => panic!("client: {e}"),
    }
}

fn holder(s: &TestServer) -> String {
    s.object(LEASES, "controller")
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn transitions(s: &TestServer) -> i64 {
    s.object(LEASES, "controller")
        .and_then(|l| l["spec"]["leaseTransitions"].as_i64())
        .unwrap_or(-1)
}

#[test]
fn config_validation() {
    assert!(
        LeaderElectionConfig::new("ns", "l", "me")
            .validate()
            .is_ok(),
        "15/10/2 defaults"
    );
    let mut c = cfg("me");
    c.renew_deadline = c.lease_duration;
    assert!(c.validate().is_err(), "lease must exceed renew deadline");
    let mut c = cfg("me");
    c.retry_period = Duration::from_millis(1250);
    assert!(
        c.validate().is_err(),
        "renew deadline must exceed 1.2 × retry"
    );
    assert!(cfg("").validate().is_err(), "identity required");
}

#[tokio::test]
async fn hand_over_on_release_at_shutdown() {
    let s = TestServer::start().await;
    let client = client_for(&s);
    let a = spawn(&client, cfg("a"));
    eventually("a leads", Duration::from_secs(10), || {
        a.flags.leading.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(holder(&s), "a");
    assert_eq!(transitions(&s), 0);
    let b = spawn(&client, cfg("b"));
    // b keeps observing a's renewals and must not take over.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !b.flags.started.load(Ordering::SeqCst),
        "b must not lead while a renews"
    );
    assert_eq!(holder(&s), "a");
    assert!(b.elector.get_leader() == "a" && !b.elector.is_leader());
    assert_eq!(
        b.flags.leaders_seen.lock().first().map(String::as_str),
        Some("a")
    );

    a.token.cancel();
    let _ = a.task.await;
    assert!(a.flags.stopped.load(Ordering::SeqCst) && !a.flags.leading.load(Ordering::SeqCst));
    eventually("b leads after release", Duration::from_secs(10), || {
        b.flags.leading.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(holder(&s), "b");
    assert_eq!(transitions(&s), 1, "takeover increments leaseTransitions");
    b.token.cancel();
    let _ = b.task.await;
}

#[tokio::test]
async fn hand_over_when_holder_stops_renewing() {
    let s = TestServer::start().await;
    let client = client_for(&s);
    let mut ca = cfg("a");
    ca.release_on_cancel = false;
    let a = spawn(&client, ca);
    eventually("a leads", Duration::from_secs(10), || {
        a.flags.leading.load(Ordering::SeqCst)
    })
    .await;
    let b = spawn(&client, cfg("b"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    // a vanishes without releasing: b must wait for the lease to expire by its own clock.
    a.token.cancel();
    let stopped_at = Instant::now();
    let _ = a.task.await;
    assert_eq!(holder(&s), "a", "no release");
    eventually("b takes over", Duration::from_secs(10), || {
        b.flags.leading.load(Ordering::SeqCst)
    })
    .await;
    assert!(
        stopped_at.elapsed() >= Duration::from_secs(1),
        "takeover only after expiry: {:?}",
        stopped_at.elapsed()
    );
    assert_eq!(holder(&s), "b");
    b.token.cancel();
    let _ = b.task.await;
}

#[tokio::test]
async fn leadership_is_lost_when_renewals_fail_past_the_deadline() {
    let s = TestServer::start().await;
    let client = client_for(&s);
    let a = spawn(&client, cfg("a"));
    eventually("a leads", Duration::from_secs(10), || {
        a.flags.leading.load(Ordering::SeqCst)
    })
    .await;
    for _ in 0..200 {
        s.inject(500, None);
    }
    eventually("a stops leading", Duration::from_secs(10), || {
        a.flags.stopped.load(Ordering::SeqCst)
    })
    .await;
    assert!(
        !a.flags.leading.load(Ordering::SeqCst),
        "leading token cancelled"
    );
    let _ = a.task.await;
}
