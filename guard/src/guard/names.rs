//! Matching in header and trailer *names*, and in text that may have been case-folded: the
//! guard's second automaton, over every value form and placeholder, without regard to ASCII
//! case. HTTP stacks lowercase names, where the exact scan would miss a value or a
//! placeholder spelled into one.

use super::Guard;
use crate::SecretId;

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
        let mut hits: Vec<(usize, usize, SecretId)> = self
            .names
            .find_overlapping_iter(text)
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
        for m in self.names.find_overlapping_iter(name) {
            let (secret, is_placeholder) = self.name_secrets[m.pattern().as_usize()];
            if is_placeholder == placeholders && !found.contains(&secret) {
                found.push(secret);
            }
        }
        found
    }
}
