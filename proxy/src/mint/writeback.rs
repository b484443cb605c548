//! A rotated refresh token written back to the file it was read from, so that the next
//! run starts from a live token: atomically (a temporary file in the same directory,
//! flushed, then renamed over the old one), with the old file's mode kept.
//!
//! A reader never sees a half-written token, and a crash leaves the old file or the new
//! one, never neither.

use std::io::Write;
use std::path::Path;

/// Replaces the contents of `path` with `token` and one newline.
pub(crate) fn replace(path: &Path, token: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mode = std::fs::metadata(path).map(|m| m.permissions());
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    // The temporary file is 0600 from its creation; it takes the old file's mode only
    // once the token is in it, just before it takes the old file's name.
    file.write_all(token)?;
    file.write_all(b"\n")?;
    file.as_file().sync_all()?;
    if let Ok(mode) = mode {
        std::fs::set_permissions(file.path(), mode)?;
    }
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_token_replaces_the_file_whole_and_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refresh");
        std::fs::write(&path, "old-refresh-token-0001\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace(&path, b"new-refresh-token-0002").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "new-refresh-token-0002\n"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
