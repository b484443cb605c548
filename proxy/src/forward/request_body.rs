//! The request body on its way out: read whole and rewritten when it can be, so that a
//! refusal sends nothing; streamed through the rewriter otherwise.
//!
//! Which it is follows from the body's framing, its coding and the plan: see
//! [`Buffering`]. A body sluice cannot decode is refused, never sent unscanned.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderValue;
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http_body_util::BodyExt;
use sluice_guard::{Guard, OnPlaceholder, Tally};

use crate::body::codec::{self, Decoder, Encoder};
use crate::body::{self, Body, BoxError};
use crate::config::Limits;
use crate::forward::budget::{self as budget_step, BodySwaps};
use crate::refusal::{Refusal, RefusalSlot};
use crate::scan::grpc;
use crate::scan::request::{Outbound, Place};
use crate::scan::stream::{End, Leg, Outcome, RewriteBody, StreamRefused};

/// When a request body is buffered and rewritten whole rather than streamed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buffering {
    /// When its length is known and within the bound (so that a refusal sends nothing),
    /// and whenever a swap may change its length and `Content-Length` must be recomputed
    /// (or its coding re-encoded): `413` beyond the bound then.
    WhenLengthKnown,
    /// Always (an upgrade's body, which must be refused before the handshake leaves).
    Always,
}

/// What the body step is given besides the body: the scan's plans, the guard and the
/// bounds, and whether the body must be read whole.
#[derive(Clone, Copy)]
pub(crate) struct BodyStep<'a> {
    /// The request's scan (its body plan and trailer plan, and how a refusal reads).
    pub outbound: &'a Outbound<'a>,
    /// The guard the plans are for.
    pub guard: &'a Arc<Guard>,
    /// `max_buffered_body`, `body_read_timeout` and `max_decoded_body`.
    pub limits: &'a Limits,
    /// Whether the body must be read whole whatever its framing.
    pub buffering: Buffering,
    /// Whether its bytes may not change (a signed aws-chunked body): swaps and redactions
    /// are refused instead.
    pub keep_length: bool,
}

/// The request body on its way out: scanned as it streams, or buffered up to the bound and
/// rewritten whole (see [`Buffering`]). `report` gets what was swapped and kept, once, the
/// refusal a streamed body was cut short by, if sluice cut it, and how many (decoded) bytes
/// the guard scanned; a streamed body that a
/// refusal stopped also leaves that refusal in `stopped`. Returned beside the body: what it
/// swapped (read whole), or may swap (streamed), for the budget step.
pub(crate) async fn scan<B>(
    step: BodyStep<'_>,
    parts: &mut Parts,
    incoming: B,
    stopped: &StoppedBody,
    report: impl FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static,
) -> Result<(Body, BodySwaps), Refusal>
where
    B: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    let BodyStep {
        outbound,
        guard,
        limits,
        buffering,
        keep_length,
    } = step;
    // A run with no secret has nothing to find: the body passes as it came.
    if guard.is_empty() {
        return Ok((boxed(incoming), BodySwaps::Known(Vec::new())));
    }
    // No body at all (a GET): nothing to scan, and none goes on (no streaming rewriter is
    // set up for it, and the upstream request keeps the client's framing: none).
    if http_body::Body::is_end_stream(&incoming) && !parts.headers.contains_key(CONTENT_LENGTH) {
        return Ok((body::empty(), BodySwaps::Known(Vec::new())));
    }
    let plan = outbound.body_plan(parts);
    let plan = if keep_length {
        plan.keeping_length()
    } else {
        plan
    };
    let codings = codec::content_codings(&parts.headers).map_err(|e| {
        Refusal::bad_request(format!(
            "the request body cannot be scanned: {e}; send it uncompressed"
        ))
    })?;
    let may_change = !codings.is_empty()
        || guard
            .ids()
            .any(|id| plan.on_placeholder(id) == OnPlaceholder::Swap);
    let limit = limits.max_buffered_body;
    let declared = match parts.headers.get(CONTENT_LENGTH) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| Refusal::bad_request("Content-Length is not a number"))?,
        ),
    };
    // A body whose length is known and within the bound is read whole before anything is
    // sent, whatever the host: a refusal then stops the request before its head leaves.
    // Longer ones stream, unless a swap may change their length (then `413`).
    let has_length = declared.is_some();
    let fits = declared.is_some_and(|n| n <= limit as u64);
    // gRPC messages are rewritten one by one as they stream, never as one body.
    let grpc = grpc::is_grpc(&parts.headers);
    if buffering == Buffering::Always || (!grpc && ((may_change && has_length) || fits)) {
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Refusal::too_large(limit));
        }
        // Bounded in time as in size: a trickled body would hold its buffer for ever.
        let timeout = limits.body_read_timeout;
        let collected = tokio::time::timeout(
            timeout,
            http_body_util::Limited::new(incoming, limit).collect(),
        )
        .await
        .map_err(|_| Refusal::body_timeout(timeout))?
        .map_err(|_| Refusal::too_large(limit))?
        .to_bytes();
        let decoded = if codings.is_empty() {
            zeroize::Zeroizing::new(collected.to_vec())
        } else {
            let mut out = zeroize::Zeroizing::new(Vec::new());
            let mut decoder =
                Decoder::new(&codings, limit as u64).map_err(|e| Refusal::request_codec(&e))?;
            decoder
                .push(&collected, &mut out)
                .and_then(|()| decoder.finish(&mut out))
                .map_err(|e| Refusal::request_codec(&e))?;
            out
        };
        let rewritten = guard
            .rewrite(&decoded, &plan)
            .map_err(|e| outbound.refusal(e, &Place::Body))?;
        report(rewritten.tally(), None, decoded.len() as u64);
        let swapped = BodySwaps::Known(budget_step::swapped(rewritten.tally()).collect());
        let mut bytes = rewritten.into_bytes();
        if !codings.is_empty() {
            let mut encoded = Vec::new();
            let mut encoder = Encoder::new(&codings).map_err(|e| Refusal::request_codec(&e))?;
            encoder
                .push(&bytes, &mut encoded)
                .and_then(|()| encoder.finish(&mut encoded))
                .map_err(|e| Refusal::request_codec(&e))?;
            bytes = zeroize::Zeroizing::new(encoded);
        }
        // A bodiless request (a GET handshake) stays without a length.
        if has_length || !bytes.is_empty() {
            parts
                .headers
                .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        }
        let body = body::full(bytes::Bytes::from(std::mem::take(&mut *bytes)));
        return Ok((body, swapped));
    }
    // Streamed: a refusal mid-body aborts the upstream request before the match leaves, and
    // is kept so that the client is told why.
    let may_swap: Vec<_> = guard
        .ids()
        .filter(|&id| plan.on_placeholder(id) == OnPlaceholder::Swap)
        .collect();
    let report = {
        let stopped = stopped.clone();
        move |outcome: Outcome| {
            let cut = outcome.end.as_refusal(Leg::Request);
            stopped.set(&outcome.end, cut.is_some());
            report(&outcome.tally, cut, outcome.scanned);
        }
    };
    let mut streamed = RewriteBody::new(boxed(incoming), guard.clone(), plan, report)
        // Trailers are no grantable place: nothing is swapped into them.
        .with_trailer_plan(outbound.plan(&Place::Trailers));
    if !codings.is_empty() {
        let limit = limits.max_decoded_body;
        let decoder = Decoder::new(&codings, limit).map_err(|e| Refusal::request_codec(&e))?;
        let encoder = Encoder::new(&codings).map_err(|e| Refusal::request_codec(&e))?;
        streamed = streamed.with_decoder(decoder).with_encoder(encoder);
    }
    if grpc {
        // Each message gets its new length; the body's no longer holds.
        parts.headers.remove(CONTENT_LENGTH);
        streamed = streamed.with_grpc_messages(limit);
    }
    Ok((BodyExt::boxed(streamed), BodySwaps::Streaming(may_swap)))
}

/// Any body, as the rewriter and the upstream leg take it.
fn boxed<B>(incoming: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    BodyExt::boxed(incoming.map_err(Into::into))
}

/// Where a streamed request body leaves the refusal that stopped it, and whether sluice cut
/// it at all. hyper reports a body error to the caller only as a failed exchange (and over
/// HTTP/2 as a reset stream), so the body's own report is the reliable witness; and since
/// that report has put the cut in the audit log, the failed exchange is not recorded again.
#[derive(Clone, Default)]
pub(crate) struct StoppedBody {
    stopped: Arc<std::sync::Mutex<Stopped>>,
    /// A refusal by a step before the scan (an aws-chunked chunk whose signature failed).
    other: RefusalSlot,
}

#[derive(Default)]
struct Stopped {
    refused: Option<StreamRefused>,
    cut: bool,
}

impl StoppedBody {
    fn set(&self, end: &End, cut: bool) {
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        if let End::Refused(refused) = end {
            stopped.refused = Some(refused.clone());
        }
        stopped.cut |= cut;
    }

    /// The refusal that stopped the body, if one did.
    pub(crate) fn take(&self) -> Option<StreamRefused> {
        self.stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
            .take()
    }

    /// Where a step before the scan leaves the refusal it stopped the body with.
    pub(crate) fn refusals(&self) -> &RefusalSlot {
        &self.other
    }

    /// The refusal a step before the scan stopped the body with, if one did.
    pub(crate) fn take_refusal(&self) -> Option<Refusal> {
        self.other.take()
    }

    /// Whether sluice cut the body short (a refusal, a coding it could not undo): the cut
    /// is in the audit log already.
    pub(crate) fn was_cut(&self) -> bool {
        self.stopped.lock().unwrap_or_else(|e| e.into_inner()).cut
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http_body_util::Full;

    use super::*;
    use crate::refusal::Code;
    use crate::tls::target::Target;

    #[tokio::test]
    async fn a_streamed_body_cut_by_a_refusal_reports_it_as_it_is_cut() {
        let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test"]
egress:
  allow: ["open.test"]
"#;
        let (policy, guard) = crate::testing::declared(yaml, "body.yaml");
        let guard = Arc::new(guard);
        let placeholder = guard
            .placeholder(guard.id("tok").unwrap())
            .as_str()
            .to_owned();
        let target = Target {
            host: "open.test".into(),
            port: 443,
        };
        let outbound = Outbound::new(&guard, &policy, &target);
        // No Content-Length: the body streams, and its head may have gone before the cut.
        let (mut parts, ()) = http::Request::post("https://open.test/")
            .body(())
            .unwrap()
            .into_parts();
        let text = format!("first chunk, t={placeholder}");
        let length = text.len() as u64;
        let incoming = Full::new(Bytes::from(text));
        let limits = Limits::default();
        let step = BodyStep {
            outbound: &outbound,
            guard: &guard,
            limits: &limits,
            buffering: Buffering::WhenLengthKnown,
            keep_length: false,
        };
        let stopped = StoppedBody::default();
        let reported: Arc<Mutex<Option<Option<Refusal>>>> = Arc::default();
        let scanned = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let report = {
            let (reported, scanned) = (reported.clone(), scanned.clone());
            move |_: &Tally, cut: Option<Refusal>, bytes: u64| {
                scanned.store(bytes, std::sync::atomic::Ordering::Relaxed);
                *reported.lock().unwrap() = Some(cut);
            }
        };
        let (body, swaps) = scan(step, &mut parts, incoming, &stopped, report)
            .await
            .unwrap();
        // Toward a host the secret does not grant, the plan swaps nothing.
        assert!(matches!(swaps, BodySwaps::Streaming(ref ids) if ids.is_empty()));
        assert!(
            body.collect().await.is_err(),
            "the body ends with the refusal"
        );
        let cut = reported
            .lock()
            .unwrap()
            .take()
            .expect("reported")
            .expect("a cut");
        assert_eq!(cut.code, Code::PlaceholderNotGranted);
        assert_eq!(cut.secret.as_deref(), Some("tok"));
        assert_eq!(cut.location.as_deref(), Some("body"));
        assert!(stopped.was_cut());
        assert!(stopped.take().is_some());
        // Every byte fed to the guard is counted for the metrics, up to the cut.
        assert_eq!(scanned.load(std::sync::atomic::Ordering::Relaxed), length);
    }
}
