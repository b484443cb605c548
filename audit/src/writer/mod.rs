//! The one writer of a run's audit log: a cheap-to-clone handle in front of a dedicated
//! thread that owns the file, assigns `seq` and `prev`, flushes on a short interval and
//! rotates the file into numbered segments.
//!
//! It must never block a caller on the disk, never let a failed write go unnoticed, and
//! never truncate a log: a run appends its own chain after the runs already in the file.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod thread;

#[cfg(test)]
pub(crate) use thread::RETRY;

use thread::Writer;

use super::segments::{self, Rotation, Segment};
use super::{
    Approval, AuditError, Event, EventKind, Line, Redactor, StartInfo, cap, elide_path,
    is_sha256_hex, is_valid_run_id, sanitize_method, timestamp_now,
};

/// How long a record may wait before it is written and flushed to the file: the writer
/// gathers a batch this long after the first record of a burst.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(2);

/// The write buffer: a busy proxy's batch (some 60 records of about 360 bytes in
/// [`FLUSH_INTERVAL`]) fits whole, so a batch costs one write.
const WRITE_BUFFER: usize = 64 * 1024;

/// How many records may wait for the writer before [`AuditLog::record`] refuses more.
pub const QUEUE_CAPACITY: usize = 16_384;

/// Longest field values, in bytes; longer ones are cut and end with `…`.
const MAX_NAME: usize = 128;
const MAX_HOST: usize = 256;
const MAX_PATH: usize = 2048;
const MAX_REASON: usize = 512;

/// The run's audit log. Cheap to clone (an `Arc` inside); every clone writes to the same
/// file through the same writer thread, so lines never interleave and the order of lines
/// in the file is the order of `seq`.
///
/// # Fallibility
///
/// [`AuditLog::open`] fails loudly when the file cannot be created or the `start` record
/// cannot be written and flushed. After that, a failed write or flush (a full disk)
/// marks the log failed, and so does a queue of [`QUEUE_CAPACITY`] records waiting for a
/// stalled disk: [`AuditLog::record`] returns [`AuditError::Failed`] from then on
/// and [`AuditLog::is_healthy`] is false, so the proxy can refuse to proxy. A failed write
/// is retried: when the disk takes it again, everything accepted before is written in
/// order, the chain unbroken, and the log is healthy again (`thread`).
///
/// # Durability
///
/// A record accepted by [`AuditLog::record`] is queued, not yet on disk: it is written
/// in the next batch and flushed to the file within about [`FLUSH_INTERVAL`] (2 ms). [`AuditLog::close`]
/// writes `stop`, flushes and syncs the file. A crash can lose the records of the last
/// flush interval; the log then ends without `stop`, which `sluice audit verify` reports.
///
/// # Closing
///
/// [`AuditLog::close`] closes the log for every clone: the first call writes `stop`,
/// flushes, syncs and joins the writer; records after it return [`AuditError::Closed`],
/// and later `close` calls (on other clones) wait for the first to finish and return
/// `Ok(())`, or the failure if the log had failed. Dropping the last clone without
/// closing flushes what was queued and joins the writer, but writes no `stop`.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("healthy", &self.is_healthy())
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// `None` once closed; records hold the read side only for a `try_send`.
    tx: RwLock<Option<SyncSender<Msg>>>,
    /// The writer thread, taken by the first `close` (or the last drop).
    thread: Mutex<Option<JoinHandle<()>>>,
    health: Arc<Health>,
    redactor: Option<Redactor>,
}

/// What the writer thread tells the handles about itself.
#[derive(Default)]
struct Health {
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Writes (or queueings) that failed, for the metrics; the first fails the log.
    failures: AtomicU64,
    /// Events queued and not yet taken by the writer, for the metrics.
    queued: AtomicUsize,
    /// Records that found the queue full: kept here, in order, for the writer to take
    /// once it has emptied the queue. Only the few that race the log's failing land here
    /// (from then on every record is refused), so it stays small.
    overflow: Mutex<Vec<Line>>,
    /// The log failed because the queue was full, not because the disk refused: it is
    /// healthy again once the writer has written everything it was behind on.
    backlogged: AtomicBool,
}

impl Health {
    fn fail(&self, what: &str, err: &io::Error) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.fail_uncounted(what, err);
    }

    /// Fails the log without counting a failed write (a full queue).
    fn fail_uncounted(&self, what: &str, err: &io::Error) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        failure.get_or_insert_with(|| format!("{what}: {err}"));
        self.failed.store(true, Ordering::SeqCst);
    }

    /// A record the full queue could not take: kept for the writer, and the log failed
    /// until the writer has caught up ([`Health::caught_up`]).
    fn overflow(&self, line: Box<Line>) {
        self.overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(*line);
        self.backlogged.store(true, Ordering::SeqCst);
        self.fail_uncounted(
            "queueing a record",
            &io::Error::other(format!(
                "{QUEUE_CAPACITY} records waiting: the disk is not keeping up"
            )),
        );
    }

    /// The records that found the queue full, oldest first.
    fn take_overflow(&self) -> Vec<Line> {
        std::mem::take(&mut *self.overflow.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The writer wrote and flushed everything it was given: a log failed only by a full
    /// queue is healthy again (one failed by the disk recovers in `thread`'s retry).
    fn caught_up(&self) {
        let overflow_empty = self
            .overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        if overflow_empty && self.backlogged.swap(false, Ordering::SeqCst) {
            self.recover();
        }
    }

    /// The disk took again what it had refused: records are accepted again.
    fn recover(&self) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.failed.store(false, Ordering::SeqCst);
    }

    fn error(&self) -> AuditError {
        let reason = self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the writer thread stopped".to_owned());
        AuditError::Failed { reason }
    }
}

enum Msg {
    Event(Box<Line>),
    /// Look at [`Health::overflow`]: a record went there while the writer may be parked.
    Wake,
    Close(SyncSender<Result<(), AuditError>>),
}

impl AuditLog {
    /// Opens the log at `path` (created with mode 0600, or appended to: a log already there
    /// is kept, and this run's `start` follows its last line), writes the `start` record
    /// and flushes it before returning, then starts the writer thread.
    ///
    /// # Errors
    ///
    /// [`AuditError::InvalidRunId`] or [`AuditError::InvalidDigest`] for unusable
    /// arguments; [`AuditError::Open`] when the file cannot be created;
    /// [`AuditError::NotAppendable`] when a file is there that is not a sluice log or
    /// whose last line is cut short (it is left as it is);
    /// [`AuditError::Start`] when `start` cannot be written (a full disk).
    pub fn open(path: &Path, run_id: &str, start: StartInfo) -> Result<AuditLog, AuditError> {
        AuditLog::open_with(path, run_id, start, None, Rotation::default())
    }

    /// [`AuditLog::open`], with a redaction applied to the host, path, location and
    /// reason of every event before it is queued (the proxy passes the guard here, so
    /// that a known value in a host name or path segment is written as its placeholder).
    pub fn open_with_redactor(
        path: &Path,
        run_id: &str,
        start: StartInfo,
        redactor: Redactor,
    ) -> Result<AuditLog, AuditError> {
        AuditLog::open_with(path, run_id, start, Some(redactor), Rotation::default())
    }

    /// [`AuditLog::open`] with an optional redactor (see [`AuditLog::open_with_redactor`])
    /// and rotation into numbered segments (see [`Rotation`]).
    pub fn open_with(
        path: &Path,
        run_id: &str,
        start: StartInfo,
        redactor: Option<Redactor>,
        rotation: Rotation,
    ) -> Result<AuditLog, AuditError> {
        check_start(run_id, &start)?;
        let opened = segments::open(path)?;
        let rotates = rotation.max_bytes.is_some() || rotation.max_age.is_some();
        // Only a regular file (not a device, a pipe, or a symlink whose link a rename would
        // move) is rotated.
        let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
        if rotates && !regular {
            return Err(AuditError::NotAppendable {
                path: path.to_owned(),
                why: "it is not a regular file (a device, a pipe or a symlink), so it cannot rotate; drop --audit-max-bytes and --audit-max-age, or give a file".to_owned(),
            });
        }
        let mut segment = Segment {
            path: path.to_owned(),
            rotation,
            bytes: opened.len,
            since: Instant::now(),
            number: 1,
        };
        // The line this run follows: the log's last, or (a log whose active file is gone)
        // its last segment's.
        let follows = Follows {
            last: opened.last,
            torn: opened.torn,
        };
        let mut file = opened.file;
        // A run after a cut line starts in the same file, so that the line naming the cut
        // is the one after it.
        if follows.last.is_some() && follows.torn.is_none() && segment.due() {
            // A log already past its bound: this run starts in a segment of its own.
            file = segments::rotate(path).map_err(|source| AuditError::Open {
                path: path.to_owned(),
                source,
            })?;
            segment.bytes = 0;
            segment.since = Instant::now();
        }
        AuditLog::start_with_sink(
            Box::new(file),
            path,
            run_id,
            start,
            redactor,
            follows,
            regular.then_some(segment),
        )
    }

    /// Writes `start` to `sink`, flushes it and starts the writer thread over it.
    pub(crate) fn start_with_sink(
        sink: Box<dyn Sink>,
        path: &Path,
        run_id: &str,
        start: StartInfo,
        redactor: Option<Redactor>,
        follows: Follows,
        segment: Option<Segment>,
    ) -> Result<AuditLog, AuditError> {
        check_start(run_id, &start)?;
        let start_error = |source| AuditError::Start {
            path: path.to_owned(),
            source,
        };
        let mut writer = Writer::new(sink, run_id, segment);
        let mut line = Line::bare(EventKind::Start, timestamp_now(), run_id);
        line.follows = follows.last;
        line.torn = follows.torn;
        line.version = Some(env!("CARGO_PKG_VERSION").to_owned());
        line.policy_sha256 = Some(start.policy_sha256);
        line.ca_sha256 = Some(start.ca_sha256);
        if !start.withheld.is_empty() {
            // Names only; through the redactor like every free-text field, before the cap
            // (a value cut in two by the cap would no longer be known to the guard).
            let names = start.withheld.into_iter();
            line.withheld = Some(match &redactor {
                Some(redact) => names.map(|name| cap(redact(name), 200)).collect(),
                None => names.map(|name| cap(name, 200)).collect(),
            });
        }
        // Names and words; through the redactor like every free-text field, then capped.
        let redact = |text: String| match &redactor {
            Some(redact) => cap(redact(text), 200),
            None => cap(text, 200),
        };
        if !start.grants.is_empty() {
            line.grants = Some(
                start
                    .grants
                    .into_iter()
                    .map(|(secret, grants)| {
                        (redact(secret), grants.into_iter().map(&redact).collect())
                    })
                    .collect(),
            );
        }
        if !start.settings.is_empty() {
            line.settings = Some(
                start
                    .settings
                    .into_iter()
                    .map(|(setting, value)| (redact(setting), redact(value)))
                    .collect(),
            );
        }
        if !start.placeholders.is_empty() {
            line.placeholders = Some(
                start
                    .placeholders
                    .into_iter()
                    .map(|(secret, form)| (redact(secret), redact(form)))
                    .collect(),
            );
        }
        writer.write(line).map_err(start_error)?;
        writer.flush().map_err(start_error)?;

        let (tx, rx) = mpsc::sync_channel(QUEUE_CAPACITY);
        let health = Arc::new(Health::default());
        let thread_health = Arc::clone(&health);
        let thread = std::thread::Builder::new()
            .name("sluice-audit".to_owned())
            .spawn(move || writer.run(&rx, &thread_health))
            .map_err(AuditError::Spawn)?;
        Ok(AuditLog {
            inner: Arc::new(Inner {
                tx: RwLock::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                health,
                redactor,
            }),
        })
    }

    /// Queues one event. Never waits for the disk: the writer assigns `seq`, `ts` is
    /// taken now, the path's query values are elided and the redactor (if any) applied.
    ///
    /// # Errors
    ///
    /// [`AuditError::Failed`] once a write has failed, [`AuditError::Closed`] after
    /// [`AuditLog::close`], [`AuditError::Backlog`] when the queue is full (which fails
    /// the log: a disk that far behind is failing), and
    /// [`AuditError::ReservedKind`] for `start` and `stop`. On any error the caller must not
    /// carry out what it describes (fail closed). The event is not recorded, except on
    /// `Backlog`: that record is kept and written once the writer catches up, so the log
    /// may hold an event for something its caller then refused to do (never the reverse).
    pub fn record(&self, event: Event) -> Result<(), AuditError> {
        if matches!(event.kind, EventKind::Start | EventKind::Stop) {
            return Err(AuditError::ReservedKind { kind: event.kind });
        }
        let health = &self.inner.health;
        if health.failed.load(Ordering::SeqCst) {
            return Err(health.error());
        }
        let line = self.to_line(event);
        let tx = self.inner.tx.read().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = tx.as_ref() else {
            return Err(AuditError::Closed);
        };
        // Counted before the send, so that the writer's decrement never comes first.
        health.queued.fetch_add(1, Ordering::Relaxed);
        let sent = tx.try_send(Msg::Event(Box::new(line)));
        if sent.is_err() {
            health.queued.fetch_sub(1, Ordering::Relaxed);
        }
        match sent {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(msg)) => {
                // A disk this far behind is failing: stop proxying until it catches up, and
                // keep this record, which was accepted as far as its caller knows.
                if let Msg::Event(line) = msg {
                    health.queued.fetch_add(1, Ordering::Relaxed);
                    health.overflow(line);
                }
                // The writer may have emptied the queue and parked since the send failed:
                // a wake-up, so that it looks at the overflow. (Still full: it is busy, and
                // looks there once the queue is empty.)
                let _ = tx.try_send(Msg::Wake);
                Err(AuditError::Backlog {
                    capacity: QUEUE_CAPACITY,
                })
            }
            Err(TrySendError::Disconnected(_)) => Err(health.error()),
        }
    }

    /// How many writes have failed (the first one failed the log), for the metrics.
    pub fn write_failures(&self) -> u64 {
        self.inner.health.failures.load(Ordering::Relaxed)
    }

    /// How many events wait in the queue for the writer thread, for the metrics.
    pub fn queued(&self) -> usize {
        self.inner.health.queued.load(Ordering::Relaxed)
    }

    /// Whether the log is open and no write has failed: when false, the proxy refuses.
    pub fn is_healthy(&self) -> bool {
        !self.inner.health.failed.load(Ordering::SeqCst)
            && self
                .inner
                .tx
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
    }

    /// Writes `stop` (with the per-kind counts), flushes, syncs the file and joins the
    /// writer; closes the log for every clone (see [`AuditLog`] § Closing).
    ///
    /// # Errors
    ///
    /// [`AuditError::Failed`] if the log had failed or `stop` could not be written.
    pub fn close(self) -> Result<(), AuditError> {
        self.inner.close()
    }

    /// The line for an event: elision, sanitising, redaction and caps, done here so that
    /// no caller can forget them.
    fn to_line(&self, event: Event) -> Line {
        let redact = |text: String| match &self.inner.redactor {
            Some(redactor) => redactor(text),
            None => text,
        };
        let mut line = Line::bare(event.kind, timestamp_now(), "");
        line.secret = event.secret.map(|s| cap(redact(s), MAX_NAME));
        line.host = event.host.map(|s| cap(redact(s), MAX_HOST));
        line.method = event.method.map(|m| sanitize_method(&m));
        line.path = event.path.map(|p| cap(redact(elide_path(&p)), MAX_PATH));
        line.location = event.location.map(|s| cap(redact(s), MAX_NAME));
        line.count = event.count;
        line.reason = event.reason.map(|s| cap(redact(s), MAX_REASON));
        // A hash or nothing: the field is free text to the caller, never to the log.
        // One of the words each field may hold, or `(unknown)`: never free text.
        line.approval = event
            .approval
            .filter(|_| event.kind == EventKind::Approve)
            .map(|a| Approval {
                decision: one_of(a.decision, &["allow", "deny"]),
                scope: one_of(a.scope, &["once", "run"]),
                channel: one_of(a.channel, &["admin-api", "terminal", "webhook", "run"]),
                ..a
            });
        line.policy_sha256 = event.policy_sha256.filter(|hex| {
            event.kind == EventKind::Reload
                && hex.len() == 64
                && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        line
    }
}

/// `word` when it is one of `words`, else `(unknown)`.
fn one_of(word: String, words: &[&str]) -> String {
    if words.contains(&word.as_str()) {
        word
    } else {
        "(unknown)".to_owned()
    }
}

impl Inner {
    fn close(&self) -> Result<(), AuditError> {
        // Held for the whole close, so a second closer waits until the first is done.
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = self
            .tx
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(tx) = tx else {
            // Already closed through another clone (or dropped).
            return if self.health.failed.load(Ordering::SeqCst) {
                Err(self.health.error())
            } else {
                Ok(())
            };
        };
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        // A blocking send: the writer is draining the queue, or gone (then it fails).
        let result = match tx.send(Msg::Close(reply_tx)) {
            Ok(()) => reply_rx.recv().unwrap_or_else(|_| Err(self.health.error())),
            Err(_) => Err(self.health.error()),
        };
        drop(tx);
        // A log that failed (a full queue, say) before `stop` reports it here too.
        let result = result.and_then(|()| {
            if self.health.failed.load(Ordering::SeqCst) {
                Err(self.health.error())
            } else {
                Ok(())
            }
        });
        if let Some(handle) = thread.take()
            && handle.join().is_err()
        {
            self.health.fail(
                "joining the writer",
                &io::Error::other("the thread panicked"),
            );
            return Err(self.health.error());
        }
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Disconnect the writer: it flushes what was queued and exits; no `stop`.
        self.tx
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// Where the writer's bytes go: the log file, or a test double.
pub(crate) trait Sink: Write + Send {
    /// Makes written bytes durable (fsync for a file).
    fn sync(&mut self) -> io::Result<()>;
}

impl Sink for File {
    fn sync(&mut self) -> io::Result<()> {
        match self.sync_all() {
            // Devices and pipes cannot sync; their writes already failed or succeeded.
            Err(err) if err.kind() == io::ErrorKind::InvalidInput => Ok(()),
            other => other,
        }
    }
}

fn check_start(run_id: &str, start: &StartInfo) -> Result<(), AuditError> {
    if !is_valid_run_id(run_id) {
        return Err(AuditError::InvalidRunId { len: run_id.len() });
    }
    for (field, value) in [
        ("policy_sha256", &start.policy_sha256),
        ("ca_sha256", &start.ca_sha256),
    ] {
        if !is_sha256_hex(value) {
            return Err(AuditError::InvalidDigest {
                field,
                len: value.chars().count(),
            });
        }
    }
    Ok(())
}

/// What a run appended to a log follows: the SHA-256 of the log's last whole line, and the
/// length of a line cut short after it, if one was.
#[derive(Default)]
pub(crate) struct Follows {
    last: Option<String>,
    torn: Option<u64>,
}

/// Where a test writer's failure is injected.
#[cfg(test)]
pub(crate) fn open_with_sink(
    sink: Box<dyn Sink>,
    run_id: &str,
    start: StartInfo,
) -> Result<AuditLog, AuditError> {
    AuditLog::start_with_sink(
        sink,
        Path::new("(test sink)"),
        run_id,
        start,
        None,
        Follows::default(),
        None,
    )
}
