//! A streaming body that passes every data frame through an optional decoder, the guard's
//! streaming rewriter and an optional encoder, and reports what it did when it ends.
//!
//! This module owns applying one [`Plan`] to a whole body as it streams: data frames
//! (decoded first when the body has a `Content-Encoding`), then trailers. The output is
//! exactly the one-shot rewrite of the whole (decoded) body, whatever the frame boundaries,
//! because the guard's [`Rewriter`] holds back any tail that may still grow into a match.
//! A gRPC body ([`RewriteBody::with_grpc_messages`]) is rewritten one whole message at a
//! time instead, each sent on behind a prefix of its new length (`super::grpc`).
//!
//! It must never let a byte pass unscanned: a refusal by the plan, a body that does not decode
//! and an error of the inner body each end the stream with an error (so hyper aborts the
//! message instead of finishing it), and a trailer that cannot be written as rewritten is
//! dropped, never passed on as it came. It decides no grant (the [`Plan`] says) and matches
//! nothing itself (the guard does). It never logs: what it did goes to the [`Outcome`]
//! callback, once, for the audit log.
//!
//! # Example
//! The crate is private; `tests::the_module_example_redacts_a_response_and_swaps_a_request`
//! is the example, run as a test: a response redacted through a decoder, and a request
//! toward a granted host with its placeholder swapped.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::{Buf as _, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Frame, SizeHint};
use sluice_guard::{
    Encoding, Form, Guard, GuardError, OnPlaceholder, OnValue, Plan, RefusedMatch, Rewriter, Tally,
};
use zeroize::Zeroizing;

use super::grpc::{GrpcError, Messages};
use crate::body::codec::{CodecError, Decoder, Encoder, SLICE};
use crate::body::{Body, BoxError};

pub(crate) mod outcome;

pub(crate) use outcome::{End, Leg, Outcome, StreamPlace, StreamRefused};

/// The callback that receives the [`Outcome`].
pub(crate) type Report = Box<dyn FnOnce(Outcome) + Send + 'static>;

/// A body rewritten as it streams: frames of the inner body go through an optional
/// [`Decoder`], the guard's [`Rewriter`] under one [`Plan`], and an optional [`Encoder`];
/// trailers are rewritten too.
///
/// It calls its report callback exactly once: when it ends (normally or with an error), or
/// when it is dropped before its end. The callback runs inside `poll_frame` or `drop`: keep it
/// short (send the outcome on a channel, or append an audit line).
///
/// Its length is unknown until it ends (a rewrite may change it): callers remove
/// `Content-Length` (and `Content-Encoding` when decoding without re-encoding).
///
/// # Resource usage
/// At most one inner frame (fed on in slices of [`SLICE`] bytes), one decoded slice, what
/// the rewriter holds back (less than the guard's longest pattern) and what the codecs
/// hold; each output frame comes from one slice (grown or shrunk by what was replaced in
/// it: a redaction writes a placeholder over a value, which may be longer). See
/// `RewriteBody::buffered` (in tests).
pub(crate) struct RewriteBody {
    inner: Body,
    guard: Arc<Guard>,
    /// The body's plan; the rewriter holds its own copy.
    plan: Plan,
    /// The trailers' plan, when it is not the body's.
    trailer_plan: Option<Plan>,
    rewriter: Option<Rewriter>,
    decoder: Option<Decoder>,
    encoder: Option<Encoder>,
    /// For a gRPC body: each message rewritten whole under `plan`, instead of `rewriter`.
    messages: Option<Messages>,
    /// What the messages' rewrites did.
    message_tally: Tally,
    /// Inner data not yet fed on.
    pending: Bytes,
    /// Whether the decoder may hold more output for what it was fed.
    draining: bool,
    /// Decoded bytes on their way to the rewriter (may hold a value: zeroized).
    decoded: Zeroizing<Vec<u8>>,
    trailers: Option<HeaderMap>,
    /// The body's tally once the rewriter is finished (or gone after an error).
    body_tally: Tally,
    trailer_tally: Tally,
    state: State,
    bytes_in: u64,
    bytes_out: u64,
    /// Bytes fed to the guard (decoded), for the metrics.
    scanned: u64,
    /// Only ever reached through `&mut self` (`get_mut`, no locking): the mutex is there so
    /// that the body is `Sync`, as `BoxBody` requires, without asking the callback to be.
    report: Mutex<Option<Report>>,
}

enum State {
    Streaming,
    Ending,
    Trailers(Option<HeaderMap>),
    Done,
}

impl fmt::Debug for RewriteBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RewriteBody")
            .field("rewriter", &self.rewriter)
            .field("decoder", &self.decoder)
            .field("encoder", &self.encoder)
            .field("pending", &self.pending.len())
            .field("bytes_in", &self.bytes_in)
            .field("bytes_out", &self.bytes_out)
            .finish_non_exhaustive()
    }
}

/// Why a step failed, before it becomes the body's error.
enum Failure {
    Refused(StreamRefused),
    Codec(CodecError),
    Grpc(GrpcError),
    Guard(GuardError),
}

impl From<CodecError> for Failure {
    fn from(e: CodecError) -> Self {
        Self::Codec(e)
    }
}

impl From<GrpcError> for Failure {
    fn from(e: GrpcError) -> Self {
        Self::Grpc(e)
    }
}

impl Failure {
    fn from_guard(e: GuardError, place: StreamPlace) -> Self {
        match e {
            GuardError::Refused(refusal) => Self::Refused(StreamRefused { refusal, place }),
            other => Self::Guard(other),
        }
    }

    fn end(&self) -> End {
        match self {
            Self::Refused(r) => End::Refused(r.clone()),
            Self::Codec(e) => End::Codec(e.clone()),
            Self::Grpc(e) => End::Grpc(e.clone()),
            Self::Guard(e) => End::Guard(e.clone()),
        }
    }

    fn into_error(self) -> BoxError {
        match self {
            Self::Refused(r) => Box::new(r),
            Self::Codec(e) => Box::new(e),
            Self::Grpc(e) => Box::new(e),
            Self::Guard(e) => Box::new(e),
        }
    }
}

impl RewriteBody {
    /// Rewrites `inner` under `plan` (body and trailers), calling `report` once when it ends.
    pub(crate) fn new(
        inner: Body,
        guard: Arc<Guard>,
        plan: Plan,
        report: impl FnOnce(Outcome) + Send + 'static,
    ) -> Self {
        Self {
            inner,
            rewriter: Some(Rewriter::new(Arc::clone(&guard), plan.clone())),
            plan,
            trailer_plan: None,
            guard,
            decoder: None,
            encoder: None,
            messages: None,
            message_tally: Tally::default(),
            pending: Bytes::new(),
            draining: false,
            decoded: Zeroizing::new(Vec::new()),
            trailers: None,
            body_tally: Tally::default(),
            trailer_tally: Tally::default(),
            state: State::Streaming,
            bytes_in: 0,
            bytes_out: 0,
            scanned: 0,
            report: Mutex::new(Some(Box::new(report))),
        }
    }

    /// Redacts every known value in `inner` to its placeholder (responses): the plan
    /// [`Plan::redact_all`], which never refuses.
    pub(crate) fn redacting(
        inner: Body,
        guard: Arc<Guard>,
        report: impl FnOnce(Outcome) + Send + 'static,
    ) -> Self {
        let plan = Plan::redact_all(&guard);
        Self::new(inner, guard, plan, report)
    }

    /// Decodes the inner body before rewriting it (its `Content-Encoding`, bounded); the
    /// output stays decoded unless an encoder is set too.
    pub(crate) fn with_decoder(mut self, decoder: Decoder) -> Self {
        self.decoder = Some(decoder);
        self
    }

    /// Encodes the rewritten body again (a request body sent on in the coding it came in).
    pub(crate) fn with_encoder(mut self, encoder: Encoder) -> Self {
        self.encoder = Some(encoder);
        self
    }

    /// A different plan for the trailers (by default, the body's).
    pub(crate) fn with_trailer_plan(mut self, plan: Plan) -> Self {
        self.trailer_plan = Some(plan);
        self
    }

    /// Reads the (decoded) body as gRPC's length-prefixed messages
    /// ([`super::grpc::is_grpc`]): each message is held whole, up to `limit` bytes, rewritten
    /// alone and passed on behind a prefix of its new length, so that a swap or a redaction
    /// that changes its length keeps the framing true. The body ends with a [`GrpcError`] on
    /// a message it cannot scan.
    pub(crate) fn with_grpc_messages(mut self, limit: usize) -> Self {
        self.messages = Some(Messages::new(limit));
        self
    }

    /// Bytes this body holds between polls: the undecoded rest of the current frame, the
    /// decode buffer, the rewriter's held-back tail and the decoder's inner buffers (the
    /// codec libraries' windows are not counted).
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.pending.len()
            + self.decoded.capacity()
            + self.rewriter.as_ref().map_or(0, Rewriter::held_back)
            + self.decoder.as_ref().map_or(0, Decoder::buffered)
            + self.messages.as_ref().map_or(0, Messages::buffered)
    }

    /// Rewrites one slice of the pending input; `None` when it produced no output yet.
    fn step(&mut self) -> Result<Option<Bytes>, Failure> {
        let Some(rewriter) = self.rewriter.as_mut() else {
            self.pending.clear();
            self.draining = false;
            return Ok(None);
        };
        // Rewritten bytes may hold a swapped value until they leave: zeroized if they do not.
        let mut out = Zeroizing::new(Vec::new());
        let pushed = match self.decoder.as_mut() {
            Some(decoder) => {
                self.decoded.clear();
                let used = decoder.decode_some(&self.pending, &mut self.decoded, SLICE)?;
                self.pending.advance(used);
                self.draining = self.decoded.len() == SLICE;
                self.scanned += self.decoded.len() as u64;
                out.reserve(self.decoded.len() + rewriter.held_back());
                let mut scan = Scan {
                    rewriter,
                    messages: self.messages.as_mut(),
                    guard: &self.guard,
                    plan: &self.plan,
                    tally: &mut self.message_tally,
                };
                scan.push(&self.decoded, &mut out)
            }
            None => {
                let slice = self.pending.split_to(self.pending.len().min(SLICE));
                self.scanned += slice.len() as u64;
                out.reserve(slice.len() + rewriter.held_back());
                let mut scan = Scan {
                    rewriter,
                    messages: self.messages.as_mut(),
                    guard: &self.guard,
                    plan: &self.plan,
                    tally: &mut self.message_tally,
                };
                scan.push(&slice, &mut out)
            }
        };
        pushed?;
        self.encode(std::mem::take(&mut *out), false)
    }

    /// Passes rewritten bytes through the encoder, if any; `None` when nothing is ready.
    fn encode(&mut self, out: Vec<u8>, last: bool) -> Result<Option<Bytes>, Failure> {
        let out = match self.encoder.as_mut() {
            None => out,
            Some(encoder) => {
                let plain = Zeroizing::new(out);
                let mut encoded = Vec::with_capacity(plain.len() / 2 + 64);
                encoder.push(&plain, &mut encoded)?;
                if last && let Some(encoder) = self.encoder.take() {
                    encoder.finish(&mut encoded)?;
                }
                encoded
            }
        };
        if out.is_empty() {
            return Ok(None);
        }
        self.bytes_out += out.len() as u64;
        Ok(Some(Bytes::from(out)))
    }

    /// Ends the body: trailers first (so a refused trailer stops the body before its last
    /// bytes leave), then the decoder's, rewriter's and encoder's ends.
    fn end(&mut self) -> Result<(Option<Bytes>, Option<HeaderMap>), Failure> {
        let trailers = match self.trailers.take() {
            Some(trailers) => Some(self.rewrite_trailers(trailers)?),
            None => None,
        };
        let Some(mut rewriter) = self.rewriter.take() else {
            return Ok((None, trailers));
        };
        // Rewritten bytes may hold a swapped value until they leave: zeroized if they do not.
        let mut out = Zeroizing::new(Vec::new());
        if let Some(decoder) = self.decoder.take() {
            self.decoded.clear();
            let decoded = decoder.finish(&mut self.decoded);
            self.body_tally = rewriter.tally().clone();
            decoded?;
            self.scanned += self.decoded.len() as u64;
            Scan {
                rewriter: &mut rewriter,
                messages: self.messages.as_mut(),
                guard: &self.guard,
                plan: &self.plan,
                tally: &mut self.message_tally,
            }
            .push(&self.decoded, &mut out)?;
        }
        if let Some(messages) = &self.messages {
            messages.finish()?;
        }
        self.body_tally = rewriter.tally().clone();
        self.body_tally = rewriter
            .finish(&mut out)
            .map_err(|e| Failure::from_guard(e, StreamPlace::Body))?;
        Ok((self.encode(std::mem::take(&mut *out), true)?, trailers))
    }

    /// Rewrites every trailer under the trailer plan. A trailer whose rewritten name or value
    /// is not valid in a header is dropped: passing it on as it came would pass it unscanned.
    fn rewrite_trailers(&mut self, trailers: HeaderMap) -> Result<HeaderMap, Failure> {
        let mut out = HeaderMap::with_capacity(trailers.len());
        // The (rewritten) name of the values that follow, and whether it is safe to show.
        let mut current: Option<(HeaderName, bool)> = None;
        for (key, value) in trailers {
            if let Some(key) = key {
                current = self.trailer_name(key)?;
            }
            let Some((name, clean)) = &current else {
                continue;
            };
            let plan = self.trailer_plan.as_ref().unwrap_or(&self.plan);
            let rewritten =
                crate::scan::basic::rewrite_header_value(&self.guard, value.as_bytes(), plan)
                    .map_err(|e| {
                        let name = clean.then(|| name.as_str().to_owned());
                        Failure::from_guard(e, StreamPlace::Trailer { name })
                    })?;
            self.trailer_tally.merge(rewritten.tally());
            if !rewritten.is_changed() {
                out.append(name.clone(), value);
                continue;
            }
            if let Ok(mut value) = HeaderValue::from_bytes(rewritten.bytes()) {
                value.set_sensitive(rewritten.tally().total().swapped > 0);
                out.append(name.clone(), value);
            }
        }
        Ok(out)
    }

    /// A trailer's name, rewritten; `None` when it cannot be written as rewritten. The flag
    /// says whether the name held no match (and so may be shown in a refusal).
    fn trailer_name(&mut self, key: HeaderName) -> Result<Option<(HeaderName, bool)>, Failure> {
        let plan = self.trailer_plan.as_ref().unwrap_or(&self.plan);
        let rewritten = self
            .guard
            .rewrite(key.as_str().as_bytes(), plan)
            .map_err(|e| Failure::from_guard(e, StreamPlace::TrailerName))?;
        self.trailer_tally.merge(rewritten.tally());
        let clean = rewritten.tally().is_empty();
        if !rewritten.is_changed() {
            // A value or a placeholder in a name arrives case-folded, where the exact scan
            // cannot see it. Where the plan refuses it (a request toward a host it may not
            // reach; a placeholder, which no name can take), the body is refused, as for a
            // header name; elsewhere (a response) the trailer is dropped, and each value it
            // held counted as a redaction.
            let name = key.as_str().as_bytes();
            let values = self.guard.values_in_name(name);
            let placeholders = self.guard.placeholders_in_name(name);
            let refused = values
                .iter()
                .find(|&&secret| plan.on_value(secret) == OnValue::Refuse)
                .map(|&secret| (secret, Form::Value(Encoding::Raw)))
                .or_else(|| {
                    placeholders
                        .iter()
                        .find(|&&secret| plan.on_placeholder(secret) == OnPlaceholder::Refuse)
                        .map(|&secret| (secret, Form::Placeholder))
                });
            if let Some((secret, form)) = refused {
                let refusal = RefusedMatch {
                    secret,
                    name: self.guard.name(secret).to_owned(),
                    form,
                    offset: 0,
                };
                return Err(Failure::from_guard(
                    GuardError::Refused(refusal),
                    StreamPlace::TrailerName,
                ));
            }
            for &secret in &values {
                self.trailer_tally.add_redaction(secret);
            }
            if !values.is_empty() {
                return Ok(None);
            }
            return Ok(Some((key, clean)));
        }
        Ok(HeaderName::from_bytes(rewritten.bytes())
            .ok()
            .map(|name| (name, clean)))
    }

    /// Ends the body on `failure`: reports, drops every buffer, and returns the error.
    fn fail(&mut self, failure: Failure) -> BoxError {
        self.report(failure.end());
        self.shut();
        failure.into_error()
    }

    /// Drops every buffer (the rewriter's and the decode buffer are zeroized).
    fn shut(&mut self) {
        self.state = State::Done;
        self.pending = Bytes::new();
        self.draining = false;
        self.rewriter = None;
        self.decoder = None;
        self.encoder = None;
        self.messages = None;
        self.trailers = None;
    }

    /// Calls the report callback, if it was not called yet.
    fn report(&mut self, end: End) {
        let slot = self
            .report
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(report) = slot.take() else {
            return;
        };
        let mut tally = match &self.rewriter {
            Some(rewriter) => rewriter.tally().clone(),
            None => self.body_tally.clone(),
        };
        tally.merge(&self.message_tally);
        tally.merge(&self.trailer_tally);
        report(Outcome {
            tally,
            end,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            scanned: self.scanned,
        });
    }
}

/// Where rewritten body bytes come from: the streaming rewriter, or for a gRPC body, each
/// whole message rewritten alone and framed again.
struct Scan<'a> {
    rewriter: &'a mut Rewriter,
    messages: Option<&'a mut Messages>,
    guard: &'a Guard,
    plan: &'a Plan,
    tally: &'a mut Tally,
}

impl Scan<'_> {
    fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Failure> {
        let Some(messages) = self.messages.as_deref_mut() else {
            return self
                .rewriter
                .push(input, out)
                .map_err(|e| Failure::from_guard(e, StreamPlace::Body));
        };
        let mut input = input;
        while let Some(message) = messages.next(&mut input)? {
            let rewritten = self
                .guard
                .rewrite(&message, self.plan)
                .map_err(|e| Failure::from_guard(e, StreamPlace::Body))?;
            self.tally.merge(rewritten.tally());
            messages.frame(rewritten.bytes(), out)?;
        }
        Ok(())
    }
}

impl http_body::Body for RewriteBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Streaming => {
                    // Finish the current frame before asking for the next one.
                    if this.draining || !this.pending.is_empty() {
                        match this.step() {
                            Ok(Some(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                            Ok(None) => continue,
                            Err(failure) => return Poll::Ready(Some(Err(this.fail(failure)))),
                        }
                    }
                    match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                        Some(Ok(frame)) => match frame.into_data() {
                            Ok(data) => {
                                this.bytes_in += data.len() as u64;
                                this.pending = data;
                            }
                            Err(frame) => {
                                // Any other kind of frame (none exists today) is dropped:
                                // what sluice cannot scan does not pass.
                                if let Ok(trailers) = frame.into_trailers() {
                                    this.trailers.get_or_insert_default().extend(trailers);
                                }
                            }
                        },
                        Some(Err(e)) => {
                            this.report(End::Inner);
                            this.shut();
                            return Poll::Ready(Some(Err(e)));
                        }
                        None => this.state = State::Ending,
                    }
                }
                State::Ending => match this.end() {
                    Ok((data, trailers)) => {
                        this.report(End::Complete);
                        match data {
                            Some(data) => {
                                this.state = State::Trailers(trailers);
                                return Poll::Ready(Some(Ok(Frame::data(data))));
                            }
                            None => this.state = State::Trailers(trailers),
                        }
                    }
                    Err(failure) => return Poll::Ready(Some(Err(this.fail(failure)))),
                },
                State::Trailers(trailers) => {
                    let trailers = trailers.take();
                    this.state = State::Done;
                    if let Some(trailers) = trailers {
                        return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

impl Drop for RewriteBody {
    fn drop(&mut self) {
        self.report(End::Cancelled);
    }
}

#[cfg(test)]
mod tests;
