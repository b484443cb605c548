//! A path pattern of a request rule: literal segments, `*` for one segment, `**` for any
//! number of them.
//!
//! A pattern is written in the form paths are matched in (see `path.rs`), so that what a
//! reader sees is what matches; one written otherwise could never match and is refused,
//! with its normal form as the fix. Matching is linear: a pattern holds at most one `**`.

use super::RuleProblem;
use super::path::{Segments, normalize_path};

/// One segment of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    /// Exactly this text.
    Literal(Box<str>),
    /// `*`: one segment, not empty, not opaque.
    One,
}

/// A compiled path pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PathPattern {
    /// The segments before `**` (all of them when there is none).
    head: Vec<Seg>,
    /// With a `**`: the segments after it.
    tail: Option<Vec<Seg>>,
}

impl PathPattern {
    /// Parses a pattern as written in `paths:`.
    pub(crate) fn parse(text: &str) -> Result<PathPattern, RuleProblem> {
        let bad = |problem: fn(String) -> RuleProblem| Err(problem(text.to_owned()));
        if !text.starts_with('/') {
            return bad(|found| RuleProblem::PathNotAbsolute { found });
        }
        if text.contains(['?', '#']) {
            return bad(|found| RuleProblem::PathWithQuery { found });
        }
        if text.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(RuleProblem::PathNotVisible {
                found: text.escape_debug().to_string(),
            });
        }
        let normal = normalize_path(text);
        if normal != text {
            return Err(RuleProblem::NeverNormal {
                found: text.to_owned(),
                normal: normal.into_owned(),
            });
        }
        let mut head = Vec::new();
        let mut tail: Option<Vec<Seg>> = None;
        for segment in text[1..].split('/') {
            let seg = match segment {
                "**" if tail.is_some() => {
                    return bad(|found| RuleProblem::TwoDoubleStars { found });
                }
                "**" => {
                    tail = Some(Vec::new());
                    continue;
                }
                "*" => Seg::One,
                s if s.contains('*') => {
                    return Err(RuleProblem::PartialWildcard {
                        found: text.to_owned(),
                        segment: s.to_owned(),
                    });
                }
                s => Seg::Literal(s.into()),
            };
            match &mut tail {
                Some(tail) => tail.push(seg),
                None => head.push(seg),
            }
        }
        Ok(PathPattern { head, tail })
    }

    /// Whether the normalised `path`, cut into `segments`, matches.
    pub(crate) fn matches(&self, path: &str, segments: &Segments) -> bool {
        let spans = segments.spans.as_slice();
        let one = |seg: &Seg, (range, opaque): &(std::ops::Range<usize>, bool)| match seg {
            Seg::Literal(text) => **text == path[range.clone()],
            Seg::One => !range.is_empty() && !opaque,
        };
        let Some(tail) = &self.tail else {
            return spans.len() == self.head.len()
                && self.head.iter().zip(spans).all(|(s, p)| one(s, p));
        };
        let Some(middle_len) = spans.len().checked_sub(self.head.len() + tail.len()) else {
            return false;
        };
        let (before, rest) = spans.split_at(self.head.len());
        let (middle, after) = rest.split_at(middle_len);
        self.head.iter().zip(before).all(|(s, p)| one(s, p))
            && tail.iter().zip(after).all(|(s, p)| one(s, p))
            // `**` spans no segment an upstream could read as a way out of it.
            && middle.iter().all(|(_, opaque)| !opaque)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        let pattern = PathPattern::parse(pattern).unwrap();
        let path = normalize_path(path);
        let segments = Segments::of(&path).unwrap();
        pattern.matches(&path, &segments)
    }

    #[test]
    fn one_star_is_one_segment_and_two_are_any() {
        assert!(matches("/repos/*/issues", "/repos/acme/issues"));
        assert!(!matches("/repos/*/issues", "/repos/acme/x/issues"));
        assert!(!matches("/repos/*/issues", "/repos//issues"));
        assert!(matches("/repos/acme/**", "/repos/acme"));
        assert!(matches("/repos/acme/**", "/repos/acme/"));
        assert!(matches("/repos/acme/**", "/repos/acme/x/y/z"));
        assert!(!matches("/repos/acme/**", "/repos/acmex"));
        assert!(!matches("/repos/acme/**", "/repos/other"));
        assert!(matches("/**/issues", "/repos/a/b/issues"));
        assert!(matches("/**/issues", "/issues"));
        assert!(matches("/a/**/z", "/a/z"));
        assert!(matches("/a/**/z", "/a/b/c/z"));
        assert!(!matches("/a/**/z", "/a/b/c/y"));
        assert!(matches("/**", "/"));
        assert!(matches("/", "/"));
        assert!(!matches("/", "/a"));
    }

    #[test]
    fn near_misses_miss() {
        // Case is part of a path.
        assert!(!matches("/repos/acme/**", "/Repos/acme/x"));
        // A trailing slash is another path.
        assert!(matches("/user", "/user"));
        assert!(!matches("/user", "/user/"));
        assert!(!matches("/user/", "/user"));
        // Dot segments are resolved before matching.
        assert!(!matches("/repos/acme/**", "/repos/acme/../other/x"));
        assert!(!matches("/repos/acme/**", "/repos/acme/%2e%2e/other"));
        assert!(matches("/repos/acme/**", "/repos/other/../acme/x"));
        // An encoded slash or backslash is never a wildcard's.
        assert!(!matches("/repos/acme/*", "/repos/acme/..%2F..%2Fadmin"));
        assert!(!matches(
            "/repos/acme/**",
            "/repos/acme/x%2F..%2F..%2Fadmin"
        ));
        assert!(!matches("/repos/acme/**", "/repos/acme/..%5Cadmin"));
        assert!(!matches("/repos/acme/**", "/repos/acme/..;/admin"));
        assert!(!matches("/repos/acme/**", "/repos/acme/%252F"));
        // Unless a literal spells it.
        assert!(matches("/files/a%2Fb", "/files/a%2fb"));
    }

    #[test]
    fn bad_patterns_say_why() {
        let problem = |p: &str| PathPattern::parse(p).unwrap_err();
        assert!(matches!(
            problem("repos/*"),
            RuleProblem::PathNotAbsolute { .. }
        ));
        assert!(matches!(
            problem("/a?b=1"),
            RuleProblem::PathWithQuery { .. }
        ));
        assert!(matches!(
            problem("/a/**/b/**"),
            RuleProblem::TwoDoubleStars { .. }
        ));
        assert!(matches!(
            problem("/v1/*.json"),
            RuleProblem::PartialWildcard { .. }
        ));
        assert!(matches!(
            problem("/a b"),
            RuleProblem::PathNotVisible { .. }
        ));
        let RuleProblem::NeverNormal { normal, .. } = problem("/a/../b") else {
            panic!("a dot segment can never match")
        };
        assert_eq!(normal, "/b");
        for never in ["/a//b", "/a/./b", "/%7Euser", "/a%2fb"] {
            assert!(
                matches!(problem(never), RuleProblem::NeverNormal { .. }),
                "{never}"
            );
        }
        assert!(PathPattern::parse("/a%2Fb/**").is_ok());
    }
}
