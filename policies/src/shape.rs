//! Placeholders shaped like the credential they stand for, so that a client which checks a
//! token's shape before sending it (a prefix, a length, GitHub's checksum) sends the
//! placeholder instead of refusing it.
//!
//! ```
//! use sluice_policies::shape::Shape;
//!
//! let value = b"ghp_0123456789abcdefghijABCDEFGHIJ0123ab";
//! let shape = Shape::known(value).expect("a GitHub token's shape");
//! let placeholder = shape.mint()?;
//! assert!(placeholder.starts_with("ghp_") && placeholder.len() == 40);
//! assert!(sluice_policies::shape::checksum_holds(&placeholder));
//! # Ok::<(), sluice_policies::MintError>(())
//! ```
//!
//! A shape is a prefix, a length and an alphabet, never more of the value: the rest of a
//! shaped placeholder is drawn from the run's random source, at least [`MIN_RANDOM_BITS`]
//! bits of it, and checked to differ from the value. The well-known formats are one table
//! ([`FORMATS`]); `placeholder: shaped` takes any value's own shape ([`Shape::of_value`]).
//! This module reads a value only to take its shape, and never keeps, prints or returns it.

use crate::random::{MintError, random_chars};

/// The fewest random bits a shaped placeholder holds, as a `SLUICE_` one does at least.
pub const MIN_RANDOM_BITS: f64 = 64.0;

/// The shortest placeholder (the guard's minimum).
const MIN_LEN: usize = sluice_guard::MIN_PLACEHOLDER_LEN;

const DIGITS: &[u8] = b"0123456789";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
/// GitHub's and npm's base62, in the order their checksum digits use.
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Letters, digits, `_` and `-`: every character a placeholder may hold.
const URL_SAFE: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-";
/// An AWS access key id's characters after its prefix (base32's).
const AWS_KEY_ID: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// How long a shaped placeholder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// The format fixes it.
    Fixed(usize),
    /// The value's own.
    OfValue,
}

/// What a format checks beyond its prefix, length and alphabet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Random characters after the prefix.
    Random,
    /// GitHub's and npm's: 30 random base62 characters, then the CRC32 of those 30 in six
    /// base62 digits.
    Crc32Base62,
    /// The value's `_` and `-` kept where they stand (they separate fixed-size fields of the
    /// format: `github_pat_<22>_<59>`), every other character random.
    Fields,
    /// Slack's: `-`-separated fields kept where they stand, every field but the last made of
    /// digits (numeric ids), the last random letters and digits.
    NumericFields,
}

/// One well-known credential format.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    /// What the value starts with, kept in the placeholder.
    pub prefix: &'static str,
    /// How long the placeholder is.
    pub length: Length,
    /// What its random characters are drawn from.
    pub alphabet: &'static [u8],
    /// What else it checks.
    pub layout: Layout,
}

const fn format(
    prefix: &'static str,
    length: Length,
    alphabet: &'static [u8],
    layout: Layout,
) -> Format {
    Format {
        prefix,
        length,
        alphabet,
        layout,
    }
}

/// The well-known formats, longest prefix first (`sk-ant-` before `sk-`): a value that starts
/// with one of these prefixes gets a placeholder of its format unless its declaration says
/// `placeholder: plain`.
pub const FORMATS: &[Format] = &[
    // GitHub: https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/
    format("github_pat_", Length::OfValue, BASE62, Layout::Fields),
    format("ghp_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    format("gho_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    format("ghu_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    format("ghs_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    format("ghr_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    // npm: https://github.blog/2021-09-23-announcing-npms-new-access-token-format/
    format("npm_", Length::Fixed(40), BASE62, Layout::Crc32Base62),
    // GitLab personal access tokens.
    format("glpat-", Length::OfValue, URL_SAFE, Layout::Random),
    // Slack bot and user tokens: xoxb-<team id>-<bot id>-<secret>.
    format("xoxb-", Length::OfValue, BASE62, Layout::NumericFields),
    format("xoxp-", Length::OfValue, BASE62, Layout::NumericFields),
    // Anthropic: API keys, OAuth access and refresh tokens, admin keys (the kind and its
    // version are part of the prefix, never any of the random part), then OpenAI's project
    // and classic keys.
    format("sk-ant-api03-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-ant-oat01-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-ant-ort01-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-ant-admin01-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-ant-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-proj-", Length::OfValue, URL_SAFE, Layout::Random),
    format("sk-", Length::OfValue, URL_SAFE, Layout::Random),
    // AWS access key ids, long-term and temporary.
    format("AKIA", Length::Fixed(20), AWS_KEY_ID, Layout::Random),
    format("ASIA", Length::Fixed(20), AWS_KEY_ID, Layout::Random),
    // Hugging Face, PyPI.
    format("hf_", Length::OfValue, BASE62, Layout::Random),
    format("pypi-", Length::OfValue, URL_SAFE, Layout::Random),
];

/// The shape a placeholder is minted in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Kept as it is: the format's prefix (never more of the value than that).
    prefix: String,
    /// The placeholder's length, prefix included.
    len: usize,
    alphabet: Vec<u8>,
    layout: Layout,
    /// For [`Layout::Fields`] and [`Layout::NumericFields`]: where the separators stand
    /// after the prefix, and which they are.
    separators: Vec<(usize, u8)>,
}

impl Shape {
    /// The shape of the well-known format `value` is in, if any, and if it leaves room for
    /// [`MIN_RANDOM_BITS`] (a value cut short keeps the `SLUICE_` form).
    pub fn known(value: &[u8]) -> Option<Shape> {
        let format = FORMATS
            .iter()
            .find(|f| value.starts_with(f.prefix.as_bytes()))?;
        let len = match format.length {
            Length::Fixed(n) => n,
            Length::OfValue => value.len(),
        };
        let separators = match format.layout {
            Layout::Fields | Layout::NumericFields => separators(&value[format.prefix.len()..]),
            Layout::Random | Layout::Crc32Base62 => Vec::new(),
        };
        let shape = Shape {
            prefix: format.prefix.to_owned(),
            len,
            alphabet: format.alphabet.to_vec(),
            layout: format.layout,
            separators,
        };
        shape.fits(value).then_some(shape)
    }

    /// The value's own shape, for `placeholder: shaped`: its prefix up to and including the
    /// last `-` or `_` among its first 16 characters, its length, and the characters it
    /// uses (letters of either case, digits, `_`, `-`: those a placeholder may hold). `None`
    /// when that prefix holds a character a placeholder may not, or leaves too little room.
    pub fn of_value(value: &[u8]) -> Option<Shape> {
        if let Some(known) = Shape::known(value) {
            return Some(known);
        }
        let head = &value[..value.len().min(16)];
        let cut = head
            .iter()
            .rposition(|b| matches!(b, b'-' | b'_'))
            .map_or(0, |at| at + 1);
        let prefix = &value[..cut];
        if !prefix.iter().all(|b| URL_SAFE.contains(b)) {
            return None;
        }
        let rest = &value[cut..];
        let mut alphabet = Vec::new();
        for class in [DIGITS, UPPER, LOWER, b"_".as_slice(), b"-".as_slice()] {
            if rest.iter().any(|b| class.contains(b)) {
                alphabet.extend_from_slice(class);
            }
        }
        if alphabet.len() < 2 {
            return None;
        }
        let shape = Shape {
            prefix: String::from_utf8(prefix.to_vec()).ok()?,
            len: value.len(),
            alphabet,
            layout: Layout::Random,
            separators: Vec::new(),
        };
        shape.fits(value).then_some(shape)
    }

    /// Whether a placeholder of this shape is long enough, random enough, and within the
    /// placeholder alphabet.
    fn fits(&self, value: &[u8]) -> bool {
        self.len >= MIN_LEN
            && self.len <= sluice_guard::MAX_PLACEHOLDER_LEN
            && self.len > self.prefix.len()
            && value.len() >= self.prefix.len()
            && self.random_bits() >= MIN_RANDOM_BITS
    }

    /// The random bits a placeholder of this shape holds.
    pub fn random_bits(&self) -> f64 {
        let random = self.len - self.prefix.len() - self.separators.len();
        match self.layout {
            // The checksum's six characters follow from the 30 before them.
            Layout::Crc32Base62 => (random.saturating_sub(6)) as f64 * (62f64).log2(),
            Layout::NumericFields => {
                let last = self.separators.last().map_or(0, |(at, _)| at + 1);
                let digits = last.saturating_sub(self.separators.len());
                let tail = self.len - self.prefix.len() - last;
                digits as f64 * 10f64.log2() + tail as f64 * (self.alphabet.len() as f64).log2()
            }
            Layout::Random | Layout::Fields => random as f64 * (self.alphabet.len() as f64).log2(),
        }
    }

    /// A fresh placeholder of this shape, from the operating system's random source.
    ///
    /// # Errors
    /// [`MintError`] when the random source fails.
    pub fn mint(&self) -> Result<String, MintError> {
        let body_len = self.len - self.prefix.len();
        let mut out = self.prefix.clone();
        match self.layout {
            Layout::Random => out.push_str(&random_chars(body_len, &self.alphabet)?),
            Layout::Crc32Base62 => {
                let random = random_chars(body_len - 6, &self.alphabet)?;
                out.push_str(&random);
                out.push_str(&base62_checksum(random.as_bytes()));
            }
            Layout::Fields | Layout::NumericFields => {
                let last = self.separators.last().map_or(0, |(at, _)| at + 1);
                let mut separators = self.separators.iter().peekable();
                for at in 0..body_len {
                    if let Some((_, sep)) = separators.next_if(|(s, _)| *s == at) {
                        out.push(char::from(*sep));
                        continue;
                    }
                    let numeric = self.layout == Layout::NumericFields && at < last;
                    let alphabet = if numeric { DIGITS } else { &self.alphabet };
                    out.push_str(&random_chars(1, alphabet)?);
                }
            }
        }
        Ok(out)
    }

    /// The kept prefix, for what the launcher and the audit log say of a shaped placeholder.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// What form `placeholder`, minted for `secret`, took, in words the `start` audit event and
/// the launcher write: `fixed` (a literal `placeholder:`), `plain` (`SLUICE_…`), `shaped
/// <prefix>` (a well-known format, whose prefix is public), or `shaped` (the value's own
/// shape; its prefix, read off the value, is not repeated).
pub fn form_of(secret: &crate::SecretDecl, placeholder: &str) -> String {
    if secret.fixed_placeholder().is_some() {
        return "fixed".to_owned();
    }
    if placeholder.starts_with("SLUICE") {
        return "plain".to_owned();
    }
    match FORMATS.iter().find(|f| placeholder.starts_with(f.prefix)) {
        Some(format) => format!("shaped {}", format.prefix),
        None => "shaped".to_owned(),
    }
}

/// Where `_` and `-` stand in `rest`.
fn separators(rest: &[u8]) -> Vec<(usize, u8)> {
    rest.iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, b'_' | b'-'))
        .map(|(at, b)| (at, *b))
        .collect()
}

/// The CRC32 of `random` in six base62 digits, most significant first, zero-padded: the last
/// six characters of a GitHub or npm token.
fn base62_checksum(random: &[u8]) -> String {
    let mut n = crc32fast::hash(random);
    let mut digits = [b'0'; 6];
    for digit in digits.iter_mut().rev() {
        *digit = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&digits).into_owned()
}

/// Whether a GitHub- or npm-format token's last six characters are the checksum of the 30
/// before them: the check such clients make.
pub fn checksum_holds(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.len() == 40
        && bytes[3] == b'_'
        && base62_checksum(&bytes[4..34]).as_bytes() == &bytes[34..]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value per row of [`FORMATS`], in the format's own shape.
    const EXAMPLES: &[&str] = &[
        "github_pat_11ABCDEFG0123456789abc_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW",
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "gho_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "ghu_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "ghs_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "ghr_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123450000",
        "glpat-aB3dEf-hIjK_mN0pQr",
        "xoxb-123456789012-1234567890123-aBcDeFgHiJkLmNoPqRsTuVwX",
        "xoxp-123456789012-123456789012-1234567890123-aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
        "sk-ant-api03-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsT-AA",
        "sk-ant-oat01-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkL-AA",
        "sk-ant-ort01-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkL-AA",
        "sk-ant-admin01-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeF-AA",
        "sk-ant-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "sk-proj-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123",
        "sk-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkL",
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAIOSFODNN7EXAMPLE",
        "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZjAxLTIzNDUtNjc4OS1hYmNkLWVmMDEyMzQ1Njc4OQ",
    ];

    fn in_alphabet(text: &str, alphabet: &[u8]) -> bool {
        text.bytes().all(|b| alphabet.contains(&b))
    }

    #[test]
    fn every_format_has_an_example_that_takes_its_shape() {
        assert_eq!(EXAMPLES.len(), FORMATS.len());
        for (format, example) in FORMATS.iter().zip(EXAMPLES) {
            let shape = Shape::known(example.as_bytes())
                .unwrap_or_else(|| panic!("{}: no shape", format.prefix));
            assert_eq!(shape.prefix(), format.prefix, "{example}");
            let placeholder = shape.mint().unwrap();
            assert!(placeholder.starts_with(format.prefix), "{placeholder}");
            let want = match format.length {
                Length::Fixed(n) => n,
                Length::OfValue => example.len(),
            };
            assert_eq!(placeholder.len(), want, "{placeholder}");
            let body = &placeholder[format.prefix.len()..];
            match format.layout {
                Layout::Random => assert!(in_alphabet(body, format.alphabet), "{placeholder}"),
                Layout::Crc32Base62 => {
                    assert!(in_alphabet(body, BASE62), "{placeholder}");
                    assert!(checksum_holds(&placeholder), "{placeholder}");
                }
                Layout::Fields | Layout::NumericFields => {
                    // Separators where the value has them, the rest from the alphabet.
                    let rest = &example[format.prefix.len()..];
                    for (a, b) in rest.bytes().zip(body.bytes()) {
                        if matches!(a, b'_' | b'-') {
                            assert_eq!(a, b, "{placeholder}");
                        } else {
                            assert!(format.alphabet.contains(&b), "{placeholder}");
                        }
                    }
                }
            }
            assert!(shape.random_bits() >= MIN_RANDOM_BITS, "{}", format.prefix);
            assert_ne!(placeholder.as_bytes(), example.as_bytes());
            sluice_guard::Placeholder::parse(&placeholder).expect("a placeholder the guard takes");
        }
    }

    #[test]
    fn slack_ids_stay_digits_and_the_secret_part_is_random() {
        let shape = Shape::known(EXAMPLES[8].as_bytes()).unwrap();
        let placeholder = shape.mint().unwrap();
        let fields: Vec<&str> = placeholder.split('-').collect();
        assert_eq!(fields.len(), 4, "{placeholder}");
        assert_eq!(fields[0], "xoxb");
        assert!(
            fields[1].bytes().all(|b| b.is_ascii_digit()),
            "{placeholder}"
        );
        assert!(
            fields[2].bytes().all(|b| b.is_ascii_digit()),
            "{placeholder}"
        );
        assert!(fields[3].bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn the_checksum_is_githubs_published_rule() {
        // Computed independently: CRC32 (IEEE) of the 30 characters, in base62, 6 digits.
        let random = b"aBcDeFgHiJkLmNoPqRsTuVwXyZ0123";
        let mut n = crc32fast::hash(random) as u64;
        let mut digits = Vec::new();
        for _ in 0..6 {
            digits.push(BASE62[(n % 62) as usize]);
            n /= 62;
        }
        digits.reverse();
        let token = format!(
            "ghp_{}{}",
            String::from_utf8_lossy(random),
            String::from_utf8_lossy(&digits)
        );
        assert!(checksum_holds(&token), "{token}");
        let mut wrong = token.clone().into_bytes();
        wrong[10] = if wrong[10] == b'a' { b'b' } else { b'a' };
        assert!(!checksum_holds(&String::from_utf8(wrong).unwrap()));
    }

    #[test]
    fn two_mints_differ() {
        let shape = Shape::known(EXAMPLES[1].as_bytes()).unwrap();
        let a = shape.mint().unwrap();
        let b = shape.mint().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn a_value_too_short_for_its_format_keeps_no_shape() {
        assert!(Shape::known(b"sk-short1234567").is_none());
        assert!(Shape::known(b"hf_abc").is_none());
        assert!(Shape::known(b"not-a-known-prefix-0123456789").is_none());
    }

    #[test]
    fn any_value_takes_its_own_shape_when_asked() {
        let shape = Shape::of_value(b"acme_live_0123456789abcdefABCDEF").unwrap();
        assert_eq!(shape.prefix(), "acme_live_");
        let placeholder = shape.mint().unwrap();
        assert_eq!(placeholder.len(), 32);
        assert!(placeholder.starts_with("acme_live_"));
        assert!(in_alphabet(&placeholder[10..], BASE62));
        // Only the classes the value uses: digits and lower case here.
        let shape = Shape::of_value(b"tok-0123456789abcdef0123").unwrap();
        let placeholder = shape.mint().unwrap();
        assert!(in_alphabet(
            &placeholder[4..],
            b"0123456789abcdefghijklmnopqrstuvwxyz"
        ));
        // A prefix a placeholder cannot hold, or too little randomness: no shape.
        assert!(Shape::of_value(b"a/b_0123456789abcdef").is_none());
        assert!(Shape::of_value(b"abcdefghijkl_012").is_none());
    }
}
