//! Files the command writes for a run (the CA bundle, the proxy URL, a secret handed to CMD
//! through the `file` sink): each created with its mode from the start, never widened
//! afterwards, so that none is readable more widely even for an instant.

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
