//! The declaration exactly as written: a serde model that refuses unknown keys and keeps
//! the line and column of every value, for validation to point at.
//!
//! Nothing here interprets a value; a literal secret value is held in a zeroizing
//! buffer that never prints.

use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_saphyr::Spanned;
use zeroize::Zeroizing;

/// A list of strings, each with its position, and the list's own position.
pub(crate) type SpannedList = Spanned<Vec<Spanned<String>>>;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDeclaration {
    pub(crate) version: Option<Spanned<u64>>,
    pub(crate) secrets: Option<Spanned<RawSecrets>>,
    pub(crate) egress: Option<Spanned<RawEgress>>,
}

/// `secrets:` in file order, each name with its position.
#[derive(Debug, Default)]
pub(crate) struct RawSecrets(pub(crate) Vec<(Spanned<String>, Spanned<RawSecret>)>);

impl<'de> Deserialize<'de> for RawSecrets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SecretsVisitor;
        impl<'de> Visitor<'de> for SecretsVisitor {
            type Value = RawSecrets;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping from secret names to secret declarations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawSecrets, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(RawSecrets(out))
            }
        }
        d.deserialize_map(SecretsVisitor)
    }
}

/// One secret.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSecret {
    pub(crate) from: Option<Spanned<RawFrom>>,
    pub(crate) value: Option<Spanned<RawValue>>,
    pub(crate) hosts: Option<SpannedList>,
    pub(crate) sinks: Option<SpannedList>,
    #[serde(rename = "in")]
    pub(crate) locations: Option<SpannedList>,
    pub(crate) header: Option<SpannedList>,
    pub(crate) placeholder: Option<Spanned<String>>,
    /// `budget: { requests: N, per: DURATION }`: how many requests it may be swapped into.
    pub(crate) budget: Option<Spanned<RawBudget>>,
    /// `approve: [POST, DELETE]` or `approve: all`: uses that wait for a person's decision.
    pub(crate) approve: Option<Spanned<RawApprove>>,
    /// `allow:`: request rules, the methods and paths the secret may be swapped into.
    pub(crate) allow: Option<Spanned<Vec<Spanned<RawRule>>>>,
    /// `pin: ["sha256/BASE64"]`: SPKI pins the upstream's chain must hold.
    pub(crate) pin: Option<SpannedList>,
    /// `sign: aws-sigv4`: the secret signs requests instead of being swapped into them.
    pub(crate) sign: Option<Spanned<String>>,
    /// A signing secret's narrowing to these services (signing names).
    pub(crate) services: Option<SpannedList>,
    /// A signing secret's narrowing to these regions.
    pub(crate) regions: Option<SpannedList>,
    /// `oauth2:`: the secret is an access token sluice mints itself.
    pub(crate) oauth2: Option<Spanned<RawOauth2>>,
    /// `github_app:`: the secret is a GitHub App installation token sluice mints itself.
    pub(crate) github_app: Option<Spanned<RawGithubApp>>,
}

/// `github_app: { app_id, installation_id, private_key, repositories, permissions, api }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGithubApp {
    pub(crate) app_id: Option<Spanned<u64>>,
    pub(crate) installation_id: Option<Spanned<u64>>,
    pub(crate) private_key: Option<Spanned<RawPartFrom>>,
    pub(crate) repositories: Option<SpannedList>,
    /// GitHub's permission names and levels, in the order written.
    pub(crate) permissions: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    pub(crate) api: Option<Spanned<String>>,
}

/// `oauth2: { token_url, grant, client_id, client_secret, refresh_token, ... }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOauth2 {
    pub(crate) token_url: Option<Spanned<String>>,
    pub(crate) grant: Option<Spanned<String>>,
    pub(crate) client_id: Option<Spanned<RawClientId>>,
    pub(crate) client_secret: Option<Spanned<RawPartFrom>>,
    pub(crate) refresh_token: Option<Spanned<RawPartFrom>>,
    pub(crate) service_account: Option<Spanned<RawPartFrom>>,
    pub(crate) scopes: Option<SpannedList>,
    pub(crate) audience: Option<Spanned<String>>,
    /// `body: json` for a provider that wants its token requests as JSON; `form` by default.
    pub(crate) body: Option<Spanned<String>>,
}

/// A client id: a literal (client ids are not secret) or a source.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawClientId {
    /// `client_id: 1234.apps.example.com`.
    Literal(String),
    /// `client_id: { env: VAR }`, `{ file: PATH }` or `{ command: [...] }`.
    Source(Box<RawPartFrom>),
}

/// `approve:` as written: a word (`all`) or a list of methods.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawApprove {
    /// `approve: all`.
    Word(String),
    /// `approve: [POST, PUT]`.
    Methods(Vec<String>),
}

/// `budget: { requests: 600, per: 1h }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub(crate) requests: Option<Spanned<u64>>,
    pub(crate) per: Option<Spanned<String>>,
}

/// One request rule: `{ methods: [GET], paths: ["/user"] }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub(crate) methods: Option<SpannedList>,
    pub(crate) paths: Option<SpannedList>,
}

/// `from: { env: VAR }`, `from: { file: PATH }` or `from: { command: [ARGV...] }`; for a
/// signing secret, one such source per part of its credential.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFrom {
    pub(crate) env: Option<Spanned<String>>,
    pub(crate) file: Option<Spanned<String>>,
    pub(crate) command: Option<SpannedList>,
    pub(crate) access_key_id: Option<Spanned<RawPartFrom>>,
    pub(crate) secret_access_key: Option<Spanned<RawPartFrom>>,
    pub(crate) session_token: Option<Spanned<RawPartFrom>>,
}

/// The source of one part of a signing secret's credential.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPartFrom {
    pub(crate) env: Option<Spanned<String>>,
    pub(crate) file: Option<Spanned<String>>,
    pub(crate) command: Option<SpannedList>,
}

/// A literal secret value: zeroized on drop, never printed.
pub(crate) struct RawValue(pub(crate) Zeroizing<String>);

impl fmt::Debug for RawValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RawValue(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| RawValue(Zeroizing::new(s)))
    }
}

/// `egress:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEgress {
    pub(crate) allow: Option<SpannedList>,
    pub(crate) verbatim: Option<SpannedList>,
    pub(crate) passthrough: Option<SpannedList>,
    pub(crate) allow_ips: Option<SpannedList>,
    /// `ask:`: hosts that wait for a person's decision instead of being refused.
    pub(crate) ask: Option<SpannedList>,
}
