//! Verification of a log's hash chain, line by line, stopping at the first break.
//!
//! It reads the log and never writes it; it trusts nothing in it until the line's
//! place in the chain has been checked.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::{Counts, EventKind, Line, genesis, is_sha256_hex, line_hash};

/// A log whose chain holds, from `start` to its last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many lines (events, `start` and `stop` included).
    pub lines: u64,
    /// The run named by `start`.
    pub run_id: String,
    /// SHA-256 of the last line: compare it with a copy kept elsewhere to detect a log
    /// rewritten from some line onward, or cut before `stop`.
    pub head: String,
    /// Whether the log ends with `stop`. A log without it is intact as far as it goes, but
    /// the run is still going, ended abruptly, or the log's tail was cut.
    pub complete: bool,
    /// Per-kind tallies of the events between `start` and the end.
    pub counts: Counts,
}

/// Why a log does not verify.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The file could not be opened or read.
    #[error("cannot read audit log {}: {source}", path.display())]
    Read {
        /// The path given.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// The first line (1-based) where the chain breaks, and why.
    #[error("line {line}: {why}")]
    Broken {
        /// 1-based line number.
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
    /// Line 1 is not `start`.
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
    /// Line 1's `prev` is not the genesis value of its run.
    #[error(
        "prev is not the genesis value of run {run_id:?}: line 1 was edited or belongs to another log"
    )]
    Genesis {
        /// The run id line 1 names.
        run_id: String,
    },
    /// The line names another run than line 1.
    #[error(
        "run_id is {found:?}: expected {expected:?}, the run named by `start` (a line from another log?)"
    )]
    RunId {
        /// The run named by line 1.
        expected: String,
        /// The run named here.
        found: String,
    },
    /// `seq` is not the line number: a line was dropped, inserted or moved.
    #[error(
        "seq is {found}: expected {expected}, so a line was dropped, inserted or moved at or before this one"
    )]
    Seq {
        /// The line's number, which its `seq` must equal.
        expected: u64,
        /// The `seq` found.
        found: u64,
    },
    /// `prev` is not the SHA-256 of the line before.
    #[error(
        "prev does not match the SHA-256 of line {previous}: that line was edited, or a line was dropped, inserted or moved here"
    )]
    Prev {
        /// The number of the line before.
        previous: u64,
    },
    /// A second `start`.
    #[error("a second `start` record: expected exactly one, on line 1")]
    UnexpectedStart,
    /// A line after `stop`.
    #[error("a record after `stop`: expected `stop` to be the last line")]
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
}

/// Checks the log's hash chain from `start` to its last line: each line one JSON record
/// of the schema, `seq` equal to its line number, one `run_id` throughout, line 1 a
/// `start` whose `prev` is the run's genesis value, every other `prev` the SHA-256 of the
/// line before, nothing after `stop`, and `stop`'s counts equal to the tally.
///
/// # Errors
///
/// [`ChainError::Broken`] naming the first line that breaks the chain, and why;
/// [`ChainError::Read`] when the file cannot be read.
pub fn verify(path: &Path) -> Result<Verified, ChainError> {
    scan(path, |_| {})
}

/// [`verify`], handing every line to `visit` once its place in the chain is checked.
pub(crate) fn scan(path: &Path, mut visit: impl FnMut(&Line)) -> Result<Verified, ChainError> {
    let read_error = |source| ChainError::Read {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(read_error)?);
    let mut buf = Vec::new();
    let mut chain: Option<Chain> = None;
    let mut number: u64 = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(read_error)? == 0 {
            break;
        }
        number += 1;
        let broken = |why| ChainError::Broken { line: number, why };
        let Some(bytes) = buf.strip_suffix(b"\n") else {
            return Err(broken(Break::NotTerminated));
        };
        if bytes.is_empty() {
            return Err(broken(Break::Malformed("an empty line".to_owned())));
        }
        let line: Line = serde_json::from_slice(bytes)
            .map_err(|err| broken(Break::Malformed(err.to_string())))?;
        match chain.as_mut() {
            None => chain = Some(Chain::first(&line).map_err(broken)?),
            Some(chain) => chain.next(number, &line).map_err(broken)?,
        }
        if let Some(chain) = chain.as_mut() {
            chain.prev = line_hash(bytes);
        }
        visit(&line);
    }
    match chain {
        None => Err(ChainError::Broken {
            line: 1,
            why: Break::Empty,
        }),
        Some(chain) => Ok(Verified {
            lines: number,
            run_id: chain.run_id,
            head: chain.prev,
            complete: chain.stopped,
            counts: chain.counts,
        }),
    }
}

/// What the lines read so far commit the next one to.
struct Chain {
    run_id: String,
    prev: String,
    counts: Counts,
    stopped: bool,
}

impl Chain {
    fn first(line: &Line) -> Result<Chain, Break> {
        if line.event != EventKind::Start {
            return Err(Break::MissingStart { found: line.event });
        }
        if line.seq != 1 {
            return Err(Break::Seq {
                expected: 1,
                found: line.seq,
            });
        }
        if line.prev != genesis(&line.run_id) {
            return Err(Break::Genesis {
                run_id: line.run_id.clone(),
            });
        }
        if line.version.is_none() {
            return Err(Break::StartFields { field: "version" });
        }
        for (field, value) in [
            ("policy_sha256", &line.policy_sha256),
            ("ca_sha256", &line.ca_sha256),
        ] {
            if !value.as_deref().is_some_and(is_sha256_hex) {
                return Err(Break::StartFields { field });
            }
        }
        Ok(Chain {
            run_id: line.run_id.clone(),
            prev: String::new(),
            counts: Counts::default(),
            stopped: false,
        })
    }

    fn next(&mut self, number: u64, line: &Line) -> Result<(), Break> {
        if self.stopped {
            return Err(Break::AfterStop);
        }
        if line.run_id != self.run_id {
            return Err(Break::RunId {
                expected: self.run_id.clone(),
                found: line.run_id.clone(),
            });
        }
        if line.seq != number {
            return Err(Break::Seq {
                expected: number,
                found: line.seq,
            });
        }
        if line.prev != self.prev {
            return Err(Break::Prev {
                previous: number - 1,
            });
        }
        match line.event {
            EventKind::Start => return Err(Break::UnexpectedStart),
            EventKind::Stop => {
                if line.counts != Some(self.counts) {
                    return Err(Break::StopCounts {
                        expected: Box::new(self.counts),
                        found: line.counts.map(Box::new),
                    });
                }
                self.stopped = true;
            }
            kind => self.counts.add(kind),
        }
        Ok(())
    }
}
