//! Frames into messages over a leg that hands sluice the wire in arbitrary pieces: a value
//! is found, and redacted exactly, however its message was cut into frames and reads,
//! compressed or not; and every frame the relay cannot account for closes the connection.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::DeflateEncoder;
use proptest::prelude::*;
use sluice_guard::Guard;
use tokio::io::{AsyncRead, ReadBuf};
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tungstenite::protocol::frame::{Frame, FrameHeader};

use super::Close;
use super::deflate::Inflater;
use super::frame::{FrameReader, Peer};
use super::message::{Assembler, Item, Kind};

const VALUE: &str = "Sec-Value-0123456789abcdef";

/// The wire, handed over at most `step` bytes a read.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self
            .step
            .min(self.data.len() - self.at)
            .min(buf.remaining());
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

fn guard() -> (Guard, String) {
    let yaml =
        format!("version: 1\nsecrets:\n  s:\n    value: \"{VALUE}\"\n    hosts: [api.test]\n");
    let (_, guard) = crate::testing::declared(&yaml, "ws.yaml");
    let placeholder = guard
        .placeholder(guard.id("s").unwrap())
        .as_str()
        .to_owned();
    (guard, placeholder)
}

/// `message` as a compressing sender writes it: the sync flush's tail stripped.
fn deflated(encoder: &mut DeflateEncoder<Vec<u8>>, message: &[u8]) -> Vec<u8> {
    encoder.write_all(message).unwrap();
    encoder.flush().unwrap();
    let mut out = std::mem::take(encoder.get_mut());
    out.truncate(out.len() - 4);
    out
}

/// One message's frames: its payload cut at `cuts`, the first frame compressed (RSV1)
/// when `compressed`, masked when a client sends it, and a ping between its first two
/// fragments, as RFC 6455 allows.
fn frames(payload: &[u8], cuts: &[usize], compressed: bool, peer: Peer) -> Vec<u8> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (payload.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts {
        pieces.push(&payload[from..cut]);
        from = cut;
    }
    pieces.push(&payload[from..]);
    let mut wire = Vec::new();
    let last = pieces.len() - 1;
    for (i, piece) in pieces.into_iter().enumerate() {
        let opcode = if i == 0 { Data::Text } else { Data::Continue };
        let mut frame = Frame::message(
            Bytes::copy_from_slice(piece),
            OpCode::Data(opcode),
            i == last,
        );
        frame.header_mut().rsv1 = compressed && i == 0;
        let mut ping = Frame::ping(Bytes::from_static(b"between"));
        if peer == Peer::Client {
            frame.header_mut().mask = Some([0x5a, 0x01, 0xc3, 0x7e]);
            ping.header_mut().mask = Some([9, 8, 7, 6]);
        }
        frame.format(&mut wire).unwrap();
        if i == 0 && last > 0 {
            ping.format(&mut wire).unwrap();
        }
    }
    wire
}

/// Everything `wire` makes, read `step` bytes at a time.
fn assemble(wire: Vec<u8>, step: usize, peer: Peer, deflate: bool) -> Result<Vec<Item>, Close> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut reader = FrameReader::new(
            Trickle {
                data: wire,
                at: 0,
                step,
            },
            peer,
            1 << 20,
        );
        let mut assembler = Assembler::new(deflate.then(Inflater::default), 1 << 20);
        let mut items = Vec::new();
        while let Some((header, payload)) = reader.next().await? {
            items.extend(assembler.push(&header, payload)?);
        }
        Ok(items)
    })
}

fn texts(items: &[Item]) -> Vec<Vec<u8>> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Message(Kind::Text, bytes) => Some(bytes.to_vec()),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_value_is_redacted_exactly_however_its_messages_are_framed(
        prefix in "[a-z {}\":]{0,40}",
        suffix in "[a-z {}\":]{0,40}",
        cuts in proptest::collection::vec(0usize..400, 0..6),
        second_cuts in proptest::collection::vec(0usize..400, 0..4),
        step in 1usize..80,
        compressed in any::<bool>(),
        from_client in any::<bool>(),
    ) {
        let (guard, placeholder) = guard();
        let peer = if from_client { Peer::Client } else { Peer::Upstream };
        let first = format!("{prefix}{VALUE}{suffix}");
        // The second message repeats the first's value: compressed with the window kept,
        // it refers back into the first message for it.
        let second = format!("{suffix}{VALUE}");
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
        let mut wire = Vec::new();
        for (message, cuts) in [(&first, &cuts), (&second, &second_cuts)] {
            let payload = if compressed {
                deflated(&mut encoder, message.as_bytes())
            } else {
                message.as_bytes().to_vec()
            };
            wire.extend(frames(&payload, cuts, compressed, peer));
        }
        let items = assemble(wire, step, peer, compressed).unwrap();
        let messages = texts(&items);
        prop_assert_eq!(messages.len(), 2);
        prop_assert_eq!(&messages[0], first.as_bytes());
        prop_assert_eq!(&messages[1], second.as_bytes());
        let (want_first, want_second) = (format!("{prefix}{placeholder}{suffix}"), format!("{suffix}{placeholder}"));
        let redacted: Vec<Vec<u8>> = messages.iter().map(|m| guard.redact(m).bytes().to_vec()).collect();
        prop_assert_eq!(&redacted[0], want_first.as_bytes());
        prop_assert_eq!(&redacted[1], want_second.as_bytes());
        // The pings between fragments came through as they were, in their place.
        let pings = items.iter().filter(|i| matches!(i, Item::Control(Control::Ping, p) if &p[..] == b"between")).count();
        let fragmented = usize::from(!cuts.is_empty()) + usize::from(!second_cuts.is_empty());
        prop_assert_eq!(pings, fragmented);
    }
}

/// The close a wire of hand-made frames ends with.
fn closes(wire: Vec<u8>, peer: Peer, deflate: bool) -> u16 {
    assemble(wire, 7, peer, deflate).unwrap_err().code
}

fn frame(header: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    Frame::from_payload(header, Bytes::copy_from_slice(payload))
        .format(&mut wire)
        .unwrap();
    wire
}

fn text(is_final: bool) -> FrameHeader {
    FrameHeader {
        is_final,
        opcode: OpCode::Data(Data::Text),
        ..FrameHeader::default()
    }
}

#[test]
fn frames_that_cannot_be_inspected_or_break_the_protocol_close_the_connection() {
    let upstream = Peer::Upstream;
    // An extension nobody negotiated: 1008, not passed.
    for rsv in [(false, true, false), (false, false, true)] {
        let header = FrameHeader {
            rsv1: rsv.0,
            rsv2: rsv.1,
            rsv3: rsv.2,
            ..text(true)
        };
        assert_eq!(closes(frame(header, b"hi"), upstream, true), 1008);
    }
    let compressed = FrameHeader {
        rsv1: true,
        ..text(true)
    };
    assert_eq!(closes(frame(compressed, b"hi"), upstream, false), 1008);
    // Protocol faults: 1002.
    let continuation = FrameHeader {
        opcode: OpCode::Data(Data::Continue),
        ..text(true)
    };
    assert_eq!(closes(frame(continuation, b"x"), upstream, false), 1002);
    let mut two_starts = frame(text(false), b"a");
    two_starts.extend(frame(text(true), b"b"));
    assert_eq!(closes(two_starts, upstream, false), 1002);
    let fragmented_ping = FrameHeader {
        is_final: false,
        opcode: OpCode::Control(Control::Ping),
        ..FrameHeader::default()
    };
    assert_eq!(closes(frame(fragmented_ping, b""), upstream, false), 1002);
    let long_pong = FrameHeader {
        opcode: OpCode::Control(Control::Pong),
        ..FrameHeader::default()
    };
    assert_eq!(
        closes(frame(long_pong, &[b'p'; 126]), upstream, false),
        1002
    );
    // Masking the wrong way round, either way.
    assert_eq!(
        closes(frame(text(true), b"unmasked"), Peer::Client, false),
        1002
    );
    let masked = FrameHeader {
        mask: Some([1, 2, 3, 4]),
        ..text(true)
    };
    assert_eq!(closes(frame(masked, b"masked"), upstream, false), 1002);
    // Cut inside a frame.
    let mut cut = frame(text(true), b"hello");
    cut.truncate(4);
    assert_eq!(closes(cut, upstream, false), 1001);
}

#[test]
fn a_message_over_the_bound_closes_with_1009_however_it_is_fragmented() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let run = |wire: Vec<u8>| {
        runtime.block_on(async move {
            let mut reader = FrameReader::new(
                Trickle {
                    data: wire,
                    at: 0,
                    step: 100,
                },
                Peer::Upstream,
                64,
            );
            let mut assembler = Assembler::new(None, 64);
            while let Some((header, payload)) = reader.next().await? {
                assembler.push(&header, payload)?;
            }
            Ok::<_, Close>(())
        })
    };
    // One frame declaring more than the bound: refused on its header.
    assert_eq!(run(frame(text(true), &[b'a'; 65])).unwrap_err().code, 1009);
    // Frames within it, a message beyond it.
    let mut wire = frame(text(false), &[b'a'; 40]);
    wire.extend(frame(
        FrameHeader {
            opcode: OpCode::Data(Data::Continue),
            ..text(true)
        },
        &[b'a'; 40],
    ));
    assert_eq!(run(wire).unwrap_err().code, 1009);
    assert!(run(frame(text(true), &[b'a'; 64])).is_ok());
}
