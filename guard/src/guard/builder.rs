//! Building a [`Guard`]: secrets collected, every encoding of every value made a pattern, the
//! declarations that would make matching ambiguous refused (a placeholder inside another
//! pattern, one value under two names), and the automata and prefilters built.
//!
//! It must never print a value: errors name secrets, and `Debug` shows names only.

use std::fmt;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use zeroize::Zeroizing;

use super::{Form, Guard, MAX_SECRETS, PatternInfo, Secret};
use crate::encoding::Encoding;
use crate::prefilter::{QgramFilter, StartFilter};
use crate::search::FALLBACK_MIN_REGION;
use crate::{GuardError, MAX_VALUE_LEN, MIN_VALUE_LEN, Placeholder, SecretId, SecretValue};

/// Up to this many patterns, aho-corasick searches with its packed SIMD searcher (Teddy) at
/// about 14 GB/s here; the q-gram prefilter beats that only with a long stride (measured on
/// one secret: stride 33, 23 GB/s; stride 5, 4 GB/s). So below [`PACKED_MIN_STRIDE`], a guard
/// of that few patterns runs its automaton alone.
pub(super) const PACKED_MAX_PATTERNS: usize = 64;
const PACKED_MIN_STRIDE: usize = 16;

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
            let names = automaton(MatchKind::Standard, &name_texts)?;
            // The same automaton finds every overlap between patterns (each one exact is
            // one without regard to case too), so no second one is built for it.
            check_overlaps(&self.secrets, &texts, &name_texts, &infos, &names)?;
            Ok::<_, GuardError>(names)
        };

        let pattern_bytes: usize = texts.iter().map(|t| t.len()).sum();
        let build_matcher = || automaton(MatchKind::LeftmostLongest, &texts);
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

/// One automaton over `texts`: a contiguous NFA, or, should one be too large to build, a
/// noncontiguous one.
///
/// Never a DFA. Measured here (`cargo bench -p sluice-guard`, 64 MiB), a DFA scans no faster
/// where the prefilter skips most of the text (10 secrets: 11.2 against 11.0 GB/s) and is
/// slower where it cannot (text of near-misses, 30 secrets: 116 against 426 MB/s), its
/// tables, some 400 bytes per pattern byte, falling out of cache; it is also a dozen times
/// the size (10 secrets: 2.4 MiB against 0.2), and a run's guard grows with every value it
/// retires.
fn automaton(kind: MatchKind, texts: &[Zeroizing<Vec<u8>>]) -> Result<AhoCorasick, GuardError> {
    let build = |automaton| {
        AhoCorasick::builder()
            .match_kind(kind)
            .kind(Some(automaton))
            .build(texts.iter().map(|t| t.as_slice()))
    };
    build(AhoCorasickKind::ContiguousNFA)
        .or_else(|_| build(AhoCorasickKind::NoncontiguousNFA))
        .map_err(|e| GuardError::Matcher {
            reason: e.to_string(),
        })
}

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
