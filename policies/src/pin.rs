//! Certificate pins: `pin: ["sha256/BASE64"]` on a secret, the SHA-256 of a
//! SubjectPublicKeyInfo (SPKI) that the upstream's verified chain must hold for the secret
//! to be swapped into a connection.
//!
//! ```
//! use sluice_policies::SpkiPin;
//!
//! let pin: SpkiPin = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=".parse().unwrap();
//! assert_eq!(pin, SpkiPin::of_spki(b""));
//! assert_eq!(pin.to_string(), "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
//! ```
//!
//! This module only parses, prints and computes pins. Checking a chain against them is the
//! upstream connector's (`sluice-proxy`), which asks only after ordinary verification has
//! passed: a pin narrows which verified chains are accepted, it never admits one.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// What a pin is written with, before its base64.
const PREFIX: &str = "sha256/";

/// The SHA-256 of a DER-encoded SubjectPublicKeyInfo (the whole `SEQUENCE`, as HPKP and
/// `openssl pkey -pubin -outform der` write it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpkiPin([u8; 32]);

impl SpkiPin {
    /// The pin of `spki`, a DER SubjectPublicKeyInfo.
    pub fn of_spki(spki: &[u8]) -> Self {
        Self(Sha256::digest(spki).into())
    }
}

/// Why a pin entry does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinSyntax {
    /// It does not start with `sha256/`.
    Prefix,
    /// What follows is not standard base64 of 32 bytes.
    Hash,
}

impl FromStr for SpkiPin {
    type Err = PinSyntax;

    fn from_str(s: &str) -> Result<Self, PinSyntax> {
        let encoded = s.strip_prefix(PREFIX).ok_or(PinSyntax::Prefix)?;
        let bytes = STANDARD.decode(encoded).map_err(|_| PinSyntax::Hash)?;
        let hash: [u8; 32] = bytes.try_into().map_err(|_| PinSyntax::Hash)?;
        Ok(Self(hash))
    }
}

impl fmt::Display for SpkiPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", STANDARD.encode(self.0))
    }
}

/// A pin is a public key's hash, not a secret: shown as written.
impl fmt::Debug for SpkiPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_reads_back_as_written_and_refuses_anything_else() {
        let pin = SpkiPin::of_spki(b"an spki");
        assert_eq!(pin.to_string().parse::<SpkiPin>(), Ok(pin));
        let cases = [
            (
                "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                PinSyntax::Prefix,
            ),
            (
                "sha1/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                PinSyntax::Prefix,
            ),
            (
                "SHA256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                PinSyntax::Prefix,
            ),
            // Hex, URL-safe base64, a short hash, no padding, a space.
            (
                "sha256/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                PinSyntax::Hash,
            ),
            (
                "sha256/47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",
                PinSyntax::Hash,
            ),
            ("sha256/AAAA", PinSyntax::Hash),
            (
                "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
                PinSyntax::Hash,
            ),
            (
                "sha256/ 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
                PinSyntax::Hash,
            ),
            ("sha256/", PinSyntax::Hash),
        ];
        for (written, why) in cases {
            assert_eq!(written.parse::<SpkiPin>(), Err(why), "{written}");
        }
    }
}
