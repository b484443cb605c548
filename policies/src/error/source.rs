//! Why a secret's real value could not be read at launch: the errors of secret sources,
//! each naming the secret and never a byte of its value.

use std::path::PathBuf;

/// Why a secret's real value could not be read at launch.
///
/// Every variant names the secret, never its value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// `from: { env: VAR }` named a variable that is not set.
    #[error(
        "secret {secret}: environment variable {var} is not set; export it before starting sluice"
    )]
    EnvMissing {
        /// The secret's name.
        secret: String,
        /// The variable the declaration names.
        var: String,
    },
    /// `from: { file: PATH }` named a file that cannot be read.
    #[error("secret {secret}: cannot read file {}: {kind}", path.display())]
    FileUnreadable {
        /// The secret's name.
        secret: String,
        /// The path, resolved against the declaration's directory.
        path: PathBuf,
        /// The I/O error's kind (never its text, which could quote the file).
        kind: std::io::ErrorKind,
    },
    /// `from: { command: [...] }` failed: it could not start, exited non-zero, timed out or
    /// printed nothing. Never carries what it printed.
    #[error("secret {secret}: the source command {program} failed: {why}")]
    CommandFailed {
        /// The secret's name.
        secret: String,
        /// The program, as declared.
        program: String,
        /// What went wrong (a status, a timeout, an I/O error's kind).
        why: String,
    },
    /// The value is shorter than the guard can redact safely.
    #[error(
        "secret {secret}: value is {len} bytes, expected at least {min}; a shorter value cannot be redacted safely"
    )]
    TooShort {
        /// The secret's name.
        secret: String,
        /// The value's length in bytes.
        len: usize,
        /// The minimum length.
        min: usize,
    },
    /// The value holds CR, LF or NUL and the secret may be placed in a header.
    #[error(
        "secret {secret}: value holds a {byte} byte and cannot be placed in a header; remove `header` from secrets.{secret}.in"
    )]
    UnfitForHeader {
        /// The secret's name.
        secret: String,
        /// `CR`, `LF` or `NUL`.
        byte: &'static str,
    },
    /// A signing secret's part holds a byte that no signature header can carry.
    #[error(
        "secret {secret}: value holds a byte outside printable ASCII, which no AWS credential does; check that the source holds the key itself"
    )]
    UnfitForSigning {
        /// The part's name (`aws_prod.access_key_id`).
        secret: String,
    },
    /// No placeholder was minted for this secret: a bug in the caller or in sluice.
    #[error("secret {secret}: no placeholder was minted for it (this is a bug in sluice)")]
    NoPlaceholder {
        /// The secret's name.
        secret: String,
    },
    /// The guard refused the entries (it checks lengths, placeholders and overlaps again;
    /// its messages name secrets, never values).
    #[error("the guard refused the secrets: {0}")]
    Guard(#[from] sluice_guard::GuardError),
    /// The operating system's random source failed while minting placeholders.
    #[error(transparent)]
    Random(#[from] crate::random::MintError),
}
