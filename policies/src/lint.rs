//! Heuristics behind the lints: whether a literal value looks like a real credential.
//!
//! The answer describes the kind of credential in words; it never quotes the value.

/// Prefixes of well-known credential formats, with what they are.
const KNOWN_PREFIXES: &[(&str, &str)] = &[
    ("ghp_", "a GitHub personal access token"),
    ("gho_", "a GitHub OAuth token"),
    ("ghu_", "a GitHub user-to-server token"),
    ("ghs_", "a GitHub server-to-server token"),
    ("ghr_", "a GitHub refresh token"),
    ("github_pat_", "a GitHub fine-grained token"),
    ("glpat-", "a GitLab personal access token"),
    ("sk-", "an OpenAI/Anthropic-style API key"),
    ("sk_live_", "a Stripe live key"),
    ("rk_live_", "a Stripe restricted key"),
    ("AKIA", "an AWS access key id"),
    ("ASIA", "an AWS temporary access key id"),
    ("xoxa-", "a Slack token"),
    ("xoxb-", "a Slack bot token"),
    ("xoxp-", "a Slack user token"),
    ("xoxr-", "a Slack refresh token"),
    ("xoxs-", "a Slack session token"),
    ("AIza", "a Google API key"),
    ("-----BEGIN", "a PEM private key or certificate"),
];

/// Length from which a string is judged by its entropy.
const ENTROPY_MIN_LEN: usize = 20;
/// Shannon entropy (bits per character) above which a long string looks random.
const ENTROPY_THRESHOLD: f64 = 3.5;

/// Why `value` looks like a real credential, or `None`.
pub(crate) fn looks_like_secret(value: &str) -> Option<String> {
    let trimmed = value.trim_start();
    if let Some((prefix, what)) = KNOWN_PREFIXES.iter().find(|(p, _)| trimmed.starts_with(p)) {
        return Some(format!("it starts like {what} (`{prefix}`)"));
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
    fn known_prefixes_are_recognised() {
        for v in [
            "ghp_abcdefghijklmnop",
            "sk-proj-aaaa",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-1234-5678",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
        ] {
            assert!(looks_like_secret(v).is_some(), "{v}");
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
        let v = "ghp_q8Zr2LmXv9TpW4nKc7HsBd3Fy6";
        assert!(!looks_like_secret(v).unwrap().contains("q8Zr"));
    }
}
