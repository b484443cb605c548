//! Content codings: reading `Content-Encoding`, decoding bodies (bounded) so that the guard can
//! scan them, and encoding them again after a swap.
//!
//! This module owns the list of codings sluice understands (`gzip`, `deflate`, `br`, `zstd`,
//! stacked in any order) and the limits that make decoding safe on hostile input: a bound on
//! the decoded size (a decompression bomb stops there, with [`CodecError::TooLarge`]), and
//! output produced in slices of at most [`SLICE`] bytes, so no call inflates more than that
//! before the bound is checked.
//!
//! It must never pass a body through undecoded: a coding it does not know is
//! [`CodecError::Unsupported`], and the caller refuses the message (`502`) rather than
//! forwarding bytes the guard could not read. It matches nothing itself (that is the guard's
//! work) and writes no codec: the maintained crates do (`flate2` on `miniz_oxide`, `brotli`,
//! `zstd`).
//!
//! # Example: decode a gzip'd body, whatever the chunking
//! (run as `tests::example_a_gzipped_body_decodes_whatever_the_chunking`; the module is
//! the crate's own, so its examples are unit tests)
//! ```text
//! use crate::body::codec::{ContentCoding, Decoder, Encoder};
//!
//! let mut encoder = Encoder::new(&[ContentCoding::Gzip])?;
//! let mut wire = Vec::new();
//! encoder.push(b"hello, body", &mut wire)?;
//! encoder.finish(&mut wire)?;
//!
//! let mut decoder = Decoder::new(&[ContentCoding::Gzip], 1 << 20)?;
//! let mut plain = Vec::new();
//! for chunk in wire.chunks(3) {
//!     decoder.push(chunk, &mut plain)?;
//! }
//! decoder.finish(&mut plain)?;
//! assert_eq!(plain, b"hello, body");
//! ```

use std::fmt;

use http::{HeaderMap, HeaderValue, header};

mod decode;
mod encode;

pub(crate) use decode::Decoder;
pub(crate) use encode::Encoder;

/// The most decoded bytes one [`Decoder::decode_some`] step produces, and the size of the
/// buffers between stacked codings.
pub(crate) const SLICE: usize = 64 * 1024;

/// The most codings one body may stack (`Content-Encoding: gzip, br` is two). Real servers
/// use one; a long stack only costs memory (a window per coding).
pub(crate) const MAX_STACK: usize = 4;

/// Everything that can go wrong reading `Content-Encoding` or coding a body.
///
/// Every variant means the body cannot be scanned as sent: the caller refuses the message
/// (`502` for a response, the request's refusal for a request) and never passes it on
/// unscanned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CodecError {
    /// `Content-Encoding` names a coding sluice cannot decode.
    ///
    /// `name` is the peer's text (trimmed, lowercased, at most 40 characters): like any text
    /// from a peer, pass the message through the guard's redaction before it goes into a log
    /// or a body.
    #[error("content coding `{name}` is not supported, expected gzip, deflate, br or zstd")]
    Unsupported {
        /// The coding as it arrived.
        name: String,
    },

    /// More codings are stacked than [`MAX_STACK`].
    #[error("{count} content codings are stacked, expected at most {max}")]
    TooManyCodings {
        /// How many codings the header lists (identity excluded).
        count: usize,
        /// The most accepted, [`MAX_STACK`].
        max: usize,
    },

    /// The decoded body (or one layer of a stack) grew past the bound given to
    /// [`Decoder::new`]: a decompression bomb, or a body larger than sluice is set to scan.
    #[error("decoded body exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The bound in force, in decoded bytes.
        limit: u64,
    },

    /// `Transfer-Encoding` lists `chunked` before another coding: chunks inside a coding,
    /// framed by the connection's close, which sluice does not undo.
    #[error("transfer coding chunked is followed by another coding, expected chunked last")]
    ChunkedNotLast,

    /// The body is not valid in its coding: a bad header or checksum, data after the end of
    /// the stream, or a stream that stops before its end (truncated).
    #[error("{coding} body is corrupt: {reason}")]
    Corrupt {
        /// The coding whose data is bad.
        coding: ContentCoding,
        /// What the decoder found (the library's message; never body bytes).
        reason: String,
    },

    /// An encoder or decoder could not be set up or failed while encoding; this points at the
    /// machine (memory) or a bug in sluice, not at the peer.
    #[error("{coding} codec failed: {reason}")]
    Codec {
        /// The coding concerned.
        coding: ContentCoding,
        /// The library's message.
        reason: String,
    },
}

/// One content coding (RFC 9110 §8.4.1), as named in `Content-Encoding` and
/// `Accept-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ContentCoding {
    /// No transformation; never part of a parsed list.
    Identity,
    /// `gzip` (RFC 1952; `x-gzip` is read as its alias). Concatenated members are decoded too.
    Gzip,
    /// `deflate`: a zlib stream (RFC 1950). Raw deflate (RFC 1951), which some servers send
    /// by mistake, is accepted when the first two bytes are not a valid zlib header; a raw
    /// stream whose first two bytes happen to form one (about 1 in 31 of those starting with
    /// `x8`) is reported corrupt rather than guessed at.
    Deflate,
    /// `br`: Brotli (RFC 7932), standard window sizes only.
    Br,
    /// `zstd`: Zstandard (RFC 8878), windows up to 8 MiB (RFC 9659).
    Zstd,
}

impl ContentCoding {
    /// Reads one coding name, case-insensitively, surrounding whitespace ignored.
    ///
    /// # Errors
    /// [`CodecError::Unsupported`] for any other name.
    pub(crate) fn from_name(name: &str) -> Result<Self, CodecError> {
        let name = name.trim_matches(|c| c == ' ' || c == '\t');
        let known = [
            ("identity", Self::Identity),
            ("gzip", Self::Gzip),
            ("x-gzip", Self::Gzip),
            ("deflate", Self::Deflate),
            ("br", Self::Br),
            ("zstd", Self::Zstd),
        ];
        known
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, c)| *c)
            .ok_or_else(|| unsupported(name.as_bytes()))
    }

    /// The coding's name as sluice writes it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
            Self::Deflate => "deflate",
            Self::Br => "br",
            Self::Zstd => "zstd",
        }
    }
}

impl fmt::Display for ContentCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest coding name quoted in a refusal.
const QUOTED_NAME: usize = 40;

/// A coding sluice cannot decode, its name quoted only when it is a short token: the
/// refusal's message is redacted whole by the guard, which knows whole values only, so a
/// longer name (an upstream echoing a token there) is never cut to a prefix of one.
fn unsupported(name: &[u8]) -> CodecError {
    let text = String::from_utf8_lossy(name);
    let text = text.trim();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let name = if text.len() <= QUOTED_NAME && text.chars().all(token) {
        text.to_ascii_lowercase()
    } else {
        format!("(a name of {} bytes)", name.len())
    };
    CodecError::Unsupported { name }
}

/// The codings a message's `Content-Encoding` lists, in the order they were applied (the
/// last one applied is the last in the list). Every `Content-Encoding` field counts, each may
/// hold a comma-separated list; names are case-insensitive, `identity` and empty elements are
/// skipped. An empty result means the body is sent as it is.
///
/// # Errors
/// [`CodecError::Unsupported`] for a coding sluice cannot decode (or a value that is not
/// text), [`CodecError::TooManyCodings`] past [`MAX_STACK`].
pub(crate) fn content_codings(headers: &HeaderMap) -> Result<Vec<ContentCoding>, CodecError> {
    parse_content_encoding(headers.get_all(header::CONTENT_ENCODING))
}

/// Every coding a received body is in, in the order applied: its content codings, then the
/// transfer codings `Transfer-Encoding` lists besides a final `chunked` (which is framing,
/// undone by hyper as it reads the body). A response sent `Transfer-Encoding: gzip, chunked`
/// is gzip'd on top of its content codings, and must be decoded to be scanned like one
/// sent `Content-Encoding: gzip`.
///
/// ```text
/// // tests::example_transfer_codings_follow_content_codings
///
/// let mut headers = HeaderMap::new();
/// headers.insert("content-encoding", HeaderValue::from_static("br"));
/// headers.insert("transfer-encoding", HeaderValue::from_static("gzip, chunked"));
/// assert_eq!(body_codings(&headers)?, [ContentCoding::Br, ContentCoding::Gzip]);
/// ```
///
/// # Errors
/// As [`content_codings`], for either header; [`CodecError::ChunkedNotLast`] when
/// `chunked` is followed by another transfer coding (the body is then framed by the
/// connection's close, with chunks inside a coding: sluice does not undo that).
pub(crate) fn body_codings(headers: &HeaderMap) -> Result<Vec<ContentCoding>, CodecError> {
    let mut codings = content_codings(headers)?;
    let mut transfer = elements(headers.get_all(header::TRANSFER_ENCODING))?;
    if transfer
        .last()
        .is_some_and(|last| last.eq_ignore_ascii_case("chunked"))
    {
        transfer.pop();
    }
    if transfer
        .iter()
        .any(|name| name.eq_ignore_ascii_case("chunked"))
    {
        return Err(CodecError::ChunkedNotLast);
    }
    push_named(&transfer, &mut codings)?;
    Ok(codings)
}

/// Whether `Transfer-Encoding` names a coding besides `chunked` (or cannot be read): a body
/// hyper hands over still coded.
pub(crate) fn has_transfer_coding(headers: &HeaderMap) -> bool {
    match elements(headers.get_all(header::TRANSFER_ENCODING)) {
        Ok(names) => names
            .iter()
            .any(|name| !name.eq_ignore_ascii_case("chunked")),
        Err(_) => true,
    }
}

/// [`content_codings`] over the `Content-Encoding` field values themselves.
///
/// # Errors
/// As [`content_codings`].
pub(crate) fn parse_content_encoding<'a>(
    values: impl IntoIterator<Item = &'a HeaderValue>,
) -> Result<Vec<ContentCoding>, CodecError> {
    let mut codings = Vec::new();
    push_named(&elements(values)?, &mut codings)?;
    Ok(codings)
}

/// The non-empty elements of a comma-separated list over every field value, trimmed.
fn elements<'a>(
    values: impl IntoIterator<Item = &'a HeaderValue>,
) -> Result<Vec<&'a str>, CodecError> {
    let mut out = Vec::new();
    for value in values {
        let text = value.to_str().map_err(|_| unsupported(value.as_bytes()))?;
        out.extend(
            text.split(',')
                .map(|element| element.trim_matches(|c| c == ' ' || c == '\t'))
                .filter(|element| !element.is_empty()),
        );
    }
    Ok(out)
}

/// Appends the codings `names` name (`identity` skipped), within [`MAX_STACK`] in all.
fn push_named(names: &[&str], codings: &mut Vec<ContentCoding>) -> Result<(), CodecError> {
    for name in names {
        match ContentCoding::from_name(name)? {
            ContentCoding::Identity => {}
            coding => codings.push(coding),
        }
    }
    if codings.len() > MAX_STACK {
        return Err(CodecError::TooManyCodings {
            count: codings.len(),
            max: MAX_STACK,
        });
    }
    Ok(())
}

/// The `Accept-Encoding` sluice sends upstream in place of the client's: exactly the codings
/// it can decode, so that every response it receives can be scanned.
pub(crate) fn accept_encoding() -> HeaderValue {
    HeaderValue::from_static("gzip, deflate, br, zstd")
}

/// Whether an `Accept-Encoding` value names only codings sluice decodes (an empty one
/// names none): then it can go upstream as it came, byte for byte, which matters when a
/// client signed it (AWS's Go SDK signs `Accept-Encoding: identity`). `*`, or any other
/// coding, could bring back a body sluice cannot scan: such a value is replaced with
/// [`accept_encoding`].
///
/// ```text
/// // tests::example_only_decodable_names_pass
/// assert!(names_only_decodable(&HeaderValue::from_static("identity")));
/// assert!(names_only_decodable(&HeaderValue::from_static("gzip;q=1.0, br;q=0.5")));
/// assert!(!names_only_decodable(&HeaderValue::from_static("gzip, compress")));
/// assert!(!names_only_decodable(&HeaderValue::from_static("*")));
/// ```
pub(crate) fn names_only_decodable(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|text| {
        text.trim().is_empty()
            || text.split(',').all(|item| {
                let name = item.split(';').next().unwrap_or_default();
                !name.trim().is_empty() && ContentCoding::from_name(name).is_ok()
            })
    })
}

#[cfg(test)]
mod tests;
