//! What sluice's SigV4 path costs beside the crate's own signing: `Claim::find`,
//! `Claim::verify` with the placeholder key and `Verified::resign` with the real one, over
//! the GET `sluice-bench signing` sends, against two in-process `aws-sigv4` signs of the same
//! request (the verification and the re-signing are one each).
//!
//! `cargo bench -p sluice-sign --bench resign` prints each, best of 7 batches of 20,000,
//! and the difference: what sluice's own code adds per request on the signing path. Under
//! `cargo test --benches` it runs a batch of 200, as a smoke test.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use sluice_sign::aws_sigv4::{Canonicalization, Claim, Credentials, Head, Scope, sign_as_client};

const HOST: &str = "localhost:8443";
const DATE: &str = "20261202T120000Z";
/// `DATE` as seconds since the epoch.
const DATE_SECS: u64 = 1_796_212_800;

fn best_of(batches: usize, per_batch: usize, mut f: impl FnMut()) -> f64 {
    (0..batches)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            started.elapsed().as_secs_f64() * 1e6 / per_batch as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let (batches, per_batch) = if smoke { (1, 200) } else { (7, 20_000) };
    let placeholder = Credentials::new(
        "SLUICEPLACEHOLDER001",
        "placeholder/secret/0123456789",
        None,
    );
    let real = Credentials::new(
        "AKIABENCHREALKEY0001",
        "bench/real/secret/access/key/0123456789ab",
        None,
    );
    let fixed = [
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-date", DATE),
    ];
    let client_head = Head {
        method: "GET",
        host: HOST,
        path_and_query: "/small",
        headers: fixed.to_vec(),
    };
    let scope = Scope {
        date: DATE[..8].to_owned(),
        region: "us-east-1".to_owned(),
        service: "s3".to_owned(),
    };
    let names = ["host", "x-amz-content-sha256", "x-amz-date"];
    let (authorization, _) = sign_as_client(
        &client_head,
        scope,
        &names,
        "UNSIGNED-PAYLOAD",
        &placeholder,
    )
    .unwrap();
    // The head as sluice reads it: what a client sends, and the headers sluice's path sees.
    let mut headers = fixed.to_vec();
    headers.push(("authorization", authorization.as_str()));
    headers.push(("user-agent", "sluice-bench"));
    headers.push(("accept", "*/*"));
    let head = Head {
        method: "GET",
        host: HOST,
        path_and_query: "/small",
        headers,
    };
    let canon = Canonicalization::for_service("s3");
    let sluice = best_of(batches, per_batch, || {
        let claim = Claim::find(&head).unwrap().unwrap();
        let payload = claim.payload_hash(None).unwrap().into_owned();
        let verified = claim.verify(&head, &payload, &placeholder, canon).unwrap();
        black_box(verified.resign(&head, &payload, &real, canon).unwrap());
    });

    let identity: aws_smithy_runtime_api::client::identity::Identity =
        aws_credential_types::Credentials::new("AKIABENCHREALKEY0001", "secret", None, None, "b")
            .into();
    let mut settings = SigningSettings::default();
    settings.excluded_headers = None;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(SystemTime::UNIX_EPOCH + Duration::from_secs(DATE_SECS))
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let crate_sign = best_of(batches, per_batch, || {
        let signable = SignableRequest::new(
            "GET",
            "https://localhost:8443/small",
            std::iter::once(("host", HOST)),
            SignableBody::Precomputed("UNSIGNED-PAYLOAD".to_owned()),
        )
        .unwrap();
        black_box(sign(signable, &params).unwrap());
    });
    println!("find + verify + resign (sluice-sign) {sluice:>8.2} µs");
    println!(
        "two aws-sigv4 signs                   {:>8.2} µs",
        2.0 * crate_sign
    );
    println!(
        "sluice-sign's own                     {:>8.2} µs",
        sluice - 2.0 * crate_sign
    );
}
