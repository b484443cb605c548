//! The guard: one Aho-Corasick automaton over every placeholder and every encoding of every
//! known secret value.
//!
//! This module owns building that automaton, refusing declarations that would make matching
//! ambiguous, and reporting matches. It decides nothing about what a match means: that is the
//! [`Plan`](crate::Plan)'s job, and applying it is the rewriter's. It must never print a value:
//! `Debug` shows names and counts only.

use std::fmt;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use zeroize::Zeroizing;

use crate::encoding::Encoding;
use crate::prefilter::{QgramFilter, StartFilter};
use crate::search::{FALLBACK_MIN_REGION, Matches};
use crate::{GuardError, MAX_VALUE_LEN, MIN_VALUE_LEN, Placeholder, SecretId, SecretValue};

mod names;

/// The most secrets one guard holds.
pub const MAX_SECRETS: usize = 4096;

/// Up to this many bytes of patterns in all, the guard builds a DFA (fastest scan, largest
/// tables); above, a contiguous NFA.
const DFA_PATTERN_BYTES: usize = 40 * 1024;

/// Up to this many patterns, aho-corasick searches with its packed SIMD searcher (Teddy) at
/// about 14 GB/s here; the q-gram prefilter beats that only with a long stride (measured on
/// one secret: stride 33, 23 GB/s; stride 5, 4 GB/s). So below [`PACKED_MIN_STRIDE`], a guard
/// of that few patterns runs its automaton alone.
const PACKED_MAX_PATTERNS: usize = 64;
const PACKED_MIN_STRIDE: usize = 16;

/// What a match found: a secret's placeholder, or its real value under some encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// The secret's placeholder.
    Placeholder,
    /// The secret's real value, written in this encoding.
    Value(Encoding),
}

impl Form {
    /// Whether this is a real value (in any encoding) rather than a placeholder.
    pub fn is_value(self) -> bool {
        matches!(self, Form::Value(_))
    }
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Form::Placeholder => f.write_str("placeholder"),
            Form::Value(Encoding::Raw) => f.write_str("real value"),
            Form::Value(encoding) => write!(f, "real value ({encoding})"),
        }
    }
}

/// One match in a haystack: which secret, what of it, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hit {
    /// The secret matched.
    pub secret: SecretId,
    /// What of it matched.
    pub form: Form,
    /// Byte offset where the match starts.
    pub start: usize,
    /// Byte offset just past the match.
    pub end: usize,
}

/// Collects secrets, then builds a [`Guard`].
///
/// # Defaults
/// - No secrets: the built guard matches nothing and every rewrite passes input through.
#[derive(Default)]
pub struct GuardBuilder {
    secrets: Vec<Secret>,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field(
                "secrets",
                &self.secrets.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl GuardBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret under `name`, with the placeholder the sandbox sees and the real value.
    ///
    /// # Errors
    /// [`GuardError::EmptyName`], [`GuardError::DuplicateName`],
    /// [`GuardError::ValueTooShort`] (under [`MIN_VALUE_LEN`]),
    /// [`GuardError::ValueTooLong`] (over [`MAX_VALUE_LEN`]) or
    /// [`GuardError::TooManySecrets`] (over [`MAX_SECRETS`]).
    pub fn add(
        &mut self,
        name: impl Into<String>,
        placeholder: Placeholder,
        value: SecretValue,
    ) -> Result<SecretId, GuardError> {
        let name = name.into();
        if name.is_empty() {
            return Err(GuardError::EmptyName);
        }
        if self.secrets.iter().any(|s| s.name == name) {
            return Err(GuardError::DuplicateName { name });
        }
        if value.len() < MIN_VALUE_LEN {
            return Err(GuardError::ValueTooShort {
                name,
                len: value.len(),
                min: MIN_VALUE_LEN,
            });
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(GuardError::ValueTooLong {
                name,
                len: value.len(),
                max: MAX_VALUE_LEN,
            });
        }
        if self.secrets.len() >= MAX_SECRETS {
            return Err(GuardError::TooManySecrets {
                count: self.secrets.len() + 1,
                max: MAX_SECRETS,
            });
        }
        let id = SecretId(u32::try_from(self.secrets.len()).unwrap_or(u32::MAX));
        self.secrets.push(Secret {
            name,
            placeholder,
            value,
            retired: Vec::new(),
        });
        Ok(id)
    }

    /// Adds a value `id`'s secret held before (a rotated one): it is matched like the
    /// current value, every encoding of it, and redacted into the same placeholder, but
    /// never swapped in ([`Guard::value`] stays the current one). A proxy that reloads its
    /// sources keeps every value it has known this way, so that a rotated value that comes
    /// back is still caught.
    ///
    /// # Example
    ///
    /// ```
    /// use sluice_guard::{Guard, Placeholder, SecretValue};
    ///
    /// let mut builder = Guard::builder();
    /// let id = builder.add(
    ///     "token",
    ///     Placeholder::parse("SLUICE_TOKEN_0123456789abcdef")?,
    ///     SecretValue::new(b"new-value-2".to_vec()),
    /// )?;
    /// builder.add_retired(id, SecretValue::new(b"old-value-1".to_vec()))?;
    /// let guard = builder.build()?;
    /// assert_eq!(guard.redact_str("was old-value-1"), "was SLUICE_TOKEN_0123456789abcdef");
    /// assert_eq!(guard.value(id).expose(), b"new-value-2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`GuardError::UnknownSecret`] for an id this builder did not return,
    /// [`GuardError::ValueTooShort`] and [`GuardError::ValueTooLong`] as for [`add`](Self::add).
    pub fn add_retired(&mut self, id: SecretId, value: SecretValue) -> Result<(), GuardError> {
        let Some(secret) = self.secrets.get_mut(id.index()) else {
            return Err(GuardError::UnknownSecret { id: id.index() });
        };
        if value.len() < MIN_VALUE_LEN {
            return Err(GuardError::ValueTooShort {
                name: secret.name.clone(),
                len: value.len(),
                min: MIN_VALUE_LEN,
            });
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(GuardError::ValueTooLong {
                name: secret.name.clone(),
                len: value.len(),
                max: MAX_VALUE_LEN,
            });
        }
        if value.expose() != secret.value.expose()
            && secret
                .retired
                .iter()
                .all(|old| old.expose() != value.expose())
        {
            secret.retired.push(value);
        }
        Ok(())
    }

    /// Builds the guard: every placeholder and every distinct encoding of every value, in one
    /// leftmost-longest automaton.
    ///
    /// # Errors
    /// [`GuardError::SharedValue`] when two secrets share a value or an encoding of one;
    /// [`GuardError::Overlap`] when a placeholder contains, or is contained in, any other
    /// pattern; [`GuardError::Matcher`] if the automaton cannot be built.
    pub fn build(self) -> Result<Guard, GuardError> {
        let mut texts: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        let mut infos: Vec<PatternInfo> = Vec::new();
        for (index, secret) in self.secrets.iter().enumerate() {
            let id = SecretId(u32::try_from(index).unwrap_or(u32::MAX));
            let first_of_secret = texts.len();
            texts.push(Zeroizing::new(secret.placeholder.as_bytes().to_vec()));
            infos.push(PatternInfo {
                secret: id,
                form: Form::Placeholder,
            });
            // The current value first, then the retired ones: matched alike, swapped never.
            for value in std::iter::once(&secret.value).chain(&secret.retired) {
                for &encoding in Encoding::ALL {
                    let Some(text) = encoding.apply(value.expose()) else {
                        continue;
                    };
                    if text.is_empty() || texts[first_of_secret..].iter().any(|t| **t == *text) {
                        continue;
                    }
                    texts.push(text);
                    infos.push(PatternInfo {
                        secret: id,
                        form: Form::Value(encoding),
                    });
                }
            }
        }
        // Header and trailer names reach sluice lowercased: values and placeholders are
        // matched there without regard to ASCII case. A value must never pass in a name; a
        // placeholder in one can never be swapped, and a request must be refused for it.
        // The automaton holds the patterns lowercased and is searched over lowercased text:
        // the same matches as the crate's case-insensitive mode, built about six times as
        // fast (that mode doubles every letter's transitions; docs/benchmarks.md).
        let name_texts: Vec<Zeroizing<Vec<u8>>> = texts
            .iter()
            .map(|text| Zeroizing::new(text.to_ascii_lowercase()))
            .collect();
        let name_secrets: Vec<(SecretId, bool)> = infos
            .iter()
            .map(|info| (info.secret, info.form == Form::Placeholder))
            .collect();
        // Standard semantics, so that every value a name holds can be reported
        // (`values_in_name`), overlapping ones included.
        let build_names = || {
            let names = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(name_texts.iter().map(|t| t.as_slice()))
                .map_err(|e| GuardError::Matcher {
                    reason: e.to_string(),
                })?;
            // The same automaton finds every overlap between patterns (each one exact is
            // one without regard to case too), so no second one is built for it.
            check_overlaps(&self.secrets, &texts, &name_texts, &infos, &names)?;
            Ok::<_, GuardError>(names)
        };

        // A DFA scans about twice as fast as the NFAs but costs some 400 bytes of table per
        // pattern byte: take it while that stays near 16 MiB.
        let pattern_bytes: usize = texts.iter().map(|t| t.len()).sum();
        let kind = (pattern_bytes <= DFA_PATTERN_BYTES).then_some(AhoCorasickKind::DFA);
        let build_matcher = || {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(kind)
                .build(texts.iter().map(|t| t.as_slice()))
                .map_err(|e| GuardError::Matcher {
                    reason: e.to_string(),
                })
        };
        // The two automata are independent: a large guard builds them on two threads, a
        // small one on this thread alone (a thread would cost more than it saves).
        let (names, matcher) = if pattern_bytes > PARALLEL_BUILD_BYTES {
            std::thread::scope(|scope| {
                // No thread to be had (a process at its limit): both here, one after the other.
                match std::thread::Builder::new().spawn_scoped(scope, build_names) {
                    Ok(names) => {
                        let matcher = build_matcher();
                        let names = names
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                        (names, matcher)
                    }
                    Err(_) => (build_names(), build_matcher()),
                }
            })
        } else {
            (build_names(), build_matcher())
        };
        let (names, matcher) = (names?, matcher?);

        let shortest_name_pattern = name_texts
            .iter()
            .map(|t| t.len())
            .min()
            .unwrap_or(usize::MAX);

        let mut first_bytes = [false; 256];
        for t in &texts {
            first_bytes[usize::from(t[0])] = true;
        }
        let max_len = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        let filter = QgramFilter::new(&texts);
        let prefilter = filter
            .as_ref()
            .is_some_and(|f| texts.len() > PACKED_MAX_PATTERNS || f.stride() >= PACKED_MIN_STRIDE);
        let starts = StartFilter::new(&texts);
        let mut sorted = texts;
        sorted.sort_unstable_by(|a, b| a.as_slice().cmp(b.as_slice()));
        sorted.dedup_by(|a, b| a.as_slice() == b.as_slice());

        Ok(Guard {
            secrets: self.secrets,
            matcher,
            names,
            name_secrets,
            shortest_name_pattern,
            patterns: infos,
            sorted,
            first_bytes,
            starts,
            filter,
            prefilter,
            fallback_min: FALLBACK_MIN_REGION,
            max_len,
        })
    }
}

/// Beyond this many bytes of patterns (some 30 secrets) the two automata are built on two
/// threads at once.
const PARALLEL_BUILD_BYTES: usize = 4096;

/// Refuses pattern sets whose matches would be ambiguous: a placeholder inside (or around)
/// another pattern, or two secrets with an identical pattern. `all` is a Standard automaton
/// over `lowercase` (`texts` lowercased, in their order: the name matcher); each of its
/// hits is checked byte for byte in `texts`, so only exact overlaps count.
fn check_overlaps(
    secrets: &[Secret],
    texts: &[Zeroizing<Vec<u8>>],
    lowercase: &[Zeroizing<Vec<u8>>],
    infos: &[PatternInfo],
    all: &AhoCorasick,
) -> Result<(), GuardError> {
    if texts.len() < 2 {
        return Ok(());
    }
    for (i, text) in texts.iter().enumerate() {
        // Lowercasing keeps every byte's place, so a match in `lowercase[i]` is at the same
        // offsets in `text`, where it must hold exactly.
        for m in all.find_overlapping_iter(lowercase[i].as_slice()) {
            let j = m.pattern().as_usize();
            if i == j || text[m.start()..m.end()] != *texts[j] {
                continue;
            }
            let (outer, inner) = (infos[i], infos[j]);
            let involves_placeholder =
                outer.form == Form::Placeholder || inner.form == Form::Placeholder;
            let name = |id: SecretId| secrets[id.index()].name.clone();
            if involves_placeholder {
                return Err(GuardError::Overlap {
                    first: name(outer.secret),
                    first_form: outer.form,
                    second: name(inner.secret),
                    second_form: inner.form,
                });
            }
            // Two values: one secret's encodings may contain each other, and one secret's
            // value may contain another's (the longer match wins and redacts both). Equal
            // patterns under two names cannot say which placeholder to write back.
            if outer.secret != inner.secret && texts[j].len() == text.len() {
                let (first, second) = if outer.secret < inner.secret {
                    (outer.secret, inner.secret)
                } else {
                    (inner.secret, outer.secret)
                };
                return Err(GuardError::SharedValue {
                    first: name(first),
                    second: name(second),
                });
            }
        }
    }
    Ok(())
}

struct Secret {
    name: String,
    placeholder: Placeholder,
    value: SecretValue,
    /// Values it held before, matched and redacted, never swapped in.
    retired: Vec<SecretValue>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct PatternInfo {
    pub(crate) secret: SecretId,
    pub(crate) form: Form,
}

/// One Aho-Corasick guard over the placeholders and the known values (in every encoding in
/// [`Encoding::ALL`]) of a run's secrets. Immutable once built; share it behind an `Arc`.
///
/// Matching is leftmost-longest: at the leftmost position where any pattern starts, the longest
/// pattern there wins, and matching resumes after it.
///
/// # Speed
/// A sampled q-gram prefilter runs in front of the automaton: it reads one 4- or 8-byte gram
/// every `shortest pattern - q + 1` bytes, and the automaton runs only around grams that may
/// belong to a pattern. On text where no secret occurs that is several GB/s whatever the
/// number of secrets; on text made of near-misses it falls back to the automaton alone. The
/// answer is always exactly the automaton's (the argument is in `search.rs`).
///
/// # Resource usage
/// Up to about 40 KiB of patterns (some seventy 40-byte secrets) the automaton is a DFA, about
/// 400 bytes of table per pattern byte (16 MiB at most); beyond, a slower but much smaller
/// NFA. The prefilter adds about 64 bits per distinct gram (512 bytes to 2 MiB).
/// [`Guard::memory_usage`] tells what it came to. About twenty patterns per secret at most
/// (identical encodings are kept once), each up to six times the value's length (ASCII-only
/// JSON of non-ASCII text). A streaming [`Rewriter`](crate::Rewriter) holds back at most
/// [`Guard::max_pattern_len`]` - 1` bytes.
///
/// # Secrets in memory
/// Values, the encoded patterns this crate keeps, and the prefilter's hash tables live in
/// zeroized memory. The automaton's own tables also encode the patterns and are not zeroized
/// when dropped.
pub struct Guard {
    secrets: Vec<Secret>,
    matcher: AhoCorasick,
    /// Every value form and placeholder, lowercased, searched over lowercased text: matching
    /// without regard to ASCII case, for names.
    names: AhoCorasick,
    /// The secret of each of `names`' patterns, and whether the pattern is its placeholder.
    name_secrets: Vec<(SecretId, bool)>,
    /// The length of the shortest of `names`' patterns: a shorter name holds none of them.
    shortest_name_pattern: usize,
    patterns: Vec<PatternInfo>,
    /// Every distinct pattern text, sorted, to tell whether a stream's tail may still grow into
    /// a match.
    sorted: Vec<Zeroizing<Vec<u8>>>,
    /// Which bytes start some pattern.
    first_bytes: [bool; 256],
    /// How patterns begin: first byte pairs exactly, first four bytes approximately.
    starts: Option<StartFilter>,
    /// The sampled q-gram prefilter (`None` when a pattern is too short for one).
    filter: Option<QgramFilter>,
    /// Whether the search goes through `filter` (else through the automaton alone).
    prefilter: bool,
    /// How long a region grows before the search falls back to the automaton alone.
    fallback_min: usize,
    max_len: usize,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field(
                "secrets",
                &self.secrets.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("patterns", &self.patterns.len())
            .field("max_pattern_len", &self.max_len)
            .finish()
    }
}

impl Guard {
    /// A builder with no secrets.
    pub fn builder() -> GuardBuilder {
        GuardBuilder::new()
    }

    /// How many secrets the guard holds.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// Whether the guard holds no secret.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Every secret's id, in the order they were added.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = SecretId> + '_ {
        (0..self.secrets.len()).map(|i| SecretId(u32::try_from(i).unwrap_or(u32::MAX)))
    }

    /// The id of the secret named `name`.
    pub fn id(&self, name: &str) -> Option<SecretId> {
        self.secrets
            .iter()
            .position(|s| s.name == name)
            .map(|i| SecretId(u32::try_from(i).unwrap_or(u32::MAX)))
    }

    /// The secret's name.
    ///
    /// # Panics
    /// If `id` comes from another guard with more secrets.
    pub fn name(&self, id: SecretId) -> &str {
        &self.secrets[id.index()].name
    }

    /// The secret's placeholder.
    ///
    /// # Panics
    /// If `id` comes from another guard with more secrets.
    pub fn placeholder(&self, id: SecretId) -> &Placeholder {
        &self.secrets[id.index()].placeholder
    }

    /// The secret's real value.
    ///
    /// # Panics
    /// If `id` comes from another guard with more secrets.
    pub fn value(&self, id: SecretId) -> &SecretValue {
        &self.secrets[id.index()].value
    }

    /// How many patterns the automaton holds (placeholders plus distinct value encodings).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// The heap memory the automaton and its prefilter use, in bytes.
    pub fn memory_usage(&self) -> usize {
        self.matcher.memory_usage()
            + self.names.memory_usage()
            + self.active_filter().map_or(0, QgramFilter::memory_usage)
    }

    /// The longest pattern, in bytes: a streaming rewriter holds back less than this.
    pub fn max_pattern_len(&self) -> usize {
        self.max_len
    }

    /// Every match in `haystack`, leftmost-longest, non-overlapping.
    ///
    /// A sampled q-gram prefilter skips the stretches where no pattern can occur; the answer is
    /// exactly the automaton's own full scan (the argument is in `search.rs`).
    pub fn find_iter<'h>(&'h self, haystack: &'h [u8]) -> impl Iterator<Item = Hit> + 'h {
        self.matches(haystack).map(|m| {
            let info = self.patterns[m.pattern().as_usize()];
            Hit {
                secret: info.secret,
                form: info.form,
                start: m.start(),
                end: m.end(),
            }
        })
    }

    /// Whether `haystack` holds any placeholder or known value.
    pub fn is_match(&self, haystack: &[u8]) -> bool {
        self.matches(haystack).next().is_some()
    }

    /// The automaton's matches in `haystack`, through the prefilter.
    pub(crate) fn matches<'h>(&'h self, haystack: &'h [u8]) -> Matches<'h, 'h> {
        Matches::new(
            &self.matcher,
            self.active_filter(),
            haystack,
            self.max_len,
            self.fallback_min,
        )
    }

    fn active_filter(&self) -> Option<&QgramFilter> {
        self.filter.as_ref().filter(|_| self.prefilter)
    }

    /// Puts the prefilter in front of the automaton even where the packed searcher is faster,
    /// so that tests with few short patterns exercise it.
    #[cfg(test)]
    pub(crate) fn force_prefilter(&mut self) {
        self.prefilter = self.filter.is_some();
    }

    /// The automaton's own full scan, without the prefilter: what [`Guard::matches`] must equal.
    #[cfg(test)]
    pub(crate) fn plain_matches<'h>(
        &'h self,
        haystack: &'h [u8],
    ) -> impl Iterator<Item = aho_corasick::Match> + 'h {
        self.matcher.find_iter(haystack)
    }

    /// Every distinct pattern text.
    #[cfg(test)]
    pub(crate) fn pattern_texts(&self) -> impl Iterator<Item = &[u8]> {
        self.sorted.iter().map(|p| p.as_slice())
    }

    /// Sets how long a region grows before the search falls back to the automaton alone, so
    /// that tests reach both paths on short texts.
    #[cfg(test)]
    pub(crate) fn set_fallback_min(&mut self, bytes: usize) {
        self.fallback_min = bytes;
    }

    pub(crate) fn pattern(&self, index: usize) -> PatternInfo {
        self.patterns[index]
    }

    /// Where the part of `buf` that may still grow into a match begins: the smallest `k` such
    /// that `buf[k..]` is a proper prefix of some pattern, or `buf.len()` when there is none.
    /// Every match starting before `k` is decided by `buf` alone.
    pub(crate) fn hold_from(&self, buf: &[u8]) -> usize {
        let start = buf.len().saturating_sub(self.max_len.saturating_sub(1));
        (start..buf.len())
            .find(|&k| {
                // Cheap tests first (how patterns begin), then the exact one.
                let tail = &buf[k..];
                let may_start = match &self.starts {
                    Some(starts) if tail.len() >= 2 => starts.may_start(tail),
                    _ => self.first_bytes[usize::from(tail[0])],
                };
                may_start && self.is_proper_prefix(tail)
            })
            .unwrap_or(buf.len())
    }

    fn is_proper_prefix(&self, tail: &[u8]) -> bool {
        // Patterns starting with `tail` form one run of the sorted list, beginning at the
        // first pattern not below `tail` (which is `tail` itself when it is a pattern).
        let at = self.sorted.partition_point(|p| p.as_slice() < tail);
        self.sorted[at..]
            .iter()
            .take(2)
            .any(|p| p.len() > tail.len() && p.starts_with(tail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NONCE_LEN;

    fn ph(name: &str, n: u8) -> Placeholder {
        Placeholder::mint(name, &[n; NONCE_LEN])
    }

    fn guard(secrets: &[(&str, &str)]) -> Result<Guard, GuardError> {
        let mut b = Guard::builder();
        for (i, (name, value)) in secrets.iter().enumerate() {
            b.add(*name, ph(name, i as u8), SecretValue::from(*value))?;
        }
        b.build()
    }

    #[test]
    fn builder_refuses_bad_secrets() {
        let mut b = Guard::builder();
        assert_eq!(
            b.add("", ph("x", 1), SecretValue::from("longenough")),
            Err(GuardError::EmptyName)
        );
        assert_eq!(
            b.add("short", ph("short", 1), SecretValue::from("1234567")),
            Err(GuardError::ValueTooShort {
                name: "short".into(),
                len: 7,
                min: MIN_VALUE_LEN
            })
        );
        assert!(
            b.add("ok", ph("ok", 1), SecretValue::from("12345678"))
                .is_ok()
        );
        assert_eq!(
            b.add("ok", ph("ok", 2), SecretValue::from("abcdefgh")),
            Err(GuardError::DuplicateName { name: "ok".into() })
        );
        assert!(matches!(
            b.add(
                "big",
                ph("big", 3),
                SecretValue::new(vec![b'a'; MAX_VALUE_LEN + 1])
            ),
            Err(GuardError::ValueTooLong { .. })
        ));
    }

    #[test]
    fn shared_values_are_refused_naming_both_secrets() {
        let err = guard(&[("one", "same-value-123"), ("two", "same-value-123")]).unwrap_err();
        assert_eq!(
            err,
            GuardError::SharedValue {
                first: "one".into(),
                second: "two".into()
            }
        );
        assert!(!err.to_string().contains("same-value-123"));
    }

    #[test]
    fn a_value_inside_another_value_is_allowed() {
        let g = guard(&[("short", "abcdefgh12"), ("long", "abcdefgh1234")]).unwrap();
        let hits: Vec<_> = g.find_iter(b"x abcdefgh1234 abcdefgh12 y").collect();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].secret, g.id("long").unwrap());
        assert_eq!(hits[1].secret, g.id("short").unwrap());
    }

    #[test]
    fn placeholder_overlap_is_refused() {
        let mut b = Guard::builder();
        b.add(
            "a",
            Placeholder::parse("SLUICE_FIXED_PLACEHOLDER").unwrap(),
            SecretValue::from("value-one-1"),
        )
        .unwrap();
        b.add(
            "b",
            ph("b", 2),
            SecretValue::from("xxSLUICE_FIXED_PLACEHOLDERxx"),
        )
        .unwrap();
        let err = b.build().unwrap_err();
        assert!(matches!(err, GuardError::Overlap { .. }), "{err:?}");
        assert!(!err.to_string().contains("xxSLUICE"));
    }

    #[test]
    fn finds_placeholders_and_every_encoding() {
        let value = "tok/en+with spaces\"";
        let g = guard(&[("api", value)]).unwrap();
        let id = g.id("api").unwrap();
        let p = g.placeholder(id).to_string();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{value}"));
        let haystacks = [
            (p.clone(), Form::Placeholder),
            (value.to_string(), Form::Value(Encoding::Raw)),
            (
                "tok%2Fen%2Bwith%20spaces%22".into(),
                Form::Value(Encoding::ALL[1]),
            ),
            (
                "tok%2fen%2bwith%20spaces%22".into(),
                Form::Value(Encoding::ALL[2]),
            ),
            (
                "tok%2Fen%2Bwith+spaces%22".into(),
                Form::Value(Encoding::ALL[7]),
            ),
            (
                r#"tok/en+with spaces\""#.into(),
                Form::Value(Encoding::Json {
                    style: crate::JsonStyle::Minimal,
                }),
            ),
            (
                hex::encode(value),
                Form::Value(Encoding::Hex { lowercase: true }),
            ),
        ];
        for (hay, form) in haystacks {
            let text = format!("before {hay} after");
            let hits: Vec<_> = g.find_iter(text.as_bytes()).collect();
            assert_eq!(hits.len(), 1, "{form:?}");
            assert_eq!(hits[0].form, form);
            assert_eq!(&text[hits[0].start..hits[0].end], hay);
        }
        let hits: Vec<_> = g.find_iter(b64.as_bytes()).collect();
        assert_eq!(hits.len(), 1);
        assert!(matches!(hits[0].form, Form::Value(Encoding::Base64 { .. })));
        assert!(!g.is_match(b"nothing to see here"));
    }

    #[test]
    fn empty_guard_matches_nothing() {
        let g = Guard::builder().build().unwrap();
        assert!(g.is_empty());
        assert_eq!(g.find_iter(b"anything").count(), 0);
        assert_eq!(g.hold_from(b"anything"), 8);
    }

    #[test]
    fn hold_from_keeps_only_a_tail_that_can_grow_into_a_match() {
        let g = guard(&[("k", "zzzzqqqq99")]).unwrap();
        let p = g.placeholder(g.id("k").unwrap()).to_string();
        assert_eq!(g.hold_from(b"hello world"), 11);
        assert_eq!(g.hold_from(b"hello zzzzq"), 6);
        let partial = format!("x {}", &p[..10]);
        assert_eq!(g.hold_from(partial.as_bytes()), 2);
        // A complete value that no longer pattern extends is not held.
        assert_eq!(g.hold_from(b"a zzzzqqqq99"), 12);
    }

    #[test]
    fn prefilter_is_used_unless_the_packed_searcher_is_faster() {
        // Few patterns and a short stride: aho-corasick's packed searcher alone.
        let few_short = guard(&[("k", "12345678")]).unwrap();
        assert!(few_short.active_filter().is_none());
        // Few patterns, long stride (the placeholder, 33 bytes, is the shortest): the prefilter.
        let few_long = guard(&[("k", "a-forty-byte-long-token-0123456789abcdef")]).unwrap();
        assert_eq!(
            few_long.active_filter().map(QgramFilter::stride),
            Some(33 - 8 + 1)
        );
        // Many patterns: the prefilter, whatever the stride.
        let names: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        let values: Vec<String> = (0..10).map(|i| format!("v{i}__wxyz")).collect();
        let many: Vec<(&str, &str)> = names
            .iter()
            .zip(&values)
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let many = guard(&many).unwrap();
        assert!(many.pattern_count() > PACKED_MAX_PATTERNS);
        assert_eq!(many.active_filter().map(QgramFilter::stride), Some(5));
        let mut forced = few_short;
        forced.force_prefilter();
        assert!(forced.active_filter().is_some());
    }

    #[test]
    fn a_value_json_escaped_in_upper_case_hex_is_redacted_and_refused() {
        // A base64-shaped key, as Jackson (`ESCAPE_NON_ASCII`) and .NET's System.Text.Json
        // write it: `+` as `\u002B`, `é` as `\u00E9`.
        let g = guard(&[("k", "AbC+dEf/gHé==")]).unwrap();
        for escaped in [
            r#"{"key":"AbC\u002BdEf/gH\u00E9=="}"#,
            r#"{"key":"AbC+dEf/gH\u00E9=="}"#,
        ] {
            let redacted = g.redact(escaped.as_bytes());
            assert_eq!(redacted.tally().total().redacted, 1, "{escaped}");
            assert!(
                !String::from_utf8_lossy(redacted.bytes()).contains("dEf"),
                "{escaped}"
            );
            let refused = g.rewrite(escaped.as_bytes(), &crate::Plan::refuse_all(&g));
            assert!(matches!(refused, Err(GuardError::Refused(_))), "{escaped}");
        }
    }

    #[test]
    fn text_is_redacted_in_any_letter_case() {
        let g = guard(&[("k", "Secret-Value-0001"), ("l", "Other-Value-0002")]).unwrap();
        let k = g.placeholder(g.id("k").unwrap()).as_str().to_owned();
        let l = g.placeholder(g.id("l").unwrap()).as_str().to_owned();
        let cases = [
            ("sni secret-value-0001.test", format!("sni {k}.test")),
            (
                "SECRET-VALUE-0001 and other-value-0002",
                format!("{k} and {l}"),
            ),
            ("exact Secret-Value-0001", format!("exact {k}")),
            ("nothing here", "nothing here".to_owned()),
        ];
        for (text, want) in cases {
            assert_eq!(g.redact_string(text.to_owned()), want, "{text}");
        }
    }

    #[test]
    fn value_in_name_skips_only_names_too_short_to_hold_a_value() {
        let g = guard(&[("k", "12345678"), ("l", "Longer-Value-0123")]).unwrap();
        let name = b"x-12345678-longer-value-0123-MTIzNDU2Nzg-trailing";
        for end in 0..=name.len() {
            for start in 0..end {
                let part = &name[start..end];
                // The name automaton is searched over lowercased text.
                let searched = g
                    .names
                    .find_overlapping_iter(part.to_ascii_lowercase().as_slice())
                    .map(|m| g.name_secrets[m.pattern().as_usize()])
                    .find(|&(_, is_placeholder)| !is_placeholder)
                    .map(|(secret, _)| secret);
                assert_eq!(g.value_in_name(part), searched, "{part:?}");
            }
        }
        assert_eq!(g.value_in_name(b"12345678"), g.id("k"));
        assert_eq!(g.value_in_name(b"1234567"), None);
        let empty = Guard::builder().build().unwrap();
        assert_eq!(empty.value_in_name(b"anything-at-all"), None);
    }

    #[test]
    fn values_in_name_reports_every_secret_once_overlapping_ones_too() {
        let g = guard(&[("a", "Abcdefgh12"), ("b", "gh12345678")]).unwrap();
        let (a, b) = (g.id("a").unwrap(), g.id("b").unwrap());
        // The two values overlap: a leftmost search would report `a` alone.
        assert_eq!(g.values_in_name(b"x-abcdefgh12345678"), [a, b]);
        assert_eq!(
            g.values_in_name(b"x-gh12345678-abcdefgh12-gh12345678"),
            [b, a]
        );
        assert_eq!(g.values_in_name(b"x-short"), []);
    }

    #[test]
    fn debug_shows_names_not_values() {
        let g = guard(&[("name_here", "value-that-is-secret")]).unwrap();
        let shown = format!("{g:?}");
        assert!(shown.contains("name_here"));
        assert!(!shown.contains("value-that-is-secret"));
    }
}
