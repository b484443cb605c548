//! Tests of the rewriting body: exactness over any framing, codecs, trailers, refusals and
//! the outcome report.

use std::collections::VecDeque;
use std::io::Write as _;
use std::task::Waker;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flate2::Compression;
use flate2::write::GzEncoder;
use http_body::Body as _;
use http_body_util::BodyExt as _;
use proptest::prelude::*;
use sluice_guard::{NONCE_LEN, OnPlaceholder, OnValue, Placeholder, SecretId, SecretValue};

use super::*;
use crate::body::codec::ContentCoding;

const GH_VALUE: &str = "ghp_AAAAbbbbCCCCdddd1234";
const AWS_VALUE: &str = "wJalr/K7MDENG+bPxRfi\"CY";

struct Fixture {
    guard: Arc<Guard>,
    gh: SecretId,
    aws: SecretId,
}

fn fixture() -> Fixture {
    let mut b = Guard::builder();
    let gh = b
        .add(
            "github_token",
            Placeholder::mint("github_token", &[1; NONCE_LEN]),
            SecretValue::from(GH_VALUE),
        )
        .unwrap();
    let aws = b
        .add(
            "aws_secret",
            Placeholder::mint("aws_secret", &[2; NONCE_LEN]),
            SecretValue::from(AWS_VALUE),
        )
        .unwrap();
    Fixture {
        guard: Arc::new(b.build().unwrap()),
        gh,
        aws,
    }
}

impl Fixture {
    fn placeholder(&self, id: SecretId) -> String {
        self.guard.placeholder(id).to_string()
    }

    /// github_token swapped (its value kept), aws_secret's placeholder refused, its value kept.
    fn swap_plan(&self) -> Plan {
        let mut plan = Plan::refuse_all(&self.guard);
        plan.set(self.gh, OnPlaceholder::Swap, OnValue::Keep);
        plan.set(self.aws, OnPlaceholder::Refuse, OnValue::Keep);
        plan
    }
}

/// A body that yields the frames it was given, at once.
struct Frames(VecDeque<Result<Frame<Bytes>, BoxError>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.get_mut().0.pop_front())
    }
}

fn data_frames<B: AsRef<[u8]>>(chunks: impl IntoIterator<Item = B>) -> Frames {
    Frames(
        chunks
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c.as_ref()))))
            .collect(),
    )
}

fn split_at(whole: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (whole.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([whole.len()]) {
        pieces.push(whole[from..cut].to_vec());
        from = cut;
    }
    pieces
}

type Outcomes = Arc<Mutex<Vec<Outcome>>>;

fn recorder() -> (Outcomes, impl FnOnce(Outcome) + Send + 'static) {
    let outcomes = Outcomes::default();
    let sink = Arc::clone(&outcomes);
    (outcomes, move |o| sink.lock().unwrap().push(o))
}

fn only(outcomes: &Outcomes) -> Outcome {
    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), 1, "the report is called exactly once");
    outcomes[0].clone()
}

fn poll(body: &mut RewriteBody) -> Option<Result<Frame<Bytes>, BoxError>> {
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(frame) => frame,
        Poll::Pending => panic!("the test bodies never wait"),
    }
}

#[derive(Default)]
struct Collected {
    data: Vec<u8>,
    frames: usize,
    trailers: Option<HeaderMap>,
    error: Option<BoxError>,
}

fn collect(mut body: RewriteBody) -> Collected {
    let mut got = Collected::default();
    while let Some(frame) = poll(&mut body) {
        match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => {
                    assert!(!data.is_empty(), "no empty data frames");
                    got.frames += 1;
                    got.data.extend_from_slice(&data);
                }
                Err(frame) => {
                    assert!(got.trailers.is_none(), "one trailers frame at most");
                    got.trailers = Some(frame.into_trailers().unwrap());
                }
            },
            Err(e) => {
                got.error = Some(e);
                assert!(poll(&mut body).is_none(), "nothing after an error");
                break;
            }
        }
    }
    assert!(body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(0));
    got
}

fn gzip(plain: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(plain).unwrap();
    e.finish().unwrap()
}

fn gunzip(wire: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    let mut d = Decoder::new(&[ContentCoding::Gzip], 1 << 30).unwrap();
    d.push(wire, &mut plain).unwrap();
    d.finish(&mut plain).unwrap();
    plain
}

#[test]
fn the_body_is_send_sync_and_boxes() {
    fn is_send_sync<T: Send + Sync + 'static>() {}
    is_send_sync::<RewriteBody>();
    let f = fixture();
    let body = RewriteBody::redacting(crate::body::empty(), f.guard, |_| {});
    assert_eq!(
        body.size_hint().exact(),
        None,
        "length unknown until the end"
    );
    let _boxed: Body = body.boxed();
}

#[test]
fn a_value_split_at_every_position_is_redacted() {
    let f = fixture();
    let whole = format!("{{\"token\":\"{GH_VALUE}\",\"key\":\"{AWS_VALUE}\"}}");
    let expected = f.guard.redact(whole.as_bytes());
    for cut in 0..=whole.len() {
        let (outcomes, report) = recorder();
        let inner = data_frames([&whole.as_bytes()[..cut], &whole.as_bytes()[cut..]]).boxed();
        let got = collect(RewriteBody::redacting(inner, Arc::clone(&f.guard), report));
        assert!(got.error.is_none());
        assert_eq!(got.data, expected.bytes(), "cut at {cut}");
        let outcome = only(&outcomes);
        assert!(outcome.is_complete());
        assert_eq!(outcome.tally, *expected.tally());
        assert_eq!(outcome.tally.get(f.gh).redacted, 1);
        assert_eq!(outcome.bytes_in, whole.len() as u64);
        assert_eq!(outcome.bytes_out, expected.bytes().len() as u64);
    }
}

#[test]
fn a_granted_placeholder_is_swapped_across_one_byte_frames() {
    let f = fixture();
    let whole = format!("token={}&x=1", f.placeholder(f.gh));
    let (outcomes, report) = recorder();
    let inner = data_frames(whole.as_bytes().chunks(1)).boxed();
    let got = collect(RewriteBody::new(
        inner,
        Arc::clone(&f.guard),
        f.swap_plan(),
        report,
    ));
    assert_eq!(got.data, format!("token={GH_VALUE}&x=1").as_bytes());
    assert_eq!(only(&outcomes).tally.get(f.gh).swapped, 1);
}

#[test]
fn a_refusal_ends_the_body_with_a_typed_error_and_no_bytes_of_the_match() {
    let f = fixture();
    let before = format!("a={}&", f.placeholder(f.gh));
    let whole = format!("{before}b={}&c=3", f.placeholder(f.aws));
    let (outcomes, report) = recorder();
    let inner = data_frames(whole.as_bytes().chunks(5)).boxed();
    let got = collect(RewriteBody::new(
        inner,
        Arc::clone(&f.guard),
        f.swap_plan(),
        report,
    ));
    let err = got.error.expect("the body ends with an error");
    let refused = err
        .downcast_ref::<StreamRefused>()
        .expect("a StreamRefused");
    assert_eq!(refused.secret(), "aws_secret");
    assert_eq!(refused.place, StreamPlace::Body);
    assert_eq!(refused.refusal.offset, before.len() as u64 + 2);
    let message = refused.to_string();
    assert!(
        message.contains("aws_secret") && message.contains("in the body"),
        "{message}"
    );
    assert!(!message.contains(AWS_VALUE) && !message.contains(&f.placeholder(f.aws)));
    // What left before the refusal is a prefix of the rewritten part before the match.
    let allowed = format!("a={GH_VALUE}&b=");
    assert!(
        allowed.as_bytes().starts_with(&got.data),
        "{:?}",
        String::from_utf8_lossy(&got.data)
    );
    let outcome = only(&outcomes);
    assert_eq!(outcome.end, End::Refused(refused.clone()));
    assert_eq!(
        outcome.tally.get(f.gh).swapped,
        1,
        "swaps that left are reported"
    );
}

#[test]
fn a_value_toward_an_ungranted_host_is_refused() {
    let f = fixture();
    let (outcomes, report) = recorder();
    let inner = data_frames([format!("leak={GH_VALUE}")]).boxed();
    let got = collect(RewriteBody::new(
        inner,
        Arc::clone(&f.guard),
        Plan::refuse_all(&f.guard),
        report,
    ));
    let err = got.error.unwrap();
    assert_eq!(
        err.downcast_ref::<StreamRefused>().unwrap().secret(),
        "github_token"
    );
    assert!(got.data.len() <= "leak=".len());
    assert!(matches!(only(&outcomes).end, End::Refused(_)));
}

#[test]
fn a_gzipped_response_with_a_base64_value_split_across_frames_comes_out_as_the_placeholder() {
    let f = fixture();
    let blob = STANDARD.encode(format!("user:x\n{GH_VALUE}\n").as_bytes());
    let plain = format!("{{\"config\":\"{blob}\",\"pad\":\"{}\"}}", "z".repeat(5000));
    let wire = gzip(plain.as_bytes());
    let expected = f.guard.redact(plain.as_bytes());
    assert!(
        expected
            .bytes()
            .windows(f.placeholder(f.gh).len())
            .any(|w| w == f.placeholder(f.gh).as_bytes())
    );
    for frame in [1, 7, 64, wire.len()] {
        let (outcomes, report) = recorder();
        let decoder = Decoder::new(&[ContentCoding::Gzip], 1 << 20).unwrap();
        let inner = data_frames(wire.chunks(frame)).boxed();
        let body =
            RewriteBody::redacting(inner, Arc::clone(&f.guard), report).with_decoder(decoder);
        let got = collect(body);
        assert!(got.error.is_none());
        assert_eq!(got.data, expected.bytes(), "frames of {frame} bytes");
        assert!(!String::from_utf8_lossy(&got.data).contains(&blob));
        let outcome = only(&outcomes);
        assert_eq!(outcome.tally.get(f.gh).redacted, 1);
        assert_eq!(outcome.bytes_in, wire.len() as u64);
    }
}

#[test]
fn a_swapped_request_body_is_encoded_again() {
    let f = fixture();
    let plain = format!("{{\"token\":\"{}\"}}", f.placeholder(f.gh)).repeat(50);
    let wire = gzip(plain.as_bytes());
    let (outcomes, report) = recorder();
    let body = RewriteBody::new(
        data_frames(wire.chunks(9)).boxed(),
        Arc::clone(&f.guard),
        f.swap_plan(),
        report,
    )
    .with_decoder(Decoder::new(&[ContentCoding::Gzip], 1 << 20).unwrap())
    .with_encoder(Encoder::new(&[ContentCoding::Gzip]).unwrap());
    let got = collect(body);
    assert!(got.error.is_none());
    assert_eq!(
        gunzip(&got.data),
        format!("{{\"token\":\"{GH_VALUE}\"}}")
            .repeat(50)
            .as_bytes()
    );
    assert_eq!(only(&outcomes).tally.get(f.gh).swapped, 50);
}

#[test]
fn a_body_that_does_not_decode_ends_with_a_codec_error() {
    let f = fixture();
    let wire = gzip(b"some response text");
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        ("garbage", b"not gzip, not at all".to_vec(), 1 << 20),
        ("truncated", wire[..wire.len() - 4].to_vec(), 1 << 20),
        ("over the bound", gzip(&vec![b'a'; 1 << 20]), 1000),
    ];
    for (name, wire, limit) in cases {
        let (outcomes, report) = recorder();
        let decoder = Decoder::new(&[ContentCoding::Gzip], limit).unwrap();
        let body = RewriteBody::redacting(
            data_frames(wire.chunks(3)).boxed(),
            Arc::clone(&f.guard),
            report,
        )
        .with_decoder(decoder);
        let got = collect(body);
        let err = got.error.unwrap_or_else(|| panic!("{name}: no error"));
        let codec = err
            .downcast_ref::<CodecError>()
            .unwrap_or_else(|| panic!("{name}: {err}"));
        assert_eq!(only(&outcomes).end, End::Codec(codec.clone()), "{name}");
        if name == "over the bound" {
            assert_eq!(*codec, CodecError::TooLarge { limit });
            assert!(got.data.len() <= 1000 + SLICE);
        }
    }
}

#[test]
fn an_inner_error_is_passed_on_and_reported() {
    let f = fixture();
    let (outcomes, report) = recorder();
    let inner = Frames(VecDeque::from([
        Ok(Frame::data(Bytes::from_static(b"partial ghp_AAAA"))),
        Err(BoxError::from("upstream reset")),
    ]));
    let got = collect(RewriteBody::redacting(
        inner.boxed(),
        Arc::clone(&f.guard),
        report,
    ));
    assert_eq!(got.error.unwrap().to_string(), "upstream reset");
    assert_eq!(only(&outcomes).end, End::Inner);
}

#[test]
fn trailers_are_rewritten_and_passed_after_the_data() {
    let f = fixture();
    let mut trailers = HeaderMap::new();
    trailers.insert(
        "x-echo",
        HeaderValue::from_str(&format!("token {GH_VALUE}")).unwrap(),
    );
    trailers.append("x-echo", HeaderValue::from_static("plain"));
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let inner = Frames(VecDeque::from([
        Ok(Frame::data(Bytes::from_static(b"body"))),
        Ok(Frame::trailers(trailers)),
    ]));
    let (outcomes, report) = recorder();
    let got = collect(RewriteBody::redacting(
        inner.boxed(),
        Arc::clone(&f.guard),
        report,
    ));
    assert_eq!(got.data, b"body");
    let trailers = got.trailers.expect("trailers");
    let echoed: Vec<&str> = trailers
        .get_all("x-echo")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        echoed,
        [format!("token {}", f.placeholder(f.gh)).as_str(), "plain"]
    );
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(only(&outcomes).tally.get(f.gh).redacted, 1);
}

#[test]
fn trailers_are_swapped_in_basic_credentials_and_refused_where_not_granted() {
    let f = fixture();
    let basic = format!(
        "Basic {}",
        STANDARD.encode(format!("git:{}", f.placeholder(f.gh)))
    );
    let mut trailers = HeaderMap::new();
    trailers.insert("x-auth", HeaderValue::from_str(&basic).unwrap());
    let inner = Frames(VecDeque::from([Ok(Frame::trailers(trailers))]));
    let got = collect(RewriteBody::new(
        inner.boxed(),
        Arc::clone(&f.guard),
        f.swap_plan(),
        |_| {},
    ));
    let value = &got.trailers.unwrap()["x-auth"];
    assert_eq!(
        value.to_str().unwrap(),
        format!("Basic {}", STANDARD.encode(format!("git:{GH_VALUE}")))
    );
    assert!(value.is_sensitive());

    let mut trailers = HeaderMap::new();
    trailers.insert(
        "x-key",
        HeaderValue::from_str(&f.placeholder(f.aws)).unwrap(),
    );
    let inner = Frames(VecDeque::from([
        Ok(Frame::data(Bytes::from_static(b"data before"))),
        Ok(Frame::trailers(trailers)),
    ]));
    let (outcomes, report) = recorder();
    let got = collect(RewriteBody::new(
        inner.boxed(),
        Arc::clone(&f.guard),
        f.swap_plan(),
        report,
    ));
    let err = got.error.unwrap();
    let refused = err.downcast_ref::<StreamRefused>().unwrap();
    assert_eq!(refused.secret(), "aws_secret");
    assert_eq!(
        refused.place,
        StreamPlace::Trailer {
            name: Some("x-key".into())
        }
    );
    assert!(got.trailers.is_none());
    assert!(matches!(only(&outcomes).end, End::Refused(_)));
}

#[test]
fn a_trailer_plan_of_its_own_applies_to_trailers_only() {
    let f = fixture();
    let mut trailers = HeaderMap::new();
    trailers.insert(
        "x-tok",
        HeaderValue::from_str(&f.placeholder(f.gh)).unwrap(),
    );
    let inner = Frames(VecDeque::from([
        Ok(Frame::data(Bytes::from(f.placeholder(f.gh)))),
        Ok(Frame::trailers(trailers)),
    ]));
    let got = collect(
        RewriteBody::new(inner.boxed(), Arc::clone(&f.guard), f.swap_plan(), |_| {})
            .with_trailer_plan(Plan::refuse_all(&f.guard)),
    );
    let err = got.error.unwrap();
    assert_eq!(
        err.downcast_ref::<StreamRefused>().unwrap().secret(),
        "github_token"
    );
}

/// `messages` as a gRPC body: each behind a plain message's prefix.
fn grpc_framed(messages: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for message in messages {
        out.push(0);
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
    }
    out
}

#[test]
fn grpc_messages_are_rewritten_whole_and_framed_with_their_new_length() {
    let f = fixture();
    // Redacted (a response): the placeholder is longer than the value, in a message and in
    // grpc trailers; over every chunking, each message comes out with its own new length.
    let echo = format!("{{\"echo\":\"Bearer {GH_VALUE}\"}}");
    let whole = grpc_framed(&[echo.as_bytes(), b"", b"{\"seq\":2}"]);
    let shown = format!("{{\"echo\":\"Bearer {}\"}}", f.placeholder(f.gh));
    let expected = grpc_framed(&[shown.as_bytes(), b"", b"{\"seq\":2}"]);
    for step in [1, 2, 5, 7, whole.len()] {
        let mut frames: VecDeque<_> = whole
            .chunks(step)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        trailers.insert("x-echo", HeaderValue::from_static(GH_VALUE));
        frames.push_back(Ok(Frame::trailers(trailers)));
        let (outcomes, report) = recorder();
        let got = collect(
            RewriteBody::redacting(Frames(frames).boxed(), Arc::clone(&f.guard), report)
                .with_grpc_messages(1024),
        );
        assert!(got.error.is_none(), "step {step}: {:?}", got.error);
        assert_eq!(got.data, expected, "step {step}");
        let trailers = got.trailers.expect("trailers");
        assert_eq!(trailers["x-echo"], f.placeholder(f.gh).as_str());
        assert_eq!(trailers["grpc-status"], "0");
        let outcome = only(&outcomes);
        assert!(outcome.is_complete());
        assert_eq!(outcome.tally.get(f.gh).redacted, 2, "step {step}");
    }
    // Swapped (a request): the value is shorter than the placeholder.
    let sent = format!("token {}", f.placeholder(f.gh));
    let whole = grpc_framed(&[sent.as_bytes()]);
    let (outcomes, report) = recorder();
    let got = collect(
        RewriteBody::new(
            data_frames(whole.chunks(3)).boxed(),
            Arc::clone(&f.guard),
            f.swap_plan(),
            report,
        )
        .with_grpc_messages(1024),
    );
    assert_eq!(
        got.data,
        grpc_framed(&[format!("token {GH_VALUE}").as_bytes()])
    );
    assert_eq!(only(&outcomes).tally.get(f.gh).swapped, 1);
}

#[test]
fn a_grpc_body_that_cannot_be_scanned_ends_with_an_error() {
    let f = fixture();
    let message = format!("x {GH_VALUE}");
    let mut compressed = grpc_framed(&[message.as_bytes()]);
    compressed[0] = 1;
    let whole = grpc_framed(&[message.as_bytes()]);
    let cases: [(&str, Vec<u8>, usize, GrpcError); 3] = [
        ("compressed", compressed, 1024, GrpcError::Compressed),
        (
            "over the bound",
            whole.clone(),
            4,
            GrpcError::TooLarge {
                length: message.len() as u64,
                limit: 4,
            },
        ),
        (
            "cut short",
            whole[..whole.len() - 1].to_vec(),
            1024,
            GrpcError::Truncated {
                have: whole.len() - 1,
                want: whole.len(),
            },
        ),
    ];
    for (what, body, limit, error) in cases {
        let (outcomes, report) = recorder();
        let got = collect(
            RewriteBody::redacting(
                data_frames(body.chunks(4)).boxed(),
                Arc::clone(&f.guard),
                report,
            )
            .with_grpc_messages(limit),
        );
        let err = got.error.expect(what);
        assert_eq!(err.downcast_ref::<GrpcError>(), Some(&error), "{what}");
        assert!(got.data.is_empty(), "{what}: nothing of the message left");
        assert_eq!(only(&outcomes).end, End::Grpc(error), "{what}");
    }
}

#[test]
fn dropping_the_body_early_reports_what_left() {
    let f = fixture();
    let (outcomes, report) = recorder();
    let inner = data_frames([format!("a {} b", f.placeholder(f.gh)), "more".into()]).boxed();
    let mut body = RewriteBody::new(inner, Arc::clone(&f.guard), f.swap_plan(), report);
    let first = poll(&mut body).unwrap().unwrap().into_data().unwrap();
    assert!(first.starts_with(format!("a {GH_VALUE}").as_bytes()));
    drop(body);
    let outcome = only(&outcomes);
    assert_eq!(outcome.end, End::Cancelled);
    assert_eq!(outcome.tally.get(f.gh).swapped, 1);
}

#[test]
fn the_report_is_called_once_even_when_polled_past_the_end() {
    let f = fixture();
    let (outcomes, report) = recorder();
    let mut body = RewriteBody::redacting(data_frames(["x"]).boxed(), Arc::clone(&f.guard), report);
    while poll(&mut body).is_some() {}
    assert!(poll(&mut body).is_none());
    drop(body);
    assert!(only(&outcomes).is_complete());
}

/// 16 KiB frames, each ending with the first half of a value and starting with its second
/// half, so that a value straddles every frame boundary. Generated, never held whole.
struct Stream16k {
    frame: Bytes,
    left: usize,
}

impl http_body::Body for Stream16k {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.left == 0 {
            return Poll::Ready(None);
        }
        this.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(this.frame.clone()))))
    }
}

#[test]
fn sixty_four_mib_stream_through_with_flat_memory() {
    let f = fixture();
    let (head, tail) = GH_VALUE.split_at(10);
    let mut frame = tail.as_bytes().to_vec();
    frame.resize(16 * 1024 - head.len(), b'.');
    frame.extend_from_slice(head.as_bytes());
    let frames = 64 * 1024 * 1024 / frame.len();
    let (outcomes, report) = recorder();
    let inner = Stream16k {
        frame: Bytes::from(frame),
        left: frames,
    }
    .boxed();
    let mut body = RewriteBody::redacting(inner, Arc::clone(&f.guard), report);
    let bound = SLICE + f.guard.max_pattern_len();
    let (mut total, mut max_buffered) = (0u64, 0usize);
    while let Some(frame) = poll(&mut body) {
        let data = frame.unwrap().into_data().unwrap();
        assert!(data.len() <= 16 * 1024 + f.guard.max_pattern_len());
        total += data.len() as u64;
        max_buffered = max_buffered.max(body.buffered());
    }
    assert!(
        max_buffered <= bound,
        "held {max_buffered} bytes, expected at most {bound}"
    );
    let placeholder_growth = f.placeholder(f.gh).len() as u64 - GH_VALUE.len() as u64;
    let redactions = frames as u64 - 1;
    assert_eq!(
        total,
        (frames * 16 * 1024) as u64 + redactions * placeholder_growth
    );
    assert_eq!(only(&outcomes).tally.get(f.gh).redacted, redactions);
}

#[test]
fn a_gzipped_stream_keeps_memory_flat_too() {
    let f = fixture();
    let plain = format!("{GH_VALUE} {}", "y".repeat(4000)).repeat(500);
    let wire = gzip(plain.as_bytes());
    let decoder = Decoder::new(&[ContentCoding::Gzip], 1 << 30).unwrap();
    let mut body = RewriteBody::redacting(
        data_frames(wire.chunks(16 * 1024)).boxed(),
        Arc::clone(&f.guard),
        |_| {},
    )
    .with_decoder(decoder);
    let mut out = 0;
    while let Some(frame) = poll(&mut body) {
        let data = frame.unwrap().into_data().unwrap();
        // One decoded slice, grown by the placeholders written over the values in it.
        assert!(data.len() <= SLICE + f.guard.max_pattern_len() + 17 * f.placeholder(f.gh).len());
        out += data.len();
        assert!(body.buffered() <= 16 * 1024 + 3 * SLICE + f.guard.max_pattern_len());
    }
    assert_eq!(out, f.guard.redact(plain.as_bytes()).bytes().len());
}

/// Pieces a test body is made of: text, noise, values in several encodings, placeholders.
fn pieces(f: &Fixture) -> Vec<Vec<u8>> {
    let pct = AWS_VALUE
        .replace('/', "%2F")
        .replace('+', "%2B")
        .replace('"', "%22");
    vec![
        GH_VALUE.into(),
        AWS_VALUE.into(),
        pct.into(),
        AWS_VALUE.replace('"', "\\\"").replace('/', "\\/").into(),
        f.placeholder(f.gh).into(),
        f.placeholder(f.aws).into(),
        STANDARD.encode(GH_VALUE).into(),
        STANDARD.encode(format!("u:{GH_VALUE}")).into(),
        STANDARD.encode(format!("xy{AWS_VALUE}!")).into(),
        hex::encode(GH_VALUE).into(),
        b"ghp_AAAAbbbb".to_vec(),
        b" plain text, ".to_vec(),
        b"{\"k\":\"".to_vec(),
    ]
}

fn body_strategy() -> impl Strategy<Value = (Vec<u8>, Vec<usize>, u8)> {
    let f = fixture();
    let piece = prop_oneof![
        3 => prop::sample::select(pieces(&f)),
        1 => prop::collection::vec(any::<u8>(), 0..24),
    ];
    (
        prop::collection::vec(piece, 0..10).prop_map(|p| p.concat()),
        prop::collection::vec(any::<usize>(), 0..8),
        0u8..3,
    )
}

fn plan_for(f: &Fixture, which: u8) -> Plan {
    match which {
        0 => Plan::redact_all(&f.guard),
        1 => f.swap_plan(),
        _ => Plan::refuse_all(&f.guard),
    }
}

/// Streams `frames` (already split) under `plan` and checks the result against the one-shot
/// rewrite of `whole`.
fn check_exact(f: &Fixture, whole: &[u8], body: RewriteBody, outcomes: &Outcomes, plan: &Plan) {
    let got = collect(body);
    match f.guard.rewrite(whole, plan) {
        Ok(expected) => {
            assert!(got.error.is_none(), "{:?}", got.error);
            assert_eq!(got.data, expected.bytes());
            assert_eq!(only(outcomes).tally, *expected.tally());
        }
        Err(GuardError::Refused(refusal)) => {
            let err = got.error.expect("refused in one go, so refused streaming");
            let refused = err.downcast_ref::<StreamRefused>().unwrap();
            assert_eq!(refused.refusal, refusal);
            let before = f
                .guard
                .rewrite(&whole[..refusal.offset as usize], plan)
                .unwrap();
            assert!(before.bytes().starts_with(&got.data));
        }
        Err(other) => panic!("{other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streaming_equals_one_shot_whatever_the_frames((whole, cuts, which) in body_strategy()) {
        let f = fixture();
        let plan = plan_for(&f, which);
        let (outcomes, report) = recorder();
        let inner = data_frames(split_at(&whole, &cuts)).boxed();
        let body = RewriteBody::new(inner, Arc::clone(&f.guard), plan.clone(), report);
        check_exact(&f, &whole, body, &outcomes, &plan);
    }

    #[test]
    fn streaming_a_gzipped_body_equals_one_shot((whole, cuts, which) in body_strategy()) {
        let f = fixture();
        let plan = plan_for(&f, which);
        let wire = gzip(&whole);
        let (outcomes, report) = recorder();
        let inner = data_frames(split_at(&wire, &cuts)).boxed();
        let decoder = Decoder::new(&[ContentCoding::Gzip], 1 << 20).unwrap();
        let body = RewriteBody::new(inner, Arc::clone(&f.guard), plan.clone(), report).with_decoder(decoder);
        check_exact(&f, &whole, body, &outcomes, &plan);
    }
}

#[test]
fn the_module_example_redacts_a_response_and_swaps_a_request() {
    let mut builder = Guard::builder();
    let token = builder
        .add(
            "github_token",
            Placeholder::mint("github_token", &[7; 12]),
            SecretValue::from("ghp_real_value_0123456789"),
        )
        .unwrap();
    let guard = Arc::new(builder.build().unwrap());

    // Response: decoded (the caller drops Content-Encoding and Content-Length), then redacted.
    // The outcome goes to the audit log; here through a oneshot channel.
    let upstream = crate::body::full(Bytes::from_static(b"token=ghp_real_value_0123456789"));
    let decoder = Decoder::new(&[], 64 << 20).unwrap(); // from content_codings(response.headers())
    let (tx, rx) = tokio::sync::oneshot::channel();
    let response = RewriteBody::redacting(upstream, Arc::clone(&guard), move |outcome| {
        let _ = tx.send(outcome);
    })
    .with_decoder(decoder)
    .boxed();

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let shown = rt.block_on(response.collect()).unwrap().to_bytes();
    assert_eq!(shown, format!("token={}", guard.placeholder(token)));
    let outcome = rx.blocking_recv().unwrap();
    assert!(outcome.is_complete());
    assert_eq!(outcome.tally.get(token).redacted, 1); // the audit `redact` event

    // Request toward a host and a location the secret grants: placeholders are swapped.
    let mut plan = Plan::refuse_all(&guard);
    plan.set(token, OnPlaceholder::Swap, OnValue::Keep);
    let sandbox = crate::body::full(Bytes::from(format!("t={}", guard.placeholder(token))));
    let request = RewriteBody::new(sandbox, Arc::clone(&guard), plan, |_outcome| {}).boxed();
    let sent = rt.block_on(request.collect()).unwrap().to_bytes();
    assert_eq!(sent, "t=ghp_real_value_0123456789");
}

#[test]
fn a_placeholder_or_a_value_in_a_trailer_name_is_refused_where_the_plan_refuses_it() {
    let f = fixture();
    // A trailer name arrives lowercased: aws_secret's placeholder, refused by the plan.
    let name = format!("x-{}", f.placeholder(f.aws).to_ascii_lowercase());
    let mut trailers = HeaderMap::new();
    trailers.insert(
        HeaderName::try_from(name.as_str()).unwrap(),
        HeaderValue::from_static("1"),
    );
    let inner = Frames(VecDeque::from([Ok(Frame::trailers(trailers))]));
    let got = collect(RewriteBody::new(
        inner.boxed(),
        Arc::clone(&f.guard),
        f.swap_plan(),
        |_| {},
    ));
    let err = got.error.expect("refused");
    let refused = err.downcast_ref::<StreamRefused>().unwrap();
    assert_eq!(refused.secret(), "aws_secret");
    assert_eq!(refused.place, StreamPlace::TrailerName);
    assert!(got.trailers.is_none());

    // A value, case-folded, in a trailer name toward a host it may not reach: refused too.
    let mut trailers = HeaderMap::new();
    trailers.insert(
        HeaderName::try_from(format!("x-{}", GH_VALUE.to_ascii_lowercase())).unwrap(),
        HeaderValue::from_static("1"),
    );
    let inner = Frames(VecDeque::from([Ok(Frame::trailers(trailers))]));
    let got = collect(RewriteBody::new(
        inner.boxed(),
        Arc::clone(&f.guard),
        Plan::refuse_all(&f.guard),
        |_| {},
    ));
    let err = got.error.expect("refused");
    assert_eq!(
        err.downcast_ref::<StreamRefused>().unwrap().secret(),
        "github_token"
    );

    // On the way back (a response's plan redacts), such a trailer is dropped instead.
    let mut trailers = HeaderMap::new();
    trailers.insert(
        HeaderName::try_from(format!("x-{}", GH_VALUE.to_ascii_lowercase())).unwrap(),
        HeaderValue::from_static("1"),
    );
    trailers.insert("x-plain", HeaderValue::from_static("1"));
    let inner = Frames(VecDeque::from([Ok(Frame::trailers(trailers))]));
    let got = collect(RewriteBody::redacting(
        inner.boxed(),
        Arc::clone(&f.guard),
        |_| {},
    ));
    assert!(got.error.is_none());
    let trailers = got.trailers.expect("trailers");
    assert_eq!(trailers.len(), 1, "{trailers:?}");
    assert!(trailers.contains_key("x-plain"));
}
