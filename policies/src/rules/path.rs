//! A request path in the one form request rules are matched against, and its segments.
//!
//! ```
//! use sluice_policies::normalize_path;
//!
//! assert_eq!(normalize_path("/repos/acme/x/../%79"), "/repos/acme/y");
//! assert_eq!(normalize_path("//repos//acme/"), "/repos/acme/");
//! assert_eq!(normalize_path("/a/%2f/b"), "/a/%2F/b");
//! ```
//!
//! Normalising never guesses what an upstream will read into a path: an escape of a
//! character with a meaning (`/`, `\`, `%`), a `\`, a `;` or a stray `%` stays as it came,
//! and marks its segment *opaque*, which only a literal pattern segment matches.

use std::borrow::Cow;
use std::ops::Range;

/// The path as request rules see it: escapes of unreserved characters decoded (the
/// others' hex in capitals), dot segments removed (RFC 3986 §5.2.4), and every run of `/`
/// made one. A path that does not start with `/` (`*`) is returned unchanged; no pattern
/// matches it.
pub fn normalize_path(raw: &str) -> Cow<'_, str> {
    if is_normal(raw) {
        return Cow::Borrowed(raw);
    }
    let Some(rest) = raw.strip_prefix('/') else {
        return Cow::Borrowed(raw);
    };
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    let mut trailing_slash = false;
    for segment in rest.split('/') {
        let segment = decode_unreserved(segment);
        trailing_slash = true;
        match segment.as_ref() {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            _ => {
                kept.push(segment);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::with_capacity(raw.len());
    for segment in &kept {
        out.push('/');
        out.push_str(segment);
    }
    if trailing_slash || kept.is_empty() {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Whether `raw` is already normal: no escape, no empty segment but a trailing one, no dot
/// segment. (A path with an escape takes the slow way even when it is normal.)
fn is_normal(raw: &str) -> bool {
    let Some(rest) = raw.strip_prefix('/') else {
        return true;
    };
    if raw.contains('%') || raw.contains("//") {
        return false;
    }
    rest.split('/').all(|s| s != "." && s != "..")
}

/// Decodes `%XX` where XX is an unreserved character (RFC 3986 §2.3); writes the hex of
/// every other escape in capitals; leaves a `%` without two hex digits as it is.
fn decode_unreserved(segment: &str) -> Cow<'_, str> {
    if !segment.contains('%') {
        return Cow::Borrowed(segment);
    }
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok().map(|b| (b, hex)));
        match escape {
            Some((b, _)) if is_unreserved(b) => {
                out.push(char::from(b));
                i += 3;
            }
            Some((_, hex)) => {
                out.push('%');
                out.push_str(&hex.to_ascii_uppercase());
                i += 3;
            }
            None => {
                // Copied a character at a time: the path may hold UTF-8.
                let ch = segment[i..].chars().next().unwrap_or('%');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    Cow::Owned(out)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// Whether an upstream could read a segment as more than one segment, or as a different
/// one: it holds an escaped `/`, `\` or `%`, a raw `\` or `;`, or a `%` that starts no
/// escape. Only a literal pattern segment that spells it matches it.
pub(crate) fn is_opaque(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| match b {
        b'\\' | b';' => true,
        b'%' => match bytes.get(i + 1..i + 3) {
            Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => {
                matches!(
                    [a.to_ascii_uppercase(), b.to_ascii_uppercase()],
                    [b'2', b'F'] | [b'5', b'C'] | [b'2', b'5']
                )
            }
            _ => true,
        },
        _ => false,
    })
}

/// A normalised path cut into its segments once, for every rule to read.
#[derive(Debug)]
pub(crate) struct Segments {
    /// Each segment's range in the path, and whether it is opaque.
    pub(crate) spans: Vec<(Range<usize>, bool)>,
}

impl Segments {
    /// The segments of a normalised `path` (`/` is one empty segment; `/a/` is `a` and an
    /// empty one). `None` for a path that does not start with `/`.
    pub(crate) fn of(path: &str) -> Option<Segments> {
        let rest = path.strip_prefix('/')?;
        let mut spans = Vec::with_capacity(8);
        let mut start = 1;
        for segment in rest.split('/') {
            let end = start + segment.len();
            spans.push((start..end, is_opaque(segment)));
            start = end + 1;
        }
        Some(Segments { spans })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_and_double_slashes_go() {
        for (raw, normal) in [
            ("/", "/"),
            ("", ""),
            ("*", "*"),
            ("/a/b", "/a/b"),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/../../etc", "/etc"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/a//b", "/a/b"),
            ("//a", "/a"),
            ("/a//", "/a/"),
            ("/a/%2e%2E/b", "/b"),
            ("/a/.%2e/b", "/b"),
            ("/%7Euser", "/~user"),
            ("/%41%62c", "/Abc"),
            ("/a%2fb", "/a%2Fb"),
            ("/a%zzb", "/a%zzb"),
            ("/a%", "/a%"),
            ("/caf%C3%A9", "/caf%C3%A9"),
            ("/..;/admin", "/..;/admin"),
            ("/user/", "/user/"),
        ] {
            assert_eq!(normalize_path(raw), normal, "{raw}");
        }
    }

    #[test]
    fn normalising_twice_changes_nothing() {
        for raw in ["/a/%2e%2e/%2e/b", "/%25%32%46", "//x//y/../z/", "/%7e/%7E"] {
            let once = normalize_path(raw).into_owned();
            assert_eq!(normalize_path(&once), once);
        }
    }

    #[test]
    fn segments_that_could_read_as_two_are_opaque() {
        for opaque in [
            "a%2Fb", "a%2fb", "%5C", "..%5c", "%252F", "a\\b", "..;", "a%", "a%g1",
        ] {
            assert!(is_opaque(opaque), "{opaque}");
        }
        for plain in ["a", "", "%20", "%C3%A9", "a.b", "~x"] {
            assert!(!is_opaque(plain), "{plain}");
        }
    }

    #[test]
    fn segments_keep_a_trailing_empty_one() {
        let path = "/repos/a%2Fb/";
        let segments = Segments::of(path).unwrap();
        let texts: Vec<(&str, bool)> = segments
            .spans
            .iter()
            .map(|(r, opaque)| (&path[r.clone()], *opaque))
            .collect();
        assert_eq!(texts, [("repos", false), ("a%2Fb", true), ("", false)]);
        assert_eq!(Segments::of("/").unwrap().spans.len(), 1);
        assert!(Segments::of("*").is_none());
    }
}
