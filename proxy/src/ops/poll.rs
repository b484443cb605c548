//! The declaration file and every `file` source, watched: a change reloads, as `SIGHUP`
//! does, so that a rotated Kubernetes Secret mount (its `..data` symlink swapped) is
//! picked up without a signal.
//!
//! Polling, once a second, of each file's metadata (followed through symlinks): no
//! inotify descriptors to run out of, the same on every filesystem (overlay, NFS, the
//! kubelet's atomic writer). It owns when to reload, never what a reload does
//! ([`Control::reload`]), and it never reads a secret's contents.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_policies::Source;
use tokio::sync::watch;

use crate::generation::shared::until_stopped;
use crate::ops::control::Control;

/// How often the files are looked at: a change is in force within this and a reload.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// What is compared between two looks at one file: enough to see a rewrite, a
/// replacement and a symlink swapped to another file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
    changed: i64,
}

/// Each watched path and what it was; `None` for a path that could not be read.
type Snapshot = Vec<(PathBuf, Option<Seen>)>;

fn look(paths: Vec<PathBuf>) -> Snapshot {
    use std::os::unix::fs::MetadataExt;
    paths
        .into_iter()
        .map(|path| {
            let seen = std::fs::metadata(&path).ok().map(|meta| Seen {
                len: meta.len(),
                modified: meta.modified().ok(),
                inode: meta.ino(),
                changed: meta.ctime(),
            });
            (path, seen)
        })
        .collect()
}

/// The declaration's file and every `file` source of the generation in force.
fn watched(declaration: &Path, control: &Control) -> Vec<PathBuf> {
    let declared = control.declared();
    std::iter::once(declaration.to_path_buf())
        .chain(
            declared
                .policy
                .secrets()
                .iter()
                .filter_map(|decl| match decl.source() {
                    Source::File(path) => Some(path.clone()),
                    _ => None,
                }),
        )
        .collect()
}

/// Looks at the files every [`INTERVAL`] until `shutdown`, and reloads when one changed.
pub(crate) async fn serve(
    declaration: PathBuf,
    control: Arc<Control>,
    mut shutdown: watch::Receiver<bool>,
) {
    let snapshot = |control: Arc<Control>, declaration: PathBuf| async move {
        tokio::task::spawn_blocking(move || look(watched(&declaration, &control)))
            .await
            .unwrap_or_default()
    };
    let mut last = snapshot(control.clone(), declaration.clone()).await;
    loop {
        tokio::select! {
            () = until_stopped(&mut shutdown) => return,
            () = tokio::time::sleep(INTERVAL) => {}
        }
        let now = snapshot(control.clone(), declaration.clone()).await;
        if now == last {
            continue;
        }
        tracing::info!("a watched file changed: reloading");
        // Audited and logged by the reload, whatever its result; a file caught halfway
        // through a write is refused, and its last write is a change again.
        let _ = control.reload().await;
        // The baseline is what was seen before the reload, so that a write landing while
        // it ran is a change at the next look; a file the new generation reads and the
        // last look did not is taken as it is now.
        let after = snapshot(control.clone(), declaration.clone()).await;
        last = after
            .into_iter()
            .map(|(path, seen)| match now.iter().find(|(p, _)| *p == path) {
                Some((_, before)) => (path, before.clone()),
                None => (path, seen),
            })
            .collect();
    }
}
