//! The store on etcd over TLS with client certificates (kube-apiserver's `--etcd-cafile`,
//! `--etcd-certfile`, `--etcd-keyfile`): a member that requires a client certificate signed by its
//! CA serves the store that presents one, and refuses one without.

use std::path::Path;

use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use store::etcd::server::{EtcdCluster, MemberTls};
use store::{CreateOutcome, EtcdConfig, EtcdStore, Store, StoreConfig};

fn write(dir: &Path, name: &str, pem: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    if let Err(error) = std::fs::write(&path, pem) {
        panic!("write {}: {error}", path.display());
    }
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_reaches_etcd_over_tls_with_a_client_certificate() {
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("tempdir: {error}"),
    };
    let certs = (|| -> Result<_, rcgen::Error> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key)?;
        let server_key = KeyPair::generate()?;
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?
            .signed_by(&server_key, &ca, &ca_key)?;
        let client_key = KeyPair::generate()?;
        let client = CertificateParams::new(vec!["apiserver".to_owned()])?.signed_by(
            &client_key,
            &ca,
            &ca_key,
        )?;
        Ok((
            ca.pem(),
            server.pem(),
            server_key.serialize_pem(),
            client.pem(),
            client_key.serialize_pem(),
        ))
    })();
    let (ca, server, server_key, client, client_key) = match certs {
        Ok(certs) => certs,
        Err(error) => panic!("certificates: {error}"),
    };
    let ca_file = write(dir.path(), "ca.pem", &ca);
    let client_config = EtcdConfig {
        endpoints: Vec::new(),
        ca_file: Some(ca_file.clone()),
        cert_file: Some(write(dir.path(), "client.pem", &client)),
        key_file: Some(write(dir.path(), "client-key.pem", &client_key)),
    };
    let tls = MemberTls {
        cert_file: write(dir.path(), "server.pem", &server),
        key_file: write(dir.path(), "server-key.pem", &server_key),
        client_ca_file: ca_file.clone(),
        client: client_config.clone(),
    };
    let cluster = match EtcdCluster::start_with(1, Some(tls)).await {
        Ok(cluster) => cluster,
        Err(error) => panic!("start etcd over TLS: {error}"),
    };
    let urls = cluster.client_urls();
    assert!(urls.iter().all(|u| u.starts_with("https://")));
    let config = EtcdConfig {
        endpoints: urls.clone(),
        ..client_config
    };
    let store = match EtcdStore::connect(&config, StoreConfig::default()).await {
        Ok(store) => store,
        Err(error) => panic!("connect over TLS: {error}"),
    };
    match store.create("/tls/k", Bytes::from_static(b"v")).await {
        Ok(CreateOutcome::Created(_)) => {}
        other => panic!("create over TLS: {other:?}"),
    }
    // The CA alone (no client certificate) is refused by a member requiring one.
    let no_client_cert = EtcdConfig {
        endpoints: urls,
        ca_file: Some(ca_file),
        ..EtcdConfig::default()
    };
    let refused = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        EtcdStore::connect(&no_client_cert, StoreConfig::default()).await
    })
    .await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "a client without a certificate was served"
    );
}
