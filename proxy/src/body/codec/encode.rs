//! Encoding a body again in the codings it came in, after a swap changed it.

use std::fmt;
use std::io::{self, Write};

use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};

use super::{CodecError, ContentCoding, MAX_STACK};

/// Brotli quality used when re-encoding (0–11): a request body is encoded once, on the hot
/// path, so speed beats the last few percent of size.
const BROTLI_QUALITY: u32 = 5;

/// Brotli window (log2) used when re-encoding: 4 MiB.
const BROTLI_WINDOW: u32 = 22;

/// zstd level used when re-encoding (the library's default).
const ZSTD_LEVEL: i32 = 3;

/// Encodes a body in a stack of codings (applied in the order given), chunk by chunk: used to
/// send a request body on in the coding it came in after a swap changed it.
///
/// # Resource usage
/// Each coding's compressor state (a few hundred KiB for gzip and zstd, a few MiB for
/// brotli at the quality used) and what it has not yet flushed. Its buffers are not zeroized,
/// so a swapped value may linger there until they are freed.
pub(crate) struct Encoder {
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
    pub(crate) fn new(codings: &[ContentCoding]) -> Result<Self, CodecError> {
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

    /// Encodes `input`, appending to `out` what the codings have written out so far (they
    /// hold some back until [`Encoder::finish`]).
    ///
    /// # Errors
    /// [`CodecError::Codec`] when a library fails.
    pub(crate) fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
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
    pub(crate) fn finish(self, out: &mut Vec<u8>) -> Result<(), CodecError> {
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
