//! Operations: what an operator can ask of a running proxy ([`control`]: reload, scrape,
//! readiness), the admin endpoint that asks it over HTTP ([`admin`]), and the poller that
//! reloads when the declaration or a `file` source changes on disk ([`poll`]), and the
//! approval webhook ([`webhook`]) that an operator's service decides waiting uses through.
//!
//! Behind the admin credential only: the workload can neither reach nor signal any of it.

pub(crate) mod admin;
pub(crate) mod control;
pub(crate) mod poll;
pub(crate) mod webhook;
