//! The guard: one Aho-Corasick automaton over every placeholder and every encoding of every
//! known secret value.
//!
//! This module owns building that automaton, refusing declarations that would make matching
//! ambiguous, and reporting matches. It decides nothing about what a match means: that is the
//! [`Plan`](crate::Plan)'s job, and applying it is the rewriter's. It must never print a value:
//! `Debug` shows names and counts only.

use std::fmt;

use aho_corasick::AhoCorasick;
use zeroize::Zeroizing;

use crate::encoding::Encoding;
use crate::prefilter::{QgramFilter, StartFilter};
use crate::search::Matches;
use crate::{Placeholder, SecretId, SecretValue};

mod builder;
mod names;

pub use builder::GuardBuilder;

/// The most secrets one guard holds.
pub const MAX_SECRETS: usize = 4096;

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
/// The automata are contiguous NFAs, some 25 to 35 bytes of table per pattern byte, prefilter included (a DFA
/// would take some 400, and measured no faster here: `builder.rs`). The prefilter adds about
/// 64 bits per distinct gram (512 bytes to 2 MiB).
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
mod tests;
