//! The crate's one error type, and the refusal a plan can raise.
//!
//! This module owns how every failure of the guard is named. It must never carry or print a
//! secret value: variants name the secret, the place and the sizes involved, nothing more.

use crate::{Form, SecretId};

/// Everything that can go wrong while building a guard or rewriting through one.
///
/// Construction errors ([`GuardBuilder::add`](crate::GuardBuilder::add) and
/// [`GuardBuilder::build`](crate::GuardBuilder::build)) are the declaration's fault and should
/// be shown to whoever wrote it. [`GuardError::Refused`] is raised while rewriting, when the
/// [`Plan`](crate::Plan) in force says a match must not pass: the caller turns it into a
/// refusal of the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// A secret's name is empty.
    #[error("secret name is empty, expected a non-empty name")]
    EmptyName,

    /// A retired value was added for an id the builder never returned.
    #[error("no secret has id {id} in this builder, expected an id `add` returned")]
    UnknownSecret {
        /// The id, as an index.
        id: usize,
    },

    /// Two secrets were added under one name.
    #[error("secret `{name}` is added twice, expected each name once")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },

    /// A secret value is too short to be redacted without hitting ordinary text.
    #[error(
        "secret `{name}`: value is {len} bytes, expected at least {min} \
         (shorter values cannot be redacted safely)"
    )]
    ValueTooShort {
        /// The secret's name.
        name: String,
        /// The value's length in bytes.
        len: usize,
        /// The smallest length accepted, [`MIN_VALUE_LEN`](crate::MIN_VALUE_LEN).
        min: usize,
    },

    /// A secret value is longer than the guard accepts.
    #[error("secret `{name}`: value is {len} bytes, expected at most {max}")]
    ValueTooLong {
        /// The secret's name.
        name: String,
        /// The value's length in bytes.
        len: usize,
        /// The largest length accepted, [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN).
        max: usize,
    },

    /// A placeholder is shorter than [`MIN_PLACEHOLDER_LEN`](crate::MIN_PLACEHOLDER_LEN).
    #[error("placeholder is {len} characters, expected at least {min}")]
    PlaceholderTooShort {
        /// The placeholder's length.
        len: usize,
        /// The smallest length accepted.
        min: usize,
    },

    /// A placeholder is longer than [`MAX_PLACEHOLDER_LEN`](crate::MAX_PLACEHOLDER_LEN).
    #[error("placeholder is {len} characters, expected at most {max}")]
    PlaceholderTooLong {
        /// The placeholder's length.
        len: usize,
        /// The largest length accepted.
        max: usize,
    },

    /// A placeholder holds a character that some client encoding would change.
    ///
    /// The character itself is not echoed: a real secret pasted where a placeholder belongs
    /// must not end up in a log.
    #[error(
        "placeholder has a character outside [A-Za-z0-9_-] at byte {position}, \
         expected only ASCII letters, digits, `_` and `-`"
    )]
    PlaceholderCharacter {
        /// Byte offset of the first offending character.
        position: usize,
    },

    /// Two secrets hold the same value (or the same encoding of their values), so a redaction
    /// could not say which placeholder to write back.
    #[error(
        "secrets `{first}` and `{second}` share a value, expected each value under one name \
         (declare one secret that grants both sets of hosts)"
    )]
    SharedValue {
        /// The secret added first.
        first: String,
        /// The secret added second.
        second: String,
    },

    /// A placeholder and another pattern contain one another, so matching would be ambiguous.
    #[error(
        "the {first_form} of secret `{first}` contains the {second_form} of secret `{second}`, \
         expected placeholders that no other placeholder or value contains or is contained in"
    )]
    Overlap {
        /// The secret whose pattern is the longer one.
        first: String,
        /// What of `first` overlaps.
        first_form: Form,
        /// The secret whose pattern is contained.
        second: String,
        /// What of `second` overlaps.
        second_form: Form,
    },

    /// More secrets than a guard holds.
    #[error("{count} secrets added, expected at most {max}")]
    TooManySecrets {
        /// How many were added.
        count: usize,
        /// The largest count accepted, [`MAX_SECRETS`](crate::MAX_SECRETS).
        max: usize,
    },

    /// The Aho-Corasick automaton could not be built. With the limits above this should not
    /// happen: it is a bug in sluice-guard or an exhausted resource.
    #[error("the matcher could not be built ({reason}); this is a bug in sluice-guard")]
    Matcher {
        /// The automaton builder's own message (it never contains pattern text).
        reason: String,
    },

    /// A [`Plan`](crate::Plan) refused a match.
    #[error(transparent)]
    Refused(#[from] RefusedMatch),

    /// A streaming [`Rewriter`](crate::Rewriter) was used after it refused once.
    #[error("rewriter already refused this stream, expected a fresh rewriter for a new stream")]
    Poisoned,
}

/// A match that the plan in force says must not pass: an ungranted placeholder, or a real value
/// going where its secret is not granted.
///
/// It names the secret and what was found, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{form} of secret `{name}` found at byte {offset}, where the plan in force refuses it")]
pub struct RefusedMatch {
    /// The secret whose placeholder or value was found.
    pub secret: SecretId,
    /// The secret's name.
    pub name: String,
    /// What was found: the placeholder or the value in one of its encodings.
    pub form: Form,
    /// Offset of the match from the start of the input (of the whole stream, when streaming).
    pub offset: u64,
}
