//! Decoding a body in a stack of content codings, bounded in what it may decode to.

use std::fmt;
use std::io::{self, BufRead, Read};

use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
use flate2::bufread::MultiGzDecoder;
use flate2::{Decompress, FlushDecompress, Status};
use zeroize::Zeroizing;
use zstd::stream::raw::{DParameter, InBuffer, Operation as _, OutBuffer};

use super::{CodecError, ContentCoding, MAX_STACK, SLICE};

/// The largest zstd window accepted, as a power of two: 8 MiB, the bound RFC 9659 sets for
/// the `zstd` content coding. A frame asking for more is refused rather than allowed to make
/// sluice allocate up to the library's default 128 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

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
pub(crate) struct Decoder {
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
    /// [`content_codings`](super::content_codings) returns them), stopping once more than `limit` bytes are decoded.
    /// `identity` entries are skipped; an empty list decodes nothing and only applies the
    /// bound.
    ///
    /// # Errors
    /// [`CodecError::TooManyCodings`] past [`MAX_STACK`]; [`CodecError::Codec`] when a
    /// library cannot set up its decoder.
    pub(crate) fn new(codings: &[ContentCoding], limit: u64) -> Result<Self, CodecError> {
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

    /// How many decoded bytes were produced so far.
    pub(crate) fn decoded(&self) -> u64 {
        self.stages.last().map_or(0, |s| s.total_out)
    }

    /// Bytes held in the buffers between stacked codings (the libraries' own windows are not
    /// counted): the memory bound the tests hold decoding to.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
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
    pub(crate) fn decode_some(
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
    pub(crate) fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
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
    pub(crate) fn finish(mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
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

    #[cfg(test)]
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

    #[cfg(test)]
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
pub(super) struct DeflateLayer {
    sniff: Vec<u8>,
    inflate: Option<(Decompress, usize)>,
    done: bool,
}

impl DeflateLayer {
    /// RFC 1950: compression method 8, window at most 32 KiB, header checksum.
    pub(super) fn is_zlib_header(cmf: u8, flg: u8) -> bool {
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
