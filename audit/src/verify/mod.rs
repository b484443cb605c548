//! Verification of the hash chain, line by line, stopping at the first break: within a
//! run (`seq`, `prev`), from one run to the next appended after it in the same file
//! (`follows`), and from one segment of a rotated log to the next (`segment`).
//!
//! It reads logs and never writes them; it trusts nothing in a line until the line's place
//! in the chain has been checked. Which file comes after which is read from the chain
//! itself ([`super::files`]), never from the files' names, so renaming segments can neither
//! hide nor reorder anything.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

mod error;

pub use error::{Break, ChainError};

use super::files::{self, Chained, MAX_LINE};
use super::{Counts, EventKind, Line, genesis, is_sha256_hex, is_valid_run_id, line_hash};

/// One run whose chain holds, from its `start` to its last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many lines the run wrote (events, `start` and `stop` included).
    pub lines: u64,
    /// The run named by `start`.
    pub run_id: String,
    /// SHA-256 of the run's last line: compare it with a copy kept elsewhere to detect a
    /// log rewritten from some line onward, or cut before `stop`.
    pub head: String,
    /// Whether the run ends with `stop`. A run without it is intact as far as it goes, but
    /// it is still going, ended abruptly, or the log's tail (or last segments) is missing.
    pub complete: bool,
    /// The run was killed in the middle of a write: its last line was cut short, and this
    /// many bytes of it are in the log, named by the next run's `start` (`torn`). `head` is
    /// the run's last whole line.
    pub torn: Option<u64>,
    /// Per-kind tallies of the events between `start` and the end.
    pub counts: Counts,
    /// How many segments (files) the run's lines are spread over.
    pub segments: u64,
}

/// One log: a chain of files (a rotated log's segments, in chain order) holding one run
/// or several appended one after another, verified as far as its chain holds.
#[derive(Debug)]
pub struct Log {
    /// The log's files, first to last in chain order.
    pub files: Vec<PathBuf>,
    /// Its runs in order; when the chain breaks, the runs up to the break (the last one
    /// counted up to the line before it).
    pub runs: Vec<Verified>,
    /// Where and how the chain breaks, if it does.
    pub broken: Option<ChainError>,
}

/// Checks one file's chain (see [`verify_logs`] for what is checked) and returns its last
/// run; every earlier run in the file is checked too.
///
/// # Errors
///
/// [`ChainError::Broken`] naming the first line that breaks the chain, and why (a later
/// segment of a rotated log verified alone breaks at line 1: pass every segment to
/// [`verify_logs`]); [`ChainError::Read`] when the file cannot be read.
pub fn verify(path: &Path) -> Result<Verified, ChainError> {
    let logs = verify_logs(&[path.to_owned()])?;
    // Every log counts: a broken one anywhere fails the whole, whichever comes last.
    let mut logs = logs.into_iter();
    let mut last = None;
    for log in logs.by_ref() {
        if let Some(broken) = log.broken {
            return Err(broken);
        }
        last = Some(log);
    }
    let log = last.ok_or_else(|| ChainError::Broken {
        file: path.to_owned(),
        line: 1,
        why: Break::Empty,
    })?;
    if let Some(broken) = log.broken {
        return Err(broken);
    }
    log.runs
        .into_iter()
        .last()
        .ok_or_else(|| ChainError::Broken {
            file: path.to_owned(),
            line: 1,
            why: Break::Empty,
        })
}

/// Checks every log among `paths` (files, or directories whose `*.jsonl` and
/// `*.jsonl.N` files are taken): the files are put in chain order, each chain of files is
/// one log, and each log is checked from its first line to its last: each line one JSON
/// record of the schema; each run opened by a `start` whose `prev` is the run's genesis
/// value (and, after the first, whose `follows` is the SHA-256 of the line before);
/// within a run, `seq` counting from 1, one `run_id`, every `prev` the SHA-256 of the line
/// before (across segment boundaries too), `stop` last with counts equal to the tally.
///
/// # Errors
///
/// [`ChainError::Read`] when a file cannot be read. A broken chain is not an error here:
/// it is the log's [`Log::broken`].
pub fn verify_logs(paths: &[PathBuf]) -> Result<Vec<Log>, ChainError> {
    scan_logs(paths, |_, _| {})
}

/// [`verify_logs`], handing every line to `visit` (with its log's index) once its place
/// in the chain is checked.
pub(crate) fn scan_logs(
    paths: &[PathBuf],
    mut visit: impl FnMut(usize, &Line),
) -> Result<Vec<Log>, ChainError> {
    let chained = files::chain(paths)?;
    let mut logs = Vec::with_capacity(chained.len());
    for (index, Chained { files, conflict }) in chained.into_iter().enumerate() {
        if let Some(why) = conflict {
            logs.push(Log {
                broken: Some(ChainError::Broken {
                    file: files.first().cloned().unwrap_or_default(),
                    line: 1,
                    why,
                }),
                files,
                runs: Vec::new(),
            });
            continue;
        }
        let mut walk = Walk::default();
        let mut broken = None;
        let mut previous: Option<&Path> = None;
        for file in &files {
            if let Err(err) = walk.file(file, previous, |line| visit(index, line)) {
                broken = Some(err);
                break;
            }
            previous = Some(file);
        }
        if broken.is_none() && walk.runs.is_empty() && walk.current.is_none() {
            broken = Some(ChainError::Broken {
                file: files.first().cloned().unwrap_or_default(),
                line: 1,
                why: Break::Empty,
            });
        }
        logs.push(Log {
            files,
            runs: walk.finish(),
            broken,
        });
    }
    Ok(logs)
}

/// The state of one log's walk, carried from line to line and file to file.
#[derive(Default)]
struct Walk {
    runs: Vec<Verified>,
    current: Option<Run>,
    /// SHA-256 of the last line read, in whichever file.
    last: Option<String>,
}

/// What the lines of the run being read commit the next one to.
struct Run {
    run_id: String,
    lines: u64,
    counts: Counts,
    stopped: bool,
    segments: u64,
}

impl Walk {
    /// Reads one file of the log, after the file `previous` in chain order (none for the
    /// log's first).
    fn file(
        &mut self,
        path: &Path,
        previous: Option<&Path>,
        mut visit: impl FnMut(&Line),
    ) -> Result<(), ChainError> {
        let read_error = |source| ChainError::Read {
            path: path.to_owned(),
            source,
        };
        let mut reader = BufReader::new(File::open(path).map_err(read_error)?);
        let mut buf = Vec::new();
        let mut number: u64 = 0;
        // A line that is not a record: the chain breaks there, unless it is a line cut short
        // by a run killed mid-write (kept by the next run, ended with a newline) and the
        // next line is a `start` naming it. Its number, length and why it is not a record.
        let mut cut: Option<(u64, u64, Break)> = None;
        loop {
            buf.clear();
            // Bounded: no audit record comes near it, and a forged line must not eat memory.
            if (&mut reader)
                .take(MAX_LINE + 1)
                .read_until(b'\n', &mut buf)
                .map_err(read_error)?
                == 0
            {
                break;
            }
            number += 1;
            let broken = |why| ChainError::Broken {
                file: path.to_owned(),
                line: number,
                why,
            };
            if buf.len() as u64 > MAX_LINE {
                return Err(broken(Break::Malformed(format!(
                    "a line longer than {MAX_LINE} bytes"
                ))));
            }
            let Some(bytes) = buf.strip_suffix(b"\n") else {
                return Err(broken(Break::NotTerminated));
            };
            if bytes.is_empty() {
                return Err(broken(Break::Malformed("an empty line".to_owned())));
            }
            let line = match (serde_json::from_slice::<Line>(bytes), cut.take()) {
                (Err(err), None) => {
                    let why = Break::Malformed(printable(&err.to_string()));
                    cut = Some((number, bytes.len() as u64, why));
                    continue;
                }
                (Err(_), Some((at, _, why))) => return Err(broken_at(path, at, why)),
                (Ok(line), Some((at, len, why))) => {
                    if line.event != EventKind::Start || line.torn.is_none() {
                        return Err(broken_at(path, at, why));
                    }
                    if line.torn != Some(len) {
                        return Err(broken(Break::Torn));
                    }
                    line
                }
                (Ok(line), None) if line.torn.is_some() => return Err(broken(Break::Torn)),
                (Ok(line), None) => line,
            };
            // A cut line at the top of a file is not a line of the chain: the `start` after
            // it takes its place.
            let at = if line.torn.is_some() {
                number - 1
            } else {
                number
            };
            let place = match (at, previous) {
                (0 | 1, None) => Place::LogStart,
                (0 | 1, Some(_)) => Place::FileStart,
                _ => Place::Within,
            };
            self.line(&line, place)
                .map_err(|why| match (why, previous) {
                    // Named as a reader counts lines: within this file, or the file before.
                    (Break::Prev { .. }, Some(previous)) if number == 1 => Break::PrevFile {
                        previous: previous.to_owned(),
                    },
                    (Break::Prev { .. }, _) => Break::Prev {
                        previous: number - 1,
                    },
                    (why, _) => why,
                })
                .map_err(broken)?;
            self.last = Some(line_hash(bytes));
            visit(&line);
        }
        if let Some((at, _, why)) = cut {
            return Err(broken_at(path, at, why));
        }
        if number == 0 {
            return Err(ChainError::Broken {
                file: path.to_owned(),
                line: 1,
                why: Break::Empty,
            });
        }
        Ok(())
    }

    fn line(&mut self, line: &Line, place: Place) -> Result<(), Break> {
        if line.segment.is_some() && place != Place::FileStart && place != Place::LogStart {
            return Err(Break::SegmentMarker);
        }
        if line.event == EventKind::Start {
            return self.start(line, place);
        }
        if let Some(segment) = line.segment {
            return self.continuation(line, segment, place);
        }
        if place != Place::Within {
            // A file boundary inside a run must be marked as one.
            return match &self.current {
                None => Err(Break::MissingStart { found: line.event }),
                Some(_) => Err(Break::SegmentMarker),
            };
        }
        let Some(run) = self.current.as_mut() else {
            return Err(Break::MissingStart { found: line.event });
        };
        run.next(line, self.last.as_deref())
    }

    /// A `start`: the log's first line, or a run appended after the line before it.
    fn start(&mut self, line: &Line, place: Place) -> Result<(), Break> {
        if line.seq != 1 {
            return Err(Break::Seq {
                expected: 1,
                found: line.seq,
            });
        }
        if line.segment.is_some() {
            return Err(Break::SegmentMarker);
        }
        // The writer's alphabet only: a verified run's id is printed as it is (`audit
        // verify`, the summary), and must not carry a terminal's control sequences.
        if !is_valid_run_id(&line.run_id) {
            return Err(Break::StartFields { field: "run_id" });
        }
        if line.prev != genesis(&line.run_id) {
            return Err(Break::Genesis {
                run_id: line.run_id.clone(),
            });
        }
        match (place, &line.follows, &self.last) {
            (Place::LogStart, None, _) => {}
            (Place::LogStart, Some(_), _) => {
                return Err(Break::MissingBefore {
                    what: format!("run {:?}, appended to an earlier log", line.run_id),
                    missing: "the log it was appended to".to_owned(),
                });
            }
            (_, Some(follows), Some(last)) if follows == last => {}
            _ => return Err(Break::Follows),
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
        let run = Run {
            run_id: line.run_id.clone(),
            lines: 1,
            counts: Counts::default(),
            stopped: false,
            segments: 1,
        };
        if let Some(previous) = self.current.replace(run) {
            let mut previous = previous.verified(self.last.clone().unwrap_or_default());
            previous.torn = line.torn;
            self.runs.push(previous);
        }
        Ok(())
    }

    /// The first line of a file that continues the run before it (`segment: N`).
    fn continuation(&mut self, line: &Line, segment: u64, place: Place) -> Result<(), Break> {
        let Some(run) = self.current.as_mut().filter(|_| place == Place::FileStart) else {
            return Err(Break::MissingBefore {
                what: format!("segment {segment} of run {:?}", line.run_id),
                missing: format!(
                    "segment {} of run {:?}",
                    segment.saturating_sub(1).max(1),
                    line.run_id
                ),
            });
        };
        if line.run_id == run.run_id && segment != run.segments + 1 {
            return Err(Break::SegmentOrder {
                run_id: run.run_id.clone(),
                expected: run.segments + 1,
                found: segment,
            });
        }
        run.next(line, self.last.as_deref())?;
        run.segments = segment;
        Ok(())
    }

    /// The runs read, the last one as far as it went.
    fn finish(mut self) -> Vec<Verified> {
        if let Some(run) = self.current.take() {
            self.runs
                .push(run.verified(self.last.clone().unwrap_or_default()));
        }
        self.runs
    }
}

/// Where a line stands in the log's files.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Line 1 of the log's first file.
    LogStart,
    /// Line 1 of a later file.
    FileStart,
    /// Any other line.
    Within,
}

impl Run {
    /// The next line of this run (not a `start`), whose predecessor hashed to `last`.
    fn next(&mut self, line: &Line, last: Option<&str>) -> Result<(), Break> {
        if self.stopped {
            return Err(Break::AfterStop);
        }
        if line.run_id != self.run_id {
            return Err(Break::RunId {
                expected: self.run_id.clone(),
                found: line.run_id.clone(),
            });
        }
        let expected = self.lines + 1;
        if line.seq != expected {
            return Err(Break::Seq {
                expected,
                found: line.seq,
            });
        }
        if Some(line.prev.as_str()) != last {
            return Err(Break::Prev {
                previous: self.lines,
            });
        }
        match line.event {
            EventKind::Start => return Err(Break::Follows),
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
        self.lines = expected;
        Ok(())
    }

    fn verified(self, head: String) -> Verified {
        Verified {
            lines: self.lines,
            run_id: self.run_id,
            head,
            complete: self.stopped,
            torn: None,
            counts: self.counts,
            segments: self.segments,
        }
    }
}

/// The chain broken at `line` of `path`.
fn broken_at(path: &Path, line: u64, why: Break) -> ChainError {
    ChainError::Broken {
        file: path.to_owned(),
        line,
        why,
    }
}

/// A parser's message about a hostile line, with its control characters escaped: it quotes
/// the line's field names, and it is printed on a terminal.
fn printable(message: &str) -> String {
    message
        .chars()
        .flat_map(char::escape_default)
        .collect::<String>()
}
