//! sluice's proxy and the `sluice` command.
//!
//! This is the only crate of the workspace that opens sockets. The request path reads top
//! to bottom, one module per step; each decision is made in one place: grants in
//! `sluice-policies`, matching in `sluice-guard`, never re-implemented here.
#![forbid(unsafe_code)]

pub mod audit;
pub mod cli;
