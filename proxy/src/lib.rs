//! sluice's proxy: a TLS-inspecting egress proxy that swaps placeholders for secrets only
//! where the declaration grants them, refuses everything else, and redacts every known
//! value on the way back.
//!
//! This is the only crate of the workspace that opens sockets. Its public API is what a
//! program needs to run a proxy ([`start`], [`Proxy`], [`ProxyConfig`], [`Limits`],
//! [`StartError`]), the audit log's reader and writer ([`audit`]), and the body codecs
//! ([`codec`]); the `sluice` command, its launcher and its demo live in the binary.
//!
//! # The request path, top to bottom
//!
//! One module per step, each depending only on the steps after it:
//!
//! 1. `listen`: accept within the connection limit, check the proxy credentials (`auth`),
//!    route CONNECT and absolute-form `http://` requests.
//! 2. `connect`: the egress decision for a tunnel; passthrough, or interception.
//! 3. `tls`: terminate the client's TLS with a leaf from the run CA, SNI = CONNECT host.
//! 4. `forward`: each request inside a tunnel (or in the clear): the `authority` check,
//!    `headers` hygiene, a signing secret's signature verified (`signing`), the scan and
//!    swap (`rewrite::request`), the body (`forward::request_body`, `rewrite::stream`), the
//!    request signed again with the real key (`signing`), then the `upstream` (resolve,
//!    address policy, dial, pool), and the response's redaction (`rewrite::response`).
//!
//! Beside the path: `shared` (the state every step shares, the connection slots, the
//! shutdown signal, the one serve-and-drain loop), `tunnel` (a tunnel's own state),
//! `refusal` (every refusal and the mapping of every step's error to one), `exchange` (the
//! one path a refusal takes: audited, then answered), `audit` (the log), `codec` (body
//! codings), `config` and `server` (assembling and stopping a proxy).
//!
//! Each decision is made in one place: grants in `sluice-policies`, matching in
//! `sluice-guard`, never re-implemented here. This crate never logs a secret value.
#![forbid(unsafe_code)]

mod admin;
mod auth;
mod authority;
mod body;
mod budget;
pub mod codec;
mod config;
mod connect;
mod control;
mod exchange;
mod forward;
mod headers;
mod listen;
mod metrics;
mod refusal;
mod reload;
mod rewrite;
mod server;
mod shared;
mod signing;
mod suites;
mod tls;
mod transparent;
mod tunnel;
mod upstream;
mod watch;
mod websocket;

pub use config::{Limits, ProxyConfig, default_workers};

/// The request scan's own steps, for the `outbound_rewrite` fuzz target (`proxy/fuzz/`),
/// which drives them on arbitrary requests. Not API: nothing outside the fuzz target may
/// use it, and it changes with the request path.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::authority::Target;
    pub use crate::body::{Body, BoxError};
    pub use crate::budget::BodySwaps;
    pub use crate::forward::request_body::{BodyStep, Buffering, StoppedBody, scan as scan_body};
    pub use crate::headers::{check_framing, remove_hop_by_hop};
    pub use crate::refusal::Refusal;
    pub use crate::rewrite::request::{Outbound, Place, PlanCache};
    pub use crate::rewrite::stream::outcome::StreamRefused;
}
pub use admin::USER as ADMIN_USER;
pub use server::{GuardInForce, Proxy, ReloadError, StartError, start};
pub use upstream::Timeouts;
