//! The `outbound_rewrite` fuzz target's harness, compiled only under `cfg(fuzzing)`
//! (cargo-fuzz sets it): the door through which the target, a few lines in
//! `proxy/fuzz/fuzz_targets/`, reaches the crate's own steps. Nothing else can see it.
//!
//! The request scan (`scan::request::Outbound` and the body rewriting behind it) on any
//! request head, body and trailers, toward each kind of host of one small declaration: it
//! never panics, and it never forwards a real secret value toward a host that secret's
//! declaration does not grant.
//!
//! The request goes through the steps `proxy/src/forward/` takes, in its order, called
//! here as the crate calls them: the framing check, hop-by-hop removal,
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

use std::collections::VecDeque;
use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request, Uri};
use http_body::Frame;
use sluice_guard::GuardError;

use crate::body::Body;
use crate::body::codec::{self, Encoder};
use crate::config::Limits;
use crate::forward::request_body::{BodyStep, Buffering, StoppedBody, scan as scan_body};
use crate::scan::request::{Outbound, Place, PlanCache};
use crate::scan::stream::outcome::StreamRefused;
use crate::tls::target::Target;

mod case;
mod leak;
mod token;

pub use token::token_exchange;

use case::{
    CODINGS, CONTENT_TYPES, Case, Frames, TARGETS, header_map, path_and_query, render,
    render_leaves,
};
use leak::{
    DECODED_LIMIT, FIXTURE, Secret, assert_clean, assert_clean_header, assert_clean_refusal,
    decode_forwarded, poll_now, ungranted,
};

/// The runtime the body step runs on (it bounds a buffered body's read with a timer).
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
});

/// One fuzz case from the fuzzer's bytes: the request built, scanned as `forward` scans
/// it, and checked (see the module's docs). Panics on a leak or a divergence.
pub fn outbound_rewrite(data: &[u8]) {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    run(case);
}

fn run(case: Case) {
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
    if let Err(refusal) = crate::scan::headers::check_framing(&parts.headers) {
        return assert_clean_refusal(fixture, refusal);
    }
    crate::scan::headers::remove_hop_by_hop(&mut parts.headers);
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
}
