//! Rewriting what crosses the proxy: the request scan (swap where granted, refuse the rest)
//! and the response redaction, on headers and on streamed, possibly compressed bodies.
//!
//! Matching is the guard's, grants are the declaration's; this module only applies them.

pub(crate) mod basic;
pub(crate) mod grpc;
pub(crate) mod headers;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod stream;
