//! `permessage-deflate` (RFC 7692): which offers reach the upstream, what its answer may
//! accept, and inflating the messages either peer compresses.
//!
//! sluice reads compressed messages and never writes any: what it forwards, it forwards
//! uncompressed (RSV1 clear), which every endpoint that negotiated the extension must
//! accept. So the parameters the two peers agree on bind only them, and sluice's inflater
//! (a 15-bit window, the largest) reads whatever window they chose. It keeps its window
//! from message to message, as context takeover needs; a peer that takes no context never
//! refers back to it.
//!
//! Any other extension is taken out of the client's offer, so that the upstream cannot
//! accept what sluice could not inspect; an answer accepting one anyway is refused.

use flate2::{Decompress, FlushDecompress, Status};
use http::HeaderMap;
use http::header::{HeaderValue, SEC_WEBSOCKET_EXTENSIONS};
use zeroize::Zeroizing;

use super::Close;
use super::message::reserve_wiped;

/// The one extension sluice reads.
const DEFLATE: &str = "permessage-deflate";

/// The four bytes a compressor's sync flush ends with, which the sender strips from each
/// message and the receiver puts back (RFC 7692 section 7.2.2).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Keeps only the `permessage-deflate` offers of the client's `Sec-WebSocket-Extensions`,
/// dropping the header when none is left. An offer with a quoted parameter is dropped too:
/// its commas could hide another extension from this split.
pub(crate) fn keep_inspectable_offers(headers: &mut HeaderMap) {
    let offers: Vec<String> = headers
        .get_all(SEC_WEBSOCKET_EXTENSIONS)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|offer| extension_name(offer).eq_ignore_ascii_case(DEFLATE) && !offer.contains('"'))
        .map(str::to_owned)
        .collect();
    headers.remove(SEC_WEBSOCKET_EXTENSIONS);
    if offers.is_empty() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&offers.join(", ")) {
        headers.insert(SEC_WEBSOCKET_EXTENSIONS, value);
    }
}

/// Whether the upstream's `101` accepted `permessage-deflate`.
///
/// # Errors
///
/// What else it accepted (or accepted twice), which sluice did not offer and cannot read.
pub(crate) fn accepted(headers: &HeaderMap) -> Result<bool, String> {
    let mut deflate = false;
    for value in headers.get_all(SEC_WEBSOCKET_EXTENSIONS) {
        let value = value
            .to_str()
            .map_err(|_| "an extension answer that is not text".to_owned())?;
        for accepted in value.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let name = extension_name(accepted);
            if !name.eq_ignore_ascii_case(DEFLATE) || deflate {
                // Echoed only when it is a token: text escaped here would no longer be
                // what the guard redacts from the answer.
                if name.is_empty() || !name.bytes().all(is_tchar) {
                    return Err(
                        "the upstream accepted an extension whose name is not a token, which sluice did not offer and cannot inspect".to_owned(),
                    );
                }
                return Err(format!(
                    "the upstream accepted extension `{name}`, which sluice did not offer and cannot inspect"
                ));
            }
            deflate = true;
        }
    }
    Ok(deflate)
}

/// A token character (RFC 9110 section 5.6.2), which an extension name is made of.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// An extension element's name: what comes before its first `;`.
fn extension_name(element: &str) -> &str {
    element.split(';').next().unwrap_or("").trim()
}

/// Inflates one direction's compressed messages.
pub(crate) struct Inflater {
    inner: Decompress,
}

impl Default for Inflater {
    fn default() -> Self {
        Self {
            // Raw deflate: no zlib header, as RFC 7692 sends it.
            inner: Decompress::new(false),
        }
    }
}

impl Inflater {
    /// The message `compressed` was, at most `max` bytes of it.
    ///
    /// # Errors
    ///
    /// `1009` past `max` (a decompression bomb stops there), `1007` for bytes that are
    /// not deflate.
    pub(crate) fn inflate(
        &mut self,
        compressed: &[u8],
        max: usize,
    ) -> Result<Zeroizing<Vec<u8>>, Close> {
        let mut out = Zeroizing::new(Vec::with_capacity((compressed.len() * 4).min(max) + 64));
        for input in [compressed, &TAIL[..]] {
            let mut input = input;
            loop {
                if out.len() == out.capacity() {
                    // Room up to one byte past `max`, which tells a message of exactly
                    // `max` bytes from a longer one.
                    reserve_wiped(&mut out, 1, max.saturating_add(1));
                }
                let (before_in, before_out) = (self.inner.total_in(), out.len());
                let status = self
                    .inner
                    .decompress_vec(input, &mut out, FlushDecompress::Sync)
                    .map_err(|e| {
                        Close::invalid(&format!("a compressed message is not deflate: {e}"))
                    })?;
                let consumed =
                    usize::try_from(self.inner.total_in() - before_in).unwrap_or(usize::MAX);
                input = &input[consumed.min(input.len())..];
                if out.len() > max {
                    return Err(Close::too_big(max));
                }
                if status == Status::StreamEnd {
                    // A final block: the next message starts a new stream.
                    self.inner.reset(false);
                    break;
                }
                if input.is_empty() && out.len() < out.capacity() {
                    break;
                }
                if consumed == 0 && out.len() == before_out && out.len() < out.capacity() {
                    return Err(Close::invalid("a compressed message ends inside a block"));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::DeflateEncoder;

    use super::*;

    /// `text` compressed as a permessage-deflate sender does: sync flush, tail stripped.
    fn compressed(encoder: &mut DeflateEncoder<Vec<u8>>, text: &[u8]) -> Vec<u8> {
        encoder.write_all(text).unwrap();
        encoder.flush().unwrap();
        let mut out = std::mem::take(encoder.get_mut());
        assert_eq!(out[out.len() - 4..], TAIL);
        out.truncate(out.len() - 4);
        out
    }

    #[test]
    fn messages_inflate_with_context_taken_over_and_stop_at_the_bound() {
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
        let mut inflater = Inflater::default();
        let first = compressed(&mut encoder, b"the token is gh-REAL-0123456789");
        let second = compressed(&mut encoder, b"the token is gh-REAL-0123456789 again");
        // The second refers back into the first: only a kept window reads it.
        assert!(second.len() < first.len());
        assert_eq!(
            &inflater.inflate(&first, 1024).unwrap()[..],
            b"the token is gh-REAL-0123456789"
        );
        assert_eq!(
            &inflater.inflate(&second, 1024).unwrap()[..],
            b"the token is gh-REAL-0123456789 again"
        );
        let bomb = compressed(&mut encoder, &vec![b'a'; 100_000]);
        assert_eq!(inflater.inflate(&bomb, 10_000).unwrap_err().code, 1009);
        let garbage = [0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            Inflater::default()
                .inflate(&garbage, 1024)
                .unwrap_err()
                .code,
            1007
        );
    }

    #[test]
    fn a_message_inflating_to_exactly_the_bound_passes_and_one_byte_more_does_not() {
        // Zeros compress to a few bytes, so the output buffer grows by doubling from a
        // small start and, at some lengths, fills exactly at the bound.
        for max in (1..3000).chain([4096, 70_000]) {
            let message = vec![0u8; max];
            let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
            let packed = compressed(&mut encoder, &message);
            let inflated = Inflater::default().inflate(&packed, max).unwrap();
            assert_eq!(&inflated[..], &message[..], "max {max}");
            assert_eq!(
                Inflater::default()
                    .inflate(&packed, max - 1)
                    .unwrap_err()
                    .code,
                1009,
                "max {max}"
            );
        }
    }

    #[test]
    fn only_deflate_offers_reach_the_upstream_and_only_deflate_may_come_back() {
        let mut headers = HeaderMap::new();
        headers.append(
            SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static(
                "permessage-deflate; client_max_window_bits, x-webkit-deflate-frame",
            ),
        );
        headers.append(
            SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("permessage-bzip2, Permessage-Deflate"),
        );
        headers.append(
            SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("permessage-deflate; x=\"a, evil\""),
        );
        keep_inspectable_offers(&mut headers);
        assert_eq!(
            headers[SEC_WEBSOCKET_EXTENSIONS],
            "permessage-deflate; client_max_window_bits, Permessage-Deflate"
        );
        let mut only_other = HeaderMap::new();
        only_other.insert(
            SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("x-custom"),
        );
        keep_inspectable_offers(&mut only_other);
        assert!(only_other.is_empty());

        let answer = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(SEC_WEBSOCKET_EXTENSIONS, HeaderValue::from_static(value));
            accepted(&headers)
        };
        assert_eq!(accepted(&HeaderMap::new()), Ok(false));
        assert_eq!(
            answer("permessage-deflate; server_no_context_takeover"),
            Ok(true)
        );
        assert!(answer("x-custom").unwrap_err().contains("`x-custom`"));
        let odd = answer("x\\\"quoted\"").unwrap_err();
        assert!(
            !odd.contains("quoted") && odd.contains("not a token"),
            "{odd}"
        );
        assert!(answer("permessage-deflate, permessage-deflate").is_err());
    }
}
