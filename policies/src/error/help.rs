//! How to fix each [`Problem`], in one line: the `help:` a diagnostic prints under its
//! message. Kept apart from the problems themselves so that each reads as a list.

use sluice_guard::MIN_PLACEHOLDER_LEN;

use super::{HostError, Problem};

impl Problem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            Problem::Syntax { .. } => {
                "fix the YAML at this position; docs/declaration.md shows the shape of every key".into()
            }
            Problem::UnknownKey { key, .. } => {
                format!("remove `{key}` or rename it to one of the keys listed; keys are never ignored")
            }
            Problem::Unreadable { .. } => {
                "check the path and its permissions; the declaration is YAML or JSON text".into()
            }
            Problem::DuplicateKey { key } => format!("keep one `{key}` and delete the other"),
            Problem::Empty | Problem::MissingVersion => "add `version: 1` as the first line".into(),
            Problem::UnsupportedVersion { .. } => "write `version: 1`".into(),
            Problem::BadSecretName { .. } => "rename the secret, e.g. github_token".into(),
            Problem::UnknownSink { .. } => {
                "use egress for the proxy's swap, command or file for the launcher, or sinks: [] for redact-only".into()
            }
            Problem::UnknownLocation { .. } => "use header, query or body".into(),
            Problem::Host(HostError::TooBroad { .. }) => {
                "name the exact hosts, or a wildcard under a domain you control, e.g. `*.example.com`".into()
            }
            Problem::Host(HostError::BadPort { .. }) => {
                "write `host:443`, or leave the port out to match every port".into()
            }
            Problem::Host(HostError::BadWildcard { .. }) => {
                "write the wildcard as `*.example.com`, or list exact hosts".into()
            }
            Problem::Rule(rule) => rule.help(),
            Problem::Budget(budget) => budget.help(),
            Problem::Approve(approve) => approve.help(),
            Problem::Pin(pin) => pin.help(),
            Problem::Mint(mint) => mint.help(),
            Problem::Host(_) => "write a host name such as api.example.com, optionally with :port".into(),
            Problem::NoSource { secret } => format!(
                "add `from: {{ env: VAR }}` (or `from: {{ file: PATH }}`, or `from: {{ command: [PROGRAM, ARGS...] }}`) under secrets.{secret}"
            ),
            Problem::TwoSources { .. } => "keep one source and delete the other".into(),
            Problem::EmptySource { key, what, .. } => format!("write the {what} after `{key}:`"),
            Problem::ValueTooShort { .. } => {
                "use the real secret (short values cannot be redacted safely), read from `from: { env: VAR }`".into()
            }
            Problem::ValueUnfitForHeader { secret, .. } => {
                format!("remove `header` from secrets.{secret}.in, or fix the value")
            }
            Problem::PlaceholderAlphabet { .. } | Problem::PlaceholderTooShort { .. } => {
                format!("use at least {MIN_PLACEHOLDER_LEN} characters of A-Z, a-z, 0-9, _ and -, or write `placeholder: shaped` (shaped like the value) or `plain` (SLUICE_<NAME>_<nonce>), or delete `placeholder:` to have one minted per run")
            }
            Problem::SharedPlaceholder { secret, .. } | Problem::PlaceholderContains { secret, .. } => {
                format!("give secrets.{secret} a distinct placeholder (or rename the secret)")
            }
            Problem::EgressWithoutHosts { secret } => format!(
                "add the hosts the secret is for to secrets.{secret}.hosts, or set `sinks: []` for redact-only"
            ),
            Problem::Unservable { secret } => format!(
                "remove the secret's hosts from egress.passthrough, or drop egress from secrets.{secret}.sinks"
            ),
            Problem::UnknownSignKind { .. } => {
                "write `sign: aws-sigv4`, or delete `sign:` for a secret that is swapped into requests".into()
            }
            Problem::SigningKey { secret, key, .. } => format!(
                "delete secrets.{secret}.{key}: sluice verifies the sandbox's signature by the placeholders and re-signs toward secrets.{secret}.hosts"
            ),
            Problem::SigningSinks { secret } => {
                format!("delete secrets.{secret}.sinks (a signing secret gets [egress])")
            }
            Problem::SigningWholeSource { secret, .. } => format!(
                "write secrets.{secret}.from as {{ access_key_id: {{ env: AWS_ACCESS_KEY_ID }}, secret_access_key: {{ env: AWS_SECRET_ACCESS_KEY }} }}"
            ),
            Problem::MissingPart { secret, part, .. } => {
                format!("add `{part}: {{ env: VAR }}` (or `{{ file: PATH }}`) under secrets.{secret}.from")
            }
            Problem::OnlyForSigning { secret, key } => format!(
                "add `sign: aws-sigv4` to secrets.{secret}, or delete secrets.{secret}.{key}"
            ),
            Problem::BadScopeName { .. } => {
                "write the name as AWS signs it: the service's signing name (s3, bedrock, sts) or a region (eu-west-1)".into()
            }
            Problem::PartNameTaken { secret, part } => {
                format!("rename secrets.{secret}.{part} or secrets.{secret}")
            }
            Problem::NeedsEgress { secret, key } => format!(
                "delete secrets.{secret}.{key}, or add egress to secrets.{secret}.sinks if the proxy should swap it"
            ),
            Problem::NoValue { key } => format!(
                "write the value after `{}:` (for a list, `[...]`), or delete the key to get its default",
                key.rsplit('.').next().unwrap_or(key)
            ),
            Problem::ReservedVariable { secret, .. } => format!(
                "rename secrets.{secret} (e.g. {secret}_token); a secret's variable is its name uppercased"
            ),
            Problem::NoLocations { secret } => format!(
                "write `in: [header]` (or query, body) under secrets.{secret}, or set `sinks: []` for redact-only"
            ),
            Problem::HeaderNamesWithoutHeader { secret } => {
                format!("add header to secrets.{secret}.in, or delete secrets.{secret}.header")
            }
            Problem::BadHeaderName { .. } => "write a header name such as Authorization or X-Api-Key".into(),
            Problem::BadCidr { .. } => "write e.g. 127.0.0.1/32, 10.0.0.0/8 or ::1/128".into(),
            Problem::VerbatimPassthrough { .. } => "keep the host in one of the two lists".into(),
            Problem::AskReachable { list, .. } => {
                format!("remove the host from egress.ask, or from {list} if it should wait for a decision")
            }
            Problem::CredentialLiteral { secret, .. } => format!(
                "read it at launch instead: `from: {{ env: VAR }}` or `from: {{ file: PATH }}` under secrets.{secret}, and rotate it if this file was ever shared"
            ),
            Problem::CommonWordValue { secret } => format!(
                "use the real secret (random, not words), or read it with `from: {{ env: VAR }}` under secrets.{secret}"
            ),
            Problem::LiteralValue { secret, .. } => format!(
                "read it at launch instead: `from: {{ env: VAR }}` or `from: {{ file: PATH }}` under secrets.{secret}"
            ),
            Problem::NoSinks { .. } => {
                "write `sinks: [egress]` to say so explicitly (or `sinks: []` for redact-only)".into()
            }
            Problem::HostEngineOnly { secret, .. } => format!(
                "serve it from a host engine (`sluice serve` with an admin endpoint), or grant secrets.{secret} egress, command or file; `sinks: []` makes it redact-only"
            ),
            Problem::BroadWildcard { named, .. } => format!("list {named} instead of the wildcard"),
            Problem::PassthroughHost { .. } => {
                "remove the host from egress.passthrough if the secret should be swapped there".into()
            }
            Problem::MetadataReachable { .. } => {
                "narrow the CIDR so that it leaves out 169.254.169.254 and fd00:ec2::254".into()
            }
        }
    }
}
