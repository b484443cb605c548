//! Shared parts for sluice's end-to-end tests: a test PKI for upstreams, a recording TLS
//! upstream (hyper + rustls, HTTP/1.1 and HTTP/2) on 127.0.0.1 and the one accept loop every
//! test upstream runs on, a proxy started from a declaration, and clients that go through it
//! (curl, and a Rust client over CONNECT). For the abuse tests, what no well-behaved peer
//! would send: raw HTTP/1.1 through a tunnel and from an upstream, and raw HTTP/2 frames.
//!
//! Loopback only: every address here is 127.0.0.1.
#![forbid(unsafe_code)]

pub mod client;
pub mod git;
pub mod github;
pub mod h2frame;
pub mod h2wire;
pub mod idp;
pub mod kubernetes_doc;
pub mod launch;
pub mod listen;
pub mod pki;
pub mod podman;
pub mod proxy;
pub mod raw;
pub mod raw_upstream;
pub mod serve;
pub mod served;
pub mod squid;
pub mod upstream;

pub use client::{Curl, CurlOutput, TunnelClient};
pub use github::{GithubApi, GithubConfig};
pub use idp::{Fault, IdentityProvider, IdpConfig, ServiceAccountConfig};
pub use launch::{Launch, RunOutput};
pub use pki::TestPki;
pub use proxy::TestProxy;
pub use serve::ServeBinary;
pub use served::ServedUpstream;
pub use upstream::{Recorded, RecordingUpstream};

/// Whether the tests run as root (CI does).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|uid| uid == "0"))
        .unwrap_or(false)
}

/// The `sluice` binary of this build. `cargo test --workspace` builds it (the proxy's own
/// tests need it); a lone `cargo test -p sluice-integration-tests` may not.
pub fn sluice_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("sluice");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p sluice` or `cargo test --workspace`",
        bin.display()
    );
    bin
}
