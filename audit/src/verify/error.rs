//! Why a log does not verify: a file that cannot be read ([`ChainError::Read`]), or the
//! first line where the chain breaks and why ([`Break`]), each worded for the reviewer
//! who reads it, never quoting a line's content beyond its field names.

use std::io;
use std::path::PathBuf;

use super::super::Counts;
use super::super::EventKind;

/// Why a log does not verify.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A file could not be opened or read, or a path names no log.
    #[error("cannot read audit log {}: {source}", path.display())]
    Read {
        /// The path given.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// The first line (1-based, within its file) where the chain breaks, and why.
    #[error("{}: line {line}: {why}", file.display())]
    Broken {
        /// The file the line is in.
        file: PathBuf,
        /// 1-based line number within `file`.
        line: u64,
        /// What is wrong with it.
        why: Break,
    },
}

impl ChainError {
    /// The 1-based number of the first broken line, if the log could be read.
    pub fn line(&self) -> Option<u64> {
        match self {
            ChainError::Read { .. } => None,
            ChainError::Broken { line, .. } => Some(*line),
        }
    }

    /// What is wrong, if the log could be read.
    pub fn why(&self) -> Option<&Break> {
        match self {
            ChainError::Read { .. } => None,
            ChainError::Broken { why, .. } => Some(why),
        }
    }
}

/// What is wrong with the first broken line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Break {
    /// The file holds no line at all.
    #[error("the log is empty: expected a `start` record")]
    Empty,
    /// The last line has no newline: a write was cut short, or the tail was edited.
    #[error("the line does not end with a newline: a write was cut short or the tail was edited")]
    NotTerminated,
    /// Not one JSON object of the audit schema.
    #[error("not an audit record: {0}")]
    Malformed(String),
    /// The log's first line is neither `start` nor the first line of a later segment.
    #[error("the first record is `{found}`: expected `start` (the log's beginning is missing)")]
    MissingStart {
        /// The kind found instead.
        found: EventKind,
    },
    /// `start` lacks `version`, `policy_sha256` or `ca_sha256`, or a digest is not hex.
    #[error(
        "the `start` record lacks {field} or it is malformed: expected sluice's version and two 64-digit lowercase hex SHA-256 digests"
    )]
    StartFields {
        /// The field that is missing or malformed.
        field: &'static str,
    },
    /// A `start`'s `prev` is not the genesis value of its run.
    #[error(
        "prev is not the genesis value of run {run_id:?}: the start record was edited or belongs to another log"
    )]
    Genesis {
        /// The run id the `start` names.
        run_id: String,
    },
    /// The line names another run than its run's `start`.
    #[error(
        "run_id is {found:?}: expected {expected:?}, the run named by its `start` (a line from another log?)"
    )]
    RunId {
        /// The run named by `start`.
        expected: String,
        /// The run named here.
        found: String,
    },
    /// `seq` is not the line's place in its run: a line was dropped, inserted or moved.
    #[error(
        "seq is {found}: expected {expected}, so a line was dropped, inserted or moved at or before this one"
    )]
    Seq {
        /// The line's place in its run, which its `seq` must equal.
        expected: u64,
        /// The `seq` found.
        found: u64,
    },
    /// `prev` is not the SHA-256 of the line before.
    #[error(
        "prev does not match the SHA-256 of line {previous}: that line was edited, or a line was dropped, inserted or moved here"
    )]
    Prev {
        /// The number of the line before, in the same file.
        previous: u64,
    },
    /// A later file's first line, whose `prev` is not the SHA-256 of the last line of the
    /// file before it. Files are put in order by those links, so only a file that changed
    /// while it was being verified can break here.
    #[error(
        "prev does not match the SHA-256 of the last line of {}: a segment was edited, or one was dropped or inserted before this file",
        previous.display()
    )]
    PrevFile {
        /// The file before, in chain order.
        previous: PathBuf,
    },
    /// A file that begins with the same line as another file given: a copy of it.
    #[error(
        "this file begins with the same record as {}: it is a copy (or a forged twin), counted once; pass each segment once",
        of.display()
    )]
    Copy {
        /// The file it repeats.
        of: PathBuf,
    },
    /// A file that continues the same line as another file given: only one can.
    #[error(
        "this file continues the same record as {}: two files cannot both come after one line, so one of them is forged or from another copy of the log",
        other.display()
    )]
    Fork {
        /// The file that continues that line too.
        other: PathBuf,
    },
    /// A `start` in the middle of a run: its `follows` is missing or does not name the
    /// line before it.
    #[error(
        "a `start` whose follows is not the SHA-256 of the line before it: a line or a run was dropped, edited or inserted before this run"
    )]
    Follows,
    /// A `start` naming a line cut short (`torn`) where the line before it is whole, or
    /// naming another length than the cut line's.
    #[error(
        "a `start` whose torn names a line cut short that is not the line before it: a line was edited, dropped or inserted before this run"
    )]
    Torn,
    /// A line after `stop` that is not the `start` of the next run.
    #[error("a record after `stop`: expected `stop` to be its run's last line, or a new `start`")]
    AfterStop,
    /// `stop` lacks its counts, or they disagree with the lines before it.
    #[error(
        "the `stop` record's counts are {found:?}: expected {expected:?}, the tally of the lines before it"
    )]
    StopCounts {
        /// The tally of the lines before `stop`.
        expected: Box<Counts>,
        /// The counts `stop` carries (`None` when absent).
        found: Option<Box<Counts>>,
    },
    /// The log begins with a later segment of a run, or a run appended to a log, whose
    /// earlier part is in no file given.
    #[error(
        "this file begins {what}, but no file given ends where it begins: {missing} is missing (deleted, or not given; pass every segment, or the directory)"
    )]
    MissingBefore {
        /// What the file begins with (`segment 3 of run R`, `run R, appended to a log`).
        what: String,
        /// What is missing (`segment 2 of run R`, `the log it was appended to`).
        missing: String,
    },
    /// A file's first line continues a run with the wrong segment number.
    #[error(
        "this file is segment {found} of run {run_id:?}: expected segment {expected}, so a segment is missing or out of order"
    )]
    SegmentOrder {
        /// The run.
        run_id: String,
        /// The number the chain expects here.
        expected: u64,
        /// The number the line carries.
        found: u64,
    },
    /// A segment marker anywhere but on a file's first line, or a run continued across
    /// files without one.
    #[error(
        "a segment boundary that is not one: the `segment` field belongs only on the first line of a file continuing a run"
    )]
    SegmentMarker,
}
