//! The fixture and the leak check: the declaration, every encoding of every value it holds
//! (found anywhere, overlaps included), and the checks that none of them reaches what is
//! forwarded toward a host its secret does not grant, or any refusal.

use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Waker};

use aho_corasick::AhoCorasick;
use base64::Engine as _;
use bytes::Bytes;
use http_body::{Body as _, Frame};
use sluice_guard::{Encoding, Guard, SecretValue};
use sluice_policies::{Policy, Sink};

use crate::body::codec::{ContentCoding, Decoder};
use crate::body::{Body, BoxError};
use crate::refusal::Refusal;
use crate::tls::target::Target;

/// The bound on a decoded body, far above what a case can build.
pub(super) const DECODED_LIMIT: u64 = 1 << 20;

/// `alpha` may go to api.alpha.test in the Authorization header, the query and the body;
/// `beta` to beta.test (any port) in any header; `gamma` nowhere (redact-only).
/// `other.test` is reachable without a grant, `verbatim.test` keeps placeholders.
const DECLARATION: &str = r#"version: 1
secrets:
  alpha:
    value: ".alpha.Secret.Value.0001."
    placeholder: FUZZ_ALPHA_PLACEHOLDER_0A
    hosts: [api.alpha.test]
    sinks: [egress]
    in: [header, query, body]
    header: [Authorization]
  beta:
    value: "~BETAsecretVALUE0002~"
    placeholder: FUZZ_BETA_PLACEHOLDER_0B
    hosts: [beta.test]
    sinks: [egress]
    in: [header]
  gamma:
    value: "gammaRedactOnly0003xyz"
    placeholder: FUZZ_GAMMA_PLACEHOLDER_0C
    sinks: []
egress:
  allow: [other.test]
  verbatim: [verbatim.test]
"#;

pub(super) struct Secret {
    pub(super) name: String,
    pub(super) placeholder: Vec<u8>,
    /// Every encoding of the value the guard looks for.
    pub(super) patterns: Vec<Vec<u8>>,
    /// An automaton finding any of `patterns` anywhere, overlaps included.
    pub(super) finder: AhoCorasick,
}

pub(super) struct Fixture {
    pub(super) policy: Policy,
    pub(super) guard: Arc<Guard>,
    pub(super) secrets: Vec<Secret>,
    /// What pieces are made of: each placeholder, then each pattern of each secret.
    pub(super) tokens: Vec<Vec<u8>>,
}

pub(super) static FIXTURE: LazyLock<Fixture> = LazyLock::new(fixture);

fn fixture() -> Fixture {
    let loaded =
        Policy::parse(DECLARATION, "outbound_rewrite.yaml").expect("the declaration loads");
    let policy = loaded.policy;
    let placeholders = policy.mint_placeholders();
    let guard = Arc::new(policy.build_guard(&placeholders).expect("the guard builds"));
    let mut secrets = Vec::new();
    for resolved in policy
        .resolve(&placeholders)
        .expect("literal values resolve")
    {
        let value = SecretValue::new(resolved.value.to_vec());
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        for encoding in Encoding::ALL {
            if let Some(text) = encoding.encode(&value)
                && !text.is_empty()
                && !patterns.iter().any(|p| **p == *text)
            {
                patterns.push(text.to_vec());
            }
        }
        let finder = AhoCorasick::new(&patterns).expect("the patterns build an automaton");
        secrets.push(Secret {
            name: resolved.name,
            placeholder: resolved.placeholder.into_bytes(),
            patterns,
            finder,
        });
    }
    // The check is exact only if no swap can spell a value with the bytes beside it.
    for secret in &secrets {
        let decl = policy.secret(&secret.name).expect("declared");
        let forms = swap_forms(decl.locations());
        if decl.grants(Sink::Egress) {
            assert_eq!(
                secret.placeholder.len() % 3,
                secret.patterns[0].len() % 3,
                "{}: a swap would shift the base64 alignment of what follows it",
                secret.name
            );
        }
        let value = SecretValue::new(secret.patterns[0].clone());
        for form in forms.iter().filter_map(|f| f.encode(&value)) {
            for other in secrets.iter().filter(|o| o.name != secret.name) {
                for pattern in &other.patterns {
                    assert!(
                        !overlaps(&form, pattern),
                        "a swapped {} could spell an encoding of {}: {}",
                        secret.name,
                        other.name,
                        String::from_utf8_lossy(pattern)
                    );
                }
            }
        }
        // Refusals redact values into placeholders: a placeholder must not spell one either.
        for other in &secrets {
            for pattern in &other.patterns {
                assert!(
                    !overlaps(&secret.placeholder, pattern),
                    "the placeholder of {} could spell an encoding of {}: {}",
                    secret.name,
                    other.name,
                    String::from_utf8_lossy(pattern)
                );
            }
        }
    }
    let mut tokens: Vec<Vec<u8>> = secrets.iter().map(|s| s.placeholder.clone()).collect();
    tokens.extend(secrets.iter().flat_map(|s| s.patterns.iter().cloned()));
    Fixture {
        policy,
        guard,
        secrets,
        tokens,
    }
}

/// The forms a swap writes a value in, for the places a secret may be swapped into
/// (`SwapForm` in the guard): raw in headers, percent-encoded in the query, and raw,
/// form-encoded or JSON-escaped in bodies.
fn swap_forms(places: &[sluice_policies::Place]) -> Vec<Encoding> {
    use sluice_guard::{JsonStyle, PercentStyle};
    let mut forms = vec![Encoding::Raw];
    if places.contains(&sluice_policies::Place::Query) {
        forms.push(Encoding::Percent {
            style: PercentStyle::Rfc3986,
            lowercase: false,
        });
    }
    if places.contains(&sluice_policies::Place::Body) {
        forms.push(Encoding::Percent {
            style: PercentStyle::Form,
            lowercase: false,
        });
        forms.push(Encoding::Json {
            style: JsonStyle::Minimal,
        });
    }
    forms
}

/// Whether `a` and `b` could share bytes when written next to each other or one inside the
/// other: one contains the other, or an end of one is a start of the other.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let contains = |h: &[u8], n: &[u8]| n.len() <= h.len() && h.windows(n.len()).any(|w| w == n);
    if contains(a, b) || contains(b, a) {
        return true;
    }
    (1..a.len().min(b.len())).any(|l| a.ends_with(&b[..l]) || b.ends_with(&a[..l]))
}

/// The secrets whose values may not go to this target.
pub(super) fn ungranted<'f>(fixture: &'f Fixture, target: &Target, plain: bool) -> Vec<&'f Secret> {
    fixture
        .secrets
        .iter()
        .filter(|s| {
            plain
                || fixture
                    .policy
                    .may_reach(&s.name, &target.host, target.port)
                    .is_err()
        })
        .collect()
}

pub(super) fn assert_clean(secrets: &[&Secret], what: &str, bytes: &[u8]) {
    for secret in secrets {
        if let Some(hit) = secret.finder.find(bytes) {
            panic!(
                "the value of secret {} ({}) left in the {what}: {:?}",
                secret.name,
                String::from_utf8_lossy(&secret.patterns[hit.pattern().as_usize()]),
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

/// A header value as forwarded, and the credentials inside it when it has the shape of
/// `Basic` credentials (`Basic`, whitespace, one base64 token: RFC 7617's token68), decoded
/// as leniently about padding as the guard decodes them. A value of any other shape is
/// opaque: decoding a word out of it would look one encoding deeper than the guard promises
/// anywhere else (base64 of a base64 form is not a form it knows).
pub(super) fn assert_clean_header(secrets: &[&Secret], what: &str, value: &[u8]) {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    assert_clean(secrets, what, value);
    let text = String::from_utf8_lossy(value);
    let trimmed = text.trim_matches([' ', '\t']);
    let Some((scheme, token)) = trimmed.split_once([' ', '\t']) else {
        return;
    };
    let token = token.trim_start_matches([' ', '\t']);
    if scheme.eq_ignore_ascii_case("basic")
        && !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        && let Ok(credentials) = LENIENT.decode(token)
    {
        assert_clean(
            secrets,
            &format!("{what} (Basic credentials)"),
            &credentials,
        );
    }
}

/// A refusal, as the client receives it: no value of any secret.
pub(super) fn assert_clean_refusal(fixture: &Fixture, refusal: Refusal) {
    let all: Vec<&Secret> = fixture.secrets.iter().collect();
    let response = refusal.into_response(&fixture.guard);
    for (name, value) in response.headers() {
        assert_clean(&all, "refusal's header names", name.as_str().as_bytes());
        assert_clean(&all, "refusal's headers", value.as_bytes());
    }
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(frame) = poll_now(&mut body) {
        if let Ok(data) = frame.expect("a refusal's body never fails").into_data() {
            text.extend_from_slice(&data);
        }
    }
    assert_clean(&all, "refusal's body", &text);
}

/// Polls an in-memory body once; it never waits.
pub(super) fn poll_now(body: &mut Body) -> Option<Result<Frame<Bytes>, BoxError>> {
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(frame) => frame,
        Poll::Pending => panic!("a body made of frames in memory waited"),
    }
}

pub(super) fn decode_forwarded(codings: &[ContentCoding], forwarded: &[u8]) -> Vec<u8> {
    if codings.is_empty() {
        return forwarded.to_vec();
    }
    let mut decoded = Vec::new();
    if let Ok(mut decoder) = Decoder::new(codings, DECODED_LIMIT) {
        // A stream stopped midway decodes as far as it goes.
        if decoder.push(forwarded, &mut decoded).is_ok() {
            let _ = decoder.finish(&mut decoded);
        }
    }
    decoded
}
