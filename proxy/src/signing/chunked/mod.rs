//! An aws-chunked request body through sluice: unframed and its chunk signatures checked on
//! the way in ([`Unchunk`]), scanned as plain data by the request's rewriter like any body,
//! then framed again on the way out with a signature by the real key on every chunk, and
//! on the trailers where they are signed ([`Rechunk`]).
//!
//! The trailers after the last chunk go to the scan too, as HTTP trailers: a placeholder
//! or a known value in one is refused like anywhere else (they are signed, so never
//! swapped), and the way out writes them as the client did.
//!
//! Streamed, never read whole: a signed chunk is held until its signature by the
//! placeholder key is checked (nothing of it reaches the scanner or the real key before),
//! and each chunk goes out as soon as the scanner has released all of it. The chunks go out
//! with the client's own sizes, written as the client wrote them, so `Content-Length` and
//! `x-amz-decoded-content-length` (both usually signed) still hold; the scan may therefore
//! only keep or refuse, never change a byte (the body step's length-keeping plan).
//!
//! Each chunk is hashed once, on the way in: the digest the placeholder key's signature was
//! checked over is the digest the real key signs on the way out ([`Framing`] carries it).
//! So the real key only ever signs bytes the client signed; the bytes that leave are the
//! scan's, which keeps them (a debug build hashes them again to prove it).

mod rechunk;
#[cfg(test)]
mod tests;
mod unchunk;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use sluice_sign::aws_sigv4::chunked::ChunkError;

use crate::refusal::Refusal;

pub(crate) use rechunk::Rechunk;
pub(crate) use unchunk::Unchunk;

/// What the way in tells the way out: each chunk as the client framed it, in order, and the
/// trailers after the last.
#[derive(Default)]
pub(crate) struct Framing {
    chunks: VecDeque<FramedChunk>,
    trailers: Vec<String>,
}

/// One chunk as it arrived.
struct FramedChunk {
    size: u64,
    /// The size's hex digits as sent.
    size_text: String,
    /// The SHA-256 of its data, once its signature by the placeholder key is checked
    /// (signed chunks only).
    digest: Option<[u8; 32]>,
}

/// Shared between one body's [`Unchunk`] and [`Rechunk`].
pub(crate) type SharedFraming = Arc<Mutex<Framing>>;

fn lock(framing: &SharedFraming) -> std::sync::MutexGuard<'_, Framing> {
    framing.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why an aws-chunked body was stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChunkedError {
    /// The framing is broken.
    #[error("{0}")]
    Framing(#[from] ChunkError),
    /// The framing of a signed body is broken: its signatures cannot be checked.
    #[error("{0}")]
    SignedFraming(ChunkError),
    /// A chunk's signature is not the placeholder key's.
    #[error("an aws-chunked chunk's signature does not verify with the placeholder key")]
    Signature,
    /// The trailers' signature is not the placeholder key's.
    #[error("the aws-chunked trailers' signature does not verify with the placeholder key")]
    TrailerSignature,
    /// The trailers are not the ones `x-amz-trailer` announced.
    #[error("the aws-chunked trailers are not the ones x-amz-trailer announces")]
    Unannounced,
    /// A trailer is not a header field (`name:value`).
    #[error("an aws-chunked trailer is not a header field (name:value)")]
    TrailerField,
    /// The data's length is not `x-amz-decoded-content-length`.
    #[error(
        "the aws-chunked body holds {found} bytes of data, not the {declared} its x-amz-decoded-content-length says"
    )]
    DecodedLength {
        /// The declared length.
        declared: u64,
        /// What arrived.
        found: u64,
    },
    /// The scan changed the data's length (it may only keep or refuse).
    #[error("the aws-chunked body's data changed length on its way through sluice")]
    LengthChanged,
    /// The signer refused a chunk or the trailers.
    #[error("an aws-chunked chunk cannot be signed")]
    Unsignable,
}

/// The refusal an aws-chunked body's failure on the way in is answered with: whatever
/// stops a signed body (a chunk or trailer signature that does not verify, trailers not
/// announced, framing that cannot be checked) is the signer's refusal; broken framing of an
/// unsigned body a bad request.
pub(crate) fn refusal(secret: &str, error: &(dyn std::error::Error + 'static)) -> Refusal {
    match error.downcast_ref::<ChunkedError>() {
        Some(
            error @ (ChunkedError::Signature
            | ChunkedError::TrailerSignature
            | ChunkedError::Unannounced
            | ChunkedError::SignedFraming(_)),
        ) => Refusal::signature_invalid(secret, error),
        Some(other) => Refusal::bad_request(other.to_string()),
        None => Refusal::bad_request("the request body did not arrive whole"),
    }
}
