//! Files the command writes for a run (the CA bundle, the proxy URL, a secret handed to CMD
//! through the `file` sink): each created with its mode from the start, never widened
//! afterwards, so that none is readable more widely even for an instant. A file another
//! program polls for (an admin URL, the proxy URL) is `replace`d: whoever finds it finds
//! it whole.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path` (which must not exist: an existing file or a planted link is an error,
/// never followed) with `mode`, writes `contents` and syncs it.
pub(crate) fn write_new(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Writes `path` afresh as `write_new` does, but beside it first (`.NAME.next`) and then
/// renamed into place, so that a reader waiting for `path` never opens it empty or half
/// written. An earlier file at `path` (or a link planted there) is replaced, not followed.
pub(crate) fn replace(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{}: not a file name", path.display())))?;
    let mut next = std::ffi::OsString::from(".");
    next.push(name);
    next.push(".next");
    let next = path.with_file_name(next);
    let _ = std::fs::remove_file(&next);
    write_new(&next, contents, mode)?;
    std::fs::rename(&next, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_replaced_file_is_whole_with_its_mode_and_nothing_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin-url");
        std::fs::write(&path, "the previous run's\n").unwrap();
        replace(&path, b"http://sluice:t@127.0.0.1:1\n", 0o600).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "http://sluice:t@127.0.0.1:1\n"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_link_planted_at_the_path_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "untouched").unwrap();
        let path = dir.path().join("proxy-url");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        replace(&path, b"http://127.0.0.1:1\n", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }
}
