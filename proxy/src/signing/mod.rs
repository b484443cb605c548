//! Signing secrets on the request path: a request signed with a signing secret's
//! placeholders is verified before anything else reads it, its signature is held out of the
//! scan, and it is signed again with the real key once the scan and the body are done.
//!
//! The order is the types': [`verify()`] reads the head exactly as the client sent it (before
//! hop-by-hop headers and `Host` go, before any swap), and only the [`Pending`] it returns
//! can be signed again, by [`Pending::resign`], over the request as it will leave. The real
//! key signs what the placeholder key signed, changed only by the upstream's `Host`, the
//! real session token, and (where the body is hashed) the body as rewritten.
//!
//! It decides no grant (`Policy::may_sign` does) and computes no signature (`sluice-sign`
//! does); it never writes a real part anywhere but into the request that leaves. An
//! aws-chunked body's framing and chunk signatures are `chunked`'s.

mod body;
mod chunked;
mod keys;
mod resign;
mod verify;

use bytes::Bytes;
use http::Uri;
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http::uri::PathAndQuery;
use http_body_util::BodyExt;
use sluice_sign::aws_sigv4::Head;

use crate::body::Body;
use crate::config::Limits;
use crate::refusal::Refusal;

pub(crate) use body::RequestBody;
pub(crate) use keys::Signers;
pub(crate) use verify::{Context, Pending, verify};

/// The request's path and query as its head holds them (`/` when it has none).
fn target_of(parts: &Parts) -> String {
    parts
        .uri
        .path_and_query()
        .map_or("/", PathAndQuery::as_str)
        .to_owned()
}

/// The head a signature is checked against: every header that is text, and `host`.
fn head_of<'a>(parts: &'a Parts, host: &'a str, path_and_query: &'a str) -> Head<'a> {
    Head {
        method: parts.method.as_str(),
        host,
        path_and_query,
        headers: parts
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect(),
    }
}

/// `uri` with another path and query.
fn with_path_and_query(uri: &Uri, path_and_query: &str) -> Result<Uri, Refusal> {
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(
        PathAndQuery::try_from(path_and_query)
            .map_err(|_| Refusal::bad_request("the signed request target is not a valid URI"))?,
    );
    Uri::from_parts(parts)
        .map_err(|_| Refusal::bad_request("the signed request target is not a valid URI"))
}

/// The whole body, within the bound and the time limit (a signature over the body's hash
/// cannot be checked, or made, before all of it is here).
async fn read_whole(mut body: Body, parts: &Parts, limits: &Limits) -> Result<Bytes, Refusal> {
    let limit = limits.max_buffered_body;
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Refusal::too_large(limit));
    }
    let read = async {
        let mut whole = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(Refusal::bad_request(
                    "the request body ended before it was whole",
                ));
            };
            if let Ok(data) = frame.into_data() {
                if whole.len() + data.len() > limit {
                    return Err(Refusal::too_large(limit));
                }
                whole.extend_from_slice(&data);
            }
        }
        Ok(whole.freeze())
    };
    let timeout = limits.body_read_timeout;
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| Refusal::body_timeout(timeout))?
}
