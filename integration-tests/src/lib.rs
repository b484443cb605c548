//! Shared parts for sluice's end-to-end tests: a test PKI for upstreams, a recording TLS
//! upstream (hyper + rustls, HTTP/1.1 and HTTP/2) on 127.0.0.1, a proxy started from a
//! declaration, and clients that go through it (curl, and a Rust client over CONNECT).
//!
//! Loopback only: every address here is 127.0.0.1.
#![forbid(unsafe_code)]

pub mod client;
pub mod pki;
pub mod proxy;
pub mod upstream;

pub use client::{Curl, CurlOutput, TunnelClient};
pub use pki::TestPki;
pub use proxy::TestProxy;
pub use upstream::{Recorded, RecordingUpstream};
