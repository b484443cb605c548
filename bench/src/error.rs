//! The one error type of the benchmark harness.
//!
//! Every failure names the step and the peer it happened to; none carries the benchmark's
//! stand-in secret value.

use std::path::PathBuf;

/// Why a benchmark step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// A file the harness or a peer writes or reads could not be.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A child process (upstream or proxy) could not be started or did not get ready.
    #[error("{peer}: {why}")]
    Peer {
        /// Which peer.
        peer: String,
        /// What went wrong.
        why: String,
    },
    /// Building certificates or TLS configuration failed.
    #[error("tls setup: {0}")]
    Tls(String),
    /// A connection, tunnel, handshake or request failed.
    #[error("{0}")]
    Request(String),
    /// A benchmark declaration did not load (a bug in the harness).
    #[error("bench declaration rejected (a bug in sluice-bench): {0}")]
    Declaration(String),
    /// A result failed its sanity check (a proxy did not swap, redact, or pass through).
    #[error("sanity check failed for {peer}: {why}")]
    Sanity {
        /// Which peer.
        peer: String,
        /// What was seen versus expected.
        why: String,
    },
}

impl BenchError {
    /// A [`BenchError::File`] for `path`.
    pub(crate) fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::File { path, source }
    }

    /// A [`BenchError::Peer`].
    pub(crate) fn peer(peer: &str, why: impl std::fmt::Display) -> Self {
        Self::Peer {
            peer: peer.to_owned(),
            why: why.to_string(),
        }
    }
}
