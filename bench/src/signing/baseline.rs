//! What the signing benchmark's figures are judged against, measured in the same process:
//! one SHA-256 pass over the upload's bytes (the hash sluice uses, a digest per 64 KiB chunk
//! as it takes them) and one in-process `aws-sigv4` sign of the GET sluice re-signs, with
//! the settings sluice gives the crate for it.

use std::time::{Duration, Instant, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use sluice_sign::aws_sigv4::chunked::ChunkHasher;

use super::CHUNK;
use crate::error::BenchError;

/// `DATE` (20261202T120000Z) as a time.
const DATE_SECS: u64 = 1_796_212_800;

/// Seconds of one SHA-256 pass over `data` in 64 KiB chunks, the best of three.
pub(super) fn sha256_pass(data: &Bytes) -> f64 {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            for chunk in data.chunks(CHUNK) {
                std::hint::black_box(ChunkHasher::digest(chunk));
            }
            started.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Microseconds of one `aws-sigv4` sign of `GET /small` toward `authority` as sluice asks
/// the crate for it (S3's canonicalisation, `x-amz-content-sha256: UNSIGNED-PAYLOAD`, the
/// date and the hash written by the signer), the median of five batches of 2,000.
pub(super) fn aws_sigv4_sign_us(authority: &str) -> Result<f64, BenchError> {
    let identity: aws_smithy_runtime_api::client::identity::Identity =
        aws_credential_types::Credentials::new(
            "AKIABENCHSIGNKEY0001",
            "bench/sign/secret/access/key/0123456789ab",
            None,
            None,
            "bench",
        )
        .into();
    let mut settings = SigningSettings::default();
    settings.excluded_headers = None;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(DATE_SECS);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| BenchError::peer("signer", e))?
        .into();
    let uri = format!("https://{authority}/small");
    let once = || -> Result<String, BenchError> {
        let signable = SignableRequest::new(
            "GET",
            uri.as_str(),
            std::iter::once(("host", authority)),
            SignableBody::Precomputed("UNSIGNED-PAYLOAD".to_owned()),
        )
        .map_err(|e| BenchError::peer("signer", e))?;
        let (_, signature) = sign(signable, &params)
            .map_err(|e| BenchError::peer("signer", e))?
            .into_parts();
        Ok(signature)
    };
    let mut batches = Vec::with_capacity(5);
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..2000 {
            std::hint::black_box(once()?);
        }
        batches.push(started.elapsed().as_secs_f64() * 1e6 / 2000.0);
    }
    batches.sort_by(f64::total_cmp);
    Ok(batches[2])
}
