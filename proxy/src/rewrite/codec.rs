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
//! ```
//! use std::io::Write as _;
//! use sluice_proxy::rewrite::codec::{ContentCoding, Decoder, Encoder};
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
//! # Ok::<(), sluice_proxy::rewrite::codec::CodecError>(())
//! ```

use std::fmt;
use std::io::{self, BufRead, Read, Write};

use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
use flate2::bufread::MultiGzDecoder;
use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::{Compression, Decompress, FlushDecompress, Status};
use http::{HeaderMap, HeaderValue, header};
use zeroize::Zeroizing;
use zstd::stream::raw::{DParameter, InBuffer, Operation as _, OutBuffer};

/// The most decoded bytes one [`Decoder::decode_some`] step produces, and the size of the
/// buffers between stacked codings.
pub const SLICE: usize = 64 * 1024;

/// The most codings one body may stack (`Content-Encoding: gzip, br` is two). Real servers
/// use one; a long stack only costs memory (a window per coding).
pub const MAX_STACK: usize = 4;

/// The largest zstd window accepted, as a power of two: 8 MiB, the bound RFC 9659 sets for
/// the `zstd` content coding. A frame asking for more is refused rather than allowed to make
/// sluice allocate up to the library's default 128 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// Brotli quality used when re-encoding (0–11): a request body is encoded once, on the hot
/// path, so speed beats the last few percent of size.
const BROTLI_QUALITY: u32 = 5;

/// Brotli window (log2) used when re-encoding: 4 MiB.
const BROTLI_WINDOW: u32 = 22;

/// zstd level used when re-encoding (the library's default).
const ZSTD_LEVEL: i32 = 3;

/// Everything that can go wrong reading `Content-Encoding` or coding a body.
///
/// Every variant means the body cannot be scanned as sent: the caller refuses the message
/// (`502` for a response, the request's refusal for a request) and never passes it on
/// unscanned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
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
pub enum ContentCoding {
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
    pub fn from_name(name: &str) -> Result<Self, CodecError> {
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
    pub fn as_str(self) -> &'static str {
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

fn unsupported(name: &[u8]) -> CodecError {
    let text = String::from_utf8_lossy(name);
    CodecError::Unsupported {
        name: text.trim().to_ascii_lowercase().chars().take(40).collect(),
    }
}

/// The codings a message's `Content-Encoding` lists, in the order they were applied (the
/// last one applied is the last in the list). Every `Content-Encoding` field counts, each may
/// hold a comma-separated list; names are case-insensitive, `identity` and empty elements are
/// skipped. An empty result means the body is sent as it is.
///
/// # Errors
/// [`CodecError::Unsupported`] for a coding sluice cannot decode (or a value that is not
/// text), [`CodecError::TooManyCodings`] past [`MAX_STACK`].
pub fn content_codings(headers: &HeaderMap) -> Result<Vec<ContentCoding>, CodecError> {
    parse_content_encoding(headers.get_all(header::CONTENT_ENCODING))
}

/// [`content_codings`] over the `Content-Encoding` field values themselves.
///
/// # Errors
/// As [`content_codings`].
pub fn parse_content_encoding<'a>(
    values: impl IntoIterator<Item = &'a HeaderValue>,
) -> Result<Vec<ContentCoding>, CodecError> {
    let mut codings = Vec::new();
    for value in values {
        let text = value.to_str().map_err(|_| unsupported(value.as_bytes()))?;
        for element in text.split(',') {
            if element.trim_matches(|c| c == ' ' || c == '\t').is_empty() {
                continue;
            }
            match ContentCoding::from_name(element)? {
                ContentCoding::Identity => {}
                coding => codings.push(coding),
            }
        }
    }
    if codings.len() > MAX_STACK {
        return Err(CodecError::TooManyCodings {
            count: codings.len(),
            max: MAX_STACK,
        });
    }
    Ok(codings)
}

/// The `Accept-Encoding` sluice sends upstream in place of the client's: exactly the codings
/// it can decode, so that every response it receives can be scanned.
pub fn accept_encoding() -> HeaderValue {
    HeaderValue::from_static("gzip, deflate, br, zstd")
}

/// Decodes a body sent in a stack of codings, chunk by chunk, with a bound on the decoded size.
///
/// Feed the body with [`Decoder::push`] (or [`Decoder::decode_some`], which also bounds the
/// output of one call), then call [`Decoder::finish`], which checks that every coding reached
/// its proper end: a truncated body is [`CodecError::Corrupt`]. An empty body decodes to an
/// empty body whatever the codings (servers send those with a `Content-Encoding` too).
///
/// After an error the decoder is spent: every later call returns the same error.
///
/// # Resource usage
/// Per coding, the library's window (32 KiB for gzip and deflate, up to 16 MiB for brotli,
/// up to 8 MiB for zstd, allocated as the stream asks) and a [`SLICE`]-sized buffer between
/// stacked codings. [`Decoder::decode_some`] appends at most `max_out` bytes per call;
/// [`Decoder::push`] appends everything its input decodes to, which the `limit` bounds.
/// sluice's own buffers of decoded bytes are zeroized when freed; those inside the codec
/// libraries (their windows) are not.
pub struct Decoder {
    /// In decoding order: the last coding applied comes first.
    stages: Vec<Stage>,
    codings: Vec<ContentCoding>,
    limit: u64,
    failed: Option<CodecError>,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("codings", &self.codings)
            .field("limit", &self.limit)
            .field("decoded", &self.decoded())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder for a body to which `codings` were applied in this order (as
    /// [`content_codings`] returns them), stopping once more than `limit` bytes are decoded.
    /// `identity` entries are skipped; an empty list decodes nothing and only applies the
    /// bound.
    ///
    /// # Errors
    /// [`CodecError::TooManyCodings`] past [`MAX_STACK`]; [`CodecError::Codec`] when a
    /// library cannot set up its decoder.
    pub fn new(codings: &[ContentCoding], limit: u64) -> Result<Self, CodecError> {
        let codings: Vec<ContentCoding> = codings
            .iter()
            .copied()
            .filter(|c| *c != ContentCoding::Identity)
            .collect();
        if codings.len() > MAX_STACK {
            return Err(CodecError::TooManyCodings {
                count: codings.len(),
                max: MAX_STACK,
            });
        }
        let mut stages = Vec::with_capacity(codings.len().max(1));
        for coding in codings.iter().rev() {
            stages.push(Stage::new(*coding, Layer::new(*coding)?));
        }
        if stages.is_empty() {
            stages.push(Stage::new(ContentCoding::Identity, Layer::Identity));
        }
        Ok(Self {
            stages,
            codings,
            limit,
            failed: None,
        })
    }

    /// The codings this decoder undoes, in the order they were applied.
    pub fn codings(&self) -> &[ContentCoding] {
        &self.codings
    }

    /// The bound on decoded bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How many decoded bytes were produced so far.
    pub fn decoded(&self) -> u64 {
        self.stages.last().map_or(0, |s| s.total_out)
    }

    /// Bytes held in the buffers between stacked codings (the libraries' own windows are not
    /// counted).
    pub fn buffered(&self) -> usize {
        self.stages.iter().map(Stage::buffered).sum()
    }

    /// Decodes from `input`, appending at most `max_out` decoded bytes to `out`, and returns
    /// how many bytes of `input` were consumed.
    ///
    /// When fewer than `max_out` bytes were appended, all of `input` was consumed and the
    /// decoder holds no more output for it: feed the next chunk. Otherwise call again with
    /// the rest of `input` (possibly empty) to get the rest of the output.
    ///
    /// # Errors
    /// [`CodecError::TooLarge`] past the bound, [`CodecError::Corrupt`] on invalid data.
    pub fn decode_some(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> Result<usize, CodecError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let result = self.pump(input, out, max_out);
        if let Err(err) = &result {
            self.failed = Some(err.clone());
        }
        result
    }

    /// Decodes all of `input`, appending the decoded bytes to `out` (at most the bound in
    /// total; see the type's resource usage).
    ///
    /// # Errors
    /// As [`Decoder::decode_some`].
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut rest = input;
        loop {
            let before = out.len();
            let consumed = self.decode_some(rest, out, SLICE)?;
            rest = &rest[consumed..];
            if out.len() - before < SLICE {
                return Ok(());
            }
        }
    }

    /// Ends the body: appends whatever output remains (nothing, after a
    /// [`Decoder::decode_some`] that returned short) and checks that every coding ended
    /// properly.
    ///
    /// # Errors
    /// [`CodecError::Corrupt`] when a coding's stream stops before its end; as
    /// [`Decoder::decode_some`] otherwise.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        if let Some(err) = self.failed.take() {
            return Err(err);
        }
        // Upstream stages are drained before a stage is told its input has ended, so that
        // each stage sees the whole of its input before its end is checked.
        for i in 0..self.stages.len() {
            self.stages[i].end_input();
            loop {
                let before = out.len();
                self.pump(&[], out, SLICE)?;
                if out.len() - before < SLICE {
                    break;
                }
            }
            let stage = &self.stages[i];
            if stage.pending() > 0 {
                // Cannot happen: a stage that stops consuming fails in `pump` first.
                return Err(stage.corrupt("the next coding left data undecoded".into()));
            }
            if stage.total_in > 0 && !stage.layer.is_complete() {
                return Err(
                    stage.corrupt("the stream ends before its end marker (truncated)".into())
                );
            }
        }
        Ok(())
    }

    /// One bounded step over the whole stack; see [`Decoder::decode_some`].
    fn pump(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> Result<usize, CodecError> {
        let start = out.len();
        let last = self.stages.len() - 1;
        let mut consumed = 0;
        loop {
            let mut progressed = false;
            // From the last stage back to the first: drain before refilling, so the buffers
            // between stages never hold more than SLICE bytes.
            for i in (0..=last).rev() {
                let (before, rest) = self.stages.split_at_mut(i);
                let stage = &mut rest[0];
                if stage.input_ended && stage.total_in == 0 {
                    // An empty stream, already ended: nothing to decode, nothing to check.
                    continue;
                }
                let room = if i == last {
                    max_out - (out.len() - start)
                } else {
                    stage.room()
                };
                if room == 0 {
                    continue;
                }
                let src: &[u8] = match before.last() {
                    None => &input[consumed..],
                    Some(prev) => &prev.buf[prev.pos..],
                };
                let (used, made) = if i == last {
                    stage.run(src, out, room)?
                } else {
                    let mut buf = std::mem::take(&mut stage.buf);
                    let step = stage.run(src, &mut buf, room);
                    stage.buf = buf;
                    step?
                };
                match before.last_mut() {
                    None => consumed += used,
                    Some(prev) => prev.consume(used),
                }
                if stage.total_out > self.limit {
                    return Err(CodecError::TooLarge { limit: self.limit });
                }
                progressed |= used > 0 || made > 0;
            }
            if !progressed || out.len() - start == max_out {
                break;
            }
        }
        if out.len() - start < max_out && consumed < input.len() {
            // Every stage had room and none moved: the first one refuses its input.
            return Err(self.stages[0].corrupt("the decoder stopped consuming its input".into()));
        }
        Ok(consumed)
    }
}

/// One coding of a stack, with the buffer holding its output for the next one.
struct Stage {
    coding: ContentCoding,
    layer: Layer,
    /// Decoded bytes not yet taken by the next stage (unused by the last stage). Decoded
    /// bytes may hold a value not yet redacted: this buffer and `scratch` are zeroized.
    buf: Zeroizing<Vec<u8>>,
    pos: usize,
    /// Where the layer writes before its output is appended (SLICE bytes, once used).
    scratch: Zeroizing<Vec<u8>>,
    total_in: u64,
    total_out: u64,
    input_ended: bool,
}

impl Stage {
    fn new(coding: ContentCoding, layer: Layer) -> Self {
        Self {
            coding,
            layer,
            buf: Zeroizing::new(Vec::new()),
            pos: 0,
            scratch: Zeroizing::new(Vec::new()),
            total_in: 0,
            total_out: 0,
            input_ended: false,
        }
    }

    fn corrupt(&self, reason: String) -> CodecError {
        CodecError::Corrupt {
            coding: self.coding,
            reason,
        }
    }

    fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn buffered(&self) -> usize {
        self.buf.capacity() + self.scratch.capacity() + self.layer.buffered()
    }

    /// Room left in `buf` for this stage's output, compacting it first.
    fn room(&mut self) -> usize {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 && self.buf.len() >= SLICE {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        SLICE.saturating_sub(self.pending())
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
    }

    fn end_input(&mut self) {
        self.input_ended = true;
        self.layer.end_input();
    }

    /// Runs the layer once, appending at most `room` bytes to `dst`.
    fn run(
        &mut self,
        src: &[u8],
        dst: &mut Vec<u8>,
        room: usize,
    ) -> Result<(usize, usize), CodecError> {
        // The layer writes into a slice: a scratch buffer zeroed once, rather than growing
        // `dst` by `room` zeroes on every call (most calls, with small inputs, make little).
        if self.scratch.is_empty() {
            self.scratch = Zeroizing::new(vec![0; SLICE]);
        }
        let room = room.min(SLICE);
        let (used, made) = self
            .layer
            .run(src, &mut self.scratch[..room])
            .map_err(|reason| self.corrupt(reason))?;
        dst.extend_from_slice(&self.scratch[..made]);
        self.total_in += used as u64;
        self.total_out += made as u64;
        Ok((used, made))
    }
}

/// One coding's decoder, driven by slices: `run` consumes some input and writes some output.
enum Layer {
    Identity,
    Gzip(Box<GzLayer>),
    Deflate(Box<DeflateLayer>),
    Br(Box<BrLayer>),
    Zstd(Box<ZstdLayer>),
}

impl Layer {
    fn new(coding: ContentCoding) -> Result<Self, CodecError> {
        Ok(match coding {
            ContentCoding::Identity => Self::Identity,
            ContentCoding::Gzip => Self::Gzip(Box::new(GzLayer {
                decoder: MultiGzDecoder::new(Feed::default()),
                done: false,
            })),
            ContentCoding::Deflate => Self::Deflate(Box::new(DeflateLayer {
                sniff: Vec::with_capacity(2),
                inflate: None,
                done: false,
            })),
            ContentCoding::Br => Self::Br(Box::new(BrLayer {
                state: BrotliState::new_strict(
                    HeapAlloc::new(0),
                    HeapAlloc::new(0),
                    HeapAlloc::new(HuffmanCode { value: 0, bits: 0 }),
                ),
                total: 0,
                done: false,
            })),
            ContentCoding::Zstd => {
                let setup = |e: io::Error| CodecError::Codec {
                    coding,
                    reason: e.to_string(),
                };
                let mut decoder = zstd::stream::raw::Decoder::new().map_err(setup)?;
                decoder
                    .set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                    .map_err(setup)?;
                Self::Zstd(Box::new(ZstdLayer {
                    decoder,
                    frame_done: false,
                }))
            }
        })
    }

    /// Consumes some of `src`, writes some of `dst`; returns (consumed, written). Makes
    /// progress whenever it has input or pending output and `dst` is not empty.
    fn run(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), String> {
        match self {
            Self::Identity => {
                let n = src.len().min(dst.len());
                dst[..n].copy_from_slice(&src[..n]);
                Ok((n, n))
            }
            Self::Gzip(layer) => layer.run(src, dst),
            Self::Deflate(layer) => layer.run(src, dst),
            Self::Br(layer) => layer.run(src, dst),
            Self::Zstd(layer) => layer.run(src, dst),
        }
    }

    fn end_input(&mut self) {
        if let Self::Gzip(layer) = self {
            layer.decoder.get_mut().ended = true;
        }
    }

    /// Whether the stream reached its proper end.
    fn is_complete(&self) -> bool {
        match self {
            Self::Identity => true,
            Self::Gzip(layer) => layer.done,
            Self::Deflate(layer) => layer.done,
            Self::Br(layer) => layer.done,
            Self::Zstd(layer) => layer.frame_done,
        }
    }

    fn buffered(&self) -> usize {
        match self {
            Self::Gzip(layer) => layer.decoder.get_ref().buf.capacity(),
            _ => 0,
        }
    }
}

fn trailing() -> String {
    "data follows the end of the stream".into()
}

/// Input queued for flate2's gzip reader, which pulls: it reads `WouldBlock` while more
/// input may come, and the end of input once the body has ended.
#[derive(Default)]
struct Feed {
    buf: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl Feed {
    /// Queues as much of `src` as fits in one slice; returns how much.
    fn fill(&mut self, src: &[u8]) -> usize {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let take = src.len().min(SLICE.saturating_sub(self.buf.len()));
        self.buf.extend_from_slice(&src[..take]);
        take
    }
}

impl Read for Feed {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Feed {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos < self.buf.len() || self.ended {
            Ok(&self.buf[self.pos..])
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.buf.len());
    }
}

/// gzip through flate2's resumable reader (header, members, trailer checks are flate2's).
struct GzLayer {
    decoder: MultiGzDecoder<Feed>,
    done: bool,
}

impl GzLayer {
    fn run(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), String> {
        if self.done {
            return if src.is_empty() {
                Ok((0, 0))
            } else {
                Err(trailing())
            };
        }
        let used = self.decoder.get_mut().fill(src);
        match self.decoder.read(dst) {
            Ok(0) => {
                // Only after the input ended: every member decoded and checked.
                self.done = self.decoder.get_ref().ended;
                Ok((used, 0))
            }
            Ok(made) => Ok((used, made)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok((used, 0)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err("the stream ends before its end marker (truncated)".into())
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// HTTP `deflate`: zlib, or raw deflate when the first two bytes are no zlib header.
struct DeflateLayer {
    sniff: Vec<u8>,
    inflate: Option<(Decompress, usize)>,
    done: bool,
}

impl DeflateLayer {
    /// RFC 1950: compression method 8, window at most 32 KiB, header checksum.
    fn is_zlib_header(cmf: u8, flg: u8) -> bool {
        cmf & 0x0f == 8 && cmf >> 4 <= 7 && ((u16::from(cmf) << 8) | u16::from(flg)) % 31 == 0
    }

    fn run(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), String> {
        if self.done {
            return if src.is_empty() {
                Ok((0, 0))
            } else {
                Err(trailing())
            };
        }
        let mut used = 0;
        if self.inflate.is_none() {
            used = src.len().min(2 - self.sniff.len());
            self.sniff.extend_from_slice(&src[..used]);
            if self.sniff.len() < 2 {
                return Ok((used, 0));
            }
            let zlib = Self::is_zlib_header(self.sniff[0], self.sniff[1]);
            self.inflate = Some((Decompress::new(zlib), 0));
        }
        let Some((inflate, sniffed)) = self.inflate.as_mut() else {
            return Ok((used, 0));
        };
        // The two sniffed bytes go in before the rest of the input.
        let (from_sniff, input) = if *sniffed < self.sniff.len() {
            (true, &self.sniff[*sniffed..])
        } else {
            (false, &src[used..])
        };
        let (in_before, out_before) = (inflate.total_in(), inflate.total_out());
        let status = inflate
            .decompress(input, dst, FlushDecompress::None)
            .map_err(|e| e.to_string())?;
        let took = usize::try_from(inflate.total_in() - in_before).unwrap_or(usize::MAX);
        let made = usize::try_from(inflate.total_out() - out_before).unwrap_or(usize::MAX);
        if from_sniff {
            *sniffed += took;
        } else {
            used += took;
        }
        if status == Status::StreamEnd {
            self.done = true;
            if *sniffed < self.sniff.len() {
                return Err(trailing());
            }
        }
        Ok((used, made))
    }
}

/// Brotli through the decompressor's own state machine.
struct BrLayer {
    state: BrotliState<HeapAlloc<u8>, HeapAlloc<u32>, HeapAlloc<HuffmanCode>>,
    total: usize,
    done: bool,
}

impl BrLayer {
    fn run(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), String> {
        if self.done {
            return if src.is_empty() {
                Ok((0, 0))
            } else {
                Err(trailing())
            };
        }
        let (mut available_in, mut in_offset) = (src.len(), 0);
        let (mut available_out, mut out_offset) = (dst.len(), 0);
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut in_offset,
            src,
            &mut available_out,
            &mut out_offset,
            dst,
            &mut self.total,
            &mut self.state,
        );
        match result {
            BrotliResult::ResultFailure => Err("invalid brotli stream".into()),
            BrotliResult::ResultSuccess => {
                self.done = true;
                Ok((in_offset, out_offset))
            }
            BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {
                Ok((in_offset, out_offset))
            }
        }
    }
}

/// zstd through the library's streaming context; concatenated and skippable frames are fine.
struct ZstdLayer {
    decoder: zstd::stream::raw::Decoder<'static>,
    /// Whether the last frame ended and was flushed.
    frame_done: bool,
}

impl ZstdLayer {
    fn run(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(usize, usize), String> {
        let mut input = InBuffer::around(src);
        let mut output = OutBuffer::around(dst);
        let hint = self
            .decoder
            .run(&mut input, &mut output)
            .map_err(|e| e.to_string())?;
        let (used, made) = (input.pos(), output.pos());
        if used > 0 || made > 0 {
            self.frame_done = hint == 0;
        }
        Ok((used, made))
    }
}

/// Encodes a body in a stack of codings (applied in the order given), chunk by chunk: used to
/// send a request body on in the coding it came in after a swap changed it.
///
/// # Resource usage
/// Each coding's compressor state (a few hundred KiB for gzip and zstd, a few MiB for
/// brotli at the quality used) and what it has not yet flushed. Its buffers are not zeroized,
/// so a swapped value may linger there until they are freed.
pub struct Encoder {
    codings: Vec<ContentCoding>,
    stages: Vec<EncodeStage>,
}

impl fmt::Debug for Encoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encoder")
            .field("codings", &self.codings)
            .finish_non_exhaustive()
    }
}

enum EncodeStage {
    Gzip(GzEncoder<Vec<u8>>),
    Deflate(ZlibEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl EncodeStage {
    fn new(coding: ContentCoding) -> Result<Option<Self>, CodecError> {
        Ok(Some(match coding {
            ContentCoding::Identity => return Ok(None),
            ContentCoding::Gzip => Self::Gzip(GzEncoder::new(Vec::new(), Compression::default())),
            ContentCoding::Deflate => {
                Self::Deflate(ZlibEncoder::new(Vec::new(), Compression::default()))
            }
            ContentCoding::Br => Self::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                0,
                BROTLI_QUALITY,
                BROTLI_WINDOW,
            ))),
            ContentCoding::Zstd => Self::Zstd(
                zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL).map_err(|e| {
                    CodecError::Codec {
                        coding,
                        reason: e.to_string(),
                    }
                })?,
            ),
        }))
    }

    fn coding(&self) -> ContentCoding {
        match self {
            Self::Gzip(_) => ContentCoding::Gzip,
            Self::Deflate(_) => ContentCoding::Deflate,
            Self::Br(_) => ContentCoding::Br,
            Self::Zstd(_) => ContentCoding::Zstd,
        }
    }

    /// Encodes `input`; returns what the coding has written out so far.
    fn push(&mut self, input: &[u8]) -> io::Result<Vec<u8>> {
        Ok(match self {
            Self::Gzip(e) => {
                e.write_all(input)?;
                std::mem::take(e.get_mut())
            }
            Self::Deflate(e) => {
                e.write_all(input)?;
                std::mem::take(e.get_mut())
            }
            Self::Br(e) => {
                e.write_all(input)?;
                std::mem::take(e.get_mut())
            }
            Self::Zstd(e) => {
                e.write_all(input)?;
                std::mem::take(e.get_mut())
            }
        })
    }

    /// Writes the coding's end; returns the rest of its output.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Self::Gzip(e) => e.finish(),
            Self::Deflate(e) => e.finish(),
            Self::Br(e) => Ok((*e).into_inner()),
            Self::Zstd(e) => e.finish(),
        }
    }
}

impl Encoder {
    /// An encoder applying `codings` in this order (`identity` entries skipped; an empty list
    /// passes bytes through).
    ///
    /// # Errors
    /// [`CodecError::TooManyCodings`] past [`MAX_STACK`]; [`CodecError::Codec`] when a
    /// library cannot set up its encoder.
    pub fn new(codings: &[ContentCoding]) -> Result<Self, CodecError> {
        let mut stages = Vec::new();
        for coding in codings {
            stages.extend(EncodeStage::new(*coding)?);
        }
        if stages.len() > MAX_STACK {
            return Err(CodecError::TooManyCodings {
                count: stages.len(),
                max: MAX_STACK,
            });
        }
        Ok(Self {
            codings: stages.iter().map(EncodeStage::coding).collect(),
            stages,
        })
    }

    /// The codings applied, in order.
    pub fn codings(&self) -> &[ContentCoding] {
        &self.codings
    }

    /// Encodes `input`, appending to `out` what the codings have written out so far (they
    /// hold some back until [`Encoder::finish`]).
    ///
    /// # Errors
    /// [`CodecError::Codec`] when a library fails.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        let Some((first, rest)) = self.stages.split_first_mut() else {
            out.extend_from_slice(input);
            return Ok(());
        };
        let mut data = first.push(input).map_err(|e| encode_error(first, &e))?;
        for stage in rest {
            data = stage.push(&data).map_err(|e| encode_error(stage, &e))?;
        }
        out.extend_from_slice(&data);
        Ok(())
    }

    /// Ends every coding, appending the rest of the encoded body to `out`.
    ///
    /// # Errors
    /// [`CodecError::Codec`] when a library fails.
    pub fn finish(self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        let mut carry = Vec::new();
        for mut stage in self.stages {
            let coding = stage.coding();
            let fail = |e: io::Error| CodecError::Codec {
                coding,
                reason: e.to_string(),
            };
            let mut data = stage.push(&carry).map_err(fail)?;
            data.extend_from_slice(&stage.finish().map_err(fail)?);
            carry = data;
        }
        out.extend_from_slice(&carry);
        Ok(())
    }
}

fn encode_error(stage: &EncodeStage, e: &io::Error) -> CodecError {
    CodecError::Codec {
        coding: stage.coding(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
