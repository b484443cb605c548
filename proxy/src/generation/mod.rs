//! The generation in force, as every task of a running proxy sees it.
//!
//! A [`shared::Shared`] is one generation's snapshot (the declaration, its guard and
//! signers) plus the run's handles (credentials, TLS terminator, upstream leg, audit log,
//! counters, limits, connection slots, shutdown); [`reload`] builds the next generation and
//! puts it in force; [`door`] is the one path every event and every refusal of a task
//! takes to the audit log, the counters and the wire.
//!
//! This module sits below every step of the request path and imports none of them.

pub(crate) mod door;
pub(crate) mod minted;
pub(crate) mod reload;
pub(crate) mod shared;
