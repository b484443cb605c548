//! sluice's proxy: a TLS-inspecting egress proxy that swaps placeholders for secrets only
//! where the declaration grants them, refuses everything else, and redacts every known
//! value on the way back.
//!
//! This is the only crate of the workspace that opens sockets. Its public API is what a
//! program needs to run a proxy ([`start`], [`Proxy`], [`ProxyConfig`], [`Limits`],
//! [`StartError`]) and the body codecs ([`codec`]); the audit log is the `sluice-audit`
//! crate, and the `sluice` command, its launcher and its demo are the `sluice` crate.
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
//! the counters), `ops` (operator control, the admin endpoint, the file poller), `metrics`,
//! `config` and `server` (assembling and stopping a proxy). docs/architecture.md walks
//! one request through the tree.
//!
//! Each decision is made in one place: grants in `sluice-policies`, matching in
//! `sluice-guard`, never re-implemented here. This crate never logs a secret value.
#![forbid(unsafe_code)]

mod auth;
mod body;
mod config;
mod edge;
mod forward;
mod generation;
mod metrics;
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

pub use body::codec;
pub use config::{Limits, ProxyConfig, default_workers};

/// The request scan's own steps, for the `outbound_rewrite` fuzz target (`proxy/fuzz/`),
/// which drives them on arbitrary requests. Not API: nothing outside the fuzz target may
/// use it, and it changes with the request path.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::body::{Body, BoxError};
    pub use crate::forward::budget::BodySwaps;
    pub use crate::forward::request_body::{BodyStep, Buffering, StoppedBody, scan as scan_body};
    pub use crate::refusal::Refusal;
    pub use crate::scan::headers::{check_framing, remove_hop_by_hop};
    pub use crate::scan::request::{Outbound, Place, PlanCache};
    pub use crate::scan::stream::outcome::StreamRefused;
    pub use crate::tls::target::Target;
}
pub use ops::admin::USER as ADMIN_USER;
pub use server::{GuardInForce, Proxy, ReloadError, StartError, start};
pub use upstream::Timeouts;
