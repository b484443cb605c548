//! Signing secrets on the request path: a request signed with a signing secret's
//! placeholders is verified before anything else reads it, its signature is held out of the
//! scan, and it is signed again with the real key once the scan and the body are done.
//!
//! The order is the types': [`verify`] reads the head exactly as the client sent it (before
//! hop-by-hop headers and `Host` go, before any swap), and only the [`Pending`] it returns
//! can be signed again, by [`Pending::resign`], over the request as it will leave. The real
//! key signs what the placeholder key signed, changed only by the upstream's `Host`, the
//! real session token, and (where the body is hashed) the body as rewritten.
//!
//! It decides no grant (`Policy::may_sign` does) and computes no signature (`sluice-sign`
//! does); it never writes a real part anywhere but into the request that leaves. An
//! aws-chunked body's framing and chunk signatures are `chunked`'s.

mod chunked;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST};
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{HeaderName, HeaderValue, Uri};
use std::pin::Pin;
use std::task::Poll;

use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sluice_policies::{Policy, ResolvedSecret, SigningPart};
use sluice_sign::aws_sigv4::{
    Canonicalization, Claim, Credentials, Form, Head, Verified, sha256_hex, without_signing_params,
};

use crate::body::{self, Body};
use crate::config::Limits;
use crate::refusal::{Refusal, RefusalSlot};
use crate::tls::target::Target;

use chunked::{Rechunk, SharedFraming, Unchunk};
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode};

/// The body a request goes on with after [`verify`]: as it arrives, or read whole (when the
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
/// aws-chunked body was refused (the refusal is in the body step's [`StoppedBody`]).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive whole")]
pub(crate) struct BodyError;

/// Each signing secret's two credentials: the placeholders the sandbox signs with, and the
/// real ones sluice signs with. Indexed as [`Policy::signers`].
#[derive(Default)]
pub(crate) struct Signers {
    keys: Vec<Keys>,
}

struct Keys {
    name: String,
    placeholder: Credentials,
    real: Credentials,
}

impl Signers {
    /// The credentials of every signer in `policy`, from its parts' values and placeholders
    /// (`resolved`, in [`Policy::secrets`] order).
    pub(crate) fn new(policy: &Policy, resolved: &[ResolvedSecret]) -> Self {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let keys = policy
            .signers()
            .iter()
            .map(|signer| {
                let part = |p: SigningPart| signer.part(p).map(|i| &resolved[i]);
                let both =
                    |p: SigningPart| part(p).map(|r| (r.placeholder.clone(), text(&r.value)));
                let (key_ph, key) = both(SigningPart::AccessKeyId).unwrap_or_default();
                let (secret_ph, secret) = both(SigningPart::SecretAccessKey).unwrap_or_default();
                let token = both(SigningPart::SessionToken);
                Keys {
                    name: signer.name().to_owned(),
                    placeholder: Credentials::new(
                        key_ph,
                        secret_ph,
                        token.as_ref().map(|(ph, _)| ph.clone()),
                    ),
                    real: Credentials::new(key, secret, token.map(|(_, value)| value)),
                }
            })
            .collect();
        Self { keys }
    }

    /// Whether no secret signs.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The signer whose placeholder access key id is `key_id`.
    fn by_key_id(&self, key_id: &str) -> Option<usize> {
        self.keys
            .iter()
            .position(|k| k.placeholder.access_key_id() == key_id)
    }

    /// The signer whose placeholder key id `text` holds, if any.
    fn named_in(&self, text: &str) -> Option<usize> {
        self.keys
            .iter()
            .position(|k| text.contains(k.placeholder.access_key_id()))
    }
}

/// A verified request waiting to be signed again.
pub(crate) struct Pending {
    signer: usize,
    verified: Verified,
    canon: Canonicalization,
    chunked: Option<Chunked>,
}

/// An aws-chunked body's state between the way in and the way out: its framing, and the
/// headers held out of the scan (its coding, which the scan would not know, and its length,
/// which the scan would recompute) and written back before the request is signed again.
struct Chunked {
    mode: Mode,
    framing: SharedFraming,
    content_encoding: Option<HeaderValue>,
    content_length: Option<HeaderValue>,
}

impl Pending {
    /// Whether the body's bytes may not change (aws-chunked: its lengths are signed).
    pub(crate) fn keeps_length(&self) -> bool {
        self.chunked.is_some()
    }
}

/// What a re-signing was, for its `swap` event (`location: signature`).
pub(crate) struct Resigned {
    /// The signing secret.
    pub(crate) secret: String,
    /// The kind, service and region.
    pub(crate) reason: String,
}

/// What [`verify`] needs of the proxy.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) signers: &'a Signers,
    pub(crate) policy: &'a Policy,
    pub(crate) limits: &'a Limits,
}

/// Finds a SigV4 signature by a signing secret's placeholder key on the request toward
/// `target`, checks the grant and the signature, and holds the signature out of `parts`
/// (the `Authorization` and session token headers, or the presigned query's parameters)
/// until [`Pending::resign`] writes the real one. A request signed by no placeholder key
/// goes on untouched (`None`): any placeholder in it is the scan's to refuse.
///
/// The body is read whole here when the signature covers its hash, since the signature
/// cannot be checked before.
pub(crate) async fn verify(
    cx: Context<'_>,
    target: &Target,
    parts: &mut Parts,
    incoming: Incoming,
    refused: &RefusalSlot,
) -> Result<(Option<Pending>, RequestBody), Refusal> {
    // Most requests carry no SigV4 signature at all: they cost two look-ups here.
    let signed_header = parts
        .headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .any(|v| v.as_bytes().starts_with(b"AWS4-"));
    let signed_query = parts
        .uri
        .query()
        .is_some_and(|q| q.contains("X-Amz-") || q.contains("x-amz-") || q.contains('%'));
    if cx.signers.is_empty() || !(signed_header || signed_query) {
        return Ok((None, RequestBody::Arriving(incoming)));
    }
    let host = match parts.headers.get(HOST).map(HeaderValue::to_str) {
        Some(Ok(host)) => host.to_owned(),
        _ => parts
            .uri
            .authority()
            .map_or_else(String::new, |a| a.to_string()),
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", PathAndQuery::as_str)
        .to_owned();
    let head = head_of(parts, &host, &path_and_query);
    let claim = match Claim::find(&head) {
        Ok(Some(claim)) => claim,
        Ok(None) => return Ok((None, RequestBody::Arriving(incoming))),
        Err(malformed) => {
            // Someone else's signature is the upstream's business; one naming a
            // placeholder key is refused, never passed on half-read.
            let authorization = head.values("authorization").collect::<Vec<_>>().join(" ");
            let mentioned = format!("{authorization} {path_and_query}");
            return match cx.signers.named_in(&mentioned) {
                Some(signer) => Err(Refusal::signature_invalid(
                    &cx.signers.keys[signer].name,
                    &malformed,
                )),
                None => Ok((None, RequestBody::Arriving(incoming))),
            };
        }
    };
    let Some(signer) = cx.signers.by_key_id(claim.access_key_id()) else {
        return Ok((None, RequestBody::Arriving(incoming)));
    };
    let keys = &cx.signers.keys[signer];
    let scope = claim.scope();
    cx.policy
        .may_sign(
            signer,
            &target.host,
            target.port,
            &scope.service,
            &scope.region,
        )
        .map_err(|ungranted| Refusal::signing_not_granted(&keys.name, &ungranted))?;
    let canon = Canonicalization::for_service(&scope.service);
    let (body, body_hash) = if claim.payload().hashes_body() {
        let bytes = read_whole(body::incoming(incoming), parts, cx.limits).await?;
        let hash = sha256_hex(&bytes);
        (RequestBody::Read(Some(bytes)), Some(hash))
    } else {
        (RequestBody::Arriving(incoming), None)
    };
    let payload_hash = claim
        .payload_hash(body_hash.as_deref())
        .map_err(|e| Refusal::signature_invalid(&keys.name, &e))?;
    let verified = claim
        .verify(&head, &payload_hash, &keys.placeholder, canon)
        .map_err(|e| Refusal::signature_invalid(&keys.name, &e))?;
    drop(head);
    // Held out of the scan: the placeholders there are the signer's, not a grant's.
    let claim = verified.claim();
    for name in claim.carrier_headers() {
        parts.headers.remove(*name);
    }
    if claim.form() == Form::Query {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query.as_str(), ""));
        let query = without_signing_params(query);
        let unsigned = if query.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{query}")
        };
        parts.uri = with_path_and_query(&parts.uri, &unsigned)?;
    }
    // An aws-chunked body: unframed on its way in, its chunks checked by the placeholder key.
    let mode = match claim.payload() {
        sluice_sign::aws_sigv4::Payload::Declared(declared) => Mode::of_payload(declared),
        _ => None,
    };
    let (body, chunked) = match (mode, body) {
        (Some(mode), RequestBody::Arriving(incoming)) => {
            let (unchunk, chunked) = unframe(cx, parts, incoming, mode, &verified, keys)?;
            let body = RequestBody::Unframed(Box::new(unchunk), refused.clone(), keys.name.clone());
            (body, Some(chunked))
        }
        (_, body) => (body, None),
    };
    Ok((
        Some(Pending {
            signer,
            verified,
            canon,
            chunked,
        }),
        body,
    ))
}

/// The way in of an aws-chunked body, and the headers held out of the scan.
fn unframe(
    cx: Context<'_>,
    parts: &mut Parts,
    incoming: Incoming,
    mode: Mode,
    verified: &Verified,
    keys: &Keys,
) -> Result<(Unchunk, Chunked), Refusal> {
    // Each of these read once, so each must be there once: two fields would be read one
    // way here and another by the upstream (and the real key would sign other headers
    // than the placeholder key's).
    for name in [
        http::header::CONTENT_ENCODING.as_str(),
        "x-amz-decoded-content-length",
        "x-amz-trailer",
    ] {
        if parts.headers.get_all(name).iter().count() > 1 {
            return Err(Refusal::bad_request(format!(
                "an aws-chunked upload has more than one {name} field; send it once"
            )));
        }
    }
    let content_encoding = parts.headers.remove(http::header::CONTENT_ENCODING);
    if let Some(value) = &content_encoding {
        let codings: Vec<String> = value
            .to_str()
            .unwrap_or("?")
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect();
        if codings != ["aws-chunked"] {
            return Err(Refusal::bad_request(format!(
                "sluice scans an aws-chunked body only without another content coding (this one is `{}`); upload it with Content-Encoding: aws-chunked alone",
                codings.join(", ")
            )));
        }
    }
    let declared = parts
        .headers
        .get("x-amz-decoded-content-length")
        .and_then(|v| digits(v.as_bytes()))
        .ok_or_else(|| {
            Refusal::bad_request(
                "an aws-chunked body needs x-amz-decoded-content-length: the length of its data, in digits",
            )
        })?;
    let content_length = parts.headers.remove(CONTENT_LENGTH);
    // The placeholder key's chain, from the request's own signature.
    let claim = verified.claim();
    let chain = mode
        .signs_chunks()
        .then(|| ChunkChain::new(&keys.placeholder, claim, claim.signature()));
    // The trailers a signed-trailer body must carry (a signed header: it stays).
    let announced = parts
        .headers
        .get("x-amz-trailer")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let framing = SharedFraming::default();
    let unchunk = Unchunk::new(
        incoming,
        mode,
        chain,
        cx.limits.max_buffered_body as u64,
        declared,
        announced,
        framing.clone(),
    );
    Ok((
        unchunk,
        Chunked {
            mode,
            framing,
            content_encoding,
            content_length,
        },
    ))
}

/// A length written as plain decimal digits (no sign, no space), as every reader of it
/// agrees: `+5` parses in Rust and not elsewhere.
fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

impl Pending {
    /// Signs the request again with the real key, over `parts` as they will leave (with
    /// `host`, the upstream's `Host`) and over `body` where the body's hash is signed; what
    /// it did, for the audit log.
    pub(crate) async fn resign(
        self,
        cx: Context<'_>,
        parts: &mut Parts,
        body: Body,
        host: &HeaderValue,
    ) -> Result<(Body, Resigned), Refusal> {
        let keys = &cx.signers.keys[self.signer];
        let claim = self.verified.claim();
        if let Some(chunked) = &self.chunked {
            // Its coding and length as the client signed them: the body leaves as framed.
            if let Some(value) = &chunked.content_encoding {
                parts
                    .headers
                    .insert(http::header::CONTENT_ENCODING, value.clone());
            }
            if let Some(value) = &chunked.content_length {
                parts.headers.insert(CONTENT_LENGTH, value.clone());
            }
        }
        let (body, body_hash) = if claim.payload().hashes_body() {
            let bytes = read_whole(body, parts, cx.limits).await?;
            let hash = sha256_hex(&bytes);
            (body::full(bytes), Some(hash))
        } else {
            (body, None)
        };
        let host = host.to_str().unwrap_or_default().to_owned();
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", PathAndQuery::as_str)
            .to_owned();
        let head = head_of(parts, &host, &path_and_query);
        let payload_hash = claim
            .payload_hash(body_hash.as_deref())
            .map_err(|e| Refusal::signature_invalid(&keys.name, &e))?;
        let signed = self
            .verified
            .resign(&head, &payload_hash, &keys.real, self.canon)
            .map_err(|e| Refusal::signature_invalid(&keys.name, &e))?;
        drop(head);
        for (name, value) in &signed.headers {
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                Refusal::signature_invalid(&keys.name, &"a signed header value is not text")
            })?;
            value.set_sensitive(true);
            parts.headers.insert(HeaderName::from_static(name), value);
        }
        if let Some(path_and_query) = &signed.path_and_query {
            parts.uri = with_path_and_query(&parts.uri, path_and_query)?;
        }
        let body = match self.chunked {
            Some(chunked) => {
                let chain = chunked
                    .mode
                    .signs_chunks()
                    .then(|| ChunkChain::new(&keys.real, claim, &signed.signature));
                BodyExt::boxed(Rechunk::new(body, chunked.mode, chain, chunked.framing))
            }
            None => body,
        };
        let scope = claim.scope();
        let resigned = Resigned {
            secret: keys.name.clone(),
            reason: format!(
                "aws-sigv4 re-signed: service {}, region {}",
                scope.service, scope.region
            ),
        };
        Ok((body, resigned))
    }
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

#[cfg(test)]
mod tests {
    use super::digits;

    #[test]
    fn a_decoded_length_is_plain_digits_only() {
        assert_eq!(digits(b"300000"), Some(300_000));
        assert_eq!(digits(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+5",
            b"-5",
            b" 5",
            b"5 ",
            b"0x10",
            b"99999999999999999999",
        ] {
            assert_eq!(digits(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
