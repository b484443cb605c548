//! The request scan (`rewrite::request::Outbound` and the body rewriting behind it) on any
//! request head, body and trailers, toward each kind of host of one small declaration: it
//! never panics, and it never forwards a real secret value toward a host that secret's
//! declaration does not grant.
//!
//! The request goes through the steps `proxy/src/forward/` takes, in its order, reached
//! through the library's `fuzzing` door: the framing check, hop-by-hop removal,
//! `Outbound::rewrite_head`, then the body step itself (`scan_body`, forward's own): read
//! whole and rewritten when the case gives it a `Content-Length`, streamed through the
//! rewriter otherwise, decoded and encoded again when it is coded.
//!
//! # The leak check, precisely
//!
//! A secret is *ungranted* for a request when `Policy::may_reach(secret, host, port)`
//! refuses it, or when the request is plain `http://` (every secret). For each ungranted
//! secret, none of the guard's encodings of its value (`Encoding::ALL`: raw,
//! percent-encoded, JSON-escaped, base64 at each alignment, hex) may occur, as exact bytes,
//! in anything forwarded:
//!
//! - the method, the path and query, each header name, each header value, and the decoded
//!   credentials of a `Basic` header value, after `rewrite_head` accepted the head;
//! - the body bytes passed on before the body ended (or was stopped), decoded from their
//!   `Content-Encoding` when they have one (what the upstream reads, not the compressor's
//!   literal bytes), and each trailer name and value passed on.
//!
//! A refusal is checked as the client receives it (`Refusal::into_response`: headers and
//! body) and as it would be logged (a stopped body's error text): no encoding of *any*
//! secret's value may occur there.
//!
//! The declaration is chosen so that a swap can never create such an occurrence by joining
//! a swapped value to the bytes around it (each swappable value starts and ends with a byte
//! that no encoding of another value holds, and keeps its length modulo 3 so that a swap
//! inside `Basic` credentials does not shift the base64 alignment after it); `fixture()`
//! asserts this. An occurrence is then always one the scan let through.
//!
//! Besides: when the fuzzer did not hand-code the body, the forwarded body (read whole or
//! streamed) equals the one-shot `Guard::rewrite` of the whole body under the same plan, or
//! both refuse.
//!
//! The secrets are fixed fuzz values, so printing the case (`Debug`) is fine here.
#![no_main]

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Waker};

use aho_corasick::AhoCorasick;
use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, HOST};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use http_body::{Body as _, Frame};
use libfuzzer_sys::fuzz_target;
use sluice_guard::{Encoding, Guard, GuardError, SecretValue};
use sluice_policies::{Policy, Sink};
use sluice_proxy::Limits;
use sluice_proxy::codec::{self, ContentCoding, Decoder, Encoder};
use sluice_proxy::fuzzing::StreamRefused;
use sluice_proxy::fuzzing::{
    self as headers, Body, BodyStep, BoxError, Buffering, Refusal, StoppedBody, Target, scan_body,
};
use sluice_proxy::fuzzing::{Outbound, Place, PlanCache};

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

/// Every target host the case may pick: granted to alpha, to beta (two ports), to none.
const TARGETS: [(&str, u16); 5] = [
    ("api.alpha.test", 443),
    ("beta.test", 443),
    ("beta.test", 8443),
    ("other.test", 443),
    ("verbatim.test", 443),
];

/// Content codings the case may declare, `compress` being one sluice cannot decode.
const CODINGS: [&str; 7] = [
    "gzip", "deflate", "br", "zstd", "identity", "x-gzip", "compress",
];

const CONTENT_TYPES: [Option<&str>; 5] = [
    None,
    Some("application/json"),
    Some("application/x-www-form-urlencoded"),
    Some("text/plain"),
    Some("application/vnd.api+json; charset=utf-8"),
];

/// The bound on a decoded body, far above what a case can build.
const DECODED_LIMIT: u64 = 1 << 20;

struct Secret {
    name: String,
    placeholder: Vec<u8>,
    /// Every encoding of the value the guard looks for.
    patterns: Vec<Vec<u8>>,
    /// An automaton finding any of `patterns` anywhere, overlaps included.
    finder: AhoCorasick,
}

struct Fixture {
    policy: Policy,
    guard: Arc<Guard>,
    secrets: Vec<Secret>,
    /// What pieces are made of: each placeholder, then each pattern of each secret.
    tokens: Vec<Vec<u8>>,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(fixture);

/// The runtime the body step runs on (it bounds a buffered body's read with a timer).
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
});

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

#[derive(Arbitrary, Debug)]
enum Leaf {
    /// A whole token: a placeholder or an encoding of a value.
    Token(u8),
    /// A token's first bytes.
    Prefix(u8, u8),
    /// A token's last bytes.
    Suffix(u8, u8),
    /// The fuzzer's own bytes.
    Bytes(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Piece {
    Leaf(Leaf),
    /// `Basic <base64 of the leaves>`, as git and pip send credentials.
    Basic(Vec<Leaf>),
}

#[derive(Arbitrary, Debug)]
struct Case {
    target: u8,
    plain: bool,
    method: Vec<Leaf>,
    path: Vec<Piece>,
    query: Option<Vec<Piece>>,
    headers: Vec<(Vec<Leaf>, Vec<Piece>)>,
    content_type: u8,
    codings: Vec<u8>,
    /// The body bytes are sent as they are under the declared codings (usually corrupt),
    /// instead of being encoded by the harness.
    coded_by_fuzzer: bool,
    body: Vec<Piece>,
    cuts: Vec<u16>,
    trailers: Vec<(Vec<Leaf>, Vec<Piece>)>,
    buffered: bool,
}

fn render_leaves(tokens: &[Vec<u8>], leaves: &[Leaf], out: &mut Vec<u8>) {
    let pick = |i: u8| &tokens[usize::from(i) % tokens.len()];
    for leaf in leaves.iter().take(32) {
        match leaf {
            Leaf::Token(i) => out.extend_from_slice(pick(*i)),
            Leaf::Prefix(i, n) => {
                let t = pick(*i);
                out.extend_from_slice(&t[..usize::from(*n) % t.len()]);
            }
            Leaf::Suffix(i, n) => {
                let t = pick(*i);
                out.extend_from_slice(&t[usize::from(*n) % t.len()..]);
            }
            Leaf::Bytes(bytes) => out.extend(bytes.iter().take(512)),
        }
    }
}

fn render(tokens: &[Vec<u8>], pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces.iter().take(32) {
        match piece {
            Piece::Leaf(leaf) => render_leaves(tokens, std::slice::from_ref(leaf), &mut out),
            Piece::Basic(leaves) => {
                let mut credentials = Vec::new();
                render_leaves(tokens, leaves, &mut credentials);
                out.extend_from_slice(b"Basic ");
                out.extend_from_slice(STANDARD.encode(&credentials).as_bytes());
            }
        }
    }
    out
}

/// A path and query from any bytes: as given when valid, else with the bytes a URI cannot
/// hold percent-encoded (as a client would send them).
fn path_and_query(raw: Vec<u8>) -> Option<PathAndQuery> {
    if let Ok(pq) = PathAndQuery::try_from(raw.clone()) {
        return Some(pq);
    }
    let mut escaped = String::new();
    for b in raw {
        if (b'!'..=b'~').contains(&b) && b != b'#' {
            escaped.push(char::from(b));
        } else {
            escaped.push_str(&format!("%{b:02X}"));
        }
    }
    PathAndQuery::try_from(escaped).ok()
}

/// The secrets whose values may not go to this target.
fn ungranted<'f>(fixture: &'f Fixture, target: &Target, plain: bool) -> Vec<&'f Secret> {
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

fn assert_clean(secrets: &[&Secret], what: &str, bytes: &[u8]) {
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
fn assert_clean_header(secrets: &[&Secret], what: &str, value: &[u8]) {
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
fn assert_clean_refusal(fixture: &Fixture, refusal: Refusal) {
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
fn poll_now(body: &mut Body) -> Option<Result<Frame<Bytes>, BoxError>> {
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(frame) => frame,
        Poll::Pending => panic!("a body made of frames in memory waited"),
    }
}

/// A body of frames held in memory, as a client would send them.
struct Frames(VecDeque<Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(Ok))
    }
}

fn header_map(tokens: &[Vec<u8>], fields: &[(Vec<Leaf>, Vec<Piece>)], max: usize) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in fields.iter().take(max) {
        let mut name_bytes = Vec::new();
        render_leaves(tokens, name, &mut name_bytes);
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&name_bytes),
            HeaderValue::from_bytes(&render(tokens, value)),
        ) else {
            continue;
        };
        map.append(name, value);
    }
    map
}

fn decode_forwarded(codings: &[ContentCoding], forwarded: &[u8]) -> Vec<u8> {
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

fuzz_target!(|case: Case| {
    let fixture = &*FIXTURE;
    let tokens = &fixture.tokens;
    let (host, port) = TARGETS[usize::from(case.target) % TARGETS.len()];
    let target = Target {
        host: host.to_owned(),
        port,
    };
    let secrets = ungranted(fixture, &target, case.plain);

    // The head, as hyper would hand it over.
    let mut method = Vec::new();
    render_leaves(tokens, &case.method, &mut method);
    let method = Method::from_bytes(&method).unwrap_or(Method::GET);
    let mut raw_path = b"/".to_vec();
    raw_path.extend(render(tokens, &case.path));
    if let Some(query) = &case.query {
        raw_path.push(b'?');
        raw_path.extend(render(tokens, query));
    }
    let Some(pq) = path_and_query(raw_path) else {
        return;
    };
    let uri = if case.plain {
        let Ok(uri) = format!("http://{}{pq}", target.authority()).parse::<Uri>() else {
            return;
        };
        uri
    } else {
        Uri::from(pq)
    };
    let mut head = header_map(tokens, &case.headers, 24);
    if let Some(content_type) = CONTENT_TYPES[usize::from(case.content_type) % CONTENT_TYPES.len()]
    {
        head.append(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if !case.codings.is_empty() {
        let names: Vec<&str> = case
            .codings
            .iter()
            .take(3)
            .map(|&c| CODINGS[usize::from(c) % CODINGS.len()])
            .collect();
        let value = HeaderValue::from_str(&names.join(", ")).expect("coding names are tokens");
        head.append(CONTENT_ENCODING, value);
    }
    let (mut parts, ()) = Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .expect("a valid method and target")
        .into_parts();
    parts.headers = head;

    // forward.rs: framing, hop-by-hop headers, Host, then the scan of the head.
    if let Err(refusal) = headers::check_framing(&parts.headers) {
        return assert_clean_refusal(fixture, refusal);
    }
    headers::remove_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
    let cache = PlanCache::default();
    let outbound = if case.plain {
        Outbound::plain(&fixture.guard, &fixture.policy, &target)
    } else {
        Outbound::new(&fixture.guard, &fixture.policy, &target).with_cache(&cache)
    };
    if let Err(refusal) = outbound.rewrite_head(&mut parts) {
        return assert_clean_refusal(fixture, refusal);
    }
    assert_clean(&secrets, "method", parts.method.as_str().as_bytes());
    let forwarded_target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    assert_clean(&secrets, "path and query", forwarded_target.as_bytes());
    for (name, value) in &parts.headers {
        assert_clean(&secrets, "header names", name.as_str().as_bytes());
        assert_clean_header(&secrets, &format!("header {name}"), value.as_bytes());
    }

    // The body as a client sends it: coded when it says it is (unless the fuzzer coded it
    // itself), with a Content-Length when the case says so (the real step then reads it
    // whole before anything leaves), cut into frames, then the trailers.
    let plan = outbound.body_plan(&parts);
    let content = {
        let mut content = render(tokens, &case.body);
        content.truncate(64 * 1024);
        content
    };
    let sent = match codec::content_codings(&parts.headers) {
        Ok(codings) if !codings.is_empty() && !case.coded_by_fuzzer => {
            let mut encoded = Vec::new();
            let mut encoder = Encoder::new(&codings).expect("every decodable coding encodes");
            encoder
                .push(&content, &mut encoded)
                .expect("encoding in memory");
            encoder.finish(&mut encoded).expect("encoding in memory");
            encoded
        }
        _ => content.clone(),
    };
    if case.buffered {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(sent.len()));
    }
    let mut cuts: Vec<usize> = case
        .cuts
        .iter()
        .take(16)
        .map(|&c| usize::from(c) % (sent.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut frames = VecDeque::new();
    let mut at = 0;
    for cut in cuts.into_iter().chain([sent.len()]) {
        frames.push_back(Frame::data(Bytes::copy_from_slice(&sent[at..cut])));
        at = cut;
    }
    let trailers = header_map(tokens, &case.trailers, 8);
    let has_trailers = !trailers.is_empty();
    if has_trailers {
        frames.push_back(Frame::trailers(trailers));
    }

    // forward.rs's body step itself: read whole and rewritten, or streamed.
    let limits = Limits {
        max_decoded_body: DECODED_LIMIT,
        ..Limits::default()
    };
    let step = BodyStep {
        outbound: &outbound,
        guard: &fixture.guard,
        limits: &limits,
        buffering: Buffering::WhenLengthKnown,
        keep_length: false,
    };
    let stopped_body = StoppedBody::default();
    let scanned = RUNTIME.block_on(scan_body(
        step,
        &mut parts,
        Frames(frames),
        &stopped_body,
        |_tally, _cut, _scanned| {},
    ));
    let mut streamed: Body = match scanned {
        Ok((body, _swaps)) => body,
        Err(refusal) => return assert_clean_refusal(fixture, refusal),
    };
    let mut forwarded = Vec::new();
    let mut stopped: Option<Option<StreamRefused>> = None;
    while let Some(frame) = poll_now(&mut streamed) {
        match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => forwarded.extend_from_slice(&data),
                Err(frame) => {
                    for (name, value) in frame.into_trailers().expect("data or trailers").iter() {
                        assert_clean(&secrets, "trailer names", name.as_str().as_bytes());
                        assert_clean_header(&secrets, &format!("trailer {name}"), value.as_bytes());
                    }
                }
            },
            Err(error) => {
                let all: Vec<&Secret> = fixture.secrets.iter().collect();
                assert_clean(&all, "body error (logged)", error.to_string().as_bytes());
                let refused = error.downcast_ref::<StreamRefused>().cloned();
                if let Some(refused) = &refused {
                    let refusal = GuardError::Refused(refused.refusal.clone());
                    assert_clean_refusal(fixture, outbound.refusal(refusal, &Place::Body));
                }
                stopped = Some(refused);
                break;
            }
        }
    }
    // What the upstream reads: the body decoded from the coding it is sent in.
    let codings = codec::content_codings(&parts.headers).unwrap_or_default();
    let decoded = decode_forwarded(&codings, &forwarded);
    assert_clean(&secrets, "forwarded body", &decoded);

    // The stream is the one-shot rewrite of the whole body, whatever the frames.
    if case.coded_by_fuzzer {
        return;
    }
    match (fixture.guard.rewrite(&content, &plan), &stopped) {
        (Ok(one_shot), None) => assert!(
            decoded == one_shot.bytes(),
            "the streamed body differs from the one-shot rewrite"
        ),
        (Ok(_), Some(_)) => assert!(
            has_trailers,
            "the streamed body stopped where the one-shot rewrite did not"
        ),
        (Err(GuardError::Refused(one_shot)), Some(Some(refused))) => {
            assert_eq!(
                one_shot.name, refused.refusal.name,
                "refused for another secret"
            )
        }
        (Err(e), stopped) => panic!("one-shot refused ({e}) but the stream ended {stopped:?}"),
    }
});
