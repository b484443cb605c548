//! The chain of chunk signatures by one key ([`ChunkChain`]): each chunk's signature
//! covers its data's SHA-256, the scope, `X-Amz-Date` and the signature before it, starting
//! from the request's own; the trailers' signature, in `…-PAYLOAD-TRAILER`, chains from the
//! last chunk's.
//!
//! Each chunk is hashed once ([`ChunkHasher`], as its data arrives) and that one digest
//! serves both keys: the placeholder key's signature is checked over it and the real key's
//! computed over it. The string to sign is the one AWS documents for a chunk
//! (`AWS4-HMAC-SHA256-PAYLOAD`, the date, the scope, the previous signature, the empty
//! string's hash, the chunk's hash); the HMAC is `aws-sigv4`'s own `calculate_signature`, with
//! the key from its `generate_signing_key`, derived once per date, region and service and
//! kept by the credential. A property test holds every signature equal to `aws-sigv4`'s
//! `sign_chunk` over the same bytes. The trailers' signature is `aws-sigv4`'s `sign_trailer`
//! itself (once per body).
//!
//! ```
//! use sluice_sign::aws_sigv4::chunked::{ChunkChain, ChunkHasher};
//! # use sluice_sign::aws_sigv4::{Claim, Credentials, Head};
//! # let authorization = format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={}", "4".repeat(64));
//! # let head = Head { method: "PUT", host: "s3.amazonaws.com", path_and_query: "/b/k",
//! #     headers: vec![("x-amz-date", "20130524T000000Z"),
//! #         ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
//! #         ("authorization", authorization.as_str())] };
//! # let claim = Claim::find(&head).unwrap().unwrap();
//! let key = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None);
//! let mut chain = ChunkChain::new(&key, &claim, claim.signature());
//! let mut hasher = ChunkHasher::new();
//! hasher.update(b"hello ");
//! hasher.update(b"world");
//! let signature = chain.sign_digest(&hasher.finish());
//! assert_eq!(signature.len(), 64);
//! ```

use std::sync::Arc;
use std::time::SystemTime;

use aws_sigv4::http_request::SigningSettings;
use aws_sigv4::sign::v4;
use sha2::Digest;
use subtle::ConstantTimeEq;

use super::super::claim::Claim;
use super::super::key::SigningKey;
use super::super::{Credentials, Invalid};

/// The SHA-256 of the empty string, in every chunk's string to sign.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The SHA-256 of one chunk's data, fed as the data arrives.
#[derive(Clone, Default)]
pub struct ChunkHasher(sha2::Sha256);

impl ChunkHasher {
    /// A hasher over nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next part of the chunk's data.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The chunk's digest.
    pub fn finish(self) -> [u8; 32] {
        let mut digest = [0; 32];
        digest.copy_from_slice(&self.0.finalize());
        digest
    }

    /// The digest of `data`, whole.
    pub fn digest(data: &[u8]) -> [u8; 32] {
        let mut hasher = Self::new();
        hasher.update(data);
        hasher.finish()
    }
}

impl std::fmt::Debug for ChunkHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkHasher")
    }
}

/// The chain of chunk signatures by one key, from one request's signature.
pub struct ChunkChain {
    /// Kept for the trailers' signature, which `aws-sigv4` computes itself.
    credentials: Credentials,
    key: Arc<SigningKey>,
    region: String,
    service: String,
    time: SystemTime,
    /// `AWS4-HMAC-SHA256-PAYLOAD\nDATE-TIME\nSCOPE\n`: what every chunk's string to sign
    /// starts with.
    head: String,
    previous: String,
}

impl ChunkChain {
    /// The chain of `credentials` for the request `claim` describes, from `seed` (the
    /// request's signature by the same key).
    pub fn new(credentials: &Credentials, claim: &Claim, seed: &str) -> Self {
        let scope = &claim.scope;
        let key = credentials.signing_key(claim.time, scope);
        let head = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}/{}/{}/aws4_request\n",
            claim.date_time, scope.date, scope.region, scope.service
        );
        Self {
            credentials: credentials.clone(),
            key,
            region: scope.region.clone(),
            service: scope.service.clone(),
            time: claim.time,
            head,
            previous: seed.to_owned(),
        }
    }

    /// The next chunk's signature, over its `digest` ([`ChunkHasher`]; the last chunk's is
    /// the empty string's).
    pub fn sign_digest(&mut self, digest: &[u8; 32]) -> String {
        let mut string_to_sign = String::with_capacity(self.head.len() + 3 * 64 + 2);
        string_to_sign.push_str(&self.head);
        string_to_sign.push_str(&self.previous);
        string_to_sign.push('\n');
        string_to_sign.push_str(EMPTY_SHA256);
        string_to_sign.push('\n');
        string_to_sign.push_str(&hex::encode(digest));
        let signature = v4::calculate_signature(self.key.as_bytes(), string_to_sign.as_bytes());
        self.previous.clone_from(&signature);
        signature
    }

    /// The next chunk's signature, over `data` (hashed here).
    pub fn sign(&mut self, data: &[u8]) -> String {
        self.sign_digest(&ChunkHasher::digest(data))
    }

    /// Checks that `claimed` is the next chunk's signature over `digest`, and moves on.
    ///
    /// # Errors
    ///
    /// [`Invalid::Mismatch`] when it is not.
    pub fn check_digest(&mut self, digest: &[u8; 32], claimed: &str) -> Result<(), Invalid> {
        let expected = self.sign_digest(digest);
        same(&expected, claimed)
    }

    /// Checks that `claimed` is the next chunk's signature over `data` (hashed here).
    ///
    /// # Errors
    ///
    /// [`Invalid::Mismatch`] when it is not.
    pub fn check(&mut self, data: &[u8], claimed: &str) -> Result<(), Invalid> {
        self.check_digest(&ChunkHasher::digest(data), claimed)
    }

    /// The trailers' signature (`x-amz-trailer-signature`), over `trailers` (`name:value`
    /// lines, as sent), after the last chunk's; `aws-sigv4`'s `sign_trailer`.
    ///
    /// # Errors
    ///
    /// [`Invalid::Unsignable`] when a trailer is not a header `aws-sigv4` accepts.
    pub fn sign_trailer(&mut self, trailers: &[String]) -> Result<String, Invalid> {
        let mut headers = aws_smithy_runtime_api::http::Headers::new();
        for line in trailers {
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| Invalid::Unsignable("a trailer is not `name:value`".into()))?;
            headers
                .try_append(name.to_owned(), value.to_owned())
                .map_err(|_| Invalid::Unsignable("a trailer is not a valid header".into()))?;
        }
        let params = v4::SigningParams::<SigningSettings>::builder()
            .identity(self.credentials.identity(None))
            .region(&self.region)
            .name(&self.service)
            .time(self.time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| Invalid::Unsignable(e.to_string()))?;
        let signature = v4::sign_trailer(&headers, &self.previous, &params)
            .map_err(|e| Invalid::Unsignable(e.to_string()))?
            .signature()
            .to_owned();
        self.previous.clone_from(&signature);
        Ok(signature)
    }

    /// Checks that `claimed` is the trailers' signature over `trailers`.
    ///
    /// # Errors
    ///
    /// [`Invalid::Mismatch`] when it is not.
    pub fn check_trailer(&mut self, trailers: &[String], claimed: &str) -> Result<(), Invalid> {
        let expected = self.sign_trailer(trailers)?;
        same(&expected, claimed)
    }
}

/// Compared in constant time: how much of a signature matched says nothing.
fn same(expected: &str, claimed: &str) -> Result<(), Invalid> {
    if bool::from(expected.as_bytes().ct_eq(claimed.as_bytes())) {
        Ok(())
    } else {
        Err(Invalid::Mismatch)
    }
}

impl std::fmt::Debug for ChunkChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkChain(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use aws_sigv4::sign::v4::{sign_chunk, sign_trailer};
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;
    use crate::aws_sigv4::Head;

    /// A signed-chunk claim for `time`, `region` and `service` (only its scope and date
    /// matter to the chain).
    fn claim(time: SystemTime, region: &str, service: &str) -> Claim {
        let t = time::OffsetDateTime::from(time);
        let date_time = format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/{region}/{service}/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={}",
            &date_time[..8],
            "0".repeat(64)
        );
        let head = Head {
            method: "PUT",
            host: "example.amazonaws.com",
            path_and_query: "/b/k",
            headers: vec![
                ("x-amz-date", date_time.as_str()),
                ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
                ("authorization", authorization.as_str()),
            ],
        };
        Claim::find(&head).unwrap().unwrap()
    }

    fn params<'a>(
        identity: &'a aws_smithy_runtime_api::client::identity::Identity,
        claim: &'a Claim,
    ) -> v4::SigningParams<'a, SigningSettings> {
        v4::SigningParams::builder()
            .identity(identity)
            .region(&claim.scope.region)
            .name(&claim.scope.service)
            .time(claim.time)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// One hash per chunk, a derived key, `calculate_signature`: the same signatures as
        /// `aws-sigv4`'s `sign_chunk` over random chunks, seeds, dates, regions, services
        /// and secrets, then the same trailer signature as its `sign_trailer`.
        #[test]
        fn every_signature_is_sign_chunks(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..6),
            seed in "[0-9a-f]{64}",
            secs in 0u64..4_000_000_000,
            region in "[a-z]{2}-[a-z]{4,9}-[1-9]",
            service in "[a-z][a-z0-9-]{1,12}",
            secret in "[A-Za-z0-9/+]{40}",
            checksum in "[A-Za-z0-9+/]{6}==",
        ) {
            let time = UNIX_EPOCH + Duration::from_secs(secs);
            let claim = claim(time, &region, &service);
            let credentials = Credentials::new("AKIDEXAMPLE", secret.clone(), None);
            let identity = credentials.identity(None).clone();
            let params = params(&identity, &claim);
            let mut chain = ChunkChain::new(&credentials, &claim, &seed);
            let mut verifier = ChunkChain::new(&credentials, &claim, &seed);
            let mut running = seed.clone();
            for chunk in chunks.iter().chain(std::iter::once(&Vec::new())) {
                let mut hasher = ChunkHasher::new();
                for part in chunk.chunks(7) {
                    hasher.update(part);
                }
                let digest = hasher.finish();
                let theirs = sign_chunk(&Bytes::copy_from_slice(chunk), &running, &params)
                    .unwrap()
                    .signature()
                    .to_owned();
                prop_assert_eq!(&chain.sign_digest(&digest), &theirs);
                prop_assert!(verifier.check_digest(&digest, &theirs).is_ok());
                running = theirs;
            }
            let trailer = format!("x-amz-checksum-crc32:{checksum}");
            let mut headers = aws_smithy_runtime_api::http::Headers::new();
            headers.insert("x-amz-checksum-crc32", checksum.clone());
            let theirs = sign_trailer(&headers, &running, &params).unwrap().signature().to_owned();
            prop_assert_eq!(&chain.sign_trailer(std::slice::from_ref(&trailer)).unwrap(), &theirs);
            prop_assert!(verifier.check_trailer(&[trailer], &theirs).is_ok());
        }
    }

    #[test]
    fn a_wrong_chunk_signature_is_a_mismatch_and_the_key_is_derived_once() {
        let time = UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        let claim = claim(time, "eu-west-1", "s3");
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", None);
        let mut chain = ChunkChain::new(&credentials, &claim, &"1".repeat(64));
        let digest = ChunkHasher::digest(b"data");
        assert_eq!(
            chain.check_digest(&digest, &"2".repeat(64)),
            Err(Invalid::Mismatch)
        );
        let other = ChunkChain::new(&credentials, &claim, &"1".repeat(64));
        assert!(Arc::ptr_eq(&chain.key, &other.key));
    }
}
