//! HTTP/2 frames built by hand (RFC 9113 §4.1, §6): the frame types and flags the abuse
//! tests write, and [`encode`], which frames any payload, however malformed.
//!
//! It checks nothing: a frame that breaks the protocol is the point.

/// `DATA`.
pub const DATA: u8 = 0x0;
/// `HEADERS`.
pub const HEADERS: u8 = 0x1;
/// `RST_STREAM`.
pub const RST_STREAM: u8 = 0x3;
/// `SETTINGS`.
pub const SETTINGS: u8 = 0x4;
/// `PING`.
pub const PING: u8 = 0x6;
/// `GOAWAY`.
pub const GOAWAY: u8 = 0x7;
/// `CONTINUATION`.
pub const CONTINUATION: u8 = 0x9;
/// `END_STREAM`, on `DATA` and `HEADERS`.
pub const END_STREAM: u8 = 0x1;
/// `ACK`, on `SETTINGS` and `PING`.
pub const ACK: u8 = 0x1;
/// `END_HEADERS`, on `HEADERS` and `CONTINUATION`.
pub const END_HEADERS: u8 = 0x4;

/// One frame: 9-byte header, then the payload.
pub fn encode(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}
