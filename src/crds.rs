//! Installing CustomResourceDefinitions from directories, as envtest's `CRDInstallOptions`
//! (`Paths`/`CRDDirectoryPaths`) does: `Sandbox::builder().crds_from_dir(dir)` and
//! `minik8s up --crds DIR`.
//!
//! The steps:
//! 1. [`read_dir`]: every `.yaml`, `.yml` and `.json` file under the directory, recursively, in
//!    path order; every document of a multi-document file; documents that are not
//!    `apiextensions.k8s.io/v1` `CustomResourceDefinition`s are skipped, as envtest skips them
//!    (a `v1beta1` CRD, which no 1.33 server serves, is an error naming its file). A missing
//!    directory is an error (envtest's `ErrorIfPathMissing`), so a typo cannot pass silently.
//! 2. [`install`]: create each CRD; one that exists is replaced (envtest updates it), so a
//!    restarted `up` over a data directory picks up changed CRDs.
//! 3. Wait until every installed CRD has `Established=True`: one LIST, then a WATCH from its
//!    resourceVersion (no polling), bounded by the caller's timeout (envtest waits 10 s); past
//!    it the error names each CRD not established with its conditions' reasons.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use client::{Api, ListParams, WatchEvent};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;

/// envtest's `defaultMaxWait` for CRDs to be served.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// Largest CRD file read (the Gateway API's largest CRD is about 1 MiB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Errors reading or installing CRDs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read CRD directory {path}: {source}")]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read CRD file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CRD file {path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: document {document}: {message}")]
    Parse {
        path: PathBuf,
        /// 1-based.
        document: usize,
        message: String,
    },
    #[error("cannot install CustomResourceDefinition {name}: {source}")]
    Install {
        name: String,
        #[source]
        source: Box<client::Error>,
    },
    #[error("cannot watch CustomResourceDefinitions: {0}")]
    Watch(#[source] Box<client::Error>),
    #[error("CustomResourceDefinitions not established within {timeout:?}: {}", .pending.join("; "))]
    NotEstablished {
        timeout: Duration,
        /// `name (condition reasons)` of each CRD not established.
        pending: Vec<String>,
    },
}

/// Every CRD in YAML or JSON files under `dir` (recursively), in path order.
pub fn read_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    let mut crds = Vec::new();
    for f in files {
        crds.extend(read_file(&f)?);
    }
    Ok(crds)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::ReadDir {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| Error::ReadDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        // `metadata` follows symlinks, so a linked directory or file counts as what it points at.
        let meta = std::fs::metadata(&path).map_err(|source| Error::ReadFile {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            collect_files(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// The CRDs among the documents of one file.
pub fn read_file(path: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(read_err)?.len();
    if len > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    parse_documents(path, &text)
}

fn parse_documents(path: &Path, text: &str) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut crds = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let parse = |message: String| Error::Parse {
            path: path.to_path_buf(),
            document: i + 1,
            message,
        };
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| parse(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let kind = value.get("kind").and_then(serde_yaml::Value::as_str);
        if kind != Some("CustomResourceDefinition") {
            continue;
        }
        let api_version = value
            .get("apiVersion")
            .and_then(serde_yaml::Value::as_str)
            .unwrap_or_default();
        if api_version != "apiextensions.k8s.io/v1" {
            return Err(parse(format!(
                "CustomResourceDefinition of apiVersion {api_version:?}: only apiextensions.k8s.io/v1 is served"
            )));
        }
        let json = serde_json::to_value(&value).map_err(|e| parse(e.to_string()))?;
        let crd: CustomResourceDefinition =
            serde_json::from_value(json).map_err(|e| parse(e.to_string()))?;
        crds.push(crd);
    }
    Ok(crds)
}

/// Creates (or replaces) each CRD, then waits until all are Established.
pub async fn install(
    client: &client::Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = client.all();
    for crd in crds {
        create_or_replace(&api, crd).await?;
    }
    let names: Vec<String> = crds
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    wait_established(&api, &names, timeout).await
}

async fn create_or_replace(
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<(), Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let install = |source: client::Error| Error::Install {
        name: name.clone(),
        source: Box::new(source),
    };
    match api.create_metadata(crd).await {
        Ok(_) => return Ok(()),
        Err(e) if e.is_already_exists() => {}
        Err(e) => return Err(install(e)),
    }
    // Replace with the stored resourceVersion; a concurrent writer makes it conflict: retry a few
    // times with the newer one.
    for _ in 0..5 {
        let current = api.get(&name).await.map_err(install)?;
        let mut next = crd.clone();
        next.metadata.resource_version = current.metadata.resource_version;
        match api.replace(&name, &next).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(install(e)),
        }
    }
    Err(Error::Install {
        name: name.clone(),
        source: Box::new(client::Error::Config(
            "conflicting writers kept changing it".into(),
        )),
    })
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// `name (NamesAccepted=False: reason: message, …)`, or just the name.
fn describe(name: &str, crd: Option<&CustomResourceDefinition>) -> String {
    let conditions: Vec<String> = crd
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .filter(|c| c.status != "True")
                .map(|c| {
                    let mut s = format!("{}={}", c.type_, c.status);
                    if let Some(r) = c.reason.as_deref().filter(|r| !r.is_empty()) {
                        s.push_str(&format!(": {r}"));
                    }
                    if let Some(m) = c.message.as_deref().filter(|m| !m.is_empty()) {
                        s.push_str(&format!(": {m}"));
                    }
                    s
                })
                .collect()
        })
        .unwrap_or_default();
    if conditions.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({})", conditions.join(", "))
    }
}

/// Waits until every CRD in `names` is Established: a LIST, then a WATCH from its RV.
pub async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    names: &[String],
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last: BTreeMap<String, Option<CustomResourceDefinition>> =
        names.iter().map(|n| (n.clone(), None)).collect();
    let pending = |last: &BTreeMap<String, Option<CustomResourceDefinition>>| -> Vec<String> {
        last.iter()
            .filter(|(_, c)| !c.as_ref().is_some_and(is_established))
            .map(|(n, c)| describe(n, c.as_ref()))
            .collect()
    };
    let watch = async {
        loop {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::Watch(Box::new(e)))?;
            for crd in list.items {
                if let Some(slot) = crd.metadata.name.as_ref().and_then(|n| last.get_mut(n)) {
                    *slot = Some(crd);
                }
            }
            if pending(&last).is_empty() {
                return Ok(());
            }
            let mut events = api
                .watch(&ListParams::default(), &list.resource_version)
                .await
                .map_err(|e| Error::Watch(Box::new(e)))?;
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(WatchEvent::Added(crd) | WatchEvent::Modified(crd)) => {
                        if let Some(slot) = crd.metadata.name.as_ref().and_then(|n| last.get_mut(n))
                        {
                            *slot = Some(crd);
                        }
                    }
                    Ok(WatchEvent::Deleted(crd)) => {
                        if let Some(slot) = crd.metadata.name.as_ref().and_then(|n| last.get_mut(n))
                        {
                            *slot = None;
                        }
                    }
                    Ok(WatchEvent::Bookmark(_)) => {}
                    // Expired or broken: list again.
                    Ok(WatchEvent::Error(_)) | Err(_) => break,
                }
                if pending(&last).is_empty() {
                    return Ok(());
                }
            }
        }
    };
    match tokio::time::timeout_at(deadline, watch).await {
        Ok(r) => r,
        Err(_) => Err(Error::NotEstablished {
            timeout,
            pending: pending(&last),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_that_are_not_v1_crds_are_skipped_and_v1beta1_is_refused() {
        let text = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
# a comment-only document
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
---
"#;
        let crds = parse_documents(Path::new("a.yaml"), text).unwrap_or_default();
        assert_eq!(crds.len(), 1);
        assert_eq!(
            crds[0].metadata.name.as_deref(),
            Some("widgets.example.com")
        );
        let beta = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: a}\n";
        let err = parse_documents(Path::new("b.yaml"), beta)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("b.yaml: document 1: CustomResourceDefinition of apiVersion \"apiextensions.k8s.io/v1beta1\": only apiextensions.k8s.io/v1 is served")
        );
        let bad = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: 3\n";
        assert!(matches!(
            parse_documents(Path::new("c.yaml"), bad),
            Err(Error::Parse { document: 1, .. })
        ));
        assert!(parse_documents(Path::new("d.yaml"), "a: [").is_err());
    }

    #[test]
    fn a_directory_is_read_recursively_in_path_order() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let crd = |name: &str| {
            format!("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {name}}}\n")
        };
        std::fs::create_dir_all(dir.path().join("nested/deeper"))?;
        std::fs::write(dir.path().join("b.yaml"), crd("b.x"))?;
        std::fs::write(
            dir.path().join("a.yml"),
            format!("{}---\n{}", crd("a1.x"), crd("a2.x")),
        )?;
        std::fs::write(
            dir.path().join("nested/deeper/c.json"),
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"c.x"}}"#,
        )?;
        std::fs::write(
            dir.path().join("notes.txt"),
            "kind: CustomResourceDefinition",
        )?;
        let names: Vec<String> = read_dir(dir.path())?
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(names, ["a1.x", "a2.x", "b.x", "c.x"]);
        assert!(matches!(
            read_dir(&dir.path().join("missing")),
            Err(Error::ReadDir { .. })
        ));
        Ok(())
    }
}
