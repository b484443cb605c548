//! sluice's proxy and the `sluice` command.
//!
//! This is the only crate of the workspace that opens sockets. The request path reads top
//! to bottom, one module per step:
//!
//! `listen` (accept, limits, proxy credentials via `auth`) → `connect` (CONNECT, egress
//! decision, passthrough) → `tls` (terminate with the run CA, SNI check) → `forward` (the
//! request's path: `authority` check, `headers` hygiene, then `upstream`: resolve, address
//! policy, dial, pool) → back to the client. Every refusal becomes a response in `refusal`,
//! and lands in `audit`.
//!
//! Each decision is made in one place: grants in `sluice-policies`, matching in
//! `sluice-guard`, never re-implemented here. This crate never logs a secret value.
#![forbid(unsafe_code)]

pub mod audit;
pub mod auth;
pub mod authority;
pub mod body;
pub mod cli;
pub mod connect;
pub mod demo;
pub mod forward;
pub mod headers;
pub mod launcher;
pub mod listen;
pub mod refusal;
pub mod rewrite;
pub mod server;
pub mod suites;
pub mod tls;
pub mod upstream;

pub use server::{Limits, Proxy, ProxyConfig, StartError, default_workers, start};
