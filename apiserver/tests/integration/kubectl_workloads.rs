//! The real `/usr/bin/kubectl` against an in-process apiserver with Jobs, CronJobs, StatefulSets
//! and DaemonSets: the create generators (protobuf bodies), `apply -f`, `get` with kubectl's
//! columns, `scale`, the `all` category, and upstream's validation errors as kubectl prints them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

const STS: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 2
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
          name: web
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Gi
"#;

const DS: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      name: agent
  template:
    metadata:
      labels:
        name: agent
    spec:
      nodeSelector:
        kubernetes.io/os: linux
      containers:
      - name: agent
        image: agent:1
"#;

fn header_and_row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name}: {out}"));
    // Columns are separated by at least two spaces (names like NODE SELECTOR have one).
    let split = |l: &str| -> Vec<String> {
        l.split("  ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    (split(header), split(row))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_cronjobs_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["create", "job", "pi", "--image=perl:5.34", "--", "perl", "-e", "print 1"]);
        assert!(out.contains("job.batch/pi created"), "{out}");
        let out = k.ok(&["get", "jobs"]);
        let (header, row) = header_and_row(&out, "pi");
        assert_eq!(header, ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], "{out}");
        assert_eq!(row[..3], ["pi", "Running", "0/1"], "{out}");
        let out = k.ok(&["get", "job", "pi", "-o", "wide"]);
        assert!(out.contains("perl:5.34") && out.contains("batch.kubernetes.io/controller-uid="), "{out}");
        let out = k.ok(&["get", "job", "pi", "-o", "jsonpath={.spec.backoffLimit} {.spec.template.metadata.labels.job-name} {.spec.template.spec.restartPolicy}"]);
        assert_eq!(out, "6 pi Never");

        let out = k.ok(&["create", "cronjob", "hello", "--image=busybox", "--schedule=*/1 * * * *", "--", "date"]);
        assert!(out.contains("cronjob.batch/hello created"), "{out}");
        let out = k.ok(&["get", "cj"]);
        let (header, row) = header_and_row(&out, "hello");
        assert_eq!(header, ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"], "{out}");
        assert_eq!(row[..6], ["hello", "*/1 * * * *", "<none>", "False", "0", "<none>"], "{out}");
        let out = k.ok(&["create", "job", "manual", "--from=cronjob/hello"]);
        assert!(out.contains("job.batch/manual created"), "{out}");
        let out = k.ok(&["get", "job", "manual", "-o", "jsonpath={.metadata.annotations.cronjob\\.kubernetes\\.io/instantiate} {.metadata.ownerReferences[0].kind}"]);
        assert_eq!(out, "manual CronJob");

        let (ok, _, err) = k.run(&["create", "cronjob", "bad", "--image=busybox", "--schedule=every minute"]);
        assert!(!ok && err.contains("failed to create cronjob: CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"), "{err}");
        let bad = k.write("bad-job.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: bad\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: busybox\n");
        let (ok, _, err) = k.run(&["apply", "-f", bad.to_str().unwrap()]);
        assert!(!ok && err.contains("The Job \"bad\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""), "{err}");

        let out = k.ok(&["get", "all"]);
        assert!(out.contains("job.batch/pi") && out.contains("cronjob.batch/hello"), "{out}");
        let out = k.ok(&["explain", "cronjob.spec.schedule"]);
        assert!(out.contains("The schedule in Cron format"), "{out}");
        let out = k.ok(&["delete", "job", "pi"]);
        assert!(out.contains("job.batch \"pi\" deleted"), "{out}");
        let out = k.ok(&["delete", "cronjob", "hello"]);
        assert!(out.contains("cronjob.batch \"hello\" deleted"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulsets_and_daemonsets_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let sts = k.write("sts.yaml", STS);
        let out = k.ok(&["apply", "-f", sts.to_str().unwrap()]);
        assert!(out.contains("statefulset.apps/web created"), "{out}");
        let out = k.ok(&["get", "sts"]);
        let (header, row) = header_and_row(&out, "web");
        assert_eq!(header, ["NAME", "READY", "AGE"], "{out}");
        assert_eq!(row[1], "0/2", "{out}");
        let out = k.ok(&["scale", "statefulset", "web", "--replicas=3"]);
        assert!(out.contains("statefulset.apps/web scaled"), "{out}");
        let updated = k.write("sts2.yaml", &STS.replace("nginx:1.27", "nginx:1.28"));
        let out = k.ok(&["apply", "-f", updated.to_str().unwrap()]);
        assert!(out.contains("statefulset.apps/web configured"), "{out}");
        let out = k.ok(&["get", "sts", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.podManagementPolicy} {.spec.volumeClaimTemplates[0].spec.volumeMode}"]);
        assert_eq!(out, "nginx:1.28 OrderedReady Filesystem");
        let renamed = k.write("sts3.yaml", &STS.replace("serviceName: nginx", "serviceName: other"));
        let (ok, _, err) = k.run(&["apply", "-f", renamed.to_str().unwrap()]);
        assert!(!ok && err.contains("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"), "{err}");

        let ds = k.write("ds.yaml", DS);
        let out = k.ok(&["apply", "-f", ds.to_str().unwrap()]);
        assert!(out.contains("daemonset.apps/agent created"), "{out}");
        let out = k.ok(&["get", "ds"]);
        let (header, row) = header_and_row(&out, "agent");
        assert_eq!(header, ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"], "{out}");
        assert_eq!(row[..7], ["agent", "0", "0", "0", "0", "0", "kubernetes.io/os=linux"], "{out}");
        let out = k.ok(&["get", "ds", "agent", "-o", "jsonpath={.metadata.annotations.deprecated\\.daemonset\\.template\\.generation} {.spec.updateStrategy.rollingUpdate.maxUnavailable}"]);
        assert_eq!(out, "1 1");
        let out = k.ok(&["get", "all"]);
        assert!(out.contains("statefulset.apps/web") && out.contains("daemonset.apps/agent"), "{out}");
        let out = k.ok(&["get", "controllerrevisions"]);
        assert!(out.is_empty() || out.contains("NAME"), "{out}");
        let out = k.ok(&["delete", "-f", sts.to_str().unwrap()]);
        assert!(out.contains("statefulset.apps \"web\" deleted"), "{out}");
        let out = k.ok(&["delete", "ds", "agent"]);
        assert!(out.contains("daemonset.apps \"agent\" deleted"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}
