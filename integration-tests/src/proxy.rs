//! A real sluice proxy started in-process from a declaration, with its run files on disk.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use sluice_policies::Policy;
use sluice_proxy::{Proxy, ProxyConfig};

use crate::pki::TestPki;

/// A running proxy and the files a sandbox would use.
pub struct TestProxy {
    /// The proxy.
    pub proxy: Proxy,
    dir: tempfile::TempDir,
}

impl TestProxy {
    /// Starts a proxy from `yaml`, trusting `pki` for upstreams and pinning each host to
    /// 127.0.0.1.
    pub async fn start(yaml: &str, pki: &TestPki, pinned: &[&str]) -> Self {
        Self::start_with(yaml, pki, pinned, |_| {}).await
    }

    /// As [`TestProxy::start`], letting the test adjust the configuration first.
    pub async fn start_with(
        yaml: &str,
        pki: &TestPki,
        pinned: &[&str],
        adjust: impl FnOnce(&mut ProxyConfig),
    ) -> Self {
        let loaded = match Policy::parse(yaml, "test.yaml") {
            Ok(loaded) => loaded,
            Err(diagnostics) => panic!("test declaration has errors: {diagnostics:?}"),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let listen: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        let mut config = ProxyConfig::new(loaded.policy, listen, dir.path().join("audit.jsonl"));
        config.upstream_ca = vec![pki.ca_path()];
        config.resolve = pinned
            .iter()
            .map(|h| (h.to_string(), IpAddr::from([127, 0, 0, 1])))
            .collect();
        adjust(&mut config);
        let proxy = sluice_proxy::start(config).await.expect("proxy starts");
        std::fs::write(dir.path().join("ca.pem"), proxy.ca_pem()).expect("write ca.pem");
        Self { proxy, dir }
    }

    /// The run CA, PEM file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The audit log.
    pub fn audit_path(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    /// The proxy URL with credentials.
    pub fn url(&self) -> String {
        self.proxy.proxy_url()
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.proxy.local_addr()
    }

    /// Where it listens, with its URL and CA, for the tunnel helpers.
    pub fn at(&self) -> crate::client::ProxyAt {
        crate::client::ProxyAt {
            addr: self.addr(),
            url: self.url(),
            ca: self.ca_path(),
        }
    }

    /// Stops the proxy and returns the audit log's lines.
    pub async fn stop(self) -> Vec<String> {
        let path = self.audit_path();
        self.proxy.shutdown().await.expect("clean shutdown");
        let text = std::fs::read_to_string(path).expect("audit log");
        text.lines().map(str::to_owned).collect()
    }
}
