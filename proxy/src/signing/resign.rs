//! The way out: a [`Pending`] request signed again with the real key, over the request as
//! it leaves (the upstream's `Host`, the real session token, the body as rewritten where
//! its hash is signed), and an aws-chunked body framed again with the real key's chunk
//! signatures. The real key goes into the leaving request's headers or query only.

use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http::{HeaderName, HeaderValue};
use http_body_util::BodyExt;
use sluice_sign::aws_sigv4::chunked::ChunkChain;
use sluice_sign::aws_sigv4::sha256_hex;

use super::chunked::Rechunk;
use super::verify::{Context, Pending};
use super::{head_of, read_whole, target_of, with_path_and_query};
use crate::body::{self, Body};
use crate::refusal::Refusal;

/// What a re-signing was, for its `swap` event (`location: signature`).
pub(crate) struct Resigned {
    /// The signing secret.
    pub(crate) secret: String,
    /// The kind, service and region.
    pub(crate) reason: String,
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
        let path_and_query = target_of(parts);
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
