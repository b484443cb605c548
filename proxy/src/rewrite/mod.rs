//! Rewriting what crosses the proxy: the request scan (swap where granted, refuse the rest)
//! and the response redaction, on headers and on streamed, possibly compressed bodies.
//!
//! Matching is the guard's, grants are the declaration's; this module only applies them.

pub mod codec;
pub mod grpc;
pub mod request;
pub mod response;
pub mod stream;
