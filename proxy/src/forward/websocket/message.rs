//! Frames into messages: fragments joined, a compressed message inflated, control frames
//! passed on as they come (RFC 6455 allows them between fragments).
//!
//! A message is held whole, up to the bound, so that it is scanned exactly however it was
//! fragmented, and a refusal sends none of it. Every frame this module cannot account for
//! closes the connection: reserved bits of an extension that was not negotiated (`1008`:
//! sluice cannot inspect it, so it does not pass), a continuation without a start, a
//! control frame fragmented or over 125 bytes (`1002`).

use bytes::BytesMut;
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use zeroize::Zeroizing;

use super::Close;
use super::deflate::Inflater;

/// A data message's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// UTF-8 text.
    Text,
    /// Bytes.
    Binary,
}

/// A whole message's bytes, not yet scanned.
///
/// A message that came in one frame is the frame's own bytes, as read (like the TLS
/// buffers they came through, not wiped). Bytes sluice made itself, by joining fragments or
/// inflating, may hold a value not yet redacted: they are wiped when freed.
#[derive(Debug)]
pub(super) enum Payload {
    /// One frame's payload, as read.
    Read(BytesMut),
    /// Joined or inflated by sluice.
    Made(Zeroizing<Vec<u8>>),
}

impl std::ops::Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Payload::Read(bytes) => bytes,
            Payload::Made(bytes) => bytes,
        }
    }
}

/// What the frames so far make.
#[derive(Debug)]
pub(super) enum Item {
    /// A whole data message, inflated.
    Message(Kind, Payload),
    /// A control frame: ping, pong or close, with its payload.
    Control(Control, BytesMut),
}

/// Joins one direction's frames into messages.
pub(super) struct Assembler {
    /// The message being received: its kind, whether it is compressed, its bytes so far.
    partial: Option<(Kind, bool, Zeroizing<Vec<u8>>)>,
    /// `permessage-deflate`, when it was negotiated.
    inflater: Option<Inflater>,
    /// The most bytes a message may hold, compressed or inflated.
    max_message: usize,
}

impl Assembler {
    pub(super) fn new(inflater: Option<Inflater>, max_message: usize) -> Self {
        Self {
            partial: None,
            inflater,
            max_message,
        }
    }

    /// Takes one frame; returns what it completes, if anything.
    ///
    /// # Errors
    ///
    /// The close to send for a frame that breaks the protocol, cannot be inspected, or
    /// makes a message over the bound.
    pub(super) fn push(
        &mut self,
        header: &FrameHeader,
        payload: BytesMut,
    ) -> Result<Option<Item>, Close> {
        if header.rsv2 || header.rsv3 {
            return Err(Close::uninspectable(
                "a frame uses an extension (RSV2/RSV3) that was not negotiated",
            ));
        }
        let data = match header.opcode {
            OpCode::Control(control) => return self.control(header, control, payload).map(Some),
            OpCode::Data(data) => data,
        };
        let compressed = header.rsv1;
        match (data, &mut self.partial) {
            (Data::Text | Data::Binary, Some(_)) => {
                return Err(Close::protocol(
                    "a new message began inside a fragmented one",
                ));
            }
            (Data::Continue, None) => {
                return Err(Close::protocol("a continuation frame without a message"));
            }
            (Data::Continue, Some(_)) if compressed => {
                return Err(Close::protocol("RSV1 set on a continuation frame"));
            }
            (Data::Reserved(code), _) => {
                return Err(Close::protocol(&format!("reserved opcode {code:#x}")));
            }
            (Data::Text | Data::Binary, None) => {
                if compressed && self.inflater.is_none() {
                    return Err(Close::uninspectable(
                        "a frame is compressed (RSV1) but permessage-deflate was not negotiated",
                    ));
                }
                let kind = if data == Data::Text {
                    Kind::Text
                } else {
                    Kind::Binary
                };
                // A whole uncompressed message in one frame, the common case: its bytes
                // as read, not copied.
                if header.is_final && !compressed {
                    if payload.len() > self.max_message {
                        return Err(Close::too_big(self.max_message));
                    }
                    return Ok(Some(Item::Message(kind, Payload::Read(payload))));
                }
                self.partial = Some((kind, compressed, Zeroizing::new(Vec::new())));
            }
            (Data::Continue, Some(_)) => {}
        }
        let Some((_, _, bytes)) = &mut self.partial else {
            unreachable!("a message is being received here");
        };
        if bytes.len() + payload.len() > self.max_message {
            return Err(Close::too_big(self.max_message));
        }
        reserve_wiped(bytes, payload.len(), self.max_message);
        bytes.extend_from_slice(&payload);
        if !header.is_final {
            return Ok(None);
        }
        let Some((kind, compressed, bytes)) = self.partial.take() else {
            unreachable!("a message is being received here");
        };
        let bytes = match (&mut self.inflater, compressed) {
            (Some(inflater), true) => inflater.inflate(&bytes, self.max_message)?,
            _ => bytes,
        };
        Ok(Some(Item::Message(kind, Payload::Made(bytes))))
    }

    fn control(
        &self,
        header: &FrameHeader,
        control: Control,
        payload: BytesMut,
    ) -> Result<Item, Close> {
        if !header.is_final || payload.len() > 125 {
            return Err(Close::protocol(
                "a control frame is fragmented or longer than 125 bytes",
            ));
        }
        if header.rsv1 {
            return Err(Close::protocol("RSV1 set on a control frame"));
        }
        if let Control::Reserved(code) = control {
            return Err(Close::protocol(&format!("reserved opcode {code:#x}")));
        }
        Ok(Item::Control(control, payload))
    }
}

/// Makes room for `additional` more bytes in `bytes` without leaving a copy of them behind.
///
/// A `Vec` that grows by itself frees its old buffer unwiped; here a bigger one is made and
/// the old one dropped through `Zeroizing`, which wipes it. Capacity doubles, up to `limit`
/// (or just what is needed, past it).
pub(super) fn reserve_wiped(bytes: &mut Zeroizing<Vec<u8>>, additional: usize, limit: usize) {
    let needed = bytes.len().saturating_add(additional);
    if needed <= bytes.capacity() {
        return;
    }
    let capacity = needed.max(bytes.capacity().saturating_mul(2).min(limit));
    let mut bigger = Zeroizing::new(Vec::with_capacity(capacity));
    bigger.extend_from_slice(bytes);
    *bytes = bigger;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_made_by_doubling_up_to_the_limit_and_keeps_the_bytes() {
        let mut bytes = Zeroizing::new(Vec::new());
        let mut capacities = Vec::new();
        for i in 0..100u8 {
            reserve_wiped(&mut bytes, 10, 600);
            // The push below never reallocates on its own: the room is already there.
            let before = bytes.as_ptr();
            bytes.extend_from_slice(&[i; 10]);
            assert_eq!(bytes.as_ptr(), before);
            capacities.push(bytes.capacity());
        }
        assert_eq!(bytes.len(), 1000);
        assert!(
            bytes
                .chunks(10)
                .enumerate()
                .all(|(i, c)| c == [i as u8; 10])
        );
        capacities.dedup();
        // 10, 20, 40, ... doubling to the limit, then only what each push needs.
        assert_eq!(capacities[..7], [10, 20, 40, 80, 160, 320, 600]);
        assert_eq!(*capacities.last().unwrap(), 1000);
    }
}
