//! Heuristics behind the literal-value lints: whether a literal looks random, and whether
//! it reads as ordinary words.
//!
//! A literal with a real credential's shape is an error, decided by
//! [`crate::credentials::credential_shape`] (the launcher's recognisers, shared). A value of
//! ordinary words is a warning for another reason: the guard redacts every occurrence of a
//! known value, so `changeme-password` as a secret would scrub those words from every
//! response and every line of the command's output. The answers describe the value in
//! words; they never quote it.

/// Length from which a string is judged by its entropy.
const ENTROPY_MIN_LEN: usize = 20;
/// Shannon entropy (bits per character) above which a long string looks random.
const ENTROPY_THRESHOLD: f64 = 3.5;

/// Common English words, and the words test and default secrets are made of. Compared
/// lowercased, against each run of letters in a value.
const COMMON_WORDS: &[&str] = &[
    "a",
    "about",
    "access",
    "account",
    "admin",
    "administrator",
    "after",
    "again",
    "all",
    "also",
    "an",
    "and",
    "any",
    "api",
    "app",
    "application",
    "are",
    "as",
    "at",
    "auth",
    "back",
    "be",
    "because",
    "been",
    "before",
    "best",
    "big",
    "blue",
    "book",
    "but",
    "by",
    "can",
    "change",
    "changeme",
    "code",
    "come",
    "company",
    "could",
    "data",
    "day",
    "default",
    "demo",
    "dev",
    "development",
    "do",
    "dog",
    "door",
    "down",
    "dragon",
    "each",
    "even",
    "example",
    "fake",
    "find",
    "first",
    "for",
    "from",
    "get",
    "give",
    "go",
    "good",
    "great",
    "green",
    "guest",
    "have",
    "he",
    "hello",
    "her",
    "here",
    "him",
    "his",
    "home",
    "how",
    "hunter",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "key",
    "know",
    "last",
    "letmein",
    "life",
    "like",
    "little",
    "local",
    "localhost",
    "login",
    "long",
    "look",
    "love",
    "make",
    "man",
    "many",
    "master",
    "may",
    "me",
    "money",
    "monkey",
    "more",
    "most",
    "my",
    "name",
    "new",
    "no",
    "not",
    "now",
    "of",
    "old",
    "on",
    "one",
    "only",
    "open",
    "or",
    "other",
    "our",
    "out",
    "over",
    "pass",
    "passphrase",
    "password",
    "people",
    "placeholder",
    "please",
    "private",
    "prod",
    "production",
    "project",
    "public",
    "qwerty",
    "red",
    "right",
    "root",
    "say",
    "secret",
    "secure",
    "see",
    "server",
    "service",
    "she",
    "so",
    "some",
    "staging",
    "still",
    "sunshine",
    "super",
    "system",
    "take",
    "team",
    "test",
    "testing",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "think",
    "this",
    "time",
    "to",
    "token",
    "too",
    "two",
    "up",
    "us",
    "use",
    "user",
    "username",
    "value",
    "very",
    "want",
    "was",
    "way",
    "we",
    "welcome",
    "well",
    "were",
    "what",
    "when",
    "which",
    "who",
    "will",
    "with",
    "word",
    "work",
    "world",
    "would",
    "year",
    "you",
    "your",
];

/// Why a literal looks random, or `None`.
pub(crate) fn looks_random(value: &str) -> Option<String> {
    (value.chars().count() >= ENTROPY_MIN_LEN && shannon_entropy(value) >= ENTROPY_THRESHOLD)
        .then(|| {
            format!(
                "it is a long string with high entropy (at least {ENTROPY_THRESHOLD} bits per character)"
            )
        })
}

/// Whether `value` reads as ordinary words: every run of letters is a common word, and
/// besides them there are only separators (`-`, `_`, `.`, space) and at most four digits.
pub(crate) fn reads_as_words(value: &str) -> bool {
    let mut digits = 0;
    let mut words = 0;
    for run in value.split(|c: char| !c.is_ascii_alphabetic()) {
        if run.is_empty() {
            continue;
        }
        if !COMMON_WORDS.contains(&run.to_ascii_lowercase().as_str()) {
            return false;
        }
        words += 1;
    }
    for c in value.chars() {
        match c {
            c if c.is_ascii_alphabetic() => {}
            c if c.is_ascii_digit() => digits += 1,
            '-' | '_' | '.' | ' ' => {}
            _ => return false,
        }
    }
    words > 0 && digits <= 4
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
    fn ordinary_words_are_recognised_and_anything_else_is_not() {
        for value in [
            "changeme-password",
            "my-test-token",
            "Hello World 2026",
            "just-a-test-value",
            "letmein123",
            "super_secret_key",
        ] {
            assert!(reads_as_words(value), "{value}");
        }
        for value in [
            "q8Zr2LmXv9TpW4nKc7HsBd3Fy6",
            "test-token-7f3k2p9q",
            "password12345",
            "hello/world",
            "zxcvbnmasdf",
            "12345678",
        ] {
            assert!(!reads_as_words(value), "{value}");
        }
    }

    #[test]
    fn random_looking_strings_are_recognised_and_plain_ones_are_not() {
        assert!(looks_random("q8Zr2LmXv9TpW4nKc7HsBd3Fy6").is_some());
        assert!(looks_random("not-a-real-token").is_none());
        assert!(looks_random("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").is_none());
    }

    #[test]
    fn the_reason_never_quotes_the_value() {
        let v = "q8Zr2LmXv9TpW4nKc7HsBd3Fy6";
        assert!(!looks_random(v).unwrap().contains(v));
    }
}
