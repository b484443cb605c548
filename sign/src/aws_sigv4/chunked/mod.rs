//! aws-chunked bodies: the framing read strictly ([`Unframer`]), the chain of chunk
//! signatures ([`ChunkChain`]) that `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` and
//! `…-PAYLOAD-TRAILER` bodies carry, and the trailers a request announces
//! ([`announced_trailers`]).
//!
//! Each chunk's signature chains from the one before it, the first from the request's own
//! signature, so the chain is checked in order and never skipped; the trailers' signature
//! chains from the last chunk's.

mod chain;
mod framing;
mod trailer;

pub use chain::{ChunkChain, ChunkHasher};
pub use framing::{ChunkError, Mode, Piece, Unframer};
pub use trailer::announced_trailers;
