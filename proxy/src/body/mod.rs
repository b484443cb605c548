//! The one body type that crosses the proxy in both directions, and its content codings
//! ([`codec`]: decoded, bounded, to be scanned; encoded again after a swap).

pub(crate) mod codec;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};

/// Errors a body can fail with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed, streaming body.
pub(crate) type Body = BoxBody<Bytes, BoxError>;

/// A body of known bytes.
pub(crate) fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// A body of known bytes followed by trailers.
pub(crate) fn full_with_trailers(bytes: Bytes, trailers: http::HeaderMap) -> Body {
    Full::new(bytes)
        .map_err(|never| match never {})
        .with_trailers(std::future::ready(Some(Ok(trailers))))
        .boxed()
}

/// An empty body.
pub(crate) fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// Boxes hyper's incoming body.
pub(crate) fn incoming(body: hyper::body::Incoming) -> Body {
    body.map_err(|e| Box::new(e) as BoxError).boxed()
}
