//! Discovery and the REST mapper: which resources a server serves, and the resource of a kind
//! (client-go's `discovery` client, `restmapper.DeferredDiscoveryRESTMapper`; kube-rs's
//! `Discovery`).
//!
//! [`Discovery::run`] reads the legacy discovery documents (`/api`, `/apis`, then every
//! group-version's `APIResourceList`, at most [`CONCURRENT_GROUP_VERSIONS`] at once) into one
//! immutable [`Discovery`]. A group-version that fails (an aggregated API that is down) is left
//! out and logged, as client-go's `ErrGroupDiscoveryFailed` partial result; `/api` or `/apis`
//! failing fails the whole call.
//!
//! [`RestMapper`] caches one `Discovery` and, like the deferred mapper, rediscovers when asked for
//! a kind or resource it does not know (a CRD installed since), then answers from the fresh
//! document or fails with apimachinery's `NoKindMatchError` / `NoResourceMatchError` text.
//! Guarantees: a hit never waits (the cached document is an `Arc` read under a short lock);
//! concurrent misses share one discovery (single flight: a miss waits for a discovery already
//! running and uses its result); a lookup runs at most one discovery, and a miss in a document
//! discovered during the lookup is final. Like client-go's, the mapper does not rate-limit
//! misses: a lookup of a kind that never appears rediscovers each time.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroupList, APIResource, APIResourceList, APIVersions,
};
use parking_lot::RwLock;
use reqwest::Method;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::rest::client::Request;
use crate::rest::{ApiResource, Client, GroupVersionKind};

/// Group-version documents fetched at once.
pub const CONCURRENT_GROUP_VERSIONS: usize = 8;

/// One served group-version and its resources.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupVersionResources {
    pub group: String,
    pub version: String,
    /// Top-level resources (no `/` in the name), subresources folded into
    /// [`ApiResource::subresources`].
    pub resources: Vec<ApiResource>,
}

/// One served group: its versions, the preferred first.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiGroup {
    /// `""` for the core group.
    pub name: String,
    pub preferred_version: String,
    pub versions: Vec<GroupVersionResources>,
}

/// What a server served when discovery ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovery {
    pub groups: Vec<ApiGroup>,
}

impl Discovery {
    /// Reads the server's discovery documents.
    pub async fn run(client: &Client) -> Result<Discovery> {
        let core: APIVersions = get(client, "/api").await?;
        let groups: APIGroupList = get(client, "/apis").await?;
        // (group, preferred version, versions in the server's order)
        let mut wanted: Vec<(String, String, Vec<String>)> = Vec::new();
        if let Some(first) = core.versions.first() {
            wanted.push((String::new(), first.clone(), core.versions.clone()));
        }
        for g in groups.groups {
            let versions: Vec<String> = g.versions.iter().map(|v| v.version.clone()).collect();
            let preferred = g
                .preferred_version
                .map(|p| p.version)
                .or_else(|| versions.first().cloned())
                .unwrap_or_default();
            wanted.push((g.name, preferred, versions));
        }
        let gvs: Vec<(String, String)> = wanted
            .iter()
            .flat_map(|(g, _, vs)| vs.iter().map(move |v| (g.clone(), v.clone())))
            .collect();
        let fetches = gvs.into_iter().map(|(g, v)| async move {
            let path = if g.is_empty() {
                format!("/api/{v}")
            } else {
                format!("/apis/{g}/{v}")
            };
            let list = get::<APIResourceList>(client, &path).await;
            (g, v, list)
        });
        let mut fetched: Vec<(String, String, APIResourceList)> = Vec::new();
        let mut results =
            futures::stream::iter(fetches).buffer_unordered(CONCURRENT_GROUP_VERSIONS);
        while let Some((g, v, list)) = results.next().await {
            match list {
                Ok(l) => fetched.push((g, v, l)),
                Err(e) => {
                    tracing::warn!(group = %g, version = %v, error = %e, "discovery of a group version failed; left out")
                }
            }
        }
        let mut out = Discovery::default();
        for (group, preferred, versions) in wanted {
            let mut ordered: Vec<String> = vec![preferred.clone()];
            ordered.extend(versions.into_iter().filter(|v| *v != preferred));
            let versions = ordered
                .into_iter()
                .filter_map(|v| {
                    let i = fetched
                        .iter()
                        .position(|(g, fv, _)| *g == group && *fv == v)?;
                    let (_, _, list) = fetched.swap_remove(i);
                    Some(GroupVersionResources {
                        resources: resources_of(&group, &v, list.resources),
                        group: group.clone(),
                        version: v,
                    })
                })
                .collect::<Vec<_>>();
            if !versions.is_empty() {
                out.groups.push(ApiGroup {
                    name: group,
                    preferred_version: preferred,
                    versions,
                });
            }
        }
        Ok(out)
    }

    /// The resource serving `gvk`.
    pub fn resolve(&self, gvk: &GroupVersionKind) -> Option<&ApiResource> {
        self.group(&gvk.group)?
            .versions
            .iter()
            .find(|v| v.version == gvk.version)?
            .resources
            .iter()
            .find(|r| r.kind == gvk.kind)
    }

    /// The resource serving `kind` of `group` in the group's preferred version, else in the first
    /// version that serves it (`RESTMapping(gk)` without versions).
    pub fn resolve_kind(&self, group: &str, kind: &str) -> Option<&ApiResource> {
        self.group(group)?
            .versions
            .iter()
            .find_map(|v| v.resources.iter().find(|r| r.kind == kind))
    }

    /// The resource `plural` of `group`, in `version` or (None) the preferred version serving it.
    pub fn resolve_resource(
        &self,
        group: &str,
        version: Option<&str>,
        plural: &str,
    ) -> Option<&ApiResource> {
        self.group(group)?
            .versions
            .iter()
            .filter(|v| version.is_none_or(|w| v.version == w))
            .find_map(|v| v.resources.iter().find(|r| r.plural == plural))
    }

    fn group(&self, name: &str) -> Option<&ApiGroup> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// `APIResource`s of one group-version, with subresources folded into their parents.
fn resources_of(group: &str, version: &str, list: Vec<APIResource>) -> Vec<ApiResource> {
    let mut out: Vec<ApiResource> = list
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            ApiResource::new(
                r.group.clone().unwrap_or_else(|| group.to_string()),
                r.version.clone().unwrap_or_else(|| version.to_string()),
                r.kind.clone(),
                r.name.clone(),
                r.namespaced,
            )
        })
        .collect();
    for r in list.iter().filter(|r| r.name.contains('/')) {
        if let Some((parent, sub)) = r.name.split_once('/') {
            if let Some(p) = out.iter_mut().find(|p| p.plural == parent) {
                p.subresources.push(sub.to_string());
            }
        }
    }
    out
}

async fn get<T: DeserializeOwned>(client: &Client, path: &str) -> Result<T> {
    let req = Request::new(Method::GET, path.to_string());
    let body = client.send_bytes(&req).await?;
    serde_json::from_slice(&body).map_err(|e| Error::Decode {
        what: format!("discovery document {path}"),
        source: e,
    })
}

struct Cached {
    discovery: Option<Arc<Discovery>>,
    /// Incremented by every completed discovery.
    generation: u64,
}

/// Kinds and resources to `ApiResource`s, through a cached [`Discovery`] refreshed on a miss.
/// Clones share the cache.
#[derive(Clone)]
pub struct RestMapper {
    client: Client,
    cache: Arc<RwLock<Cached>>,
    /// Held while discovery runs, so concurrent misses share one.
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for RestMapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestMapper")
            .field("generation", &self.cache.read().generation)
            .finish()
    }
}

impl RestMapper {
    /// A mapper over `client`; discovery runs on the first lookup.
    pub fn new(client: Client) -> Self {
        RestMapper {
            client,
            cache: Arc::new(RwLock::new(Cached {
                discovery: None,
                generation: 0,
            })),
            refreshing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Forgets the cached discovery (`Reset`); the next lookup rediscovers.
    pub fn reset(&self) {
        self.cache.write().discovery = None;
    }

    /// The current discovery, running it if none is cached.
    pub async fn discovery(&self) -> Result<Arc<Discovery>> {
        let (cached, generation) = {
            let c = self.cache.read();
            (c.discovery.clone(), c.generation)
        };
        match cached {
            Some(d) => Ok(d),
            None => self.refresh(generation).await,
        }
    }

    /// Runs discovery unless one completed since `seen` (then returns that one).
    async fn refresh(&self, seen: u64) -> Result<Arc<Discovery>> {
        let _one = self.refreshing.lock().await;
        {
            let c = self.cache.read();
            if c.generation != seen {
                if let Some(d) = &c.discovery {
                    return Ok(d.clone());
                }
            }
        }
        let d = Arc::new(Discovery::run(&self.client).await?);
        let mut c = self.cache.write();
        c.discovery = Some(d.clone());
        c.generation += 1;
        Ok(d)
    }

    /// Looks up with `find`; on a miss rediscovers once (unless the document looked at was
    /// discovered during this call) and looks again.
    async fn lookup(
        &self,
        find: impl Fn(&Discovery) -> Option<&ApiResource>,
        missing: impl FnOnce() -> Error,
    ) -> Result<ApiResource> {
        let (cached, generation) = {
            let c = self.cache.read();
            (c.discovery.clone(), c.generation)
        };
        let fresh = cached.is_none();
        let d = match cached {
            Some(d) => d,
            None => self.refresh(generation).await?,
        };
        if let Some(r) = find(&d) {
            return Ok(r.clone());
        }
        if fresh {
            return Err(missing());
        }
        let d = self.refresh(generation).await?;
        find(&d).cloned().ok_or_else(missing)
    }

    /// The resource serving `gvk`.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<ApiResource> {
        self.lookup(
            |d| d.resolve(gvk),
            || Error::NoKindMatch {
                group: gvk.group.clone(),
                kind: gvk.kind.clone(),
                version: Some(gvk.version.clone()),
            },
        )
        .await
    }

    /// The resource serving `kind` of `group`, in the preferred version that serves it.
    pub async fn resolve_kind(&self, group: &str, kind: &str) -> Result<ApiResource> {
        self.lookup(
            |d| d.resolve_kind(group, kind),
            || Error::NoKindMatch {
                group: group.to_string(),
                kind: kind.to_string(),
                version: None,
            },
        )
        .await
    }

    /// The resource `plural` of `group` in `version` (None: the preferred version serving it).
    pub async fn resolve_resource(
        &self,
        group: &str,
        version: Option<&str>,
        plural: &str,
    ) -> Result<ApiResource> {
        self.lookup(
            |d| d.resolve_resource(group, version, plural),
            || Error::NoResourceMatch {
                group: group.to_string(),
                version: version.unwrap_or_default().to_string(),
                resource: plural.to_string(),
            },
        )
        .await
    }

    /// A dynamic [`Api`](crate::Api) for `gvk`: in `namespace` when the resource is namespaced
    /// (`None`: all namespaces), cluster-wide otherwise (the namespace is then ignored).
    pub async fn api(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
    ) -> Result<crate::Api<super::DynamicObject>> {
        let r = self.resolve(gvk).await?;
        let ns = if r.namespaced { namespace } else { None };
        Ok(self.client.dynamic(&r, ns))
    }

    /// The dynamic [`Api`](crate::Api) an object is written through: its kind's resource, in
    /// its namespace when the resource is namespaced (`default` when it names none, as kubectl).
    pub async fn api_for(
        &self,
        obj: &super::DynamicObject,
    ) -> Result<crate::Api<super::DynamicObject>> {
        let r = self.resolve(&obj.gvk()).await?;
        let ns = r.namespaced.then(|| obj.namespace().unwrap_or("default"));
        Ok(self.client.dynamic(&r, ns))
    }
}
