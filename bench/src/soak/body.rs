//! A body fed through a channel by a task: how the soak's upstream streams, stalls and
//! breaks its responses, and how its client streams uploads. Nothing here touches a socket.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use tokio::sync::mpsc;

/// Why a fed body stopped early (the upstream's deliberate reset, mostly).
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The one body type of the soak, both ways.
pub(crate) type SoakBody = BoxBody<Bytes, BodyError>;

/// The feeding end: send `Ok(chunk)`s, an `Err` to abort, drop to end.
pub(crate) type Feed = mpsc::Sender<Result<Bytes, BodyError>>;

/// A body whose frames come from a [`Feed`].
pub(crate) struct ChannelBody {
    frames: mpsc::Receiver<Result<Bytes, BodyError>>,
    /// The length announced (`Content-Length`), when there is one.
    exact: Option<u64>,
}

/// A feed and its body; `exact` announces a length (the feeder must then keep to it or
/// abort with an error).
pub(crate) fn channel(exact: Option<u64>) -> (Feed, SoakBody) {
    let (feed, frames) = mpsc::channel(2);
    (feed, ChannelBody { frames, exact }.boxed())
}

/// A whole body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> SoakBody {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// No body.
pub(crate) fn empty() -> SoakBody {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.frames.poll_recv(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(left) = &mut self.exact {
                    *left = left.saturating_sub(chunk.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.exact
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// Whether `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Finds `needle` in a body that arrives in chunks, across chunk boundaries.
pub(crate) struct StreamScan<'a> {
    needle: &'a [u8],
    carry: Vec<u8>,
    found: bool,
}

impl<'a> StreamScan<'a> {
    /// A scan for `needle`.
    pub(crate) fn new(needle: &'a [u8]) -> Self {
        Self {
            needle,
            carry: Vec::new(),
            found: false,
        }
    }

    /// Looks at the next chunk.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.found || self.needle.is_empty() {
            return;
        }
        let keep = self.needle.len() - 1;
        // The seam: the end of what came before joined to the start of this chunk.
        let mut seam = std::mem::take(&mut self.carry);
        seam.extend_from_slice(&chunk[..chunk.len().min(keep)]);
        if contains(&seam, self.needle) || contains(chunk, self.needle) {
            self.found = true;
            return;
        }
        seam.extend_from_slice(&chunk[chunk.len().min(keep)..]);
        let from = seam.len().saturating_sub(keep);
        self.carry = seam.split_off(from);
    }

    /// Whether the needle was seen.
    pub(crate) fn found(&self) -> bool {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_needle_split_across_chunks_is_found_whatever_the_split() {
        let text = b"....soakvalue0123456789....";
        let needle = b"soakvalue0123456789";
        for a in 0..text.len() {
            for b in a..text.len() {
                let mut scan = StreamScan::new(needle);
                for part in [&text[..a], &text[a..b], &text[b..]] {
                    scan.push(part);
                }
                assert!(scan.found(), "split at {a}, {b}");
            }
        }
        let mut scan = StreamScan::new(needle);
        scan.push(b"soakvalue012345678");
        scan.push(b"X9");
        assert!(!scan.found());
    }
}
