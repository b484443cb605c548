//! The way in: a SigV4 signature by a placeholder key found, its grant and signature
//! checked, and the signature (and an aws-chunked body's framing headers) held out of the
//! scan. What it returns, [`Pending`], is the only thing [`Pending::resign`] signs.

use http::HeaderValue;
use http::header::{CONTENT_LENGTH, HOST};
use http::request::Parts;
use hyper::body::Incoming;
use sluice_policies::Policy;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode};
use sluice_sign::aws_sigv4::{
    Canonicalization, Claim, Form, Verified, sha256_hex, without_signing_params,
};

use super::body::RequestBody;
use super::chunked::{SharedFraming, Unchunk};
use super::keys::{Keys, Signers};
use super::{head_of, read_whole, target_of, with_path_and_query};
use crate::body;
use crate::config::Limits;
use crate::refusal::{Refusal, RefusalSlot};
use crate::tls::target::Target;

/// A verified request waiting to be signed again.
pub(crate) struct Pending {
    pub(super) signer: usize,
    pub(super) verified: Verified,
    pub(super) canon: Canonicalization,
    pub(super) chunked: Option<Chunked>,
}

/// An aws-chunked body's state between the way in and the way out: its framing, and the
/// headers held out of the scan (its coding, which the scan would not know, and its length,
/// which the scan would recompute) and written back before the request is signed again.
pub(super) struct Chunked {
    pub(super) mode: Mode,
    pub(super) framing: SharedFraming,
    pub(super) content_encoding: Option<HeaderValue>,
    pub(super) content_length: Option<HeaderValue>,
}

impl Pending {
    /// Whether the body's bytes may not change (aws-chunked: its lengths are signed).
    pub(crate) fn keeps_length(&self) -> bool {
        self.chunked.is_some()
    }
}

/// What [`verify()`] needs of the proxy.
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
    let path_and_query = target_of(parts);
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
