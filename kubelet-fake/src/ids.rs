//! Deterministic identifiers and randomness: container IDs, image digests, jitter samples.
//!
//! Everything here is a pure function of its inputs, so a pod's simulated history is replayable:
//! the same pod UID under the same config seed gets the same delays, container IDs and image IDs in
//! every run and after a kubelet restart. The digests are not cryptographic (a 64-bit FNV-1a fed
//! through SplitMix64 to fill 256 bits); they only have to look like and behave like IDs: stable,
//! well spread, 64 lowercase hex characters.

/// 64-bit FNV-1a of `parts`, with a separator so that `("ab","c")` and `("a","bc")` differ.
fn fnv1a(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for part in parts {
        for b in part.iter() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64's output function: a bijective mixer.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// 64 hex characters derived from `parts`.
pub fn hex_digest(parts: &[&[u8]]) -> String {
    let base = fnv1a(0, parts);
    let mut out = String::with_capacity(64);
    for i in 0..4u64 {
        let word = splitmix(base ^ i.wrapping_mul(0xa076_1d64_78bd_642f));
        out.push_str(&format!("{word:016x}"));
    }
    out
}

/// A sample in `[0, 1)` for `(seed, uid, slot)`; `slot` names what the sample is for.
pub fn unit_sample(seed: u64, uid: &str, slot: &str) -> f64 {
    let bits = splitmix(fnv1a(seed, &[uid.as_bytes(), slot.as_bytes()]));
    // The top 53 bits as a fraction: uniform over [0, 1).
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// The `containerd://…` ID of the `restart`-th instance of a container in a pod.
pub fn container_id(pod_uid: &str, container: &str, restart: i32) -> String {
    format!(
        "containerd://{}",
        hex_digest(&[
            pod_uid.as_bytes(),
            container.as_bytes(),
            &restart.to_le_bytes()
        ])
    )
}

/// An image reference split the way containerd normalizes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// `docker.io/library/nginx`.
    pub repository: String,
    /// `latest` when not given.
    pub tag: String,
    /// The `sha256:…` digest if the reference carries one.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Normalizes `image` (`nginx` → `docker.io/library/nginx:latest`).
    pub fn parse(image: &str) -> Self {
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(d.to_string())),
            None => (image, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (
                &name[..last_slash + i],
                name[last_slash + i + 1..].to_string(),
            ),
            None => (name, "latest".to_string()),
        };
        let repository = match name.split_once('/') {
            Some((first, _))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                name.to_string()
            }
            Some(_) => format!("docker.io/{name}"),
            None => format!("docker.io/library/{name}"),
        };
        Self {
            repository,
            tag,
            digest,
        }
    }

    /// The `image` a kubelet with containerd reports: `docker.io/library/nginx:latest`.
    pub fn status_image(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }

    /// The `imageID`: `docker.io/library/nginx@sha256:<64 hex>`, stable per repository and tag.
    pub fn image_id(&self) -> String {
        match &self.digest {
            Some(d) => format!("{}@{d}", self.repository),
            None => format!(
                "{}@sha256:{}",
                self.repository,
                hex_digest(&[self.repository.as_bytes(), self.tag.as_bytes()])
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_stable_hex_and_distinct() {
        let a = hex_digest(&[b"uid-1", b"web"]);
        assert_eq!(a, hex_digest(&[b"uid-1", b"web"]));
        assert_eq!(a.len(), 64);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, hex_digest(&[b"uid-1", b"weB"]));
        assert_ne!(hex_digest(&[b"ab", b"c"]), hex_digest(&[b"a", b"bc"]));
    }

    #[test]
    fn container_ids_change_per_restart() {
        let a = container_id("u", "c", 0);
        assert!(a.starts_with("containerd://"));
        assert_eq!(a.len(), "containerd://".len() + 64);
        assert_ne!(a, container_id("u", "c", 1));
        assert_eq!(a, container_id("u", "c", 0));
    }

    #[test]
    fn samples_are_uniformish_and_deterministic() {
        let xs: Vec<f64> = (0..10_000)
            .map(|i| unit_sample(1, &format!("uid-{i}"), "start"))
            .collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert_eq!(unit_sample(1, "uid-3", "start"), xs[3]);
        assert_ne!(unit_sample(2, "uid-3", "start"), xs[3]);
        assert_ne!(unit_sample(1, "uid-3", "ready"), xs[3]);
    }

    #[test]
    fn image_references_normalize_like_containerd() {
        let r = ImageRef::parse("nginx");
        assert_eq!(r.status_image(), "docker.io/library/nginx:latest");
        assert!(r.image_id().starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(
            r.image_id().len(),
            "docker.io/library/nginx@sha256:".len() + 64
        );
        assert_eq!(
            ImageRef::parse("nginx:1.25").status_image(),
            "docker.io/library/nginx:1.25"
        );
        assert_ne!(
            ImageRef::parse("nginx:1.25").image_id(),
            ImageRef::parse("nginx:1.26").image_id()
        );
        assert_eq!(
            ImageRef::parse("bitnami/redis:7").status_image(),
            "docker.io/bitnami/redis:7"
        );
        assert_eq!(
            ImageRef::parse("registry.k8s.io/pause:3.9").status_image(),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(
            ImageRef::parse("localhost:5000/app").status_image(),
            "localhost:5000/app:latest"
        );
        let pinned = ImageRef::parse("busybox@sha256:abc");
        assert_eq!(pinned.image_id(), "docker.io/library/busybox@sha256:abc");
    }
}
