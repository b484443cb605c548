//! What the command inherits of sluice's environment, and what it is denied.
//!
//! Every inherited variable holding a known value is redacted (a declared secret's source
//! variable then holds its placeholder); every undeclared variable that looks like a
//! credential ([`credentials::judge`], by name and by value) is withheld, named on stderr
//! with the two fixes, never shown. `--pass-env NAME` passes one on purpose; `--clear-env`
//! keeps only a short allowlist. What it must never do: pass a value the guard knows, or a
//! flagged variable `--pass-env` did not name, or print any part of a withheld value.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use sluice_guard::Guard;
use sluice_policies::{Policy, SignKind, credentials, placeholder_name};

use sluice_policies::launcher_env::PROXY_VARIABLES;

use super::trust;

/// What `--clear-env` keeps of the inherited environment, besides what sluice sets and what
/// `--pass-env` names: what a shell and its tools need to run at all.
pub(super) const CLEAR_ENV_ALLOWLIST: [&str; 8] = [
    "PATH", "HOME", "USER", "LANG", "TERM", "TZ", "TMPDIR", "SHELL",
];

/// Whether `--clear-env` keeps `name`: the allowlist, and every `LC_*` locale variable.
fn kept_by_clear_env(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    CLEAR_ENV_ALLOWLIST.contains(&name.as_ref()) || name.starts_with("LC_")
}

/// What the command inherits of sluice's environment (`--clear-env` applied) and what it
/// is denied; a variable that sluice sets itself (a declared secret's, the proxy's) is not
/// counted as withheld, since the command gets sluice's own value for it.
pub(super) fn environment(
    policy: &Policy,
    guard: &Guard,
    pass_env: &[OsString],
    clear_env: bool,
) -> (
    BTreeMap<OsString, OsString>,
    Vec<(OsString, credentials::Suspicion)>,
) {
    let vars = std::env::vars_os()
        .filter(|(key, _)| !clear_env || kept_by_clear_env(key) || pass_env.contains(key));
    let (env, mut withheld) = inherited(vars, guard, pass_env);
    withheld.retain(|(key, _)| !sets_itself(key, policy));
    (env, withheld)
}

/// The variables every AWS SDK reads (`AWS_ACCESS_KEY_ID`, …), each with the secret whose
/// placeholder it gets: set when exactly one `aws-sigv4` secret is declared, so that a
/// client configured by the environment alone signs with its placeholders.
pub(super) fn standard_aws_variables(policy: &Policy) -> Vec<(&'static str, &str)> {
    let mut aws = policy
        .signers()
        .iter()
        .filter(|signer| signer.kind() == SignKind::AwsSigV4);
    match (aws.next(), aws.next()) {
        (Some(signer), None) => signer
            .parts()
            .iter()
            .map(|&(part, index)| (part.standard_variable(), policy.secrets()[index].name()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether sluice sets `name` in the command's environment itself.
fn sets_itself(name: &OsStr, policy: &Policy) -> bool {
    let name = name.to_string_lossy();
    PROXY_VARIABLES.contains(&name.as_ref())
        || trust::is_trust_variable(&name)
        || standard_aws_variables(policy)
            .iter()
            .any(|(variable, _)| *variable == name)
        || policy
            .secrets()
            .iter()
            .any(|decl| placeholder_name(decl.name()) == name)
}

/// What the command inherits of `vars`: each value holding a known secret redacted (a
/// declared secret's source variable, or a copy, gets its placeholder), `pass_env` passed
/// as it is, every other variable that looks like a credential withheld (returned beside,
/// with why).
fn inherited(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    guard: &Guard,
    pass_env: &[OsString],
) -> (
    BTreeMap<OsString, OsString>,
    Vec<(OsString, credentials::Suspicion)>,
) {
    let mut env = BTreeMap::new();
    let mut withheld = Vec::new();
    for (key, value) in vars {
        let redacted = guard.is_match(value.as_bytes());
        let value = if redacted {
            OsString::from_vec(guard.redact(value.as_bytes()).bytes().to_vec())
        } else {
            value
        };
        // sluice's own placeholders are not credentials, however shaped (a `ghp_` one looks
        // like a GitHub token by design): judged without them.
        let judged = without_placeholders(guard, value.as_bytes());
        let why = credentials::judge(&key.to_string_lossy(), &judged);
        // A redacted variable holds placeholders now, whatever its name says (a declared
        // secret's source variable is how the command finds its placeholder); but another
        // credential's shape left beside them still withholds it.
        let withhold = match why {
            Some(credentials::Suspicion::Value(_)) => true,
            Some(_) => !redacted,
            None => false,
        };
        if withhold && !pass_env.contains(&key) {
            withheld.extend(why.map(|why| (key, why)));
        } else {
            env.insert(key, value);
        }
    }
    (env, withheld)
}

/// `text` with each of the guard's placeholders in it cut out (a space in its place, so
/// that what stood around it is not joined into one word).
fn without_placeholders(guard: &Guard, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    for hit in guard
        .find_iter(text)
        .filter(|hit| hit.form == sluice_guard::Form::Placeholder)
    {
        out.extend_from_slice(&text[at..hit.start]);
        out.push(b' ');
        at = hit.end;
    }
    out.extend_from_slice(&text[at..]);
    out
}

/// Names each withheld variable on stderr, and why, never its value; then the two fixes.
pub(super) fn say_withheld(withheld: &[(OsString, credentials::Suspicion)], pass_env: &[OsString]) {
    for name in pass_env {
        eprintln!(
            "sluice: passing {} to the command unchanged (--pass-env)",
            name.to_string_lossy()
        );
    }
    if withheld.is_empty() {
        return;
    }
    for (name, why) in withheld {
        eprintln!(
            "sluice: withheld {} from the command: {why}",
            name.to_string_lossy()
        );
    }
    eprintln!(
        "sluice: to give the command such a variable, declare it as a secret (the command then gets its placeholder) or pass it on purpose with --pass-env NAME"
    );
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sluice_guard::{Placeholder, SecretValue};

    use super::*;

    const KNOWN: &str = "known-Value-0123456789";

    fn guard() -> Guard {
        let mut builder = Guard::builder();
        builder
            .add(
                "known",
                Placeholder::parse("SLUICE_KNOWN_0123456789abcdef").unwrap(),
                SecretValue::from(KNOWN),
            )
            .unwrap();
        builder.build().unwrap()
    }

    /// Variable names and values of every kind: credential-shaped, innocent, holding the
    /// known value, random.
    fn variable() -> impl Strategy<Value = (String, String)> {
        let names = prop::sample::select(vec![
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
            "STRIPE_KEY",
            "NOTES",
            "GIT_AUTHOR_NAME",
            "SSH_AUTH_SOCK",
            "PATH",
            "TOKEN_FILE",
        ]);
        let values = prop_oneof![
            Just("ghp_0123456789abcdefABCDEF0123456789abcd".to_owned()),
            Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
            Just("sk-ant-api03-abcdefghijklmnopqrstuvwxyz".to_owned()),
            Just(format!("prefix {KNOWN} suffix")),
            "[a-zA-Z0-9/+_-]{0,40}",
        ];
        (names, "[A-Z]{0,3}", values)
            .prop_map(|(name, suffix, value)| (format!("{name}{suffix}"), value))
    }

    proptest! {
        #[test]
        fn nothing_known_or_flagged_is_inherited_unless_passed_on_purpose(
            vars in prop::collection::vec(variable(), 0..12),
            pass in prop::collection::vec(0usize..12, 0..3),
        ) {
            let guard = guard();
            let vars: Vec<(OsString, OsString)> =
                vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
            let pass_env: Vec<OsString> =
                pass.iter().filter_map(|&i| vars.get(i).map(|(k, _)| k.clone())).collect();
            let (env, withheld) = inherited(vars.clone(), &guard, &pass_env);
            for (key, value) in &env {
                let text = value.to_string_lossy();
                prop_assert!(!text.contains(KNOWN), "a known value in {key:?}");
                if pass_env.contains(key) {
                    continue;
                }
                // No credential's shape, ever; a credential's name only where the value
                // held a declared secret, now its placeholder.
                prop_assert!(
                    credentials::credential_shape(value.as_bytes()).is_none(),
                    "{key:?} holds a credential's shape yet is inherited"
                );
                let held_known = vars
                    .iter()
                    .any(|(k, v)| k == key && v.to_string_lossy().contains(KNOWN));
                let flagged = credentials::judge(&key.to_string_lossy(), value.as_bytes());
                prop_assert!(
                    flagged.is_none() || held_known,
                    "{key:?} is flagged ({flagged:?}) yet inherited"
                );
            }
            // Every variable is accounted for: inherited, or withheld and named.
            for (key, _) in &vars {
                prop_assert!(
                    env.contains_key(key) || withheld.iter().any(|(name, _)| name == key),
                    "{key:?} vanished without a word"
                );
            }
        }
    }

    #[test]
    fn a_shaped_placeholder_is_inherited_though_it_looks_like_a_token() {
        let value = "ghp_realrealrealrealrealrealreal1234ab";
        let placeholder = "ghp_PLACEHOLDERplaceholder0123456789AB";
        let mut builder = Guard::builder();
        builder
            .add(
                "gh",
                Placeholder::parse(placeholder).unwrap(),
                SecretValue::from(value),
            )
            .unwrap();
        let guard = builder.build().unwrap();
        let vars: Vec<(OsString, OsString)> = vec![
            ("MY_GH".into(), value.into()),
            // Another token beside a known one still withholds the variable.
            (
                "BOTH".into(),
                format!("{value} ghp_0123456789abcdefABCDEF0123456789abcd").into(),
            ),
        ];
        let (env, withheld) = inherited(vars, &guard, &[]);
        assert_eq!(
            env.get(OsStr::new("MY_GH")),
            Some(&OsString::from(placeholder))
        );
        assert!(!env.contains_key(OsStr::new("BOTH")), "{env:?}");
        assert!(withheld.iter().any(|(name, _)| name == "BOTH"));
    }
}
