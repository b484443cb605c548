//! aws-chunked framing, read strictly ([`Unframer`]) as it arrives, in pieces of any size.
//!
//! A signed chunk is `HEX-SIZE;chunk-signature=SIG\r\nDATA\r\n`, the last one of size 0; an
//! unsigned one (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`) is `HEX-SIZE\r\nDATA\r\n`. After the
//! last chunk come the trailer lines (`x-amz-checksum-crc32:…`; with signed chunks only in
//! `…-PAYLOAD-TRAILER`, closed by `x-amz-trailer-signature:SIG`) and an empty line. Anything
//! else (an extension sluice does not know, a missing CRLF, a size that is not hex, a trailer
//! after the trailer signature) is [`ChunkError`], never read one way here and another way
//! by the upstream.
//!
//! ```
//! use sluice_sign::aws_sigv4::chunked::{Mode, Piece, Unframer};
//!
//! let mut unframer = Unframer::new(Mode::Unsigned, 1 << 20);
//! let mut pieces = Vec::new();
//! let body = bytes::Bytes::from_static(b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n");
//! unframer.push(&body, &mut pieces).unwrap();
//! assert_eq!(pieces[1], Piece::Data(bytes::Bytes::from_static(b"hello")));
//! assert!(unframer.is_done());
//! ```

use bytes::Bytes;

use super::super::claim::{SIGNED_CHUNKS, SIGNED_CHUNKS_TRAILER, is_hex_digest};

/// Which aws-chunked framing a body uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`: every chunk signed, no trailer.
    Signed,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`: every chunk signed, then trailers and
    /// their signature.
    SignedTrailer,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: no chunk signatures, trailers after the last.
    Unsigned,
}

impl Mode {
    /// The mode an `x-amz-content-sha256` value names, if it names one.
    pub fn of_payload(declared: &str) -> Option<Mode> {
        match declared {
            SIGNED_CHUNKS => Some(Mode::Signed),
            SIGNED_CHUNKS_TRAILER => Some(Mode::SignedTrailer),
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER" => Some(Mode::Unsigned),
            _ => None,
        }
    }

    /// Whether every chunk carries a signature.
    pub fn signs_chunks(self) -> bool {
        matches!(self, Mode::Signed | Mode::SignedTrailer)
    }
}

/// One thing read from an aws-chunked body, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// A chunk begins: its size as written (kept to frame it again byte for byte), and its
    /// signature in signed mode.
    Chunk {
        /// The size.
        size: u64,
        /// The size's hex digits as sent.
        size_text: String,
        /// `chunk-signature=` (signed mode).
        signature: Option<String>,
    },
    /// Part of the current chunk's data (a slice of the input, not a copy).
    Data(Bytes),
    /// The current chunk's data is complete.
    ChunkEnd,
    /// A trailer line after the last chunk, without its CRLF (`name:value`).
    Trailer(String),
    /// `x-amz-trailer-signature` (signed trailers): the trailers' signature, after them.
    TrailerSignature(String),
}

/// Why an aws-chunked body cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// A chunk's size line is not `HEX[;chunk-signature=SIG]` as the mode requires.
    #[error("an aws-chunked size line is not `HEX-SIZE{0}`")]
    SizeLine(&'static str),
    /// A chunk's data is not followed by CRLF.
    #[error("an aws-chunked chunk's data is not followed by CRLF")]
    MissingCrlf,
    /// A chunk is larger than the bound.
    #[error("an aws-chunked chunk of {size} bytes is over sluice's bound of {limit}")]
    TooLarge {
        /// The chunk's size.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// A trailer line is not `name:value`, or the trailers are too long.
    #[error("an aws-chunked trailer is not `name:value`, or the trailers are over 16 KiB")]
    Trailer,
    /// Signed trailers end without `x-amz-trailer-signature`, or a line follows it.
    #[error(
        "signed aws-chunked trailers must end with one `x-amz-trailer-signature:SIG` line, then an empty line"
    )]
    TrailerSignature,
    /// The trailers are not the ones `x-amz-trailer` announced.
    #[error("the aws-chunked trailers are not the ones x-amz-trailer announces")]
    Unannounced,
    /// Bytes after the body's end.
    #[error("bytes follow the end of an aws-chunked body")]
    TrailingBytes,
    /// The body ended before its last chunk.
    #[error("the aws-chunked body ended before its last chunk")]
    Truncated,
}

/// The longest size line, and the most trailer bytes, read.
const MAX_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16 * 1024;

/// The trailer line that signs the trailers before it, name and colon.
const TRAILER_SIGNATURE: &[u8] = b"x-amz-trailer-signature:";

#[derive(Debug)]
enum State {
    /// Reading a size line (bytes so far).
    Size(Vec<u8>),
    /// Reading a chunk's data: bytes left.
    Data(u64),
    /// After a chunk's data: CR then LF.
    DataEnd(u8),
    /// After the last chunk: trailer lines (signed mode: only the empty one), and whether
    /// the trailer signature was read.
    Trailers {
        line: Vec<u8>,
        total: usize,
        signed: bool,
    },
    /// The body is complete.
    Done,
}

/// Reads aws-chunked framing as it arrives, in pieces of any size.
#[derive(Debug)]
pub struct Unframer {
    mode: Mode,
    max_chunk: u64,
    state: State,
    decoded: u64,
}

impl Unframer {
    /// A reader for `mode`, refusing chunks over `max_chunk` bytes (a signed chunk is held
    /// whole until its signature is checked).
    pub fn new(mode: Mode, max_chunk: u64) -> Self {
        Self {
            mode,
            max_chunk,
            state: State::Size(Vec::new()),
            decoded: 0,
        }
    }

    /// Reads `input`, appending what it completes to `out`.
    ///
    /// # Errors
    ///
    /// [`ChunkError`] at the first byte that breaks the framing; nothing after it is read.
    pub fn push(&mut self, whole: &Bytes, out: &mut Vec<Piece>) -> Result<(), ChunkError> {
        let mut at = 0;
        while at < whole.len() {
            let input = &whole[at..];
            match &mut self.state {
                State::Size(line) => {
                    let Some(end) = input.iter().position(|&b| b == b'\n') else {
                        line.extend_from_slice(input);
                        if line.len() > MAX_LINE {
                            return Err(self.size_error());
                        }
                        return Ok(());
                    };
                    line.extend_from_slice(&input[..end]);
                    at += end + 1;
                    let line = std::mem::take(line);
                    let (size, size_text, signature) = self.size_line(&line)?;
                    out.push(Piece::Chunk {
                        size,
                        size_text,
                        signature,
                    });
                    if size == 0 {
                        out.push(Piece::ChunkEnd);
                        self.state = State::Trailers {
                            line: Vec::new(),
                            total: 0,
                            signed: false,
                        };
                    } else {
                        self.state = State::Data(size);
                    }
                }
                State::Data(left) => {
                    let take = input
                        .len()
                        .min(usize::try_from(*left).unwrap_or(usize::MAX));
                    out.push(Piece::Data(whole.slice(at..at + take)));
                    at += take;
                    *left -= take as u64;
                    self.decoded += take as u64;
                    if *left == 0 {
                        self.state = State::DataEnd(0);
                    }
                }
                State::DataEnd(seen) => {
                    let expected = if *seen == 0 { b'\r' } else { b'\n' };
                    if input[0] != expected {
                        return Err(ChunkError::MissingCrlf);
                    }
                    at += 1;
                    if *seen == 0 {
                        *seen = 1;
                    } else {
                        out.push(Piece::ChunkEnd);
                        self.state = State::Size(Vec::new());
                    }
                }
                State::Trailers {
                    line,
                    total,
                    signed,
                } => {
                    let Some(end) = input.iter().position(|&b| b == b'\n') else {
                        line.extend_from_slice(input);
                        *total += input.len();
                        if *total > MAX_TRAILERS {
                            return Err(ChunkError::Trailer);
                        }
                        return Ok(());
                    };
                    line.extend_from_slice(&input[..end]);
                    *total += end + 1;
                    at += end + 1;
                    if *total > MAX_TRAILERS {
                        return Err(ChunkError::Trailer);
                    }
                    let text = std::mem::take(line);
                    let text = text.strip_suffix(b"\r").ok_or(ChunkError::Trailer)?;
                    let signature = text
                        .get(..TRAILER_SIGNATURE.len())
                        .is_some_and(|name| name.eq_ignore_ascii_case(TRAILER_SIGNATURE));
                    match (self.mode, text.is_empty(), signature, *signed) {
                        (Mode::SignedTrailer, true, _, false) => {
                            return Err(ChunkError::TrailerSignature);
                        }
                        (_, true, _, _) => self.state = State::Done,
                        (Mode::Signed, false, _, _) => return Err(ChunkError::Trailer),
                        (Mode::SignedTrailer, false, _, true) => {
                            return Err(ChunkError::TrailerSignature);
                        }
                        (Mode::SignedTrailer, false, true, false) => {
                            let value = std::str::from_utf8(&text[TRAILER_SIGNATURE.len()..])
                                .ok()
                                .filter(|v| is_hex_digest(v))
                                .ok_or(ChunkError::TrailerSignature)?;
                            *signed = true;
                            out.push(Piece::TrailerSignature(value.to_owned()));
                        }
                        // Unsigned trailers carry no signature: one that claims to is refused.
                        (Mode::Unsigned, false, true, _) => return Err(ChunkError::Trailer),
                        (_, false, false, _) => out.push(Piece::Trailer(trailer_line(text)?)),
                    }
                }
                State::Done => return Err(ChunkError::TrailingBytes),
            }
        }
        Ok(())
    }

    /// Whether the body is complete (its last chunk and trailers read).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The data bytes read so far (the decoded length).
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// Checks the body is complete, once the input has ended.
    ///
    /// # Errors
    ///
    /// [`ChunkError::Truncated`].
    pub fn finish(&self) -> Result<(), ChunkError> {
        if self.is_done() {
            Ok(())
        } else {
            Err(ChunkError::Truncated)
        }
    }

    fn size_error(&self) -> ChunkError {
        ChunkError::SizeLine(if self.mode.signs_chunks() {
            ";chunk-signature=SIG"
        } else {
            ""
        })
    }

    /// `HEX[;chunk-signature=SIG]` followed by CR (the LF was the delimiter).
    fn size_line(&self, line: &[u8]) -> Result<(u64, String, Option<String>), ChunkError> {
        let line = line.strip_suffix(b"\r").ok_or_else(|| self.size_error())?;
        let line = std::str::from_utf8(line).map_err(|_| self.size_error())?;
        let (size_text, signature) = match (self.mode.signs_chunks(), line.split_once(';')) {
            (true, Some((size, ext))) => {
                let signature = ext
                    .strip_prefix("chunk-signature=")
                    .filter(|s| is_hex_digest(s))
                    .ok_or_else(|| self.size_error())?;
                (size, Some(signature.to_owned()))
            }
            (false, None) => (line, None),
            _ => return Err(self.size_error()),
        };
        if size_text.is_empty()
            || size_text.len() > 16
            || !size_text.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(self.size_error());
        }
        let size = u64::from_str_radix(size_text, 16).map_err(|_| self.size_error())?;
        if size > self.max_chunk {
            return Err(ChunkError::TooLarge {
                size,
                limit: self.max_chunk,
            });
        }
        Ok((size, size_text.to_owned(), signature))
    }
}

/// A trailer line: `name:value`, the name a header token, the value visible ASCII.
fn trailer_line(text: &[u8]) -> Result<String, ChunkError> {
    let text = std::str::from_utf8(text).map_err(|_| ChunkError::Trailer)?;
    let (name, value) = text.split_once(':').ok_or(ChunkError::Trailer)?;
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token
        || !value
            .bytes()
            .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Err(ChunkError::Trailer);
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(mode: Mode, input: &[u8], split: usize) -> Result<Vec<Piece>, ChunkError> {
        let mut unframer = Unframer::new(mode, 1 << 20);
        let mut pieces = Vec::new();
        for part in input.chunks(split.max(1)) {
            unframer.push(&Bytes::copy_from_slice(part), &mut pieces)?;
        }
        unframer.finish()?;
        Ok(pieces)
    }

    fn data(pieces: &[Piece]) -> Vec<u8> {
        pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Data(d) => Some(d.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn framing_reads_the_same_however_it_is_split() {
        let sig = "a".repeat(64);
        let signed = format!("5;chunk-signature={sig}\r\nhello\r\n0;chunk-signature={sig}\r\n\r\n");
        let unsigned = b"5\r\nhello\r\nA\r\n0123456789\r\n0\r\nx-amz-checksum-crc32:abc=\r\n\r\n";
        for split in 1..=signed.len() {
            let pieces = read(Mode::Signed, signed.as_bytes(), split).unwrap();
            assert_eq!(data(&pieces), b"hello");
            let pieces = read(Mode::Unsigned, unsigned, split).unwrap();
            assert_eq!(data(&pieces), b"hello0123456789");
            assert!(pieces.contains(&Piece::Trailer("x-amz-checksum-crc32:abc=".into())));
        }
    }

    #[test]
    fn signed_trailers_read_the_same_however_they_are_split() {
        let sig = "c".repeat(64);
        let body = format!(
            "5;chunk-signature={sig}\r\nhello\r\n0;chunk-signature={sig}\r\nx-amz-checksum-crc32:NhCmhg==\r\nx-amz-trailer-signature:{sig}\r\n\r\n"
        );
        for split in 1..=body.len() {
            let pieces = read(Mode::SignedTrailer, body.as_bytes(), split).unwrap();
            assert_eq!(data(&pieces), b"hello");
            let tail = &pieces[pieces.len() - 2..];
            assert_eq!(
                tail,
                [
                    Piece::Trailer("x-amz-checksum-crc32:NhCmhg==".into()),
                    Piece::TrailerSignature(sig.clone())
                ]
            );
        }
    }

    #[test]
    fn a_trailer_signature_is_required_last_and_only_where_signed() {
        let sig = "d".repeat(64);
        let last = format!("0;chunk-signature={sig}\r\n");
        let cases = [
            // No trailer signature at all.
            (
                Mode::SignedTrailer,
                format!("{last}x-amz-checksum-crc32:AAAAAA==\r\n\r\n"),
                ChunkError::TrailerSignature,
            ),
            // A trailer after the signature: it would go unsigned.
            (
                Mode::SignedTrailer,
                format!(
                    "{last}x-amz-trailer-signature:{sig}\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"
                ),
                ChunkError::TrailerSignature,
            ),
            // Two signatures.
            (
                Mode::SignedTrailer,
                format!(
                    "{last}x-amz-trailer-signature:{sig}\r\nx-amz-trailer-signature:{sig}\r\n\r\n"
                ),
                ChunkError::TrailerSignature,
            ),
            // Not a signature's shape.
            (
                Mode::SignedTrailer,
                format!("{last}x-amz-trailer-signature:abc\r\n\r\n"),
                ChunkError::TrailerSignature,
            ),
            // Signed chunks without the trailer marker take no trailer.
            (
                Mode::Signed,
                format!("{last}x-amz-trailer-signature:{sig}\r\n\r\n"),
                ChunkError::Trailer,
            ),
            // Unsigned trailers claiming a signature.
            (
                Mode::Unsigned,
                format!("0\r\nx-amz-trailer-signature:{sig}\r\n\r\n"),
                ChunkError::Trailer,
            ),
        ];
        for (mode, input, expected) in cases {
            assert_eq!(
                read(mode, input.as_bytes(), 5).unwrap_err(),
                expected,
                "{input:?}"
            );
        }
    }

    #[test]
    fn broken_framing_is_named_never_read_around() {
        let sig = "b".repeat(64);
        let cases: [(Mode, String, ChunkError); 8] = [
            (
                Mode::Signed,
                "5\r\nhello\r\n".to_owned(),
                ChunkError::SizeLine(";chunk-signature=SIG"),
            ),
            (
                Mode::Signed,
                "5;chunk-signature=abc\r\nhello\r\n".to_owned(),
                ChunkError::SizeLine(";chunk-signature=SIG"),
            ),
            (
                Mode::Unsigned,
                format!("5;chunk-signature={sig}\r\nhello\r\n"),
                ChunkError::SizeLine(""),
            ),
            (
                Mode::Unsigned,
                "5\r\nhelloX\r\n".into(),
                ChunkError::MissingCrlf,
            ),
            (
                Mode::Unsigned,
                "-5\r\nhello\r\n".into(),
                ChunkError::SizeLine(""),
            ),
            (
                Mode::Unsigned,
                "5\nhello\r\n".into(),
                ChunkError::SizeLine(""),
            ),
            (
                Mode::Unsigned,
                "0\r\nnot a trailer\r\n\r\n".into(),
                ChunkError::Trailer,
            ),
            (
                Mode::Unsigned,
                "0\r\n\r\nmore".into(),
                ChunkError::TrailingBytes,
            ),
        ];
        for (mode, input, expected) in cases {
            assert_eq!(
                read(mode, input.as_bytes(), 3).unwrap_err(),
                expected,
                "{input:?}"
            );
        }
        assert_eq!(
            read(Mode::Unsigned, b"5\r\nhel", 2).unwrap_err(),
            ChunkError::Truncated
        );
        assert!(matches!(
            read(Mode::Unsigned, b"FFFFFFFF\r\n", 4).unwrap_err(),
            ChunkError::TooLarge { .. }
        ));
    }
}
