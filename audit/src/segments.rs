//! The log's files on disk: opening a log to append to it (never truncating one), and
//! rotating the file being written into a numbered segment.
//!
//! A log at `PATH` is written at `PATH`; when it rotates, `PATH` is renamed to `PATH.N`
//! (`N` one more than the highest segment number beside it, so numbers only grow) and a new
//! `PATH` begins, its first line chaining to the renamed file's last. What it must never
//! do: overwrite or truncate a file, or rotate between the bytes of one line.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::files::{last_line, tail_bytes, torn_tail};
use super::{AuditError, Line, line_hash};

/// When the file being written is rotated into a segment: after it holds `max_bytes`, or
/// has been written for `max_age` (checked as each line is written). The default never
/// rotates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate once the file holds at least this many bytes.
    pub max_bytes: Option<u64>,
    /// Rotate once the file has been written for this long.
    pub max_age: Option<Duration>,
}

/// The smallest `max_bytes` accepted: a segment holds at least a few lines.
pub const MIN_SEGMENT_BYTES: u64 = 4096;

/// The file the writer thread is writing, and when it is due to rotate.
pub(crate) struct Segment {
    pub(crate) path: PathBuf,
    pub(crate) rotation: Rotation,
    /// Bytes in the file (appended-to logs count what was there).
    pub(crate) bytes: u64,
    pub(crate) since: Instant,
    /// The run's segment number for this file, from 1.
    pub(crate) number: u64,
}

impl Segment {
    /// Whether the next line goes into a new segment.
    pub(crate) fn due(&self) -> bool {
        // Never an empty segment: a tiny age must not rotate line after line into nothing.
        self.bytes > 0
            && (self.rotation.max_bytes.is_some_and(|max| self.bytes >= max)
                || self
                    .rotation
                    .max_age
                    .is_some_and(|age| self.since.elapsed() >= age))
    }
}

/// A log file opened for appending.
pub(crate) struct Opened {
    pub(crate) file: File,
    /// Bytes already in it.
    pub(crate) len: u64,
    /// SHA-256 of its last line, when it holds one: the new run's `follows`.
    pub(crate) last: Option<String>,
    /// The length of a last line cut short, when there was one: the new run's `torn`.
    pub(crate) torn: Option<u64>,
}

/// Opens (or creates, mode 0600) the log at `path` for appending. A regular file that is
/// not empty must end with a whole audit record, or with a record cut short after one (a
/// run killed in the middle of a write): the cut line is ended with a newline, kept, and
/// named by the next run's `start` (`torn`), never dropped. Anything else is refused and
/// left as it is. Devices and pipes are written as they are.
pub(crate) fn open(path: &Path) -> Result<Opened, AuditError> {
    let open_error = |source| AuditError::Open {
        path: path.to_owned(),
        source,
    };
    let mut file = open_options().open(path).map_err(open_error)?;
    let meta = file.metadata().map_err(open_error)?;
    if !meta.is_file() || meta.len() == 0 {
        let mut last = None;
        if meta.is_file() {
            set_private(&file).map_err(open_error)?;
            // The active file is gone but its segments are not (a crash between rotation's
            // rename and create, or the file removed by hand): the new run follows the
            // last segment, so the log stays one chain and nothing before it can vanish.
            last = last_segment_line(path);
        }
        return Ok(Opened {
            file,
            len: 0,
            last,
            torn: None,
        });
    }
    let refuse = |why: &str| AuditError::NotAppendable {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    // A record whose write stopped just before its newline is whole: it gets its newline
    // and is followed like any last line (were it named cut, the chain would run through
    // it and the `start` naming it cut would break).
    let mut unterminated = false;
    let cut_short = || {
        refuse(
            "its last line is cut short (no newline) and longer than any audit record, or no line before it is whole",
        )
    };
    let (last, torn) = match last_line(&mut file).map_err(open_error)? {
        Some(last) => (Some(last), None),
        None => {
            let torn = torn_tail(&mut file)
                .map_err(open_error)?
                .ok_or_else(cut_short)?;
            let cut = tail_bytes(&mut file, torn.len).map_err(open_error)?;
            if serde_json::from_slice::<Line>(&cut).is_ok() {
                unterminated = true;
                (Some(cut), None)
            } else if torn.before.is_some() {
                // A cut line is appended after only when a whole record precedes it: a
                // short file without a newline may be anything, and is left alone.
                (torn.before, Some(torn.len))
            } else {
                return Err(cut_short());
            }
        }
    };
    if let Some(last) = &last
        && serde_json::from_slice::<Line>(last).is_err()
    {
        return Err(refuse("its last whole line is not a sluice audit record"));
    }
    set_private(&file).map_err(open_error)?;
    let mut len = meta.len();
    if torn.is_some() || unterminated {
        // The cut line becomes a line of its own: the next run's `start` starts on the next.
        file.write_all(b"\n")
            .and_then(|()| file.sync_data())
            .map_err(open_error)?;
        len += 1;
    }
    Ok(Opened {
        file,
        len,
        last: last.as_deref().map(line_hash),
        torn,
    })
}

/// Renames the log at `path` to its next numbered segment and creates a new, empty log at
/// `path` (which must not exist by then: nothing is overwritten).
///
/// A rotation that failed part way is finished by calling this again, never done twice:
/// after its rename (the disk had no room, or no inode, for the new file) there is nothing
/// at `path`, and only the new file is made; after a hard link standing in for the rename
/// (the unlink failed) the log and its segment are one file, and only the log's name goes;
/// after the new file (its directory's sync failed) that file, still empty and private, is
/// the new log.
pub(crate) fn rotate(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut options = open_options();
    // Never through a link planted at `path`.
    options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => {}
        Ok(meta) => {
            let highest = segments_beside(path)?
                .into_iter()
                .max_by_key(|segment| segment.number);
            let linked = highest
                .and_then(|segment| std::fs::symlink_metadata(&segment.path).ok())
                .is_some_and(|s| s.dev() == meta.dev() && s.ino() == meta.ino());
            if linked {
                std::fs::remove_file(path)?;
            } else {
                let next = next_number(path)?;
                let mut segment = path.as_os_str().to_owned();
                segment.push(format!(".{next}"));
                rename_new(path, &PathBuf::from(segment))?;
            }
            options.create_new(true);
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            options.create_new(true);
        }
        Err(err) => return Err(err),
    }
    let file = options.open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() || opened.len() != 0 {
        return Err(io::Error::other(format!(
            "{}: not an empty file where the next segment begins",
            path.display()
        )));
    }
    set_private(&file)?;
    // The new name must be on disk before lines are written after it.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    Ok(file)
}

/// One more than the highest `N` of the `PATH.N` entries beside `path` (1 when none).
fn next_number(path: &Path) -> io::Result<u64> {
    segments_beside(path)?
        .iter()
        .map(|segment| segment.number)
        .max()
        .map_or(Some(1), |n| n.checked_add(1))
        .ok_or_else(|| io::Error::other("no segment number is left after the highest"))
}

/// An entry `PATH.N` beside the log at `PATH`, `N` in digits only.
struct Beside {
    number: u64,
    path: PathBuf,
    /// Whether it is a regular file (not a directory, a pipe or a link).
    regular: bool,
}

/// Every `PATH.N` entry beside `path`.
fn segments_beside(path: &Path) -> io::Result<Vec<Beside>> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Err(io::Error::other("the audit log path has no file name"));
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(directory(path))? {
        let entry = entry?;
        let entry_name = entry.file_name();
        let Some(number) = entry_name
            .to_string_lossy()
            .strip_prefix(name.as_str())
            .and_then(super::files::segment_number)
        else {
            continue;
        };
        found.push(Beside {
            number,
            path: entry.path(),
            regular: entry.file_type().is_ok_and(|t| t.is_file()),
        });
    }
    Ok(found)
}

/// SHA-256 of the last line of the highest-numbered segment file beside `path`, when it
/// ends with a whole audit record. A directory that cannot be listed, or a segment that
/// cannot be read, gives none: the new run then starts a log of its own.
fn last_segment_line(path: &Path) -> Option<String> {
    let highest = segments_beside(path)
        .ok()?
        .into_iter()
        .filter(|segment| segment.regular)
        .max_by_key(|segment| segment.number)?;
    let mut file = File::open(highest.path).ok()?;
    last_line(&mut file)
        .ok()
        .flatten()
        .filter(|line| serde_json::from_slice::<Line>(line).is_ok())
        .map(|line| line_hash(&line))
}

fn directory(path: &Path) -> PathBuf {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.to_owned(),
        None => PathBuf::from("."),
    }
}

/// Renames `from` to `to` only if `to` does not exist, in one step: a file that appears
/// at `to` meanwhile is never overwritten.
fn rename_new(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // A kernel or filesystem without the flag.
        Err(Errno::NOSYS | Errno::INVAL) => link_then_unlink(from, to),
        Err(err) => Err(err.into()),
    }
}

/// [`rename_new`] without `RENAME_NOREPLACE`: a hard link refuses an existing name too.
/// Where there are no hard links either (vfat, some FUSE mounts), a check and a rename,
/// as a last resort.
fn link_then_unlink(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => std::fs::remove_file(from),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        Err(_) if to.exists() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("segment {} already exists", to.display()),
        )),
        Err(_) => std::fs::rename(from, to),
    }
}

fn open_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// A log is the run's record: only its owner reads it.
fn set_private(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::{AuditLog, Break, ChainError, Event, EventKind, StartInfo, verify, verify_logs};

    fn start() -> StartInfo {
        StartInfo::new("ab".repeat(32), "cd".repeat(32))
    }

    /// Rotation into the smallest segments there are: a few lines each.
    pub(crate) const SMALL_SEGMENTS: Rotation = Rotation {
        max_bytes: Some(MIN_SEGMENT_BYTES),
        max_age: None,
    };

    /// A run of `events` swaps written to `path`, closed with `stop`.
    pub(crate) fn run(path: &Path, run_id: &str, events: usize, rotation: Rotation) {
        let log = AuditLog::open_with(path, run_id, start(), None, rotation).unwrap();
        for i in 0..events {
            log.record(
                Event::new(EventKind::Swap)
                    .secret("github_token")
                    .host("api.github.com")
                    .path(format!("/repos/acme/app/issues/{i}")),
            )
            .unwrap();
        }
        log.close().unwrap();
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    }

    fn broken(result: Result<crate::Verified, ChainError>) -> (u64, Break) {
        match result {
            Err(ChainError::Broken { line, why, .. }) => (line, why),
            other => panic!("expected a break, got {other:?}"),
        }
    }

    #[test]
    fn a_second_run_appends_its_chain_after_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        run(&path, "run-a", 2, Rotation::default());
        run(&path, "run-b", 3, Rotation::default());
        let logs = verify_logs(std::slice::from_ref(&path)).unwrap();
        assert_eq!(logs.len(), 1);
        let log = &logs[0];
        assert!(log.broken.is_none(), "{:?}", log.broken);
        let runs: Vec<(&str, u64, bool)> = log
            .runs
            .iter()
            .map(|r| (r.run_id.as_str(), r.lines, r.complete))
            .collect();
        assert_eq!(runs, [("run-a", 4, true), ("run-b", 5, true)]);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let follows: serde_json::Value = serde_json::from_str(lines[4]).unwrap();
        assert_eq!(follows["follows"], line_hash(lines[3].as_bytes()));

        // A run dropped from the top: the file begins with a run appended to nothing here.
        let cut = dir.path().join("cut.jsonl");
        std::fs::write(&cut, lines[4..].join("\n") + "\n").unwrap();
        assert!(matches!(
            broken(verify(&cut)),
            (1, Break::MissingBefore { .. })
        ));
        // The first run's stop dropped: the second start no longer follows the line before.
        let mut dropped = lines.clone();
        dropped.remove(3);
        std::fs::write(&cut, dropped.join("\n") + "\n").unwrap();
        assert_eq!(broken(verify(&cut)), (4, Break::Follows));
    }

    #[test]
    fn a_run_that_died_is_followed_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        {
            let log = AuditLog::open(&path, "run-a", start()).unwrap();
            log.record(Event::new(EventKind::Deny).host("evil.example"))
                .unwrap();
            drop(log); // no stop: the run died
        }
        run(&path, "run-b", 1, Rotation::default());
        let logs = verify_logs(&[path]).unwrap();
        assert!(logs[0].broken.is_none());
        assert_eq!(
            logs[0].runs.iter().map(|r| r.complete).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn rotation_spreads_one_chain_over_numbered_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotation = SMALL_SEGMENTS;
        run(&path, "run-a", 120, rotation);
        let segments = files(dir.path());
        assert!(segments.len() >= 4, "{segments:?}");
        assert!(segments.contains(&dir.path().join("audit.jsonl.1")));
        for file in &segments {
            let len = std::fs::metadata(file).unwrap().len();
            assert!(
                len < MIN_SEGMENT_BYTES + 512,
                "{} is {len} bytes",
                file.display()
            );
        }
        // The directory, or the files in any order: one log, one run, every event once.
        let mut shuffled = segments.clone();
        shuffled.reverse();
        for given in [vec![dir.path().to_owned()], shuffled] {
            let logs = verify_logs(&given).unwrap();
            assert_eq!(logs.len(), 1, "{logs:?}");
            assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
            let run = &logs[0].runs[0];
            assert_eq!((run.lines, run.counts.swap), (122, 120));
            assert_eq!(run.segments, segments.len() as u64);
            assert!(run.complete);
        }
        // A later segment alone says what is missing.
        assert!(matches!(
            broken(verify(&path)),
            (1, Break::MissingBefore { .. })
        ));
        // A deleted middle segment is named.
        std::fs::remove_file(dir.path().join("audit.jsonl.2")).unwrap();
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        let why = logs
            .iter()
            .find_map(|log| log.broken.as_ref())
            .expect("a break")
            .to_string();
        assert!(
            why.contains("segment 2 of run \"run-a\" is missing"),
            "{why}"
        );
    }

    #[test]
    fn a_run_appended_to_a_full_log_starts_a_segment_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        run(&path, "run-a", 60, Rotation::default());
        let rotation = SMALL_SEGMENTS;
        run(&path, "run-b", 1, rotation);
        assert_eq!(
            files(dir.path()),
            [path.clone(), dir.path().join("audit.jsonl.1")]
        );
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(
            first
                .lines()
                .next()
                .unwrap()
                .contains("\"run_id\":\"run-b\"")
        );
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
        assert_eq!(logs[0].runs.len(), 2);
    }

    #[test]
    fn a_crash_between_rename_and_create_leaves_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotation = SMALL_SEGMENTS;
        run(&path, "run-a", 60, rotation);
        // The writer renamed the active file and died before creating the next one.
        let n = next_number(&path).unwrap();
        std::fs::rename(&path, dir.path().join(format!("audit.jsonl.{n}"))).unwrap();
        run(&path, "run-b", 2, rotation);
        let first: Line = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert!(
            first.follows.is_some(),
            "the new run follows the last segment"
        );
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
        let runs: Vec<&str> = logs[0].runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(runs, ["run-a", "run-b"]);
        // So the earlier run cannot vanish unnoticed: its last segment deleted is named.
        std::fs::remove_file(dir.path().join(format!("audit.jsonl.{n}"))).unwrap();
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        assert!(logs.iter().any(|log| log.broken.is_some()), "{logs:?}");
    }

    #[test]
    fn rotation_never_renames_over_an_existing_file() {
        // With RENAME_NOREPLACE, and with the hard link that stands in for it.
        for rename in [rename_new, link_then_unlink] {
            let dir = tempfile::tempdir().unwrap();
            let (from, to) = (dir.path().join("a"), dir.path().join("b"));
            std::fs::write(&from, "new\n").unwrap();
            std::fs::write(&to, "kept\n").unwrap();
            let err = rename(&from, &to).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
            assert_eq!(std::fs::read_to_string(&to).unwrap(), "kept\n");
            assert_eq!(std::fs::read_to_string(&from).unwrap(), "new\n");
            std::fs::remove_file(&to).unwrap();
            rename(&from, &to).unwrap();
            assert!(!from.exists());
            assert_eq!(std::fs::read_to_string(&to).unwrap(), "new\n");
        }
    }

    #[test]
    fn a_rotation_that_failed_part_way_is_finished_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "line 1\n").unwrap();
        rotate(&path).unwrap();
        // Failed after its rename: nothing at `path`, so the retry only makes the new file.
        std::fs::write(&path, "line 2\n").unwrap();
        std::fs::rename(&path, dir.path().join("audit.jsonl.2")).unwrap();
        rotate(&path).unwrap();
        // Failed after the new file (its directory's sync): the empty file is the new log,
        // never renamed into an empty segment.
        rotate(&path).unwrap();
        // Failed between the hard link standing in for the rename and the unlink: the log
        // and segment 3 are one file, and only the log's name goes.
        std::fs::write(&path, "line 3\n").unwrap();
        std::fs::hard_link(&path, dir.path().join("audit.jsonl.3")).unwrap();
        rotate(&path).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "audit.jsonl",
                "audit.jsonl.1",
                "audit.jsonl.2",
                "audit.jsonl.3"
            ]
        );
        let third = dir.path().join("audit.jsonl.3");
        assert_eq!(std::fs::read_to_string(third).unwrap(), "line 3\n");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        let second = dir.path().join("audit.jsonl.2");
        assert_eq!(std::fs::read_to_string(second).unwrap(), "line 2\n");
    }

    #[test]
    fn only_digit_named_regular_files_are_segments_to_follow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        run(&path, "run-a", 1, Rotation::default());
        std::fs::rename(&path, dir.path().join("audit.jsonl.1")).unwrap();
        // Look-alikes that are no segment: a sign, a leading zero read as another number,
        // a directory, a pipe; none may stop the next run from starting, or be followed.
        std::fs::write(dir.path().join("audit.jsonl.+9"), "x\n").unwrap();
        std::fs::create_dir(dir.path().join("audit.jsonl.7")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(dir.path().join("audit.jsonl.5"))
            .status()
            .unwrap();
        assert!(fifo.success());
        assert_eq!(next_number(&path).unwrap(), 8);
        run(&path, "run-b", 1, Rotation::default());
        let logs = verify_logs(&[path.clone(), dir.path().join("audit.jsonl.1")]).unwrap();
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
        assert_eq!(logs[0].runs.len(), 2);
    }

    #[test]
    fn age_rotates_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotation = Rotation {
            max_bytes: None,
            max_age: Some(Duration::from_millis(20)),
        };
        let log = AuditLog::open_with(&path, "run-a", start(), None, rotation).unwrap();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(40));
            log.record(Event::new(EventKind::Deny).host("evil.example"))
                .unwrap();
        }
        log.close().unwrap();
        // At least one rotation (how many depends on when the writer thread ran).
        let written = files(dir.path());
        assert!(written.len() >= 2, "{written:?}");
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
        assert_eq!(logs[0].runs[0].segments, written.len() as u64);
        assert_eq!(logs[0].runs[0].counts.deny, 3);
    }
}

#[cfg(test)]
mod tiny_age {
    use std::time::Duration;

    use crate::{AuditLog, Event, EventKind, Rotation, StartInfo, verify_logs};

    #[test]
    fn an_age_of_zero_never_leaves_an_empty_segment_or_a_marked_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let start = StartInfo {
            policy_sha256: "ab".repeat(32),
            ca_sha256: "cd".repeat(32),
            withheld: Vec::new(),
            placeholders: Default::default(),
            settings: Default::default(),
            grants: Default::default(),
        };
        let rotation = Rotation {
            max_bytes: None,
            max_age: Some(Duration::ZERO),
        };
        let log = AuditLog::open_with(&path, "run-z", start, None, rotation).unwrap();
        for _ in 0..3 {
            log.record(Event::new(EventKind::Deny).host("evil.example"))
                .unwrap();
        }
        log.close().unwrap();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let file = entry.unwrap().path();
            assert!(
                std::fs::metadata(&file).unwrap().len() > 0,
                "{} is empty",
                file.display()
            );
        }
        let logs = verify_logs(&[dir.path().to_owned()]).unwrap();
        assert_eq!(logs.len(), 1);
        assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
        assert_eq!(logs[0].runs[0].counts.deny, 3);
    }
}
