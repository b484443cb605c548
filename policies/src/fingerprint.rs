//! The declaration's fingerprint for the audit log: the SHA-256 of its text with every
//! literal `value:` masked, so that the `start` and `reload` records name the declaration
//! in force without letting anyone guess a short literal back from the hash.
//!
//! It must never hash a literal's bytes: when the position of a literal cannot be known
//! exactly, there is no fingerprint rather than a guessable one.
//!
//! # Example
//!
//! ```
//! let a = "secrets:\n  t:\n    value: \"hunter2-hunter2\"\n    hosts: [api.example]\n";
//! let b = "secrets:\n  t:\n    value: \"other-value-here\"\n    hosts: [api.example]\n";
//! let c = "secrets:\n  t:\n    value: \"hunter2-hunter2\"\n    hosts: [api2.example]\n";
//! let fa = sluice_policies::fingerprint(a).unwrap();
//! assert_eq!(fa, sluice_policies::fingerprint(b).unwrap()); // only the literal differs
//! assert_ne!(fa, sluice_policies::fingerprint(c).unwrap()); // a grant differs
//! ```

use sha2::{Digest, Sha256};

use crate::raw::RawDeclaration;

/// What stands in the hashed text where a literal value was.
const MASK: &str = "\u{0}sluice-masked-value\u{0}";

/// Lowercase hex SHA-256 of `source` with each literal `value:` scalar replaced by a fixed
/// mask; `None` when the text does not parse as a declaration (then no literal can be
/// located, and nothing is hashed).
pub fn fingerprint(source: &str) -> Option<String> {
    let raw: RawDeclaration = serde_saphyr::from_str(source).ok()?;
    masked_sha256(source, &raw)
}

/// [`fingerprint`] of a declaration already parsed from `source`.
pub(crate) fn masked_sha256(source: &str, raw: &RawDeclaration) -> Option<String> {
    let mut spans = Vec::new();
    if let Some(secrets) = &raw.secrets {
        for (_, secret) in &secrets.value.0 {
            if let Some(value) = &secret.value.value {
                // Both where the value stands and where its scalar is written: for an alias
                // (`value: *a`) the literal is at the anchor, wherever that is.
                for location in [&value.referenced, &value.defined] {
                    let span = location.span();
                    let start = usize::try_from(span.byte_offset()?).ok()?;
                    let len = usize::try_from(span.byte_len()?).ok()?;
                    spans.push((start, start.checked_add(len)?));
                }
            }
        }
    }
    // A merge key can bring a literal that the mapping it merges into overrides (with
    // another literal, or with `~`): that literal is in no model position, so it could not
    // be masked. Merge keys leave no fingerprint at all.
    if uses_merge_keys(source) {
        return None;
    }
    spans.sort_unstable();
    spans.dedup();
    let mut masked = String::with_capacity(source.len());
    let mut at = 0;
    for (start, end) in spans {
        // Overlapping, inverted or out-of-bounds spans mean the positions are not what
        // this code assumes: no fingerprint rather than one over a literal's bytes.
        if start < at || end > source.len() || end <= start {
            return None;
        }
        masked.push_str(source.get(at..start)?);
        masked.push_str(MASK);
        at = end;
    }
    masked.push_str(source.get(at..)?);
    Some(hex::encode(Sha256::digest(masked.as_bytes())))
}

/// Whether `source` holds a YAML merge key (`<<`, or one tagged `!!merge`).
fn uses_merge_keys(source: &str) -> bool {
    // Most declarations have neither: no second parse for them.
    if !source.contains("<<") && !source.contains("!!merge") {
        return false;
    }
    let options = serde_saphyr::options! { merge_keys: serde_saphyr::MergeKeyPolicy::Error };
    serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(source, options).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LITERAL: &str = "Zq8r2LmXv9TpW4nKc7Hs";

    /// The text that is hashed, rebuilt here to show that no literal byte is in it.
    fn masked_text(source: &str) -> String {
        let raw: RawDeclaration = serde_saphyr::from_str(source).unwrap();
        let secrets = raw.secrets.unwrap();
        let (_, secret) = &secrets.value.0[0];
        let span = secret.value.value.as_ref().unwrap().referenced.span();
        let start = span.byte_offset().unwrap() as usize;
        let end = start + span.byte_len().unwrap() as usize;
        format!("{}{MASK}{}", &source[..start], &source[end..])
    }

    fn declaration(value_yaml: &str) -> String {
        format!("version: 1\nsecrets:\n  t:\n    value: {value_yaml}\n    hosts: [api.example]\n")
    }

    #[test]
    fn every_scalar_style_is_masked_whole() {
        let styles = [
            LITERAL.to_owned(),
            format!("'{LITERAL}'"),
            format!("\"{LITERAL}\""),
            format!("\"{}\\x41\"", &LITERAL[..10]),
            format!("|\n      {LITERAL}\n      {LITERAL}"),
            format!(">-\n      {LITERAL}\n      {LITERAL}"),
            format!("\"{}\n      {}\"", &LITERAL[..10], &LITERAL[10..]),
        ];
        for style in styles {
            let source = declaration(&style);
            let masked = masked_text(&source);
            assert!(
                !masked.contains(&LITERAL[..8]) && !masked.contains(&LITERAL[10..]),
                "literal left in {masked:?}"
            );
            assert!(masked.contains("hosts: [api.example]"), "{masked:?}");
            assert_eq!(
                fingerprint(&source),
                Some(hex::encode(Sha256::digest(masked.as_bytes())))
            );
        }
    }

    #[test]
    fn json_declarations_are_masked_too() {
        let source = format!(
            r#"{{"version": 1, "secrets": {{"t": {{"value": "{LITERAL}", "hosts": ["api.example"]}}}}}}"#
        );
        let masked = masked_text(&source);
        assert!(!masked.contains(&LITERAL[..8]), "{masked:?}");
        assert!(fingerprint(&source).is_some());
    }

    #[test]
    fn the_literal_cannot_be_guessed_from_the_fingerprint() {
        // Two declarations that differ only in a literal share a fingerprint.
        let a = fingerprint(&declaration("\"short-aaaa\"")).unwrap();
        let b = fingerprint(&declaration("\"short-bbbb\"")).unwrap();
        assert_eq!(a, b);
        assert_ne!(
            a,
            hex::encode(Sha256::digest(declaration("\"short-aaaa\"")))
        );
        // Everything else counts.
        let c = fingerprint(&declaration("\"short-aaaa\"").replace("api.example", "api.other"));
        assert_ne!(Some(a), c);
    }

    #[test]
    fn declarations_without_literals_hash_as_written() {
        let source = "version: 1\nsecrets:\n  t:\n    from: { env: T }\n    hosts: [api.example]\n";
        assert_eq!(
            fingerprint(source),
            Some(hex::encode(Sha256::digest(source.as_bytes())))
        );
    }

    #[test]
    fn a_literal_given_through_an_alias_is_masked_where_it_is_written() {
        let source = format!(
            "version: 1\nsecrets:\n  t:\n    placeholder: &lit \"{LITERAL}\"\n    value: *lit\n    hosts: [api.example]\n"
        );
        let other = source.replace(LITERAL, "Another-literal-here");
        match (fingerprint(&source), fingerprint(&other)) {
            // Masked at the anchor too: the two differ only in the literal.
            (Some(a), Some(b)) => assert_eq!(a, b),
            // Or no fingerprint at all; never one over the literal's bytes.
            (None, None) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_merge_key_leaves_no_fingerprint() {
        // The merged mapping's `value` is overridden, so no model position names it.
        let source = format!(
            "version: 1\nsecrets:\n  t:\n    <<: {{ value: \"{LITERAL}\" }}\n    value: \"Another-literal-here\"\n    hosts: [api.example]\n"
        );
        assert_eq!(fingerprint(&source), None);
        let Err(err) = crate::Policy::parse(&source, "merge.yaml") else {
            panic!("a literal behind a merge key was accepted");
        };
        let err = err.to_string();
        assert!(
            err.contains("merge.yaml:1:1") && err.contains("from:"),
            "{err}"
        );
        assert!(!err.contains(LITERAL), "{err}");
        // A merged literal overridden by `~` stands in no position either: no merge key
        // leaves a fingerprint, whatever the rest holds.
        let nulled = format!(
            "version: 1\nsecrets:\n  t:\n    <<: {{ value: \"{LITERAL}\" }}\n    value: ~\n    from: {{ env: T_TOKEN }}\n    hosts: [api.example]\n"
        );
        assert_eq!(fingerprint(&nulled), None);
        let plain = "version: 1\nsecrets:\n  a: &base\n    from: { env: A_TOKEN }\n    hosts: [api.example]\n  b:\n    <<: *base\n    from: { env: B_TOKEN }\n";
        assert_eq!(fingerprint(plain), None);
        assert!(fingerprint(&plain.replace("<<: *base\n    ", "")).is_some());
    }

    #[test]
    fn text_that_does_not_parse_has_no_fingerprint() {
        assert_eq!(fingerprint("secrets: [unclosed"), None);
        assert_eq!(
            fingerprint("secrets:\n  t:\n    value: x\n    bogus: 1\n"),
            None
        );
    }
}
