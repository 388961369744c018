//! The README's five-minute tour, run for real: the built `minik8s` binary and the real `kubectl`.

use std::time::Duration;

use tests::{wait_for, Minik8s};

fn running_pods(k: &tests::Kubectl, selector: &str) -> Result<usize, String> {
    let list = k.json(&["get", "pods", "-l", selector]);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok(items
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| p["status"]["phase"] == "Running")
        .count())
}

fn live_pods(k: &tests::Kubectl, selector: &str) -> usize {
    let list = k.json(&["get", "pods", "-l", selector]);
    list["items"].as_array().map_or(0, |a| a.len())
}

#[test]
fn readme_tour_with_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let server = Minik8s::up(dir.path(), &["--nodes", "3"]);
    let k = server.kubectl();

    // kubectl get nodes: three Ready nodes.
    wait_for("3 Ready nodes", Duration::from_secs(20), || {
        let out = k.ok(&["get", "nodes"]);
        let ready = out.lines().filter(|l| l.contains(" Ready ")).count();
        if ready == 3 {
            Ok(())
        } else {
            Err(out)
        }
    });

    // kubectl apply -f examples/rc.yaml
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/rc.yaml");
    let out = k.ok(&["apply", "-f", manifest]);
    assert!(out.contains("replicationcontroller/web created"), "{out}");
    wait_for(
        "3 Running pods",
        Duration::from_secs(20),
        || match running_pods(&k, "app=web")? {
            3 => Ok(()),
            n => Err(format!("{n} running")),
        },
    );
    let wide = k.ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.contains("NODE") && wide.contains("node-"), "{wide}");

    // kubectl scale rc web --replicas=10
    let out = k.ok(&["scale", "rc", "web", "--replicas=10"]);
    assert!(out.contains("scaled"), "{out}");
    wait_for(
        "10 Running pods",
        Duration::from_secs(30),
        || match running_pods(&k, "app=web")? {
            10 => Ok(()),
            n => Err(format!("{n} running")),
        },
    );
    // The controllers and kubelets cache pods without managedFields; what they write back keeps
    // the stored entries: the creator's, and the kubelet's status entry, each named after its
    // component as upstream's are.
    let pods = k.json(&["get", "pods", "-l", "app=web", "--show-managed-fields"]);
    for p in pods["items"].as_array().into_iter().flatten() {
        let entries = p["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let main = entries.iter().any(|e| {
            e["manager"] == "kube-controller-manager"
                && e["operation"] == "Update"
                && e.get("subresource").is_none()
        });
        let status = entries.iter().any(|e| {
            e["manager"] == "kubelet" && e["operation"] == "Update" && e["subresource"] == "status"
        });
        assert!(main && status, "{}", p["metadata"]);
    }
    let rc = k.ok(&["get", "rc", "web"]);
    assert!(
        rc.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().take(4).eq(["web", "10", "10", "10"])),
        "{rc}"
    );

    // kubectl delete pod …: it is replaced.
    let names = k.ok(&["get", "pods", "-l", "app=web", "-o", "name"]);
    let victim = names
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("pod/")
        .to_string();
    let out = k.ok(&["delete", "pod", &victim]);
    assert!(out.contains("deleted"), "{out}");
    wait_for("the replacement", Duration::from_secs(30), || {
        let names = k.ok(&["get", "pods", "-l", "app=web", "-o", "name"]);
        let running = running_pods(&k, "app=web")?;
        if !names.contains(&victim) && running == 10 {
            Ok(())
        } else {
            Err(format!("{running} running: {names}"))
        }
    });

    // kubectl delete rc web: the garbage collector removes the pods.
    let out = k.ok(&["delete", "rc", "web"]);
    assert!(out.contains("deleted"), "{out}");
    wait_for("no pods", Duration::from_secs(30), || {
        match live_pods(&k, "app=web") {
            0 => Ok(()),
            n => Err(format!("{n} pods left")),
        }
    });

    // A Deployment: created, rolled out, image updated, deleted with its ReplicaSets.
    k.ok(&[
        "create",
        "deployment",
        "api",
        "--image=nginx",
        "--replicas=2",
    ]);
    k.ok(&["rollout", "status", "deployment/api", "--timeout=60s"]);
    k.ok(&["set", "image", "deployment/api", "nginx=nginx:1.27"]);
    let out = k.ok(&["rollout", "status", "deployment/api", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let rs = k.json(&["get", "rs", "-l", "app=api"]);
    assert_eq!(
        rs["items"].as_array().map_or(0, |a| a.len()),
        2,
        "old and new ReplicaSet"
    );
    k.ok(&["delete", "deployment", "api"]);
    wait_for(
        "the deployment's ReplicaSets and pods gone",
        Duration::from_secs(30),
        || {
            let rs = k.json(&["get", "rs", "-l", "app=api"])["items"]
                .as_array()
                .map_or(0, |a| a.len());
            match (rs, live_pods(&k, "app=api")) {
                (0, 0) => Ok(()),
                (r, p) => Err(format!("{r} rs, {p} pods")),
            }
        },
    );

    // curl-style list and watch with a resourceVersion.
    let (code, body) =
        tests::http_get(&format!("{}/api/v1/namespaces/default/pods", server.url())).unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"resourceVersion\""), "{body}");
}

/// The shell blocks of the README's tour, after the one that starts the server: each line runs as
/// written, in one `bash` (so `SERVER` and `RV` carry over), from the repository's folder. A line
/// the README says to stop with Ctrl-C runs for two seconds instead.
fn tour_script(readme: &str) -> String {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Five-minute tour"))
        .unwrap_or_else(|| panic!("README.md has no \"## Five-minute tour\""));
    let mut script = String::from("set -eu\n");
    for block in section.split("```sh\n").skip(1) {
        let body = block.split("```").next().unwrap_or_default();
        if body.contains("minik8s up") {
            continue;
        }
        for line in body.lines() {
            match line.rfind(" # ").filter(|_| line.contains("Ctrl-C")) {
                Some(comment) => {
                    let command = line[..comment].trim_end();
                    script.push_str(&format!("timeout 2 {command} || [ $? -eq 124 ]\n"));
                }
                None => {
                    script.push_str(line);
                    script.push('\n');
                }
            }
        }
    }
    script
}

#[test]
fn readme_tour_runs_as_pasted() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let script = tour_script(&readme);
    assert!(
        script.contains("kubectl apply -f examples/rc.yaml") && script.contains("curl"),
        "{script}"
    );
    let dir = tempfile::tempdir().unwrap();
    // `--port 0` is what the tour offers; the commands find the server through the kubeconfig.
    let server = Minik8s::up(dir.path(), &["--nodes", "3"]);
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&root)
        .env("KUBECONFIG", &server.kubeconfig)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the tour failed ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(stdout.contains("successfully rolled out"), "{stdout}");
    assert!(stdout.contains("\"kind\": \"PodList\""), "{stdout}");
}

#[test]
fn the_tour_script_stops_what_runs_until_ctrl_c() {
    let readme = "# minik8s\n## Five-minute tour\n```sh\nminik8s up\n```\n```sh\nkubectl get pods\n\
                  kubectl get pods -w     # live (Ctrl-C to stop)\n```\n## Next\n```sh\nnot this\n```\n";
    assert_eq!(
        tour_script(readme),
        "set -eu\nkubectl get pods\ntimeout 2 kubectl get pods -w || [ $? -eq 124 ]\n"
    );
}
