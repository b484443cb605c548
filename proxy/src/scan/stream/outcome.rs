//! What a streamed body reports when it ends: how it ended (a refusal, and where; a codec
//! or gRPC failure; the inner body's error), and what it swapped and redacted.

use std::fmt;

use sluice_guard::{Form, GuardError, RefusedMatch, Tally};

use crate::body::codec::CodecError;
use crate::refusal::{Code, Refusal};
use crate::scan::grpc::GrpcError;

/// Where in a body a plan refused a match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamPlace {
    /// The data of the body (decoded, when it had a coding); the refusal's offset counts
    /// decoded bytes.
    Body,
    /// A trailer's name.
    TrailerName,
    /// A trailer's value. The name is given unless the name itself held a match.
    Trailer {
        /// The trailer's name, when it is safe to show.
        name: Option<String>,
    },
}

impl fmt::Display for StreamPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Body => f.write_str("in the body"),
            Self::TrailerName => f.write_str("in a trailer name"),
            Self::Trailer { name: Some(name) } => write!(f, "in trailer `{name}`"),
            Self::Trailer { name: None } => f.write_str("in a trailer value"),
        }
    }
}

/// The error a [`RewriteBody`](super::RewriteBody) ends with when its plan refuses a match: an ungranted
/// placeholder, or a real value going where its secret is not granted.
///
/// It names the secret, what was found (placeholder or value, and the encoding) and where,
/// never the bytes. Find it with `err.downcast_ref::<StreamRefused>()` on the body's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sluice stopped the body: {refusal}, {place}")]
pub(crate) struct StreamRefused {
    /// The guard's refusal: the secret's id and name, the form found, the offset.
    pub refusal: RefusedMatch,
    /// Where the match was.
    pub place: StreamPlace,
}

impl StreamRefused {
    /// The refused secret's name.
    #[cfg(test)]
    pub(crate) fn secret(&self) -> &str {
        &self.refusal.name
    }
}

/// How a [`RewriteBody`](super::RewriteBody) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum End {
    /// Every frame was rewritten and passed on.
    Complete,
    /// The plan refused a match; the body ended with a [`StreamRefused`] error.
    Refused(StreamRefused),
    /// The body did not decode (corrupt, truncated, over the bound); it ended with this
    /// [`CodecError`].
    Codec(CodecError),
    /// A gRPC body could not be split into messages sluice can scan (compressed, over the
    /// bound, cut short); it ended with this [`GrpcError`].
    Grpc(GrpcError),
    /// The guard failed otherwise (a bug); the body ended with this error.
    Guard(GuardError),
    /// The inner body failed; its error was passed on unchanged.
    Inner,
    /// The body was dropped before its end (the peer went away, or the message was
    /// abandoned).
    Cancelled,
}

/// What a [`RewriteBody`](super::RewriteBody) did, reported once when it ends, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Per secret: swapped, redacted and kept, over the body and its trailers. Counts what
    /// was passed on before an error, too: swapped bytes may have left already.
    pub tally: Tally,
    /// How the body ended.
    pub end: End,
    /// Bytes received from the inner body (as they came, still encoded).
    pub bytes_in: u64,
    /// Bytes passed on.
    pub bytes_out: u64,
    /// Bytes the guard scanned: the body as decoded (trailers not counted).
    pub scanned: u64,
}

impl Outcome {
    /// Whether the body ended normally.
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        self.end == End::Complete
    }
}

/// Which way a streamed body goes: whose fault a cut is, and how it is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leg {
    /// The sandbox's request body, toward the upstream.
    Request,
    /// The upstream's response body, toward the sandbox.
    Response,
}

impl End {
    /// The refusal a body that sluice cut short stands for, for the audit log (the head has
    /// gone, so no response can carry it); `None` for a body that ended, or that its peer
    /// ended.
    pub(crate) fn as_refusal(&self, leg: Leg) -> Option<Refusal> {
        let refusal = match (self, leg) {
            (End::Refused(refused), _) => {
                let code = match refused.refusal.form {
                    Form::Placeholder => Code::PlaceholderNotGranted,
                    Form::Value(_) => Code::SecretValueRefused,
                };
                let location = match refused.place {
                    StreamPlace::Body => "body",
                    StreamPlace::TrailerName | StreamPlace::Trailer { .. } => "trailers",
                };
                Refusal::secret_refused(
                    code,
                    refused.to_string(),
                    &refused.refusal.name,
                    location.to_owned(),
                )
            }
            (End::Codec(error), Leg::Request) => Refusal::request_codec(error),
            (End::Codec(error), Leg::Response) => Refusal::response_codec(error),
            (End::Grpc(error), Leg::Request) => {
                Refusal::bad_request(format!("the request body: {error}"))
            }
            (End::Grpc(error), Leg::Response) => Refusal::bad_gateway(
                Code::UpstreamEncoding,
                format!("the response cannot be scanned, so it was cut: {error}"),
            ),
            (End::Guard(error), _) => {
                Refusal::unavailable(format!("sluice could not scan the body: {error}"))
            }
            (End::Complete | End::Inner | End::Cancelled, _) => return None,
        };
        Some(refusal)
    }
}
