//! A lingering close for the client connections sluice serves HTTP/1.1 on: when sluice
//! closes one, it first shuts its own side (the client gets the whole response and the
//! end of the stream), then reads and discards what the client is still sending, for a
//! bounded time and amount, before it lets the socket go.
//!
//! Why: a refusal answers a request before its body was read (a `403` for a placeholder in
//! an ungranted header, a `421` on an outdated tunnel, an upload toward a host nothing
//! allows). Closing a socket whose receive buffer still holds data makes the kernel send a
//! reset, and a reset can destroy the response on its way: the client, still writing its
//! upload, sees "connection reset" instead of the refusal that says which grant is
//! missing. Draining first lets the refusal arrive.
//!
//! What it must never do: pass on anything it drains (the bytes are dropped unread); hold
//! a connection open past [`LINGER_FOR`] or [`LINGER_BYTES`] for a client that keeps
//! sending; or drain a connection handed to a relay that reads it itself (an upgraded
//! WebSocket, whose client may still send after its upstream is done): the upgrade turns
//! the lingering off ([`LingerSwitch::off`]).
//!
//! It sits below the edge (which wraps a connection in it) and `forward` (whose upgrade
//! turns it off), so that neither reaches into the other.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Sleep;

/// The longest a closing connection is drained.
pub(crate) const LINGER_FOR: Duration = Duration::from_secs(2);
/// The most a closing connection is drained of.
pub(crate) const LINGER_BYTES: usize = 1 << 20;

/// `io` with a lingering close (see the module's docs); reads and writes pass through.
pub(crate) struct Linger<IO> {
    io: IO,
    state: State,
    switch: LingerSwitch,
    /// sluice's shutdown: a connection closed by it does not linger (the drain at
    /// shutdown closes idle keep-alive connections, whose clients may never answer).
    shutdown: watch::Receiver<bool>,
}

/// Turns one connection's lingering close off, for good.
#[derive(Clone, Debug, Default)]
pub(crate) struct LingerSwitch(Arc<AtomicBool>);

impl LingerSwitch {
    /// From now on the connection closes without draining.
    pub(crate) fn off(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_off(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

enum State {
    Open,
    /// Our side is shut; the client's is read and dropped until it ends, or until these
    /// run out.
    Draining {
        until: Pin<Box<Sleep>>,
        left: usize,
    },
    Closed,
}

impl<IO> Linger<IO> {
    /// `io`, lingering at its close until `switch` is turned off or sluice shuts down.
    pub(crate) fn new(io: IO, switch: LingerSwitch, shutdown: watch::Receiver<bool>) -> Self {
        Self {
            io,
            state: State::Open,
            switch,
            shutdown,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Linger<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Open => {
                    ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    this.state = match this.switch.is_off() || *this.shutdown.borrow() {
                        true => State::Closed,
                        false => State::Draining {
                            until: Box::pin(tokio::time::sleep(LINGER_FOR)),
                            left: LINGER_BYTES,
                        },
                    };
                }
                State::Draining { until, left } => {
                    if until.as_mut().poll(cx).is_ready() {
                        this.state = State::Closed;
                        continue;
                    }
                    let mut scratch = [0u8; 8192];
                    let mut buf = ReadBuf::new(&mut scratch);
                    match ready!(Pin::new(&mut this.io).poll_read(cx, &mut buf)) {
                        Ok(()) if !buf.filled().is_empty() => {
                            *left = left.saturating_sub(buf.filled().len());
                            if *left == 0 {
                                this.state = State::Closed;
                            }
                        }
                        // The client's end of the stream, or an error: nothing left to wait for.
                        _ => this.state = State::Closed,
                    }
                }
                State::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A shutdown signal that never fires (its last value stays `false`).
    fn running() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    #[tokio::test]
    async fn a_connection_closed_by_sluices_shutdown_does_not_linger() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let (stop, stopping) = watch::channel(false);
        let mut ours = Linger::new(ours, LingerSwitch::default(), stopping);
        stop.send(true).unwrap();
        theirs.write_all(b"still sending").await.unwrap();
        ours.shutdown().await.unwrap();
        let mut read = [0u8; 13];
        ours.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"still sending", "drained at shutdown");
    }

    #[tokio::test]
    async fn a_closing_side_is_drained_until_the_client_ends() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut ours = Linger::new(ours, LingerSwitch::default(), running());
        ours.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            .await
            .unwrap();
        // The client is still writing its upload, more than the pipe holds.
        let client = tokio::spawn(async move {
            theirs.write_all(&[b'u'; 4096]).await.unwrap();
            let mut answer = Vec::new();
            theirs.read_to_end(&mut answer).await.unwrap();
            answer
        });
        ours.shutdown().await.unwrap();
        let answer = client.await.unwrap();
        assert_eq!(answer, b"HTTP/1.1 403 Forbidden\r\n\r\n");
    }

    #[tokio::test]
    async fn a_client_that_never_stops_is_let_go_after_the_most_it_may_send() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let mut ours = Linger::new(ours, LingerSwitch::default(), running());
        let endless = tokio::spawn(async move {
            // Writes until the other side is gone, counting what it got through.
            let mut sent = 0usize;
            while theirs.write_all(&[b'u'; 4096]).await.is_ok() {
                sent += 4096;
            }
            sent
        });
        ours.shutdown().await.unwrap();
        drop(ours);
        let sent = endless.await.unwrap();
        // Drained up to the bound, then let go: what got through is the bound, plus what
        // the pipe held when the draining stopped.
        assert!(sent >= LINGER_BYTES, "{sent}");
        assert!(sent <= LINGER_BYTES + 64 * 1024 + 8192, "{sent}");
    }

    #[tokio::test]
    async fn a_connection_switched_off_closes_without_reading_what_a_relay_must_forward() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let switch = LingerSwitch::default();
        let mut ours = Linger::new(ours, switch.clone(), running());
        switch.off();
        theirs.write_all(b"a frame for the upstream").await.unwrap();
        ours.shutdown().await.unwrap();
        // Still there for the relay to read.
        let mut read = [0u8; 24];
        ours.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"a frame for the upstream");
    }
}
