//! The encodings under which a secret value is recognised, and the forms a swapped value is
//! written in.
//!
//! This module owns turning a value into the byte strings the matcher looks for. It must never
//! keep an encoded value outside zeroized memory, and never print one.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use zeroize::Zeroizing;

/// Which characters a percent-encoder leaves alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PercentStyle {
    /// RFC 3986 unreserved characters kept (`A-Za-z0-9-._~`), everything else `%XX`
    /// (Python's `quote(s, safe="")`, most HTTP libraries).
    Rfc3986,
    /// As [`PercentStyle::Rfc3986`], but `/` kept too (Python's `quote` default).
    KeepSlash,
    /// JavaScript's `encodeURIComponent`: `A-Za-z0-9-_.!~*'()` kept.
    UriComponent,
    /// `application/x-www-form-urlencoded`: `A-Za-z0-9*-._` kept, space written `+`.
    Form,
}

/// How a JSON encoder escapes a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonStyle {
    /// Only what JSON requires: `"`, `\` and control characters (serde_json, JavaScript).
    Minimal,
    /// As minimal, plus `/` written `\/` (PHP, some Java encoders).
    EscapedSlash,
    /// As minimal, plus every non-ASCII character as `\uXXXX` (Python's `json.dumps` default).
    AsciiOnly,
    /// As minimal, plus `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX` (Go's `encoding/json`).
    HtmlSafe,
    /// As minimal, with control characters in upper-case hex, `\u001F` (Jackson's default).
    MinimalUpperHex,
    /// As [`JsonStyle::AsciiOnly`], in upper-case hex, `\u00E9` (Jackson's
    /// `ESCAPE_NON_ASCII`).
    AsciiOnlyUpperHex,
    /// .NET's `System.Text.Json` default: every non-ASCII character and each of
    /// `" & ' + < > \``` as `\uXXXX` in upper-case hex (`\u002B`, `\u0022`), the rest as
    /// minimal. Common in base64-shaped keys, whose `+` it escapes.
    DotNet,
}

impl JsonStyle {
    /// Whether `\uXXXX` escapes are written with upper-case hex digits.
    fn upper_hex(self) -> bool {
        matches!(
            self,
            JsonStyle::MinimalUpperHex | JsonStyle::AsciiOnlyUpperHex | JsonStyle::DotNet
        )
    }

    /// Whether the escaper writes `c` as `\uXXXX`, for the escapers that work on
    /// characters; `None` for those that work on bytes.
    fn escapes_char(self, c: char) -> Option<bool> {
        match self {
            JsonStyle::Minimal | JsonStyle::EscapedSlash | JsonStyle::MinimalUpperHex => None,
            JsonStyle::AsciiOnly | JsonStyle::AsciiOnlyUpperHex => Some(!c.is_ascii()),
            JsonStyle::HtmlSafe => Some(matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}')),
            JsonStyle::DotNet => {
                Some(!c.is_ascii() || matches!(c, '"' | '&' | '\'' | '+' | '<' | '>' | '`'))
            }
        }
    }
}

/// Which base64 alphabet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Base64Alphabet {
    /// `+` and `/` (RFC 4648 §4).
    Standard,
    /// `-` and `_` (RFC 4648 §5).
    UrlSafe,
}

/// One encoding under which a secret value is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// The value's own bytes.
    Raw,
    /// Percent-encoded.
    Percent {
        /// Which characters stay as they are.
        style: PercentStyle,
        /// Whether the hex digits are lowercase (`%2f`) rather than uppercase (`%2F`).
        lowercase: bool,
    },
    /// Escaped as inside a JSON string.
    Json {
        /// Which escaper.
        style: JsonStyle,
    },
    /// Base64 inside a longer base64 text: only the characters that depend on the value alone,
    /// for a value starting `offset` bytes (0, 1 or 2) into a 3-byte group.
    Base64 {
        /// Which alphabet.
        alphabet: Base64Alphabet,
        /// The value's first byte's position within its 3-byte group.
        offset: u8,
    },
    /// Hexadecimal.
    Hex {
        /// Whether the digits are lowercase.
        lowercase: bool,
    },
}

impl Encoding {
    /// Every encoding the guard looks for, in the order patterns are built (the first of two
    /// identical encodings of one value wins).
    pub const ALL: &'static [Encoding] = &[
        Encoding::Raw,
        Encoding::Percent {
            style: PercentStyle::Rfc3986,
            lowercase: false,
        },
        Encoding::Percent {
            style: PercentStyle::Rfc3986,
            lowercase: true,
        },
        Encoding::Percent {
            style: PercentStyle::KeepSlash,
            lowercase: false,
        },
        Encoding::Percent {
            style: PercentStyle::KeepSlash,
            lowercase: true,
        },
        Encoding::Percent {
            style: PercentStyle::UriComponent,
            lowercase: false,
        },
        Encoding::Percent {
            style: PercentStyle::UriComponent,
            lowercase: true,
        },
        Encoding::Percent {
            style: PercentStyle::Form,
            lowercase: false,
        },
        Encoding::Percent {
            style: PercentStyle::Form,
            lowercase: true,
        },
        Encoding::Json {
            style: JsonStyle::Minimal,
        },
        Encoding::Json {
            style: JsonStyle::EscapedSlash,
        },
        Encoding::Json {
            style: JsonStyle::AsciiOnly,
        },
        Encoding::Json {
            style: JsonStyle::HtmlSafe,
        },
        Encoding::Json {
            style: JsonStyle::MinimalUpperHex,
        },
        Encoding::Json {
            style: JsonStyle::AsciiOnlyUpperHex,
        },
        Encoding::Json {
            style: JsonStyle::DotNet,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::Standard,
            offset: 0,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::Standard,
            offset: 1,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::Standard,
            offset: 2,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::UrlSafe,
            offset: 0,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::UrlSafe,
            offset: 1,
        },
        Encoding::Base64 {
            alphabet: Base64Alphabet::UrlSafe,
            offset: 2,
        },
        Encoding::Hex { lowercase: true },
        Encoding::Hex { lowercase: false },
    ];

    /// The short name used in audit logs: `raw`, `percent`, `json`, `base64` or `hex`.
    pub fn family(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Percent { .. } => "percent",
            Encoding::Json { .. } => "json",
            Encoding::Base64 { .. } => "base64",
            Encoding::Hex { .. } => "hex",
        }
    }

    /// The bytes the guard looks for when `value` is written in this encoding, or `None` where
    /// the encoding cannot carry it (a non-UTF-8 value has no ASCII-only JSON form). The result
    /// holds the secret, so it is zeroized on drop; for base64 it is the part that depends on
    /// the value alone.
    pub fn encode(self, value: &crate::SecretValue) -> Option<Zeroizing<Vec<u8>>> {
        self.apply(value.expose())
    }

    /// The value under this encoding, or `None` where the encoding cannot carry it (a
    /// non-UTF-8 value has no ASCII-only JSON form).
    pub(crate) fn apply(self, value: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        match self {
            Encoding::Raw => Some(Zeroizing::new(value.to_vec())),
            Encoding::Percent { style, lowercase } => Some(percent(value, style, lowercase)),
            Encoding::Json { style } => json(value, style),
            Encoding::Base64 { alphabet, offset } => Some(base64_inner(value, alphabet, offset)),
            Encoding::Hex { lowercase } => {
                let mut out = Zeroizing::new(vec![0u8; value.len() * 2]);
                let digits: &[u8; 16] = if lowercase {
                    b"0123456789abcdef"
                } else {
                    b"0123456789ABCDEF"
                };
                for (i, &b) in value.iter().enumerate() {
                    out[2 * i] = digits[usize::from(b >> 4)];
                    out[2 * i + 1] = digits[usize::from(b & 0xf)];
                }
                Some(out)
            }
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encoding::Base64 { offset, .. } => write!(f, "base64 (offset {offset})"),
            other => f.write_str(other.family()),
        }
    }
}

/// The form in which a swapped value is written into a request, so that it reads as the
/// placeholder did in its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SwapForm {
    /// The value's own bytes (headers, opaque bodies).
    #[default]
    Raw,
    /// Percent-encoded, RFC 3986 unreserved characters kept (URL paths and queries).
    Percent,
    /// `application/x-www-form-urlencoded` (form bodies).
    Form,
    /// Escaped for a JSON string (JSON bodies).
    Json,
}

impl SwapForm {
    /// The value as it is written into the request.
    pub(crate) fn apply(self, value: &[u8]) -> Zeroizing<Vec<u8>> {
        match self {
            SwapForm::Raw => Zeroizing::new(value.to_vec()),
            SwapForm::Percent => percent(value, PercentStyle::Rfc3986, false),
            SwapForm::Form => percent(value, PercentStyle::Form, false),
            SwapForm::Json => json(value, JsonStyle::Minimal).unwrap_or_else(|| {
                // `Minimal` always applies; this arm only keeps the function total.
                Zeroizing::new(value.to_vec())
            }),
        }
    }
}

fn percent(value: &[u8], style: PercentStyle, lowercase: bool) -> Zeroizing<Vec<u8>> {
    let digits: &[u8; 16] = if lowercase {
        b"0123456789abcdef"
    } else {
        b"0123456789ABCDEF"
    };
    let mut out = Zeroizing::new(Vec::with_capacity(value.len() * 3));
    for &b in value {
        let keep = b.is_ascii_alphanumeric()
            || match style {
                PercentStyle::Rfc3986 => matches!(b, b'-' | b'.' | b'_' | b'~'),
                PercentStyle::KeepSlash => matches!(b, b'-' | b'.' | b'_' | b'~' | b'/'),
                PercentStyle::UriComponent => {
                    matches!(
                        b,
                        b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')'
                    )
                }
                PercentStyle::Form => matches!(b, b'*' | b'-' | b'.' | b'_'),
            };
        if keep {
            out.push(b);
        } else if b == b' ' && style == PercentStyle::Form {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[
                b'%',
                digits[usize::from(b >> 4)],
                digits[usize::from(b & 0xf)],
            ]);
        }
    }
    out
}

fn json(value: &[u8], style: JsonStyle) -> Option<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::with_capacity(value.len() + 8));
    let digits: &[u8; 16] = if style.upper_hex() {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let push_u = |out: &mut Vec<u8>, unit: u32| {
        out.extend_from_slice(b"\\u");
        for shift in [12, 8, 4, 0] {
            out.push(digits[((unit >> shift) & 0xf) as usize]);
        }
    };
    if style.escapes_char('a').is_none() {
        json_byte_run(value, style, &mut out, push_u);
        return Some(out);
    }
    // These escapers work on characters, so the value must be text.
    let text = std::str::from_utf8(value).ok()?;
    for c in text.chars() {
        if style.escapes_char(c) == Some(true) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                push_u(&mut out, u32::from(*unit));
            }
        } else {
            let mut bytes = [0u8; 4];
            json_byte_run(
                c.encode_utf8(&mut bytes).as_bytes(),
                style,
                &mut out,
                push_u,
            );
        }
    }
    Some(out)
}

fn json_byte_run(
    bytes: &[u8],
    style: JsonStyle,
    out: &mut Vec<u8>,
    push_u: impl Fn(&mut Vec<u8>, u32),
) {
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'/' if style == JsonStyle::EscapedSlash => out.extend_from_slice(b"\\/"),
            b if b < 0x20 => push_u(out, u32::from(b)),
            b => out.push(b),
        }
    }
}

/// The base64 characters that depend on `value` alone, for a value that starts `offset` bytes
/// into a 3-byte group of a longer base64 text.
fn base64_inner(value: &[u8], alphabet: Base64Alphabet, offset: u8) -> Zeroizing<Vec<u8>> {
    let offset = usize::from(offset % 3);
    let mut padded = Zeroizing::new(vec![0u8; offset]);
    padded.extend_from_slice(value);
    while padded.len() % 3 != 0 {
        padded.push(0);
    }
    let engine = match alphabet {
        Base64Alphabet::Standard => &STANDARD_NO_PAD,
        Base64Alphabet::UrlSafe => &URL_SAFE_NO_PAD,
    };
    let mut encoded = Zeroizing::new(vec![0u8; padded.len() / 3 * 4]);
    let written = engine
        .encode_slice(&padded[..], &mut encoded[..])
        .unwrap_or(0);
    // Character j covers bits [6j, 6j+6); the value covers bits [8*offset, 8*(offset+len)).
    let first = (8 * offset).div_ceil(6);
    let end = (8 * (offset + value.len()) / 6).min(written);
    Zeroizing::new(encoded.get(first..end).unwrap_or_default().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: &[u8], e: Encoding) -> Vec<u8> {
        e.apply(value).map(|z| z.to_vec()).unwrap_or_default()
    }

    #[test]
    fn percent_styles_differ_where_encoders_differ() {
        let v = b"a/b c+d~e*f";
        let cases: &[(PercentStyle, bool, &[u8])] = &[
            (PercentStyle::Rfc3986, false, b"a%2Fb%20c%2Bd~e%2Af"),
            (PercentStyle::Rfc3986, true, b"a%2fb%20c%2bd~e%2af"),
            (PercentStyle::KeepSlash, false, b"a/b%20c%2Bd~e%2Af"),
            (PercentStyle::UriComponent, false, b"a%2Fb%20c%2Bd~e*f"),
            (PercentStyle::Form, false, b"a%2Fb+c%2Bd%7Ee*f"),
        ];
        for (style, lowercase, want) in cases {
            let got = enc(
                v,
                Encoding::Percent {
                    style: *style,
                    lowercase: *lowercase,
                },
            );
            assert_eq!(got, *want, "{style:?} lowercase={lowercase}");
        }
    }

    #[test]
    fn json_styles_match_common_serialisers() {
        let v = "q\"\\/\n<é\u{1}".as_bytes();
        let cases: &[(JsonStyle, &[u8])] = &[
            (JsonStyle::Minimal, "q\\\"\\\\/\\n<é\\u0001".as_bytes()),
            (
                JsonStyle::EscapedSlash,
                "q\\\"\\\\\\/\\n<é\\u0001".as_bytes(),
            ),
            (JsonStyle::AsciiOnly, b"q\\\"\\\\/\\n<\\u00e9\\u0001"),
            (
                JsonStyle::HtmlSafe,
                "q\\\"\\\\/\\n\\u003cé\\u0001".as_bytes(),
            ),
        ];
        for (style, want) in cases {
            assert_eq!(enc(v, Encoding::Json { style: *style }), *want, "{style:?}");
        }
        // Upper-case hex: Jackson (control characters; `ESCAPE_NON_ASCII`) and .NET's
        // System.Text.Json, which escapes `"`, `+` and the HTML-sensitive characters too.
        let upper: &[(JsonStyle, &[u8])] = &[
            (
                JsonStyle::MinimalUpperHex,
                "q\\\"\\\\/\\n<é\\u001F".as_bytes(),
            ),
            (
                JsonStyle::AsciiOnlyUpperHex,
                b"q\\\"\\\\/\\n<\\u00E9\\u001F",
            ),
            (JsonStyle::DotNet, b"q\\u0022\\\\/\\n\\u003C\\u00E9\\u001F"),
        ];
        let v_upper = "q\"\\/\n<é\u{1f}".as_bytes();
        for (style, want) in upper {
            let got = enc(v_upper, Encoding::Json { style: *style });
            assert_eq!(got, *want, "{style:?}");
        }
        assert_eq!(
            enc(
                b"k+e/y=",
                Encoding::Json {
                    style: JsonStyle::DotNet
                }
            ),
            b"k\\u002Be/y="
        );
        // Astral characters become surrogate pairs, as Python writes them.
        assert_eq!(
            enc(
                "😀".as_bytes(),
                Encoding::Json {
                    style: JsonStyle::AsciiOnly
                }
            ),
            b"\\ud83d\\ude00"
        );
        // Non-UTF-8 values have no character-based JSON form.
        assert!(
            Encoding::Json {
                style: JsonStyle::AsciiOnly
            }
            .apply(&[0xff, 0xfe])
            .is_none()
        );
    }

    #[test]
    fn base64_inner_matches_every_alignment_of_a_real_encoding() {
        let value = b"s3cr3t-value!";
        for prefix_len in 0..6usize {
            for suffix_len in 0..4usize {
                let mut text = vec![b'x'; prefix_len];
                text.extend_from_slice(value);
                text.extend(std::iter::repeat_n(b'y', suffix_len));
                for (alphabet, engine) in [
                    (
                        Base64Alphabet::Standard,
                        &base64::engine::general_purpose::STANDARD,
                    ),
                    (
                        Base64Alphabet::UrlSafe,
                        &base64::engine::general_purpose::URL_SAFE,
                    ),
                ] {
                    let full = engine.encode(&text);
                    let offset = (prefix_len % 3) as u8;
                    let inner = enc(value, Encoding::Base64 { alphabet, offset });
                    assert!(inner.len() >= value.len() * 4 / 3 - 2);
                    assert!(
                        full.as_bytes()
                            .windows(inner.len())
                            .any(|w| w == inner.as_slice()),
                        "prefix {prefix_len} suffix {suffix_len} {alphabet:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn hex_both_cases() {
        assert_eq!(
            enc(&[0xde, 0xad, 0x01], Encoding::Hex { lowercase: true }),
            b"dead01"
        );
        assert_eq!(
            enc(&[0xde, 0xad, 0x01], Encoding::Hex { lowercase: false }),
            b"DEAD01"
        );
    }

    #[test]
    fn swap_forms_write_the_value_for_its_context() {
        let v = b"p@ss \"w\"/rd";
        assert_eq!(SwapForm::Raw.apply(v).as_slice(), v);
        assert_eq!(
            SwapForm::Percent.apply(v).as_slice(),
            b"p%40ss%20%22w%22%2Frd"
        );
        assert_eq!(SwapForm::Form.apply(v).as_slice(), b"p%40ss+%22w%22%2Frd");
        assert_eq!(SwapForm::Json.apply(v).as_slice(), b"p@ss \\\"w\\\"/rd");
    }

    #[test]
    fn encoding_display_names_the_family() {
        assert_eq!(Encoding::Raw.to_string(), "raw");
        assert_eq!(
            Encoding::Base64 {
                alphabet: Base64Alphabet::UrlSafe,
                offset: 2
            }
            .to_string(),
            "base64 (offset 2)"
        );
        assert_eq!(Encoding::Hex { lowercase: true }.family(), "hex");
    }
}
