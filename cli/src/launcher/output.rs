//! CMD's output on its way to sluice's own stdout and stderr: through the guard's streaming
//! redactor, so a known value CMD prints reaches the terminal as its placeholder, whatever
//! the chunking. What it must never do: pass bytes the redactor has not seen.

use sluice_guard::{Rewriter, Tally};
use sluice_proxy::GuardInForce;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the redactor turned back into placeholders: per secret name, how many.
pub(super) type Redacted = Vec<(String, u64)>;

/// Copies a child's output stream to ours through the guard's redactor, flushing after
/// every read so interactive output is not delayed (only a possible partial match is held).
/// When a reload puts another guard in force, the next read goes through it, with the bytes
/// the old redactor held back. Returns what was redacted, for the
/// audit log.
pub(super) async fn pump<R, W>(mut from: R, mut to: W, mut guards: GuardInForce) -> Redacted
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut redacted = Redacted::new();
    let mut guard = guards.current();
    let mut redactor = Rewriter::redactor(guard.clone());
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(buf.len());
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.clear();
        if guards.changed() {
            // The held tail stays undecided and goes on to the new guard (a superset of the
            // old one), so a value split across this read is still caught; what the old
            // guard redacted is named by the old guard.
            let next = guards.current();
            let (rebased, tally) = redactor.rebase(next.clone());
            add(&mut redacted, &guard, &tally);
            redactor = rebased;
            guard = next;
        }
        // The redact plan never refuses: an error here is a bug; stop rather than pass
        // unredacted output.
        if redactor.push(&buf[..n], &mut out).is_err() {
            add(&mut redacted, &guard, redactor.tally());
            return redacted;
        }
        if to.write_all(&out).await.is_err() || to.flush().await.is_err() {
            add(&mut redacted, &guard, redactor.tally());
            return redacted;
        }
    }
    out.clear();
    if let Ok(tally) = redactor.finish(&mut out) {
        let _ = to.write_all(&out).await;
        add(&mut redacted, &guard, &tally);
    }
    let _ = to.flush().await;
    redacted
}

/// Adds `tally`'s redactions, named by the guard that made them.
fn add(redacted: &mut Redacted, guard: &sluice_guard::Guard, tally: &Tally) {
    for (id, counts) in tally.iter() {
        if counts.redacted == 0 {
            continue;
        }
        let name = guard.name(id);
        match redacted.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => *count += counts.redacted,
            None => redacted.push((name.to_owned(), counts.redacted)),
        }
    }
}

/// Audits what the redactor turned back into placeholders in the command's `stream`
/// (`stdout`, `stderr`): one `redact` event per secret, with its count.
pub(super) fn audit_redactions(proxy: &sluice_proxy::Proxy, stream: &str, redacted: &Redacted) {
    for (name, count) in redacted {
        let event = sluice_audit::Event::new(sluice_audit::EventKind::Redact)
            .secret(name.as_str())
            .location(stream)
            .count(*count);
        if let Err(error) = proxy.record(event) {
            tracing::error!(%error, "auditing the command's output redactions failed");
        }
    }
}
