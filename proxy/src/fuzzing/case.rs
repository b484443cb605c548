//! The fuzz case: a request built from the fuzzer's choices, its pieces made of the
//! fixture's placeholders and value encodings (whole, cut, or in `Basic` credentials)
//! and of the fuzzer's own bytes.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::Frame;

use crate::body::BoxError;

/// Every target host the case may pick: granted to alpha, to beta (two ports), to none.
pub(super) const TARGETS: [(&str, u16); 5] = [
    ("api.alpha.test", 443),
    ("beta.test", 443),
    ("beta.test", 8443),
    ("other.test", 443),
    ("verbatim.test", 443),
];

/// Content codings the case may declare, `compress` being one sluice cannot decode.
pub(super) const CODINGS: [&str; 7] = [
    "gzip", "deflate", "br", "zstd", "identity", "x-gzip", "compress",
];

pub(super) const CONTENT_TYPES: [Option<&str>; 5] = [
    None,
    Some("application/json"),
    Some("application/x-www-form-urlencoded"),
    Some("text/plain"),
    Some("application/vnd.api+json; charset=utf-8"),
];

#[derive(Arbitrary, Debug)]
pub(super) enum Leaf {
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
pub(super) enum Piece {
    Leaf(Leaf),
    /// `Basic <base64 of the leaves>`, as git and pip send credentials.
    Basic(Vec<Leaf>),
}

#[derive(Arbitrary, Debug)]
pub(super) struct Case {
    pub(super) target: u8,
    pub(super) plain: bool,
    pub(super) method: Vec<Leaf>,
    pub(super) path: Vec<Piece>,
    pub(super) query: Option<Vec<Piece>>,
    pub(super) headers: Vec<(Vec<Leaf>, Vec<Piece>)>,
    pub(super) content_type: u8,
    pub(super) codings: Vec<u8>,
    /// The body bytes are sent as they are under the declared codings (usually corrupt),
    /// instead of being encoded by the harness.
    pub(super) coded_by_fuzzer: bool,
    pub(super) body: Vec<Piece>,
    pub(super) cuts: Vec<u16>,
    pub(super) trailers: Vec<(Vec<Leaf>, Vec<Piece>)>,
    pub(super) buffered: bool,
}

pub(super) fn render_leaves(tokens: &[Vec<u8>], leaves: &[Leaf], out: &mut Vec<u8>) {
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

pub(super) fn render(tokens: &[Vec<u8>], pieces: &[Piece]) -> Vec<u8> {
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
pub(super) fn path_and_query(raw: Vec<u8>) -> Option<PathAndQuery> {
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

/// A body of frames held in memory, as a client would send them.
pub(super) struct Frames(pub(super) VecDeque<Frame<Bytes>>);

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

pub(super) fn header_map(
    tokens: &[Vec<u8>],
    fields: &[(Vec<Leaf>, Vec<Piece>)],
    max: usize,
) -> HeaderMap {
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
