//! Which environment variables look like credentials that nobody declared: by name (whole
//! words) and by value (the shapes of well-known credentials).
//!
//! The launcher withholds such a variable from the command it runs; host engines embedding
//! sluice get the same verdicts from here. Pure: it reads no environment and no file, and
//! it never prints a value (a verdict names a shape, never the text that had it).
//!
//! Precision matters as much as recall: a heuristic that withholds `GIT_AUTHOR_NAME` or
//! `SSH_AUTH_SOCK` breaks the workload's own tools and teaches people to switch it off. So
//! names are judged by whole words (`AUTHOR` is not `AUTH`), a name that says it holds a
//! place (`…_FILE`, `…_URL`, `…_SOCK`) is not a credential, and a high-entropy value counts
//! only under a name that already hints at a key (`…_KEY`, `…_PASS`), never alone: `PATH`,
//! commit hashes, UUIDs and `LS_COLORS` all score high.
//!
//! # Example
//! ```
//! use sluice_policies::credentials::{Shape, Suspicion, judge};
//!
//! assert_eq!(judge("GITHUB_TOKEN", b"anything"), Some(Suspicion::Name));
//! assert_eq!(
//!     judge("NOTES", b"ghp_0123456789abcdefABCDEF0123456789abcd"),
//!     Some(Suspicion::Value(Shape::GitHub))
//! );
//! assert_eq!(judge("GIT_AUTHOR_NAME", b"Ada Lovelace"), None);
//! assert_eq!(judge("SSH_AUTH_SOCK", b"/tmp/ssh-XXXX/agent.1"), None);
//! ```

use std::fmt;

/// Why a variable looks like a credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suspicion {
    /// Its name holds a credential word (`TOKEN`, `SECRET`, `PASSWORD`, `API_KEY`, …).
    Name,
    /// Its name hints at a key (`…_KEY`, `…_PASS`) and its value looks random.
    NameAndEntropy,
    /// Its value has the shape of a well-known credential.
    Value(Shape),
}

impl fmt::Display for Suspicion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name => f.write_str("its name looks like a credential"),
            Self::NameAndEntropy => {
                f.write_str("its name hints at a key and its value looks random")
            }
            Self::Value(shape) => write!(f, "its value looks like {shape}"),
        }
    }
}

/// The shape of a well-known credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Shape {
    /// An AWS access key id (`AKIA…`, `ASIA…`).
    AwsAccessKeyId,
    /// A GitHub token (`ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`).
    GitHub,
    /// A GitLab personal access token (`glpat-`).
    GitLab,
    /// A Slack token (`xoxb-`, `xoxp-`, …).
    Slack,
    /// An OpenAI API key (`sk-`, `sk-proj-`).
    OpenAi,
    /// An Anthropic API key (`sk-ant-`).
    Anthropic,
    /// A Google API key (`AIza…`).
    GoogleApiKey,
    /// A JSON Web Token (`eyJ….eyJ….…`).
    Jwt,
    /// A PEM private key block.
    PemPrivateKey,
    /// A URL with a password in its userinfo (`https://user:password@host`, a database
    /// URL, an index URL with a token, a CI clone URL with the job's token).
    UrlWithPassword,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AwsAccessKeyId => "an AWS access key id",
            Self::GitHub => "a GitHub token",
            Self::GitLab => "a GitLab token",
            Self::Slack => "a Slack token",
            Self::OpenAi => "an OpenAI API key",
            Self::Anthropic => "an Anthropic API key",
            Self::GoogleApiKey => "a Google API key",
            Self::Jwt => "a JSON Web Token",
            Self::PemPrivateKey => "a PEM private key",
            Self::UrlWithPassword => "a URL with a password in it",
        })
    }
}

/// Whether a variable `name` holding `value` looks like a credential, and why. The value
/// is judged first: a credential's shape is the surer sign.
pub fn judge(name: &str, value: &[u8]) -> Option<Suspicion> {
    if let Some(shape) = credential_shape(value) {
        return Some(Suspicion::Value(shape));
    }
    // The shell's working directory: its own exact names, holding an absolute path.
    if SHELL_PLACES.contains(&name) && value.starts_with(b"/") {
        return None;
    }
    match name_hint(name) {
        NameHint::Credential => Some(Suspicion::Name),
        NameHint::Key if looks_random(value) => Some(Suspicion::NameAndEntropy),
        NameHint::Key | NameHint::None => None,
    }
}

/// What a name says about its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameHint {
    /// A credential word: withheld whatever the value.
    Credential,
    /// A word that often, not always, names a key: withheld when the value looks random.
    Key,
    /// Nothing.
    None,
}

/// Words that name a credential, whole or as a word's ending (`PGPASSWORD`, `NPMTOKEN`).
const CREDENTIAL_ENDINGS: [&str; 6] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "APIKEY",
    "CREDENTIALS",
];

/// Words that name a credential only as a whole word (`AUTHOR` is not `AUTH`).
const CREDENTIAL_WORDS: [&str; 5] = ["AUTH", "CREDENTIAL", "SECRETS", "TOKENS", "PRIVATEKEY"];

/// The word before `KEY` that makes it a credential (`API_KEY`, `PRIVATE_KEY`, `ACCESS_KEY`).
const KEY_QUALIFIERS: [&str; 4] = ["API", "PRIVATE", "ACCESS", "SECRET"];

/// Words that hint at a key, without saying so.
const KEY_HINTS: [&str; 4] = ["KEY", "PASS", "PWD", "SIGNATURE"];

/// Last words that say the variable holds a place (a path, a socket, an address), not the
/// credential itself: `GITHUB_TOKEN_FILE`, `SSH_AUTH_SOCK`, `OAUTH_TOKEN_URL`.
const PLACE_WORDS: [&str; 9] = [
    "FILE", "PATH", "DIR", "SOCK", "SOCKET", "URL", "URI", "HOST", "PORT",
];

/// The shell's own variables whose names hold a hint word but never a credential: the
/// working directory (`PWD` is also short for password, as in `DB_PWD`), whose value is a
/// path that may look random (`/tmp/tmp.Xq8rT2Lk0P`) and is in many a command's arguments.
/// Exactly these names (the shell's are upper case), and only with an absolute path.
const SHELL_PLACES: [&str; 2] = ["PWD", "OLDPWD"];

fn name_hint(name: &str) -> NameHint {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    if words.last().is_some_and(|last| PLACE_WORDS.contains(last)) {
        return NameHint::None;
    }
    let credential = words.iter().enumerate().any(|(i, word)| {
        CREDENTIAL_WORDS.contains(word)
            || CREDENTIAL_ENDINGS.iter().any(|end| word.ends_with(end))
            || (*word == "KEY" && i > 0 && KEY_QUALIFIERS.contains(&words[i - 1]))
    });
    if credential {
        NameHint::Credential
    } else if words.iter().any(|word| KEY_HINTS.contains(word)) {
        NameHint::Key
    } else {
        NameHint::None
    }
}

/// Whether `value` looks like random key material: at least 16 characters with at least 4
/// bits of entropy per character by their own frequencies. Only ever asked under a name
/// that hints at a key.
fn looks_random(value: &[u8]) -> bool {
    if value.len() < 16 || value.iter().any(|b| b.is_ascii_whitespace()) {
        return false;
    }
    let mut counts = [0u32; 256];
    for &b in value {
        counts[usize::from(b)] += 1;
    }
    let len = value.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum();
    entropy >= 4.0
}

/// The well-known credential shape `value` holds, anywhere in it, if any.
pub fn credential_shape(value: &[u8]) -> Option<Shape> {
    if contains(value, b"-----BEGIN ") && contains(value, b"PRIVATE KEY-----") {
        return Some(Shape::PemPrivateKey);
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let upper_digit = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    let url_safe = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let slack = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
    // (prefix, shape, allowed characters after it, at least, at most)
    type Class = fn(u8) -> bool;
    let tokens: [(&[u8], Shape, Class, usize, usize); 16] = [
        (b"AKIA", Shape::AwsAccessKeyId, upper_digit, 16, 16),
        (b"ASIA", Shape::AwsAccessKeyId, upper_digit, 16, 16),
        (b"ghp_", Shape::GitHub, alnum, 36, 255),
        (b"gho_", Shape::GitHub, alnum, 36, 255),
        (b"ghs_", Shape::GitHub, alnum, 36, 255),
        (b"ghu_", Shape::GitHub, alnum, 36, 255),
        (b"ghr_", Shape::GitHub, alnum, 36, 255),
        (b"github_pat_", Shape::GitHub, word, 22, 255),
        (b"glpat-", Shape::GitLab, url_safe, 20, 255),
        (b"xoxb-", Shape::Slack, slack, 10, 255),
        (b"xoxp-", Shape::Slack, slack, 10, 255),
        (b"xoxa-", Shape::Slack, slack, 10, 255),
        (b"xoxs-", Shape::Slack, slack, 10, 255),
        (b"sk-ant-", Shape::Anthropic, url_safe, 20, 255),
        (b"sk-", Shape::OpenAi, url_safe, 20, 255),
        (b"AIza", Shape::GoogleApiKey, url_safe, 35, 35),
    ];
    for (prefix, shape, class, min, max) in tokens {
        if has_token(value, prefix, class, min, max) {
            return Some(shape);
        }
    }
    if is_jwt(value) {
        return Some(Shape::Jwt);
    }
    has_url_password(value).then_some(Shape::UrlWithPassword)
}

/// Whether `value` holds a URL whose userinfo carries a password: `scheme://user:pw@host`,
/// `pw` not empty and not one of sluice's own placeholders (`SLUICE_…`, which the launcher
/// puts where a declared secret's value was).
fn has_url_password(value: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = find(&value[from..], b"://").map(|i| i + from) {
        from = at + 3;
        let authority_end = value[from..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#') || b.is_ascii_whitespace())
            .map_or(value.len(), |i| i + from);
        let authority = &value[from..authority_end];
        let Some(userinfo_end) = authority.iter().rposition(|&b| b == b'@') else {
            continue;
        };
        let userinfo = &authority[..userinfo_end];
        if let Some(colon) = userinfo.iter().position(|&b| b == b':') {
            let password = &userinfo[colon + 1..];
            if !password.is_empty() && !password.starts_with(b"SLUICE_") {
                return true;
            }
        }
    }
    false
}

/// Whether `value` holds `prefix` at a word boundary, followed by `min..=max` characters of
/// `class` and then a boundary.
fn has_token(value: &[u8], prefix: &[u8], class: fn(u8) -> bool, min: usize, max: usize) -> bool {
    let mut from = 0;
    while let Some(at) = find(&value[from..], prefix).map(|i| i + from) {
        from = at + 1;
        if at > 0 && value[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = &value[at + prefix.len()..];
        let run = rest.iter().take_while(|&&b| class(b)).count();
        if (min..=max).contains(&run) {
            return true;
        }
    }
    false
}

/// A JSON Web Token: three base64url parts split by dots, the first two JSON objects
/// (`eyJ`, which is `{"` encoded), each part at least 10 characters.
fn is_jwt(value: &[u8]) -> bool {
    let b64url = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_' || *b == b'=';
    let mut from = 0;
    while let Some(at) = find(&value[from..], b"eyJ").map(|i| i + from) {
        from = at + 1;
        let parts: Vec<&[u8]> = value[at..]
            .split(|b| !b64url(b) && *b != b'.')
            .next()
            .unwrap_or_default()
            .split(|b| *b == b'.')
            .collect();
        if parts.len() >= 3
            && parts[1].starts_with(b"eyJ")
            && parts[..3].iter().all(|part| part.len() >= 10)
        {
            return true;
        }
    }
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The working directory is never withheld, however random its path looks (mktemp's):
    /// it would be refused in every argument naming a file under it.
    #[test]
    fn the_working_directory_is_not_a_password() {
        let random = "/tmp/tmp.Xq8rT2Lk0P/home/k7Qz9WbN3vYp";
        assert!(
            looks_random(random.as_bytes()),
            "the path must look random for this test"
        );
        for name in ["PWD", "OLDPWD"] {
            assert_eq!(judge(name, random.as_bytes()), None, "{name}");
        }
        // Not the shell's: another name, or no path in it, is judged like any variable.
        for (name, value) in [
            ("pwd", random),
            ("DB_PWD", "k7Qz9WbN3vYpXq8rT2Lk0P"),
            ("PWD", "k7Qz9WbN3vYpXq8rT2Lk0P"),
        ] {
            assert_eq!(
                judge(name, value.as_bytes()),
                Some(Suspicion::NameAndEntropy),
                "{name}"
            );
        }
    }

    /// (name, value, verdict): each recogniser's hits, and its near misses beside them.
    #[test]
    fn what_is_withheld_and_what_passes() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----";
        let cases: &[(&str, &str, Option<Suspicion>)] = &[
            // By name.
            ("GITHUB_TOKEN", "x", Some(Suspicion::Name)),
            ("AWS_SECRET_ACCESS_KEY", "x", Some(Suspicion::Name)),
            ("AWS_ACCESS_KEY_ID", "x", Some(Suspicion::Name)),
            ("AWS_SESSION_TOKEN", "x", Some(Suspicion::Name)),
            ("OPENAI_API_KEY", "x", Some(Suspicion::Name)),
            ("ANTHROPIC_API_KEY", "x", Some(Suspicion::Name)),
            ("DB_PASSWORD", "x", Some(Suspicion::Name)),
            ("PGPASSWORD", "x", Some(Suspicion::Name)),
            ("NPMTOKEN", "x", Some(Suspicion::Name)),
            ("MY_APIKEY", "x", Some(Suspicion::Name)),
            ("SSH_PRIVATE_KEY", "x", Some(Suspicion::Name)),
            ("GOOGLE_APPLICATION_CREDENTIALS", "x", Some(Suspicion::Name)),
            ("HTTP_AUTH", "x", Some(Suspicion::Name)),
            ("client_secret", "x", Some(Suspicion::Name)),
            // Names that pass: a credential word that is not a whole word, or a place.
            ("GIT_AUTHOR_NAME", "Ada Lovelace", None),
            ("GIT_AUTHOR_EMAIL", "ada@example.test", None),
            ("GIT_COMMITTER_EMAIL", "ada@example.test", None),
            ("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1", None),
            ("GPG_AGENT_INFO", "/run/user/0/gnupg/S.gpg-agent:0:1", None),
            (
                "TERM_SESSION_ID",
                "w0t0p0:6C1D2B4A-1F2E-4C3B-9A8D-7E6F5A4B3C2D",
                None,
            ),
            ("XDG_SESSION_ID", "3", None),
            ("KUBECONFIG", "/root/.kube/config", None),
            ("GITHUB_TOKEN_FILE", "/run/secrets/gh", None),
            ("OAUTH_TOKEN_URL", "https://auth.example.test/token", None),
            ("TOKENIZERS_PARALLELISM", "false", None),
            ("KEYBOARD", "us", None),
            ("PATH", "/usr/local/bin:/usr/bin:/bin", None),
            (
                "LS_COLORS",
                "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35",
                None,
            ),
            (
                "GIT_COMMIT",
                "9f3c2a71d0e4b6a58f3524a37e13ee6622520d89",
                None,
            ),
            ("BUILD_ID", "123e4567-e89b-12d3-a456-426614174000", None),
            (
                "LOGO_PNG",
                "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
                None,
            ),
            // A name that hints at a key: withheld only with a random-looking value.
            (
                "STRIPE_KEY",
                "rk_9fK2xQ7LmP4vT8zW1nB6",
                Some(Suspicion::NameAndEntropy),
            ),
            ("GPG_KEY", "ABCD1234", None),
            ("SORT_KEY", "created_at", None),
            // By value, under any name.
            (
                "NOTES",
                "AKIAIOSFODNN7EXAMPLE",
                Some(Suspicion::Value(Shape::AwsAccessKeyId)),
            ),
            (
                "NOTES",
                "ASIAY34FZKBOKMUTVV7A",
                Some(Suspicion::Value(Shape::AwsAccessKeyId)),
            ),
            ("NOTES", "AKIAIOSFODNN7EXAMPL", None),
            (
                "NOTES",
                "ghp_0123456789abcdefABCDEF0123456789abcd",
                Some(Suspicion::Value(Shape::GitHub)),
            ),
            ("NOTES", "ghp_short", None),
            (
                "NOTES",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
                Some(Suspicion::Value(Shape::GitHub)),
            ),
            (
                "NOTES",
                "glpat-xxxxxxxxxxxxxxxxxxxx",
                Some(Suspicion::Value(Shape::GitLab)),
            ),
            ("NOTES", "glpat-short", None),
            (
                "NOTES",
                "xoxb-1234567890-abcdefghij",
                Some(Suspicion::Value(Shape::Slack)),
            ),
            (
                "NOTES",
                "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
                Some(Suspicion::Value(Shape::OpenAi)),
            ),
            (
                "NOTES",
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
                Some(Suspicion::Value(Shape::Anthropic)),
            ),
            ("NOTES", "task-list", None),
            ("NOTES", "desk-lamp-is-not-a-key-at-all", None),
            (
                "NOTES",
                "AIzaSyA1234567890abcdefghijklmnopqrstuv",
                Some(Suspicion::Value(Shape::GoogleApiKey)),
            ),
            ("NOTES", jwt, Some(Suspicion::Value(Shape::Jwt))),
            ("NOTES", "eyJhbGciOiJIUzI1NiJ9", None),
            ("NOTES", pem, Some(Suspicion::Value(Shape::PemPrivateKey))),
            ("NOTES", "-----BEGIN CERTIFICATE-----", None),
            (
                "URL",
                "https://x:ghp_0123456789abcdefABCDEF0123456789abcd@github.test",
                Some(Suspicion::Value(Shape::GitHub)),
            ),
            (
                "DATABASE_URL",
                "postgres://app:s3cret-pw@db.internal:5432/app",
                Some(Suspicion::Value(Shape::UrlWithPassword)),
            ),
            (
                "CI_REPOSITORY_URL",
                "https://gitlab-ci-token:glcbt-64_abcdefghijklmnopqrst@gitlab.example.test/group/app.git",
                Some(Suspicion::Value(Shape::UrlWithPassword)),
            ),
            ("DATABASE_URL", "postgres://app@db.internal:5432/app", None),
            ("NOTES", "https://app:@db.internal/", None),
            ("CI_SERVER_URL", "https://gitlab.example.test", None),
            ("REMOTE", "git@github.com:acme/app.git", None),
            ("NOTES", "see https://example.test/a:b@c", None),
            (
                "DATABASE_URL",
                "postgres://app:SLUICE_DB_PASSWORD_0123456789abcdef@db.internal/app",
                None,
            ),
        ];
        for (name, value, verdict) in cases {
            assert_eq!(judge(name, value.as_bytes()), *verdict, "{name}={value}");
        }
    }

    #[test]
    fn a_verdict_names_a_shape_never_the_value() {
        let value = "ghp_0123456789abcdefABCDEF0123456789abcd";
        let verdict = judge("NOTES", value.as_bytes()).unwrap();
        let said = verdict.to_string();
        assert_eq!(said, "its value looks like a GitHub token");
        assert!(!said.contains("ghp_"));
    }
}
