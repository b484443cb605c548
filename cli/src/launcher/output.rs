//! CMD's output on its way to sluice's own stdout and stderr: through the guard's streaming
//! redactor, so a known value CMD prints reaches the terminal as its placeholder, whatever
//! the chunking. What it must never do: pass bytes the redactor has not seen.

use std::time::{Duration, Instant};

use sluice_audit::AuditLog;
use sluice_guard::{Rewriter, Tally};
use sluice_proxy::GuardInForce;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the redactor turned back into placeholders: per secret name, how many.
pub(super) type Redacted = Vec<(String, u64)>;

/// How often, at most, a stream's redactions so far are audited while CMD runs: a run
/// killed outright loses at most this much of its `redact` events, not all of them.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A stream's redactions, audited as they accrue: what is new since the last report, one
/// `redact` event per secret, at most every [`REPORT_EVERY`] and once more at the end.
pub(super) struct Reporter {
    audit: AuditLog,
    stream: &'static str,
    reported: Redacted,
    last: Instant,
}

impl Reporter {
    pub(super) fn new(audit: AuditLog, stream: &'static str) -> Self {
        Self {
            audit,
            stream,
            reported: Redacted::new(),
            last: Instant::now(),
        }
    }

    /// Audits what `redacted` holds beyond what was reported, if it is time (or `now`).
    /// Whether a report made now would be written (one second since the last).
    fn due(&self) -> bool {
        self.last.elapsed() >= REPORT_EVERY
    }

    fn report(&mut self, redacted: &Redacted, now: bool) {
        if !now && !self.due() {
            return;
        }
        let mut news = Redacted::new();
        for (name, count) in redacted {
            let before = self
                .reported
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, c)| *c);
            if *count > before {
                news.push((name.clone(), count - before));
            }
        }
        if news.is_empty() {
            return;
        }
        self.last = Instant::now();
        audit_redactions(&self.audit, self.stream, &news);
        self.reported = redacted.clone();
    }
}

/// Copies a child's output stream to ours through the guard's redactor, flushing after
/// every read so interactive output is not delayed (only a possible partial match is held).
/// When a reload puts another guard in force, the next read goes through it, with the bytes
/// the old redactor held back. What was redacted is audited as it accrues (`reporter`);
/// returns it all.
pub(super) async fn pump<R, W>(
    mut from: R,
    mut to: W,
    mut guards: GuardInForce,
    mut reporter: Reporter,
) -> Redacted
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let redacted = copy(&mut from, &mut to, &mut guards, &mut reporter).await;
    reporter.report(&redacted, true);
    redacted
}

async fn copy<R, W>(
    from: &mut R,
    to: &mut W,
    guards: &mut GuardInForce,
    reporter: &mut Reporter,
) -> Redacted
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
        // A command that printed a value and went quiet has it audited within a second,
        // not at its exit. (A read cut short by the timer loses nothing: tokio's `read`
        // takes no bytes it does not return.)
        let n = match tokio::time::timeout(REPORT_EVERY, from.read(&mut buf)).await {
            Err(_quiet) => {
                reporter.report(&so_far(&redacted, &guard, &redactor), true);
                continue;
            }
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => n,
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
        // What was redacted so far is counted only when a report is due.
        if reporter.due() {
            reporter.report(&so_far(&redacted, &guard, &redactor), false);
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

/// What has been redacted so far: the earlier guards' (`redacted`) and what the redactor
/// in use has decided (its own tally is whole, so nothing is counted twice).
fn so_far(redacted: &Redacted, guard: &sluice_guard::Guard, redactor: &Rewriter) -> Redacted {
    let mut so_far = redacted.clone();
    add(&mut so_far, guard, redactor.tally());
    so_far
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
fn audit_redactions(audit: &AuditLog, stream: &str, redacted: &Redacted) {
    for (name, count) in redacted {
        let event = sluice_audit::Event::new(sluice_audit::EventKind::Redact)
            .secret(name.as_str())
            .location(stream)
            .count(*count);
        if let Err(error) = audit.record(event) {
            tracing::error!(%error, "auditing the command's output redactions failed");
        }
    }
}
