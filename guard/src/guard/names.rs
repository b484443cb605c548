//! Matching in header and trailer *names*, and in text that may have been case-folded: the
//! guard's second automaton, over every value form and placeholder, without regard to ASCII
//! case. HTTP stacks lowercase names, where the exact scan would miss a value or a
//! placeholder spelled into one.

use zeroize::Zeroizing;

use super::Guard;
use crate::SecretId;

/// Text as the name automaton is searched: ASCII-lowercased (it holds its patterns so),
/// copied only when it has a capital letter, and the copy zeroized (it may hold a value).
enum Lowercased<'a> {
    Already(&'a [u8]),
    Copied(Zeroizing<Vec<u8>>),
}

impl Lowercased<'_> {
    fn of(text: &[u8]) -> Lowercased<'_> {
        if text.iter().any(u8::is_ascii_uppercase) {
            Lowercased::Copied(Zeroizing::new(text.to_ascii_lowercase()))
        } else {
            Lowercased::Already(text)
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Lowercased::Already(text) => text,
            Lowercased::Copied(copy) => copy,
        }
    }
}

impl Guard {
    /// The secret whose value (in any encoding) a header or trailer *name* holds, ignoring
    /// ASCII case, if any.
    ///
    /// HTTP stacks lowercase names, so a value spelled into one arrives case-folded, where
    /// [`Guard::is_match`] (exact bytes) would miss it. A name cannot carry a placeholder
    /// either, so the caller drops such a header rather than rewriting it.
    ///
    /// ```
    /// use sluice_guard::{Guard, Placeholder, SecretValue};
    /// let mut builder = Guard::builder();
    /// let key = builder.add(
    ///     "aws_key",
    ///     Placeholder::mint("aws_key", &[1; 12]),
    ///     SecretValue::from("AKIAIOSFODNN7EXAMPLE"),
    /// )?;
    /// let guard = builder.build()?;
    /// assert_eq!(guard.value_in_name(b"x-akiaiosfodnn7example"), Some(key));
    /// assert_eq!(guard.value_in_name(b"x-request-id"), None);
    /// # Ok::<(), sluice_guard::GuardError>(())
    /// ```
    pub fn value_in_name(&self, name: &[u8]) -> Option<SecretId> {
        self.values_in_name(name).first().copied()
    }

    /// Every secret whose value (in any encoding) a header or trailer *name* holds, ignoring
    /// ASCII case, overlapping matches included: a name may hold two values, and a caller
    /// deciding per secret (one may go to this host, the other not) must see both. Each
    /// secret once, in the order their values end in the name.
    ///
    /// ```
    /// use sluice_guard::{Guard, Placeholder, SecretValue};
    /// let mut builder = Guard::builder();
    /// let a = builder.add("a", Placeholder::mint("a", &[1; 12]), SecretValue::from("FIRST-value-1"))?;
    /// let b = builder.add("b", Placeholder::mint("b", &[2; 12]), SecretValue::from("Second-Value-2"))?;
    /// let guard = builder.build()?;
    /// assert_eq!(guard.values_in_name(b"x-first-value-1-second-value-2"), [a, b]);
    /// # Ok::<(), sluice_guard::GuardError>(())
    /// ```
    pub fn values_in_name(&self, name: &[u8]) -> Vec<SecretId> {
        self.in_name(name, false)
    }

    /// Every secret whose placeholder a header or trailer *name* holds, ignoring ASCII case,
    /// each secret once. A name arrives lowercased, so the exact scan never sees a default
    /// placeholder (`SLUICE_…`) in one; and a name is no place a placeholder is swapped, so
    /// a request carrying one is refused rather than sent on with the placeholder.
    ///
    /// ```
    /// use sluice_guard::{Guard, Placeholder, SecretValue};
    /// let mut builder = Guard::builder();
    /// let placeholder = Placeholder::mint("tok", &[3; 12]);
    /// let name = format!("x-{}", placeholder.as_str().to_ascii_lowercase());
    /// let tok = builder.add("tok", placeholder, SecretValue::from("tok-value-1234"))?;
    /// let guard = builder.build()?;
    /// assert_eq!(guard.placeholders_in_name(name.as_bytes()), [tok]);
    /// assert!(guard.values_in_name(name.as_bytes()).is_empty());
    /// # Ok::<(), sluice_guard::GuardError>(())
    /// ```
    pub fn placeholders_in_name(&self, name: &[u8]) -> Vec<SecretId> {
        self.in_name(name, true)
    }

    /// `text` with every value form it holds, matched without regard to ASCII case, replaced
    /// by its secret's placeholder; `None` when it holds none. Overlapping matches are
    /// resolved leftmost first, the longest at each start.
    pub(crate) fn redact_case_folded(&self, text: &[u8]) -> Option<Vec<u8>> {
        if text.len() < self.shortest_name_pattern {
            return None;
        }
        // Lowercasing keeps every byte's place: offsets found in `folded` are `text`'s.
        let folded = Lowercased::of(text);
        let mut hits: Vec<(usize, usize, SecretId)> = self
            .names
            .find_overlapping_iter(folded.bytes())
            .filter_map(|m| {
                let (secret, is_placeholder) = self.name_secrets[m.pattern().as_usize()];
                (!is_placeholder).then_some((m.start(), m.end(), secret))
            })
            .collect();
        if hits.is_empty() {
            return None;
        }
        hits.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        for (start, end, secret) in hits {
            if start < at {
                continue;
            }
            out.extend_from_slice(&text[at..start]);
            out.extend_from_slice(self.placeholder(secret).as_str().as_bytes());
            at = end;
        }
        out.extend_from_slice(&text[at..]);
        Some(out)
    }

    /// The secrets whose values (or, with `placeholders`, placeholders) `name` holds.
    fn in_name(&self, name: &[u8], placeholders: bool) -> Vec<SecretId> {
        let mut found = Vec::new();
        // Most names are shorter than any pattern: no search needed.
        if name.len() < self.shortest_name_pattern {
            return found;
        }
        let folded = Lowercased::of(name);
        for m in self.names.find_overlapping_iter(folded.bytes()) {
            let (secret, is_placeholder) = self.name_secrets[m.pattern().as_usize()];
            if is_placeholder == placeholders && !found.contains(&secret) {
                found.push(secret);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::encoding::Encoding;
    use crate::{Guard, Placeholder, SecretId, SecretValue};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The lowercased automaton finds exactly the secrets a naive case-blind search of
        /// every value form finds, whatever the case of the name.
        #[test]
        fn names_match_as_a_case_blind_search_would(
            values in proptest::collection::vec("[A-Za-z0-9+/=_-]{8,16}", 1..4),
            picks in proptest::collection::vec((0usize..4, 0usize..16, any::<bool>()), 0..6),
            flips in proptest::collection::vec(any::<bool>(), 64),
        ) {
            let mut builder = Guard::builder();
            let mut forms = Vec::new();
            for (i, value) in values.iter().enumerate() {
                let name = format!("s{i}");
                let nonce = [u8::try_from(i).unwrap(); crate::NONCE_LEN];
                let Ok(id) = builder.add(name.clone(), Placeholder::mint(&name, &nonce), SecretValue::new(value.clone().into_bytes())) else {
                    return Ok(());
                };
                let texts: Vec<Vec<u8>> = Encoding::ALL
                    .iter()
                    .filter_map(|e| e.apply(value.as_bytes()).map(|t| t.to_vec()))
                    .collect();
                forms.push((id, texts));
            }
            // Values that contain each other or collide are refused: nothing to compare.
            let Ok(guard) = builder.build() else { return Ok(()) };
            // A name made of pieces of the values' forms, its letters' case flipped at random.
            let mut name = b"x-".to_vec();
            for (secret, form, whole) in picks {
                let Some((_, texts)) = forms.get(secret % forms.len()) else { continue };
                let text = &texts[form % texts.len()];
                let piece = if whole { &text[..] } else { &text[..text.len() / 2] };
                name.extend_from_slice(piece);
                name.push(b'-');
            }
            for (byte, flip) in name.iter_mut().zip(flips.iter().cycle()) {
                if *flip && byte.is_ascii_alphabetic() {
                    *byte ^= 0x20;
                }
            }
            let lower = name.to_ascii_lowercase();
            let mut expected: Vec<SecretId> = forms
                .iter()
                .filter(|(_, texts)| texts.iter().any(|t| {
                    let t = t.to_ascii_lowercase();
                    lower.windows(t.len()).any(|w| w == t.as_slice())
                }))
                .map(|(id, _)| *id)
                .collect();
            let mut found = guard.values_in_name(&name);
            expected.sort_unstable();
            found.sort_unstable();
            prop_assert_eq!(found, expected);
            // Text redacted in any letter case holds no value form in any letter case.
            let text = String::from_utf8(name.clone()).unwrap();
            let redacted = guard.redact_string(text).to_ascii_lowercase();
            for (_, texts) in &forms {
                for t in texts {
                    let t = String::from_utf8_lossy(t).to_ascii_lowercase();
                    prop_assert!(!redacted.contains(&t), "{} left in {}", t, redacted);
                }
            }
        }
    }
}
