//! The edge: where a connection arrives and is decided before any request inside it is
//! read. The listener ([`listen`]) accepts within the connection limit, checks the proxy
//! credentials and routes CONNECT and absolute-form `http://` requests; a CONNECT
//! ([`connect`]) gets the egress decision, then passthrough or interception; a connection
//! the jail redirected ([`capture`]) is taken back to the name it was for and served the
//! same way; either, toward an `egress.ask` host, first waits for a person's decision
//! ([`ask`]).
//!
//! Nothing here reads a request inside a tunnel (that is `forward`'s) or swaps anything:
//! the edge decides whether a host is reachable at all, and every refusal it makes goes
//! through the one door (`generation::door`).

pub(crate) mod ask;
pub(crate) mod capture;
pub(crate) mod connect;
pub(crate) mod listen;
