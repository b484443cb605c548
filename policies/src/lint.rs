//! Heuristics behind the lints: whether a literal value looks like a real credential.
//!
//! The shapes are [`crate::credentials`]'s, the same the launcher judges its inherited
//! environment by; a long random-looking literal is flagged as well, since a literal in a
//! declaration is a secret by construction and only the reason is at stake here. The answer
//! describes the kind of credential in words; it never quotes the value.

use crate::credentials::credential_shape;

/// Length from which a string is judged by its entropy.
const ENTROPY_MIN_LEN: usize = 20;
/// Shannon entropy (bits per character) above which a long string looks random.
const ENTROPY_THRESHOLD: f64 = 3.5;

/// Why `value` looks like a real credential, or `None`.
pub(crate) fn looks_like_secret(value: &str) -> Option<String> {
    if let Some(shape) = credential_shape(value.as_bytes()) {
        return Some(format!("it has the shape of {shape}"));
    }
    if value.chars().count() >= ENTROPY_MIN_LEN && shannon_entropy(value) >= ENTROPY_THRESHOLD {
        return Some(format!(
            "it is a long string with high entropy (at least {ENTROPY_THRESHOLD} bits per character)"
        ));
    }
    None
}

/// Shannon entropy of the byte distribution, in bits per byte.
fn shannon_entropy(s: &str) -> f64 {
    let mut counts = [0usize; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / len;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchers_credential_shapes_are_recognised() {
        for (value, what) in [
            ("ghp_0123456789abcdefABCDEF0123456789abcd", "GitHub"),
            ("sk-proj-abcdefghijklmnopqrstuvwx", "OpenAI"),
            ("AKIAIOSFODNN7EXAMPLE", "AWS"),
            ("xoxb-1234-5678-abcdef", "Slack"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
                "PEM",
            ),
        ] {
            let why = looks_like_secret(value).unwrap_or_default();
            assert!(why.contains(what), "{value}: {why}");
        }
    }

    #[test]
    fn random_looking_strings_are_recognised_and_plain_ones_are_not() {
        assert!(looks_like_secret("q8Zr2LmXv9TpW4nKc7HsBd3Fy6").is_some());
        assert!(looks_like_secret("not-a-real-token").is_none());
        assert!(looks_like_secret("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").is_none());
    }

    #[test]
    fn the_reason_never_quotes_the_value() {
        let v = "q8Zr2LmXv9TpW4nKc7HsBd3Fy6";
        assert!(!looks_like_secret(v).unwrap().contains(v));
        let v = "ghp_q8Zr2LmXv9TpW4nKc7HsBd3Fy6q8Zr2LmXv9Tp";
        assert!(!looks_like_secret(v).unwrap().contains("q8Zr"));
    }
}
