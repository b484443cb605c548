//! Why the audit log refused to open or to record. Never carries a secret value.

use std::path::PathBuf;

use super::{EventKind, MAX_RUN_ID};

/// Why the log refused to open or to record. Never carries a secret value.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log file could not be created (missing directory, permissions, read-only disk).
    #[error("cannot create audit log {}: {source}", path.display())]
    Open {
        /// The path given to [`AuditLog::open`](crate::AuditLog::open).
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file is at the log's path that cannot be appended to: not a sluice log, or its
    /// last line cut short. It is left as it is, never overwritten.
    #[error(
        "cannot append to audit log {}: {why}; it is left as it is: move it away, or give another --audit-log",
        path.display()
    )]
    NotAppendable {
        /// The path given to [`AuditLog::open`](crate::AuditLog::open).
        path: PathBuf,
        /// What is wrong with the file.
        why: String,
    },
    /// The `start` record could not be written and flushed (full disk, `/dev/full`).
    #[error("cannot write the start record to audit log {}: {source}", path.display())]
    Start {
        /// The path given to [`AuditLog::open`](crate::AuditLog::open).
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The run id is empty, too long or holds characters outside `[A-Za-z0-9._:-]`.
    #[error(
        "run id of {len} characters is not usable: expected 1 to {max} characters from [A-Za-z0-9._:-]",
        max = MAX_RUN_ID
    )]
    InvalidRunId {
        /// Length of the run id that arrived.
        len: usize,
    },
    /// A [`StartInfo`](crate::StartInfo) digest is not 64 lowercase hex digits (its content is not echoed).
    #[error(
        "start field {field} has {len} characters that are not all lowercase hex: expected 64 lowercase hex digits"
    )]
    InvalidDigest {
        /// `policy_sha256` or `ca_sha256`.
        field: &'static str,
        /// Length of what arrived.
        len: usize,
    },
    /// `start` and `stop` are written by the log itself, never through `record`.
    #[error(
        "`{kind}` records are written by the log itself: expected swap, refuse, verbatim, redact, tunnel, deny or auth_fail"
    )]
    ReservedKind {
        /// The kind that arrived.
        kind: EventKind,
    },
    /// A write or flush failed mid-run; the log records nothing more (fail closed).
    #[error("audit log failed, nothing more can be recorded: {reason}")]
    Failed {
        /// The first failure, as the operating system reported it.
        reason: String,
    },
    /// The log was closed (through any clone of the handle).
    #[error("audit log is closed: expected an open log")]
    Closed,
    /// The writer is behind by this many queued records: the disk is not keeping up. The
    /// event is kept (written once the writer has caught up), and the log is marked failed
    /// until then (fail closed): every record after this one is refused.
    #[error("audit log queue is full ({capacity} records waiting): the disk is not keeping up")]
    Backlog {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The writer thread could not be started.
    #[error("cannot start the audit log writer thread: {0}")]
    Spawn(std::io::Error),
}
