//! Secret values, placeholders, and the ids that tie them to a guard.
//!
//! This module owns the two things a secret is made of: its real value, held in zeroized memory,
//! and its placeholder, the harmless stand-in the sandbox sees. It must never print a value:
//! [`SecretValue`]'s `Debug` says `<redacted>`, and there is no `Display`.

use std::fmt;
use std::str::FromStr;

use zeroize::Zeroizing;

use crate::GuardError;

/// The shortest secret value a guard accepts, in bytes. Shorter values would match ordinary
/// text and cannot be redacted safely.
pub const MIN_VALUE_LEN: usize = 8;

/// The longest secret value a guard accepts, in bytes (64 KiB: room for a PEM private key).
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// The shortest placeholder accepted, in characters.
pub const MIN_PLACEHOLDER_LEN: usize = 16;

/// The longest placeholder accepted, in characters.
pub const MAX_PLACEHOLDER_LEN: usize = 256;

/// How many random bytes [`Placeholder::mint`] takes: 96 bits, above the 64 the contract asks.
pub const NONCE_LEN: usize = 12;

/// The longest secret-name part [`Placeholder::mint`] keeps, so minted placeholders stay within
/// [`MAX_PLACEHOLDER_LEN`].
const MAX_NAME_PART: usize = 200;

/// Which secret of a [`Guard`](crate::Guard) a match, a plan entry or a tally belongs to.
///
/// Ids are dense indices, in the order secrets were added to the builder; they mean nothing to
/// another guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretId(pub(crate) u32);

impl SecretId {
    /// The id as an index, `0..guard.len()`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A secret's real value, zeroized when dropped.
///
/// `Debug` prints `SecretValue(<redacted>)`; there is no `Display`. Read the bytes with
/// [`SecretValue::expose`], and only to hand them where they are granted.
#[derive(Clone)]
pub struct SecretValue(Zeroizing<Vec<u8>>);

impl SecretValue {
    /// Wraps bytes as a secret value. The bytes are moved, not copied.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The real value. Every call site is a place where the secret leaves the guard's custody.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The value's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the value may stand in an HTTP header: no CR, LF or NUL. A value that fails this
    /// cannot be granted a header location.
    pub fn is_header_safe(&self) -> bool {
        !self.0.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
    }
}

impl From<String> for SecretValue {
    fn from(value: String) -> Self {
        Self::new(value.into_bytes())
    }
}

impl From<Vec<u8>> for SecretValue {
    fn from(value: Vec<u8>) -> Self {
        Self::new(value)
    }
}

impl From<&str> for SecretValue {
    fn from(value: &str) -> Self {
        Self::new(value.as_bytes().to_vec())
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// The stand-in a sandbox holds instead of a secret: at least [`MIN_PLACEHOLDER_LEN`]
/// characters of `[A-Za-z0-9_-]`, so that no encoding a client applies (percent-encoding, JSON
/// escaping, header folding) changes it.
///
/// A placeholder is not a secret; it prints as itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Placeholder(String);

impl Placeholder {
    /// Mints the default placeholder `SLUICE_<NAME>_<nonce>`: NAME is `name` with every
    /// character outside `[A-Za-z0-9_]` turned into `_` (cut to 200 characters), and the nonce
    /// is `nonce` in lowercase hex.
    ///
    /// The caller draws the nonce from a cryptographic random source once per run, so that a
    /// placeholder from one run means nothing to another. (This crate does no I/O, randomness
    /// included.)
    ///
    /// # Example
    /// ```
    /// # use sluice_guard::Placeholder;
    /// let p = Placeholder::mint("github-token", &[0xab; 12]);
    /// assert_eq!(p.as_str(), "SLUICE_github_token_abababababababababababab");
    /// ```
    pub fn mint(name: &str, nonce: &[u8; NONCE_LEN]) -> Self {
        let mut s = String::with_capacity(8 + name.len().min(MAX_NAME_PART) + 2 * NONCE_LEN);
        s.push_str("SLUICE_");
        for c in name.chars().take(MAX_NAME_PART) {
            s.push(if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            });
        }
        s.push('_');
        s.push_str(&hex::encode(nonce));
        Self(s)
    }

    /// Accepts a fixed placeholder (one a host engine already minted), checking its length and
    /// alphabet.
    ///
    /// # Errors
    /// [`GuardError::PlaceholderTooShort`], [`GuardError::PlaceholderTooLong`] or
    /// [`GuardError::PlaceholderCharacter`].
    pub fn parse(s: &str) -> Result<Self, GuardError> {
        if let Some(position) = s
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            return Err(GuardError::PlaceholderCharacter { position });
        }
        if s.len() < MIN_PLACEHOLDER_LEN {
            return Err(GuardError::PlaceholderTooShort {
                len: s.len(),
                min: MIN_PLACEHOLDER_LEN,
            });
        }
        if s.len() > MAX_PLACEHOLDER_LEN {
            return Err(GuardError::PlaceholderTooLong {
                len: s.len(),
                max: MAX_PLACEHOLDER_LEN,
            });
        }
        Ok(Self(s.to_owned()))
    }

    /// The placeholder's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The placeholder's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Placeholder {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for Placeholder {
    type Err = GuardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_placeholders_use_the_safe_alphabet_and_are_long_enough() {
        for name in ["github_token", "a", "", "ключ", "x.y-z/w", &"n".repeat(500)] {
            let p = Placeholder::mint(name, &[0x5a; NONCE_LEN]);
            assert!(p.as_str().starts_with("SLUICE_"));
            assert_eq!(Placeholder::parse(p.as_str()), Ok(p.clone()), "{name}");
        }
    }

    #[test]
    fn minted_placeholder_keeps_the_name_and_hexes_the_nonce() {
        let nonce = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255];
        let p = Placeholder::mint("aws.key", &nonce);
        assert_eq!(p.as_str(), "SLUICE_aws_key_000102030405060708090aff");
    }

    #[test]
    fn different_nonces_give_different_placeholders() {
        let a = Placeholder::mint("t", &[1; NONCE_LEN]);
        let b = Placeholder::mint("t", &[2; NONCE_LEN]);
        assert_ne!(a, b);
    }

    #[test]
    fn parse_refuses_bad_placeholders_without_echoing_them() {
        let cases: &[(&str, GuardError)] = &[
            (
                "short_but_ok",
                GuardError::PlaceholderTooShort { len: 12, min: 16 },
            ),
            (
                "has.a.dot.in.it.here",
                GuardError::PlaceholderCharacter { position: 3 },
            ),
            (
                "percent%2Fencoded_thing",
                GuardError::PlaceholderCharacter { position: 7 },
            ),
        ];
        for (input, want) in cases {
            let err = Placeholder::parse(input).unwrap_err();
            assert_eq!(&err, want, "{input}");
            assert!(!err.to_string().contains(input));
        }
        let long = "A".repeat(MAX_PLACEHOLDER_LEN + 1);
        assert_eq!(
            Placeholder::parse(&long),
            Err(GuardError::PlaceholderTooLong {
                len: MAX_PLACEHOLDER_LEN + 1,
                max: MAX_PLACEHOLDER_LEN
            })
        );
        assert!("SLUICE_FIXED_0123456789".parse::<Placeholder>().is_ok());
    }

    #[test]
    fn secret_value_debug_does_not_print_the_value() {
        let v = SecretValue::from("hunter2hunter2");
        let shown = format!("{v:?}");
        assert!(!shown.contains("hunter2"));
        assert_eq!(shown, "SecretValue(<redacted>)");
    }

    #[test]
    fn header_safety_rejects_cr_lf_nul() {
        assert!(SecretValue::from("abc def:ghi").is_header_safe());
        for bad in ["a\rb", "a\nb", "a\0b"] {
            assert!(!SecretValue::from(bad).is_header_safe(), "{bad:?}");
        }
    }
}
