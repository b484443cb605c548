//! WebSocket frames after a scanned handshake, both ways: what the sandbox sends gets the
//! same swap-or-refuse decision as a request body (place `body`), what comes back is
//! redacted, and a frame sluice cannot read closes the connection instead of passing.
//!
//! The relay reads frames (`frame`), joins them into whole messages (`message`, inflating
//! `permessage-deflate` ones, `deflate`), scans each message, and writes it to the other
//! side as one frame, uncompressed. Because a message is scanned whole, a value is found
//! however the peer fragmented it, and a refused message sends none of its bytes. A value
//! split across two messages is two fields, as across two requests, and is not matched.
//!
//! Control frames pass between the peers as they come. A ping, pong or close reason toward
//! the upstream is never a place a swap happens: a placeholder or a value there is refused.
//! Back toward the client it is redacted (and emptied if its placeholder would not fit the
//! 125 bytes a control frame may hold).
//!
//! A refusal is recorded in the audit log and closes both sides with `1008` and the
//! refusal's code as the reason; the message that caused it is not sent.
//!
//! A WebSocket never outlives what it was opened under: a reload that replaces the
//! declaration or the guard closes it with `1012` (the client reconnects, under the new
//! one), and the proxy's shutdown with `1001`. A peer that stops reading holds one frame
//! for at most [`WRITE_TIMEOUT`]; the connection is closed then.

mod deflate;
mod frame;
mod message;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use sluice_guard::{Guard, Plan};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use zeroize::Zeroizing;

use crate::forward::budget::{self, BodySwaps, Pending};
use crate::generation::door::Exchange;
use crate::generation::shared::{Shared, until_stopped};
use crate::refusal::Refusal;
use crate::scan::request::{Outbound, Place};
use crate::tls::target::Target;

use deflate::Inflater;
pub(crate) use deflate::{accepted, keep_inspectable_offers};
use frame::{FrameReader, FrameWriter, Peer};
use message::{Assembler, Item, Kind};

/// How long one frame may take to be written to a peer before sluice gives up on it (a
/// peer that stops reading would otherwise hold the relay, and its buffers, for ever).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long sluice's own close frame may take on each side.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why sluice closes a WebSocket: the code and reason both peers are sent. Its reason is
/// written by sluice (a code, a protocol fault), never taken from a message.
#[derive(Debug)]
pub(crate) struct Close {
    pub(crate) code: u16,
    reason: String,
}

impl Close {
    /// `1002`: a frame breaks RFC 6455.
    fn protocol(why: &str) -> Self {
        Self::new(1002, why)
    }

    /// `1008`: a frame uses an extension sluice cannot inspect.
    fn uninspectable(why: &str) -> Self {
        Self::new(1008, why)
    }

    /// `1009`: a message over the bound.
    fn too_big(max: usize) -> Self {
        Self::new(
            1009,
            &format!("a message is over sluice's bound of {max} bytes"),
        )
    }

    /// `1007`: a payload that is not what its frame says.
    fn invalid(why: &str) -> Self {
        Self::new(1007, why)
    }

    /// `1001`: one side went away (or broke off inside a frame).
    fn gone(why: &str) -> Self {
        Self::new(1001, why)
    }

    /// `1012` (service restart): a reload replaced the declaration this WebSocket was
    /// opened under.
    fn reloaded() -> Self {
        Self::new(1012, "sluice's declaration was reloaded: reconnect")
    }

    /// `1008`: sluice refused a message; the reason is the refusal's code.
    fn refused(refusal: &Refusal) -> Self {
        Self::new(1008, &format!("sluice-error: {}", refusal.code))
    }

    fn new(code: u16, why: &str) -> Self {
        // A close reason holds at most 123 bytes.
        let mut reason = why.to_owned();
        while reason.len() > 123 {
            reason.pop();
        }
        Self { code, reason }
    }

    /// The close frame.
    fn frame(&self) -> Outgoing {
        close_frame(self.code, self.reason.as_bytes())
    }
}

/// What the relay needs of the upgraded request.
pub(crate) struct Relay {
    pub(crate) shared: Arc<Shared>,
    /// The tunnel's host: the grants are decided toward it.
    pub(crate) target: Target,
    /// The handshake's method and path, which request rules (`allow:`) weigh.
    pub(crate) method: Method,
    pub(crate) path: String,
    /// The handshake's exchange, which every event of the connection is recorded under.
    pub(crate) exchange: Exchange,
    /// Whether `permessage-deflate` was negotiated.
    pub(crate) deflate: bool,
}

/// What one direction does to each message and control payload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// From the sandbox toward the upstream: swapped where granted, refused elsewhere.
    Outbound,
    /// From the upstream back to the sandbox: redacted.
    Inbound,
}

/// One direction's scan.
struct Scan<'a> {
    direction: Direction,
    guard: &'a Guard,
    outbound: &'a Outbound<'a>,
    /// Messages toward the upstream, as a body.
    message_plan: Plan,
    /// Control payloads toward the upstream: no swap.
    control_plan: Plan,
    shared: &'a Shared,
    exchange: &'a Exchange,
}

impl Relay {
    /// Relays frames between `client` and `upstream` until both sides have closed, or
    /// sluice closes them.
    pub(crate) async fn run<C, U>(self, client: C, upstream: U)
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
        U: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let (client_read, client_write) = tokio::io::split(client);
        let (upstream_read, upstream_write) = tokio::io::split(upstream);
        let to_client = Mutex::new(FrameWriter::new(client_write, Peer::Client, WRITE_TIMEOUT));
        let to_upstream = Mutex::new(FrameWriter::new(
            upstream_write,
            Peer::Upstream,
            WRITE_TIMEOUT,
        ));
        let max = self.shared.limits.max_buffered_body;
        let guard = &self.shared.guard;
        let outbound = Outbound::new(guard, &self.shared.policy, &self.target)
            .for_request(&self.method, &self.path);
        let scan = |direction| Scan {
            direction,
            guard,
            outbound: &outbound,
            message_plan: outbound.plan(&Place::Body),
            control_plan: outbound.plan(&Place::WebSocketControl),
            shared: &self.shared,
            exchange: &self.exchange,
        };
        let inflater = || self.deflate.then(Inflater::default);
        let ended = {
            let sent = pump(
                FrameReader::new(client_read, Peer::Client, max),
                Assembler::new(inflater(), max),
                scan(Direction::Outbound),
                &to_upstream,
            );
            let received = pump(
                FrameReader::new(upstream_read, Peer::Upstream, max),
                Assembler::new(inflater(), max),
                scan(Direction::Inbound),
                &to_client,
            );
            let replaced = self.shared.replaced(true);
            let mut shutdown = self.shared.shutdown.clone();
            let stopping = until_stopped(&mut shutdown);
            tokio::pin!(sent, received, replaced, stopping);
            let (mut sent_done, mut received_done) = (false, false);
            loop {
                tokio::select! {
                    () = &mut replaced => break Some(Close::reloaded()),
                    () = &mut stopping => break Some(Close::gone("sluice is shutting down")),
                    ended = &mut sent, if !sent_done => {
                        sent_done = true;
                        if let Err(close) = ended {
                            break Some(close);
                        }
                        // The client is done sending: so is sluice, toward the upstream
                        // (within a bound: a TLS close waits on a peer that may not read).
                        shut_down(&to_upstream).await;
                    }
                    ended = &mut received, if !received_done => {
                        received_done = true;
                        if let Err(close) = ended {
                            break Some(close);
                        }
                        shut_down(&to_client).await;
                    }
                }
                if sent_done && received_done {
                    break None;
                }
            }
            // Both directions are dropped here, and with them any lock they held.
        };
        if let Some(close) = ended {
            tracing::debug!(code = close.code, reason = %close.reason, "websocket closed by sluice");
            close_with(&to_client, &close).await;
            close_with(&to_upstream, &close).await;
        }
    }
}

/// Shuts one side's write half, giving up after [`CLOSE_TIMEOUT`].
async fn shut_down<W: AsyncWrite + Unpin>(side: &Mutex<FrameWriter<W>>) {
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async { side.lock().await.shutdown().await }).await;
}

/// Sends `close` on one side and shuts its write half, giving up after [`CLOSE_TIMEOUT`].
async fn close_with<W: AsyncWrite + Unpin>(side: &Mutex<FrameWriter<W>>, close: &Close) {
    let closing = async {
        let mut writer = side.lock().await;
        let mut frame = close.frame();
        let _ = writer.send(frame.opcode, frame.payload.bytes_mut()).await;
        writer.shutdown().await;
    };
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, closing).await;
}

/// One direction: frames from `reader`, joined by `assembler`, scanned by `scan`, written
/// by `writer`, until the reading side closes.
async fn pump<R, W>(
    mut reader: FrameReader<R>,
    mut assembler: Assembler,
    scan: Scan<'_>,
    writer: &Mutex<FrameWriter<W>>,
) -> Result<(), Close>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while let Some((header, payload)) = reader.next().await? {
        let Some(item) = assembler.push(&header, payload)? else {
            continue;
        };
        let mut frame = match item {
            Item::Message(kind, bytes) => Outgoing {
                opcode: OpCode::Data(match kind {
                    Kind::Text => Data::Text,
                    Kind::Binary => Data::Binary,
                }),
                payload: scan.message(&bytes)?,
            },
            Item::Control(control, payload) => scan.control(control, &payload)?,
        };
        writer
            .lock()
            .await
            .send(frame.opcode, frame.payload.bytes_mut())
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => Close::gone("a peer stopped reading"),
                _ => Close::gone(&format!("writing failed: {e}")),
            })?;
    }
    Ok(())
}

impl Scan<'_> {
    /// A whole message, as it goes on.
    fn message(&self, bytes: &[u8]) -> Result<Scanned, Close> {
        match self.direction {
            Direction::Inbound => {
                let redacted = self.guard.redact(bytes);
                self.exchange
                    .record_redactions("websocket-response", redacted.tally());
                Ok(Scanned::redacted(redacted.into_bytes()))
            }
            Direction::Outbound => {
                let rewritten = self
                    .guard
                    .rewrite(bytes, &self.message_plan)
                    .map_err(|e| self.refuse(self.outbound.refusal(e, &Place::Body)))?;
                let tally = rewritten.tally();
                // Each message swapping a budgeted secret is one use of it.
                let swapped: Vec<_> = budget::swapped(tally).collect();
                budget::charge(
                    self.shared,
                    &swapped,
                    BodySwaps::Known(Vec::new()),
                    &Pending::default(),
                )
                .map_err(|refusal| self.refuse(refusal))?;
                self.exchange.record_tally("websocket", tally);
                self.exchange.record_redactions("websocket", tally);
                Ok(Scanned::Swapped(rewritten.into_bytes()))
            }
        }
    }

    /// A control frame, as it goes on: its payload (a close frame's reason) never swapped
    /// into, refused toward the upstream when it holds a secret, redacted back.
    fn control(&self, control: Control, payload: &[u8]) -> Result<Outgoing, Close> {
        let (code, text) = match control {
            Control::Close => match payload.len() {
                0 => return Ok(close_frame_empty()),
                1 => return Err(Close::protocol("a close frame with a one-byte payload")),
                _ => (
                    Some(u16::from_be_bytes([payload[0], payload[1]])),
                    &payload[2..],
                ),
            },
            _ => (None, payload),
        };
        let scanned = match self.direction {
            Direction::Outbound => {
                let rewritten = self
                    .guard
                    .rewrite(text, &self.control_plan)
                    .map_err(|e| self.refuse(self.outbound.refusal(e, &Place::WebSocketControl)))?;
                self.exchange
                    .record_tally("websocket-control", rewritten.tally());
                self.exchange
                    .record_redactions("websocket-control", rewritten.tally());
                rewritten.into_bytes()
            }
            Direction::Inbound => {
                let redacted = self.guard.redact(text);
                self.exchange
                    .record_redactions("websocket-control", redacted.tally());
                redacted.into_bytes()
            }
        };
        let room = if code.is_some() { 123 } else { 125 };
        let scanned: &[u8] = if scanned.len() > room { &[] } else { &scanned };
        Ok(match (control, code) {
            (Control::Close, Some(code)) => close_frame(code, scanned),
            (control, _) => Outgoing {
                opcode: OpCode::Control(control),
                payload: Scanned::Clear(scanned.to_vec()),
            },
        })
    }

    /// Records `refusal` and turns it into the close that ends the connection.
    fn refuse(&self, refusal: Refusal) -> Close {
        self.exchange.record_refusal(&refusal);
        Close::refused(&refusal)
    }
}

/// A close frame of `code` and `reason`.
fn close_frame(code: u16, reason: &[u8]) -> Outgoing {
    let mut payload = Vec::with_capacity(2 + reason.len());
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(reason);
    Outgoing {
        opcode: OpCode::Control(Control::Close),
        payload: Scanned::Clear(payload),
    }
}

/// A close frame without a code.
fn close_frame_empty() -> Outgoing {
    Outgoing {
        opcode: OpCode::Control(Control::Close),
        payload: Scanned::Clear(Vec::new()),
    }
}

/// A frame on its way to the other side.
struct Outgoing {
    opcode: OpCode,
    payload: Scanned,
}

/// A payload after its scan, wiped when freed if it may hold a secret's value.
enum Scanned {
    /// Toward the upstream: real values may have been swapped in.
    Swapped(Zeroizing<Vec<u8>>),
    /// Redacted, or sluice's own words (a close reason): no value in it.
    Clear(Vec<u8>),
}

impl Scanned {
    /// What redaction made: every value in it was turned into its placeholder, so it is
    /// freed without a wipe.
    fn redacted(mut bytes: Zeroizing<Vec<u8>>) -> Self {
        Self::Clear(std::mem::take(&mut *bytes))
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Scanned::Swapped(bytes) => bytes,
            Scanned::Clear(bytes) => bytes,
        }
    }
}
