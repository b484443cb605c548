//! The one error type of `sluice-ca`.
//!
//! Every variant names what arrived and what was expected. None ever carries key material:
//! the only values they quote are host names, patterns and run ids, which are not secrets.
//! Names that arrive from a sandbox (an SNI, a CONNECT host) are quoted with `{:?}` and
//! truncated, so that an error message cannot smuggle control characters into a log line.

use std::time::Duration;

/// What went wrong while minting the run CA or one of its leaves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    /// The run id cannot be placed in the CA's subject.
    #[error("run id {run_id:?} is not usable: expected 1 to {max} characters from [A-Za-z0-9._-]")]
    InvalidRunId {
        /// The run id as given (truncated).
        run_id: String,
        /// The longest run id accepted.
        max: usize,
    },

    /// The CA's validity is longer than a run may last.
    #[error(
        "validity of {requested_secs}s for the run CA is too long: expected at most \
         {max_secs}s (7 days), so that the CA is worthless after its run"
    )]
    ValidityTooLong {
        /// The validity asked for, in seconds.
        requested_secs: u64,
        /// The longest validity allowed, in seconds.
        max_secs: u64,
    },

    /// A validity (the CA's or the leaves') is too short to be useful.
    #[error(
        "validity of {requested_secs}s for the {what} is too short: expected at least {min_secs}s"
    )]
    ValidityTooShort {
        /// Which validity: `"run CA"` or `"leaves"`.
        what: &'static str,
        /// The validity asked for, in seconds.
        requested_secs: u64,
        /// The shortest validity allowed, in seconds.
        min_secs: u64,
    },

    /// The leaf cache was configured with no room at all.
    #[error("leaf cache capacity of 0 is not usable: expected at least 1")]
    ZeroCacheCapacity,

    /// A permitted host pattern handed to [`RunCa::mint`](crate::RunCa::mint) is malformed.
    #[error(
        "permitted host pattern {pattern:?} is not valid: {reason}; expected an ASCII host name, \
         `*.` followed by one, or an IP literal, each with an optional `:port`"
    )]
    InvalidPattern {
        /// The pattern as given (truncated).
        pattern: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A name asked of [`RunCa::leaf`](crate::RunCa::leaf) is neither a DNS name nor an IP
    /// literal.
    #[error(
        "name {name:?} is not valid for a leaf: {reason}; expected one ASCII DNS name or IP literal"
    )]
    InvalidName {
        /// The name as given (truncated).
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A well-formed name that the run's name constraints do not cover: no leaf is minted.
    #[error(
        "name {name:?} is outside this run's name constraints: expected one of the hosts the \
         declaration lets sluice intercept"
    )]
    NotPermitted {
        /// The normalised name (truncated).
        name: String,
    },

    /// The run CA is past the end of its validity: it cannot sign anything clients accept.
    #[error("the run CA expired {ago_secs}s ago: expected a request within the run's validity")]
    Expired {
        /// How long ago the CA expired, in seconds.
        ago_secs: u64,
    },

    /// Key generation, signing or key loading failed inside the crypto library. This is a bug
    /// in sluice or in its crypto library, not something a caller can fix.
    #[error("{what} failed (a bug in sluice or its crypto library): {detail}")]
    Crypto {
        /// The step that failed.
        what: &'static str,
        /// The library's description of the failure (never key material).
        detail: String,
    },
}

/// The longest prefix of an untrusted value that an error quotes.
const QUOTE_MAX: usize = 256;

/// Cuts an untrusted value to [`QUOTE_MAX`] characters for quoting in an error.
pub(crate) fn quote(value: &str) -> String {
    match value.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}...", &value[..cut]),
        None => value.to_owned(),
    }
}

/// Whole seconds of a duration, for error messages.
pub(crate) fn secs(duration: Duration) -> u64 {
    duration.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_keeps_short_values_and_cuts_long_ones() {
        assert_eq!(quote("api.example.com"), "api.example.com");
        let long = "a".repeat(1000);
        let quoted = quote(&long);
        assert_eq!(quoted.len(), QUOTE_MAX + 3);
        assert!(quoted.ends_with("..."));
    }

    #[test]
    fn messages_are_lowercase_and_say_what_was_expected() {
        let errors = [
            CaError::ZeroCacheCapacity,
            CaError::NotPermitted {
                name: "evil.example".into(),
            },
            CaError::ValidityTooLong {
                requested_secs: 8 * 86_400,
                max_secs: 7 * 86_400,
            },
        ];
        for error in errors {
            let message = error.to_string();
            assert!(message.contains("expected"), "{message}");
            let first = message.chars().next().unwrap();
            assert!(!first.is_uppercase(), "{message}");
        }
    }
}
