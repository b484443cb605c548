//! sluice's proxy: a TLS-inspecting egress proxy that swaps placeholders for secrets only
//! where the declaration grants them, refuses everything else, and redacts every known
//! value on the way back.
//!
//! # Example: a proxy for one run
//!
//! ```
//! use sluice_policies::Policy;
//! use sluice_proxy::{ProxyConfig, start};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let declaration = "version: 1\negress:\n  allow: [pypi.org]\n";
//! let policy = Policy::parse(declaration, "policy.yaml")?.policy;
//! let run = tempfile::tempdir()?;
//! let config = ProxyConfig::new(policy, "127.0.0.1:0".parse()?, run.path().join("audit.jsonl"));
//! let proxy = start(config).await?;
//! // What the sandbox gets: the proxy with this run's credentials, and the CA to trust.
//! let url = proxy.proxy_url();
//! assert!(url.starts_with("http://") && url.contains('@'));
//! assert!(proxy.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
//! // Drains what is in flight, then writes the audit log's `stop` record.
//! proxy.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! This is the only crate of the workspace that opens sockets. Its public API is what a
//! program embedding the proxy needs: [`start`] with a [`ProxyConfig`] (and its [`Limits`]
//! and [`Timeouts`]), the running [`Proxy`] (its URLs and CA, its guard for redaction,
//! [`Proxy::reload`], [`Proxy::shutdown`]), and [`StartError`] / [`ReloadError`]. Nothing of
//! the request path is public: the fuzz target reaches it through `fuzzing`, a module that
//! exists only under cargo-fuzz's `cfg(fuzzing)`. The audit log is the `sluice-audit` crate,
//! and the `sluice` command, its launcher and its demo are the `sluice` crate.
//!
//! # The tree is the request's path
//!
//! Each folder depends only on the ones after it on the path, never on one before:
//!
//! 1. `edge`: the listener (accept within the connection limit, the proxy credentials of
//!    `auth`), a CONNECT's egress decision, passthrough or interception, and the jail's
//!    captured connections (`edge::capture`), served the same way.
//! 2. `tls`: the tunnel's target and the client's TLS terminated with a leaf for it alone.
//! 3. `forward`: one request inside a tunnel (or in the clear), its steps in order: the
//!    target check, header hygiene, a signing secret's signature (`signing`), the scan,
//!    the body, the budget, the request signed again, the upstream, the response's
//!    redaction; a WebSocket after its upgrade (`forward::websocket`).
//! 4. `scan`: the request rewrite (swap where granted, refuse the rest), the response
//!    redaction, streamed and possibly compressed (`body::codec`), gRPC framing.
//! 5. `upstream`: resolve, address policy, dial, pins, pools.
//!
//! Beside the path: `refusal` (every refusal's code, the mapping of every step's error to
//! one, the response it becomes), `generation` (the generation in force and its reload, and
//! `generation::door`, the one path every refusal and event takes to the audit log and
//! the counters), `approval` (the uses waiting for a person's decision), `ops` (operator
//! control, the admin endpoint, the file poller), `metrics`,
//! `config` and `server` (assembling and stopping a proxy). docs/architecture.md walks
//! one request through the tree.
//!
//! Each decision is made in one place: grants in `sluice-policies`, matching in
//! `sluice-guard`, never re-implemented here. This crate never logs a secret value.
#![forbid(unsafe_code)]
#![deny(unreachable_pub)]

mod approval;
mod auth;
mod body;
mod config;
mod edge;
mod forward;
#[cfg(fuzzing)]
pub mod fuzzing;
mod generation;
mod linger;
mod metrics;
mod mint;
mod ops;
mod refusal;
mod scan;
mod server;
mod signing;
mod suites;
mod tls;
mod upstream;

#[cfg(test)]
mod testing;

pub use config::{Limits, ProxyConfig, ReloadGate, Webhook, default_workers};

pub use ops::admin::USER as ADMIN_USER;
pub use server::{GuardInForce, Proxy, ReloadError, StartError, start};
pub use upstream::Timeouts;
pub use upstream::via::{UpstreamProxy, UpstreamProxyError};
