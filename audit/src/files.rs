//! Which files make up which log: paths expanded (a directory gives its `*.jsonl` and
//! `*.jsonl.N` files), then put in chain order by what their lines say: a file whose first
//! line continues a run (`segment`) or appends a run (`follows`) comes after the file whose
//! last line it names.
//!
//! It never trusts a file's name for its place: names only break ties when nothing else
//! can (which then fails verification, naming the file).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::verify::{Break, ChainError};
use super::{Line, line_hash};

/// The files of one log, first to last.
#[derive(Debug)]
pub(crate) struct Chained {
    pub(crate) files: Vec<PathBuf>,
    /// Why this file cannot take a place in any log: it repeats another file's first line
    /// (a copy), or continues a line another file already continues (a fork). Such a log
    /// is that one file, broken at its first line, and none of its lines count.
    pub(crate) conflict: Option<Break>,
}

/// Longest first or last line read to order files; longer lines (no sluice record is)
/// leave the file unordered, and verification then names it.
pub(crate) const MAX_LINE: u64 = 1 << 20;

/// Expands `paths` and groups the files into logs, each in chain order; logs keep the
/// order in which their first files were given.
pub(crate) fn chain(paths: &[PathBuf]) -> Result<Vec<Chained>, ChainError> {
    let files = expand(paths)?;
    let mut ends = Vec::with_capacity(files.len());
    for path in &files {
        ends.push(Ends::read(path).map_err(|source| ChainError::Read {
            path: path.clone(),
            source,
        })?);
    }
    // Each file's last line → the file; the first file to claim a hash keeps it.
    let mut by_last: HashMap<&str, usize> = HashMap::new();
    for (i, end) in ends.iter().enumerate() {
        if let Some(last) = &end.last {
            by_last.entry(last.as_str()).or_insert(i);
        }
    }
    // No two records are alike (each names its run and its place in it), so two files
    // opening with one line are a copy, whatever their names: counted once, never twice.
    let mut by_first: HashMap<&str, usize> = HashMap::new();
    let mut conflict: Vec<Option<Break>> = vec![None; files.len()];
    for (i, end) in ends.iter().enumerate() {
        let Some(first) = &end.first else { continue };
        match by_first.entry(first.as_str()) {
            Entry::Occupied(original) => {
                conflict[i] = Some(Break::Copy {
                    of: files[*original.get()].clone(),
                });
            }
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }
    let mut next: Vec<Option<usize>> = vec![None; files.len()];
    let mut has_previous = vec![false; files.len()];
    for (i, end) in ends.iter().enumerate() {
        if conflict[i].is_some() {
            continue;
        }
        let Some(link) = &end.link else { continue };
        let Some(&before) = by_last.get(link.as_str()) else {
            continue;
        };
        match next[before] {
            _ if before == i => {}
            None => {
                next[before] = Some(i);
                has_previous[i] = true;
            }
            // Only one file can come after another: the second to claim it is a fork.
            Some(taken) => {
                conflict[i] = Some(Break::Fork {
                    other: files[taken].clone(),
                });
            }
        }
    }
    let mut placed = vec![false; files.len()];
    let mut logs = Vec::new();
    for root in 0..files.len() {
        if let Some(why) = conflict[root].take() {
            placed[root] = true;
            logs.push(Chained {
                files: vec![files[root].clone()],
                conflict: Some(why),
            });
            continue;
        }
        if has_previous[root] {
            continue;
        }
        let mut log = Vec::new();
        let mut at = Some(root);
        while let Some(i) = at.filter(|&i| !placed[i]) {
            placed[i] = true;
            log.push(files[i].clone());
            at = next[i];
        }
        logs.push(Chained {
            files: log,
            conflict: None,
        });
    }
    // Files in a cycle (only a forged log could link so), and those that came after a copy
    // or a fork, are logs of their own, which then fail at line 1.
    for (i, file) in files.iter().enumerate() {
        if !placed[i] {
            logs.push(Chained {
                files: vec![file.clone()],
                conflict: None,
            });
        }
    }
    Ok(logs)
}

/// Files given, and each directory's log files sorted by name; each file once.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ChainError> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for path in paths {
        let read_error = |source| ChainError::Read {
            path: path.clone(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_error)?;
        let found = if meta.is_dir() {
            let mut found = Vec::new();
            for entry in std::fs::read_dir(path).map_err(read_error)? {
                let entry = entry.map_err(read_error)?;
                let name = entry.file_name();
                if is_log_name(&name.to_string_lossy())
                    && entry.file_type().map_err(read_error)?.is_file()
                {
                    found.push(entry.path());
                }
            }
            if found.is_empty() {
                return Err(read_error(io::Error::new(
                    io::ErrorKind::NotFound,
                    "the directory holds no audit log (*.jsonl, *.jsonl.N)",
                )));
            }
            found.sort_by_key(|p| segment_sort_key(p));
            found
        } else {
            vec![path.clone()]
        };
        for file in found {
            // One file under two names (a symlink, a hard link) is read once.
            let key = file_identity(&file).map_err(|source| ChainError::Read {
                path: file.clone(),
                source,
            })?;
            if seen.insert(key) {
                out.push(file);
            }
        }
    }
    Ok(out)
}

/// The device and inode behind `path`: the same for every name of one file.
fn file_identity(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

/// `audit.jsonl`, `audit.jsonl.7`.
fn is_log_name(name: &str) -> bool {
    match name.rsplit_once(".jsonl") {
        Some((stem, "")) => !stem.is_empty(),
        Some((stem, rest)) => !stem.is_empty() && segment_number(rest).is_some(),
        None => false,
    }
}

/// The `N` of a segment's suffix `.N`: digits only (no sign, no space), so that one number
/// is written one way.
pub(crate) fn segment_number(suffix: &str) -> Option<u64> {
    let digits = suffix.strip_prefix('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Rotated segments by number, the active file (no number) last.
fn segment_sort_key(path: &Path) -> (String, u64) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit_once(".jsonl.") {
        Some((stem, n)) => (format!("{stem}.jsonl"), n.parse().unwrap_or(u64::MAX - 1)),
        None => (name, u64::MAX),
    }
}

/// What orders a file: the hash its first line links to, and its first and last lines'
/// hashes.
struct Ends {
    /// A continuation's `prev`, or an appended `start`'s `follows`.
    link: Option<String>,
    first: Option<String>,
    last: Option<String>,
}

impl Ends {
    fn read(path: &Path) -> io::Result<Ends> {
        let mut file = File::open(path)?;
        let mut first = Vec::new();
        BufReader::new(&mut file)
            .take(MAX_LINE)
            .read_until(b'\n', &mut first)?;
        let first = first.strip_suffix(b"\n");
        let link = first
            .and_then(|bytes| serde_json::from_slice::<Line>(bytes).ok())
            .and_then(|line| {
                if line.segment.is_some() {
                    Some(line.prev)
                } else {
                    line.follows
                }
            });
        Ok(Ends {
            link,
            first: first.map(line_hash),
            last: last_line(&mut file)?.map(|line| line_hash(&line)),
        })
    }
}

/// The file's last complete line (without its newline), if it ends with one and the line
/// is at most [`MAX_LINE`] bytes.
pub(crate) fn last_line(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let mut window = 4096u64.min(len);
    loop {
        file.seek(SeekFrom::Start(len - window))?;
        let mut tail = Vec::with_capacity(usize::try_from(window).unwrap_or(0));
        (&mut *file).take(window).read_to_end(&mut tail)?;
        let Some(body) = tail.strip_suffix(b"\n") else {
            return Ok(None);
        };
        if let Some(at) = body.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(body[at + 1..].to_vec()));
        }
        if window == len {
            return Ok(Some(body.to_vec()));
        }
        if window > MAX_LINE {
            return Ok(None);
        }
        window = (window * 4).min(len);
    }
}

/// A log's tail cut short: the cut line's length, and the whole line before it (none when
/// the cut line is the file's only one).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TornTail {
    pub(crate) len: u64,
    pub(crate) before: Option<Vec<u8>>,
}

/// The file's tail when it does not end with a newline (a write cut short): `None` when it
/// does, or when the cut line, or the whole line before it, is longer than [`MAX_LINE`].
pub(crate) fn torn_tail(file: &mut File) -> io::Result<Option<TornTail>> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let window = (2 * MAX_LINE + 2).min(len);
    file.seek(SeekFrom::Start(len - window))?;
    let mut tail = Vec::with_capacity(usize::try_from(window).unwrap_or(0));
    (&mut *file).take(window).read_to_end(&mut tail)?;
    if tail.ends_with(b"\n") {
        return Ok(None);
    }
    let Some(at) = tail.iter().rposition(|&b| b == b'\n') else {
        // The whole file is the cut line, when it is short enough to have been a record.
        return Ok((window == len && len <= MAX_LINE).then_some(TornTail { len, before: None }));
    };
    let cut = (tail.len() - at - 1) as u64;
    let body = &tail[..at];
    let before = match body.iter().rposition(|&b| b == b'\n') {
        Some(start) => body[start + 1..].to_vec(),
        None if window == len => body.to_vec(),
        None => return Ok(None),
    };
    if cut > MAX_LINE || before.len() as u64 > MAX_LINE || before.is_empty() {
        return Ok(None);
    }
    Ok(Some(TornTail {
        len: cut,
        before: Some(before),
    }))
}

/// The file's last `len` bytes (a cut line [`torn_tail`] measured).
pub(crate) fn tail_bytes(file: &mut File, len: u64) -> io::Result<Vec<u8>> {
    file.seek(SeekFrom::End(-i64::try_from(len).unwrap_or(i64::MAX)))?;
    let mut tail = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    (&mut *file).take(len).read_to_end(&mut tail)?;
    Ok(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_cut_short_is_found_with_the_whole_line_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let read = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            torn_tail(&mut File::open(&path).unwrap()).unwrap()
        };
        assert_eq!(read(b"{\"a\":1}\n{\"b\":2}\n"), None);
        assert_eq!(
            read(b"{\"a\":1}\n{\"b\":2}\n{\"c\":"),
            Some(TornTail {
                len: 5,
                before: Some(b"{\"b\":2}".to_vec())
            })
        );
        assert_eq!(
            read(b"{\"a\":1}\n{\"c"),
            Some(TornTail {
                len: 3,
                before: Some(b"{\"a\":1}".to_vec())
            })
        );
        assert_eq!(
            read(b"{\"c"),
            Some(TornTail {
                len: 3,
                before: None
            })
        );
        assert_eq!(read(b""), None);
    }

    #[test]
    fn log_names_are_the_file_and_its_numbered_segments() {
        for name in ["audit.jsonl", "audit.jsonl.1", "a.jsonl.20"] {
            assert!(is_log_name(name), "{name}");
        }
        for name in [
            ".jsonl",
            "audit.jsonl.",
            "audit.jsonl.x",
            "ca.pem",
            "audit.json",
        ] {
            assert!(!is_log_name(name), "{name}");
        }
        let mut names = ["a.jsonl", "a.jsonl.10", "a.jsonl.2", "a.jsonl.1"].map(PathBuf::from);
        names.sort_by_key(|p| segment_sort_key(p));
        assert_eq!(
            names.map(|p| p.display().to_string()),
            ["a.jsonl.1", "a.jsonl.2", "a.jsonl.10", "a.jsonl"]
        );
    }

    #[test]
    fn the_last_line_is_found_whatever_its_length() {
        let dir = tempfile::tempdir().unwrap();
        for (text, want) in [
            ("", None),
            ("no newline", None),
            ("one\n", Some("one".to_owned())),
            ("a\nb\n", Some("b".to_owned())),
            ("cut\nshort", None),
        ] {
            let path = dir.path().join("f");
            std::fs::write(&path, text).unwrap();
            let got = last_line(&mut File::open(&path).unwrap()).unwrap();
            assert_eq!(got.map(|b| String::from_utf8(b).unwrap()), want, "{text:?}");
        }
        let long = "x".repeat(100_000);
        let path = dir.path().join("long");
        std::fs::write(&path, format!("first\n{long}\n")).unwrap();
        let got = last_line(&mut File::open(&path).unwrap()).unwrap().unwrap();
        assert_eq!(got.len(), long.len());
    }

    /// A run of `events` swaps at `path`, rotating every few lines when `rotate`.
    fn write_log(path: &Path, events: usize, rotate: bool) {
        use crate::segments::tests::{SMALL_SEGMENTS, run};
        let rotation = if rotate {
            SMALL_SEGMENTS
        } else {
            crate::Rotation::default()
        };
        run(path, "run-a", events, rotation);
    }

    fn verdicts(paths: &[PathBuf]) -> Vec<(usize, Option<String>)> {
        crate::verify_logs(paths)
            .unwrap()
            .into_iter()
            .map(|log| (log.runs.len(), log.broken.map(|b| b.to_string())))
            .collect()
    }

    #[test]
    fn a_copy_is_named_and_never_counted_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        write_log(&path, 3, false);
        let copy = dir.path().join("copy.jsonl");
        std::fs::copy(&path, &copy).unwrap();
        let got = verdicts(&[path.clone(), copy.clone()]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], (1, None));
        let (runs, why) = &got[1];
        assert_eq!(*runs, 0, "the copy's runs are not counted");
        let why = why.as_deref().unwrap();
        assert!(
            why.contains("copy.jsonl: line 1") && why.contains("a copy"),
            "{why}"
        );

        // One file under two names is one file: read once, and no break.
        let link = dir.path().join("link.jsonl");
        std::fs::hard_link(&path, &link).unwrap();
        let symlink = dir.path().join("symlink.jsonl");
        std::os::unix::fs::symlink(&path, &symlink).unwrap();
        assert_eq!(verdicts(&[path, link, symlink]), [(1, None)]);
    }

    #[test]
    fn two_files_continuing_one_segment_are_a_fork() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        write_log(&path, 60, true);
        let second = dir.path().join("audit.jsonl.2");
        let text = std::fs::read_to_string(&second).unwrap();
        // Its first line edited (so it is no copy), its `prev` kept: a forged second segment.
        let forged = text.replacen("/issues/", "/pulls/", 1);
        assert_ne!(forged, text);
        let fork = dir.path().join("forged.jsonl.2");
        std::fs::write(&fork, forged).unwrap();
        let got = verdicts(&[dir.path().to_owned()]);
        let breaks: Vec<&str> = got.iter().filter_map(|(_, why)| why.as_deref()).collect();
        assert_eq!(breaks.len(), 1, "{got:?}");
        assert!(
            breaks[0].contains("continues the same record as"),
            "{}",
            breaks[0]
        );
    }
}
