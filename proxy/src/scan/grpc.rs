//! gRPC's length-prefixed messages: a body split into whole messages, so that each is
//! rewritten whole and sent on with its new length.
//!
//! A gRPC body (`content-type: application/grpc`, `application/grpc+proto` and the like) is
//! a run of messages, each a one-byte flag (compressed or not) and a four-byte big-endian
//! length before its bytes. A swap or a redaction changes a message's length: rewritten as
//! a plain stream, the prefix would lie and the peer would read the stream wrong. So a
//! [`RewriteBody`](super::stream::RewriteBody) set for gRPC holds each message whole (up to
//! a bound), rewrites it alone, and writes it out behind a prefix of its new length.
//!
//! It must never pass a message unscanned: a compressed message (`grpc-encoding`), one over
//! the bound, a flag it does not know and a body that ends inside a message are each an
//! error, never passed on as they came. It decides no grant and matches nothing itself.

use http::HeaderMap;
use http::header::CONTENT_TYPE;
use zeroize::Zeroizing;

/// The bytes before each message: its flag, then its length (big-endian).
pub(crate) const PREFIX: usize = 5;

/// Why a gRPC body cannot be rewritten message by message. Never carries message bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum GrpcError {
    /// A message is compressed (flag 1, in the coding `grpc-encoding` names): sluice does not
    /// decode gRPC message codings, so it cannot scan it.
    #[error("a compressed gRPC message cannot be scanned; send messages uncompressed")]
    Compressed,
    /// A message's flag is neither 0 (plain) nor 1 (compressed).
    #[error("gRPC message flag {flag} is not 0 or 1")]
    Flag {
        /// The flag as it arrived.
        flag: u8,
    },
    /// A message (as sent, or as rewritten) is longer than the bound on one message.
    #[error("a gRPC message of {length} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Its length.
        length: u64,
        /// The bound in force.
        limit: usize,
    },
    /// The body ended inside a message.
    #[error("the body ends inside a gRPC message, {have} of its {want} bytes")]
    Truncated {
        /// The bytes of the message (prefix included) that arrived.
        have: usize,
        /// The bytes it should have had (prefix included; 5 while the prefix is short).
        want: usize,
    },
}

/// Whether `headers` say the body is a gRPC message stream: `application/grpc`, alone or
/// with a `+format` or parameters. gRPC-Web (`application/grpc-web`) is not.
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let media = value.split(';').next().unwrap_or("").trim();
    let Some(rest) = media
        .get(..16)
        .filter(|head| head.eq_ignore_ascii_case("application/grpc"))
        .map(|_| &media[16..])
    else {
        return false;
    };
    rest.is_empty() || rest.starts_with('+')
}

/// Splits a body into whole messages as its bytes arrive, holding at most one message.
pub(crate) struct Messages {
    limit: usize,
    /// The message being gathered, prefix included (may hold a value: zeroized).
    current: Zeroizing<Vec<u8>>,
}

impl Messages {
    /// A splitter for messages of at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            current: Zeroizing::new(Vec::new()),
        }
    }

    /// Takes bytes from the front of `input` until a message is whole, and returns its bytes
    /// (without the prefix); `None` once `input` is used up without completing one. Call
    /// again with the rest of `input` until it returns `None`.
    ///
    /// # Errors
    /// [`GrpcError::Compressed`], [`GrpcError::Flag`] or [`GrpcError::TooLarge`], as soon as
    /// the prefix says so.
    pub(crate) fn next(
        &mut self,
        input: &mut &[u8],
    ) -> Result<Option<Zeroizing<Vec<u8>>>, GrpcError> {
        if self.current.len() < PREFIX {
            let take = (PREFIX - self.current.len()).min(input.len());
            self.current.extend_from_slice(&input[..take]);
            *input = &input[take..];
            if self.current.len() < PREFIX {
                return Ok(None);
            }
            let length = self.length();
            match self.current[0] {
                0 => {}
                1 => return Err(GrpcError::Compressed),
                flag => return Err(GrpcError::Flag { flag }),
            }
            if length > self.limit {
                return Err(GrpcError::TooLarge {
                    length: length as u64,
                    limit: self.limit,
                });
            }
            // Room for the whole message now: a growing buffer would leave copies behind.
            self.current.reserve_exact(length);
        }
        let want = PREFIX + self.length();
        let take = (want - self.current.len()).min(input.len());
        self.current.extend_from_slice(&input[..take]);
        *input = &input[take..];
        if self.current.len() < want {
            return Ok(None);
        }
        let mut message = Zeroizing::new(Vec::new());
        std::mem::swap(&mut message, &mut self.current);
        message.drain(..PREFIX);
        Ok(Some(message))
    }

    /// Checks that the body ended between messages.
    ///
    /// # Errors
    /// [`GrpcError::Truncated`] when a message was begun and not finished.
    pub(crate) fn finish(&self) -> Result<(), GrpcError> {
        if self.current.is_empty() {
            return Ok(());
        }
        let want = if self.current.len() < PREFIX {
            PREFIX
        } else {
            PREFIX + self.length()
        };
        Err(GrpcError::Truncated {
            have: self.current.len(),
            want,
        })
    }

    /// Bytes held: the message being gathered.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.current.len()
    }

    /// The length the current prefix declares (the prefix must be whole).
    fn length(&self) -> usize {
        let bytes = [
            self.current[1],
            self.current[2],
            self.current[3],
            self.current[4],
        ];
        u32::from_be_bytes(bytes) as usize
    }

    /// Appends `message` to `out` behind a plain message's prefix of its length.
    ///
    /// # Errors
    /// [`GrpcError::TooLarge`] when the (rewritten) message is over the bound.
    pub(crate) fn frame(&self, message: &[u8], out: &mut Vec<u8>) -> Result<(), GrpcError> {
        let length = u32::try_from(message.len())
            .ok()
            .filter(|&n| n as usize <= self.limit)
            .ok_or(GrpcError::TooLarge {
                length: message.len() as u64,
                limit: self.limit,
            })?;
        out.reserve(PREFIX + message.len());
        out.push(0);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(message);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn framed(messages: &[&[u8]]) -> Vec<u8> {
        let splitter = Messages::new(1024);
        let mut out = Vec::new();
        for message in messages {
            splitter.frame(message, &mut out).unwrap();
        }
        out
    }

    /// Every message `input` yields when fed `step` bytes at a time.
    fn split(input: &[u8], step: usize, limit: usize) -> Result<Vec<Vec<u8>>, GrpcError> {
        let mut messages = Messages::new(limit);
        let mut found = Vec::new();
        for chunk in input.chunks(step.max(1)) {
            let mut rest = chunk;
            while let Some(message) = messages.next(&mut rest)? {
                found.push(message.to_vec());
            }
            assert!(rest.is_empty());
        }
        messages.finish()?;
        Ok(found)
    }

    #[test]
    fn messages_come_out_whole_whatever_the_chunking() {
        let body = framed(&[b"first", b"", b"third message"]);
        for step in 1..=body.len() {
            assert_eq!(
                split(&body, step, 1024).unwrap(),
                [b"first".to_vec(), Vec::new(), b"third message".to_vec()],
                "step {step}"
            );
        }
    }

    #[test]
    fn what_cannot_be_scanned_is_an_error() {
        let mut compressed = framed(&[b"gz"]);
        compressed[0] = 1;
        assert_eq!(split(&compressed, 3, 1024), Err(GrpcError::Compressed));
        compressed[0] = 0x80;
        assert_eq!(
            split(&compressed, 3, 1024),
            Err(GrpcError::Flag { flag: 0x80 })
        );
        let big = framed(&[&[b'a'; 11]]);
        assert_eq!(
            split(&big, 64, 10),
            Err(GrpcError::TooLarge {
                length: 11,
                limit: 10
            })
        );
        assert!(split(&big, 64, 11).is_ok());
        let body = framed(&[b"whole"]);
        assert_eq!(
            split(&body[..7], 2, 1024),
            Err(GrpcError::Truncated { have: 7, want: 10 })
        );
        assert_eq!(
            split(&body[..3], 2, 1024),
            Err(GrpcError::Truncated { have: 3, want: 5 })
        );
        let mut out = Vec::new();
        assert!(Messages::new(4).frame(b"12345", &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn grpc_content_types_are_told_apart() {
        let cases = [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC+json; charset=utf-8", true),
            ("application/grpc;foo=bar", true),
            ("application/grpc-web", false),
            ("application/grpc-web+proto", false),
            ("application/grpcx", false),
            ("application/json", false),
            ("", false),
        ];
        for (value, grpc) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            assert_eq!(is_grpc(&headers), grpc, "{value}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }
}
