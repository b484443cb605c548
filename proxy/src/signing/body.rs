//! The request body after [`super::verify()`]: as it arrives, read whole, or unframed from
//! aws-chunked as it arrives. It holds no key; a chunk whose signature fails leaves its
//! refusal in the body step's slot, so the client is told why.

use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;

use super::chunked::{self, Unchunk};
use crate::refusal::RefusalSlot;

/// The body a request goes on with after [`super::verify()`]: as it arrives, or read whole (when the
/// signature covers its hash).
pub(crate) enum RequestBody {
    /// Not read yet.
    Arriving(Incoming),
    /// Read whole; taken once.
    Read(Option<Bytes>),
    /// aws-chunked, unframed as it arrives (its chunk signatures checked on the way): where
    /// a refusal is left, and the signing secret's name for it.
    Unframed(Box<Unchunk>, RefusalSlot, String),
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Self::Arriving(incoming) => Pin::new(incoming).poll_frame(cx).map_err(|_| BodyError),
            Self::Read(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Unframed(unchunk, stopped, secret) => {
                match std::task::ready!(Pin::new(&mut **unchunk).poll_frame(cx)) {
                    Some(Err(error)) => {
                        // The client is told why, not that the upstream failed.
                        stopped.leave(chunked::refusal(secret, &*error));
                        Poll::Ready(Some(Err(BodyError)))
                    }
                    Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
                    None => Poll::Ready(None),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Arriving(incoming) => incoming.is_end_stream(),
            Self::Read(bytes) => bytes.is_none(),
            Self::Unframed(unchunk, ..) => unchunk.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Arriving(incoming) => incoming.size_hint(),
            Self::Read(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Self::Unframed(unchunk, ..) => unchunk.size_hint(),
        }
    }
}

/// A request body that did not arrive whole: the client's connection failed, or an
/// aws-chunked body was refused (the refusal is in the body step's `StoppedBody` (`forward::request_body`)).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive whole")]
pub(crate) struct BodyError;
