//! CMD's output on its way to sluice's own stdout and stderr: through the guard's streaming
//! redactor, so a known value CMD prints reaches the terminal as its placeholder, whatever
//! the chunking. What it must never do: pass bytes the redactor has not seen.

use std::sync::Arc;

use sluice_guard::{Guard, Rewriter, Tally};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Copies a child's output stream to ours through the guard's redactor, flushing after
/// every read so interactive output is not delayed (only a possible partial match is held).
/// Returns what was redacted, for the audit log.
pub(super) async fn pump<R, W>(mut from: R, mut to: W, guard: Arc<Guard>) -> Tally
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut redactor = Rewriter::redactor(guard);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(buf.len());
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.clear();
        // The redact plan never refuses: an error here is a bug; stop rather than pass
        // unredacted output.
        if redactor.push(&buf[..n], &mut out).is_err() {
            return redactor.tally().clone();
        }
        if to.write_all(&out).await.is_err() || to.flush().await.is_err() {
            return redactor.tally().clone();
        }
    }
    out.clear();
    let tally = match redactor.finish(&mut out) {
        Ok(tally) => {
            let _ = to.write_all(&out).await;
            tally
        }
        Err(_) => Tally::default(),
    };
    let _ = to.flush().await;
    tally
}

/// Audits what the redactor turned back into placeholders in the command's `stream`
/// (`stdout`, `stderr`): one `redact` event per secret, with its count.
pub(super) fn audit_redactions(proxy: &sluice_proxy::Proxy, stream: &str, tally: &Tally) {
    let guard = proxy.guard();
    for (id, counts) in tally.iter() {
        if counts.redacted == 0 {
            continue;
        }
        let event = sluice_proxy::audit::Event::new(sluice_proxy::audit::EventKind::Redact)
            .secret(guard.name(id))
            .location(stream)
            .count(counts.redacted);
        if let Err(error) = proxy.record(event) {
            tracing::error!(%error, "auditing the command's output redactions failed");
        }
    }
}
