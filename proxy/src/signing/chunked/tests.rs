//! The aws-chunked way in and out together: signed chunks and signed trailers leave as
//! they came, signed by the real key; anything the placeholder key did not sign stops the
//! body before its bytes go on.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt;
use proptest::prelude::*;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode};
use sluice_sign::aws_sigv4::{Claim, Head};

use super::*;
use crate::body::BoxError;

const DATE: &str = "20261202T101500Z";

fn key(id: &str, secret: &str) -> sluice_sign::aws_sigv4::Credentials {
    sluice_sign::aws_sigv4::Credentials::new(id, secret, None)
}

/// A claim for a signed-chunk upload: the chain needs its scope and date only.
fn claim() -> Claim {
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential=PLACEHOLDERKEYID0000/20261202/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={}",
        "0".repeat(64)
    );
    let headers = [
        ("x-amz-date", DATE),
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        ("authorization", authorization.as_str()),
    ];
    let head = Head {
        method: "PUT",
        host: "s3.eu-west-1.amazonaws.com",
        path_and_query: "/b/k",
        headers: headers.to_vec(),
    };
    Claim::find(&head).unwrap().unwrap()
}

/// `data` framed as a client frames it: chunks of `sizes` (cycled), each signed by
/// `chain` from `seed`, and the last empty chunk.
fn frame(data: &[u8], sizes: &[usize], chain: &mut ChunkChain) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = data;
    for &size in sizes.iter().cycle() {
        let take = size.min(rest.len());
        let chunk = Bytes::copy_from_slice(&rest[..take]);
        rest = &rest[take..];
        let signature = chain.sign(&chunk);
        out.extend_from_slice(format!("{take:x};chunk-signature={signature}\r\n").as_bytes());
        out.extend_from_slice(&chunk);
        out.extend_from_slice(b"\r\n");
        if take == 0 {
            break;
        }
    }
    out
}

/// A body arriving in pieces of `split` bytes.
struct Pieces(VecDeque<Bytes>);

impl HttpBody for Pieces {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

fn stream(bytes: Vec<u8>, split: usize) -> Pieces {
    Pieces(
        bytes
            .chunks(split.max(1))
            .map(Bytes::copy_from_slice)
            .collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the data, the client's chunk sizes and how the bytes arrive, the upload
    /// leaves with the same bytes in the same chunks, each signed by the real key, and
    /// exactly as long as it came.
    #[test]
    fn signed_chunks_leave_as_they_came_signed_by_the_real_key(
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        sizes in proptest::collection::vec(1usize..700, 1..4),
        split in 1usize..500,
    ) {
        let claim = claim();
        let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
        let real = key("AKIAREALREALREAL0000", "real-secret");
        let seed = claim.signature().to_owned();
        let sent = frame(&data, &sizes, &mut ChunkChain::new(&placeholder, &claim, &seed));
        let framing = SharedFraming::default();
        let unchunk = Unchunk::new(
            stream(sent.clone(), split),
            Mode::Signed,
            Some(ChunkChain::new(&placeholder, &claim, &seed)),
            1 << 20,
            data.len() as u64,
            None,
            framing.clone(),
        );
        let real_seed = "1".repeat(64);
        let rechunk = Rechunk::new(
            BodyExt::boxed(unchunk),
            Mode::Signed,
            Some(ChunkChain::new(&real, &claim, &real_seed)),
            framing,
        );
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let out = runtime.block_on(rechunk.collect()).unwrap().to_bytes();
        let expected = frame(&data, &sizes, &mut ChunkChain::new(&real, &claim, &real_seed));
        prop_assert_eq!(out.len(), sent.len());
        prop_assert_eq!(out.to_vec(), expected);
    }
}

#[tokio::test]
async fn a_chunk_changed_after_signing_stops_the_body_before_its_bytes_go_on() {
    let claim = claim();
    let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
    let seed = claim.signature().to_owned();
    let mut sent = frame(
        b"first chunk|second chunk",
        &[12],
        &mut ChunkChain::new(&placeholder, &claim, &seed),
    );
    let at = sent.windows(6).position(|w| w == b"second").unwrap();
    sent[at] = b'S';
    let unchunk = Unchunk::new(
        stream(sent, 7),
        Mode::Signed,
        Some(ChunkChain::new(&placeholder, &claim, &seed)),
        1 << 20,
        24,
        None,
        SharedFraming::default(),
    );
    let mut body = BodyExt::boxed(unchunk);
    let mut passed = Vec::new();
    let error = loop {
        match body.frame().await {
            Some(Ok(frame)) => passed.extend_from_slice(&frame.into_data().unwrap()),
            Some(Err(error)) => break error,
            None => panic!("the changed chunk passed"),
        }
    };
    assert_eq!(passed, b"first chunk|", "only the checked chunk went on");
    assert!(matches!(
        error.downcast_ref::<ChunkedError>(),
        Some(ChunkedError::Signature)
    ));
    assert_eq!(
        refusal("aws_prod", &*error).code,
        crate::refusal::Code::SignatureInvalid
    );
}

/// `data` framed with signed chunks and a signed trailer, as a client of
/// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER` frames it.
fn frame_trailed(data: &[u8], sizes: &[usize], chain: &mut ChunkChain, trailer: &str) -> Vec<u8> {
    let mut out = frame(data, sizes, chain);
    out.truncate(out.len() - 2);
    let signature = chain.sign_trailer(&[trailer.to_owned()]).unwrap();
    out.extend_from_slice(
        format!("{trailer}\r\nx-amz-trailer-signature:{signature}\r\n\r\n").as_bytes(),
    );
    out
}

/// The way in then the way out of a signed-trailer body sent in pieces of `split` bytes,
/// announcing `announced`: what left, or the error that stopped it.
fn through(sent: &[u8], split: usize, declared: u64, announced: &str) -> Result<Bytes, BoxError> {
    let claim = claim();
    let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
    let real = key("AKIAREALREALREAL0000", "real-secret");
    let framing = SharedFraming::default();
    let unchunk = Unchunk::new(
        stream(sent.to_vec(), split),
        Mode::SignedTrailer,
        Some(ChunkChain::new(&placeholder, &claim, claim.signature())),
        1 << 20,
        declared,
        Some(announced.to_owned()),
        framing.clone(),
    );
    let rechunk = Rechunk::new(
        BodyExt::boxed(unchunk),
        Mode::SignedTrailer,
        Some(ChunkChain::new(&real, &claim, &"1".repeat(64))),
        framing,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime
        .block_on(rechunk.collect())
        .map(http_body_util::Collected::to_bytes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Signed chunks with a signed trailer leave as they came: the same chunks and the same
    /// trailer (its checksum untouched), every signature the real key's.
    #[test]
    fn a_signed_trailer_leaves_as_it_came_signed_by_the_real_key(
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        sizes in proptest::collection::vec(1usize..700, 1..4),
        split in 1usize..400,
    ) {
        let claim = claim();
        let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
        let real = key("AKIAREALREALREAL0000", "real-secret");
        let trailer = "x-amz-checksum-crc32:3o2mDw==";
        let mut client = ChunkChain::new(&placeholder, &claim, claim.signature());
        let sent = frame_trailed(&data, &sizes, &mut client, trailer);
        let out = through(&sent, split, data.len() as u64, "x-amz-checksum-crc32").unwrap();
        let mut expected_chain = ChunkChain::new(&real, &claim, &"1".repeat(64));
        let expected = frame_trailed(&data, &sizes, &mut expected_chain, trailer);
        prop_assert_eq!(out.len(), sent.len());
        prop_assert_eq!(out.to_vec(), expected);
    }
}

#[test]
fn a_trailer_the_placeholder_key_did_not_sign_or_the_head_did_not_announce_is_refused() {
    let claim = claim();
    let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
    let signed = |trailer: &str| {
        let mut client = ChunkChain::new(&placeholder, &claim, claim.signature());
        frame_trailed(b"some data", &[4], &mut client, trailer)
    };
    let code = |error: &BoxError| refusal("aws_prod", &**error).code;
    // The checksum changed after signing.
    let mut sent = signed("x-amz-checksum-crc32:AAAAAA==");
    let at = sent.windows(8).position(|w| w == b"AAAAAA==").unwrap();
    sent[at] = b'B';
    let error = through(&sent, 5, 9, "x-amz-checksum-crc32").unwrap_err();
    assert!(matches!(
        error.downcast_ref::<ChunkedError>(),
        Some(ChunkedError::TrailerSignature)
    ));
    assert_eq!(code(&error), crate::refusal::Code::SignatureInvalid);
    // A trailer the head did not announce, however well signed.
    let sent = signed("x-amz-checksum-sha256:AAAAAA==");
    let error = through(&sent, 64, 9, "x-amz-checksum-crc32").unwrap_err();
    assert!(matches!(
        error.downcast_ref::<ChunkedError>(),
        Some(ChunkedError::Unannounced)
    ));
    assert_eq!(code(&error), crate::refusal::Code::SignatureInvalid);
    // No trailer signature: a signed body's framing, broken.
    let mut sent = signed("x-amz-checksum-crc32:AAAAAA==");
    let at = sent
        .windows(24)
        .position(|w| w == b"x-amz-trailer-signature:")
        .unwrap();
    sent.truncate(at);
    sent.extend_from_slice(b"\r\n");
    let error = through(&sent, 3, 9, "x-amz-checksum-crc32").unwrap_err();
    assert!(matches!(
        error.downcast_ref::<ChunkedError>(),
        Some(ChunkedError::SignedFraming(_))
    ));
    assert_eq!(code(&error), crate::refusal::Code::SignatureInvalid);
}
