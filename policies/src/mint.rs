//! Minted credentials (`oauth2:`), compiled: the token endpoint, the grant, and the parts
//! the sandbox holds placeholders for.
//!
//! A secret with `oauth2:` has no value of its own: its value is the access token sluice
//! mints at the token endpoint, which changes as tokens expire. It compiles into one
//! [`MinterDecl`] and one [`crate::SecretDecl`] per part: the access token under the
//! secret's own name (swapped where the declaration grants it), and `NAME.refresh_token`
//! and `NAME.client_secret` where the grant has them (never swapped anywhere: only sluice's
//! own token requests carry their values, and the sandbox's token requests carrying their
//! placeholders are answered by sluice).
//!
//! Nothing here reads a source or touches the network; the proxy owns every chain.

use std::fmt;

use crate::model::{MintPart, Source};

/// An OAuth 2 grant sluice can mint with (`grant:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Grant {
    /// RFC 6749 §6: a refresh token exchanged for an access token (and, with a provider
    /// that rotates, a new refresh token).
    RefreshToken,
    /// RFC 6749 §4.4: the client's own credentials exchanged for an access token.
    ClientCredentials,
    /// RFC 7523: a JWT signed with a service account's key exchanged for an access token.
    JwtBearer,
    /// Not OAuth: a GitHub App's JWT exchanged for an installation token (`github_app:`).
    GithubApp,
}

impl Grant {
    /// Every OAuth grant `grant:` names, in declaration-reference order.
    pub const ALL: [Grant; 3] = [
        Grant::RefreshToken,
        Grant::ClientCredentials,
        Grant::JwtBearer,
    ];

    /// The name used in declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::RefreshToken => "refresh_token",
            Grant::ClientCredentials => "client_credentials",
            Grant::JwtBearer => "jwt_bearer",
            Grant::GithubApp => "github_app",
        }
    }

    /// Parses a declaration name.
    pub fn from_name(name: &str) -> Option<Grant> {
        Grant::ALL.into_iter().find(|g| g.as_str() == name)
    }

    /// Whether a grant of this kind must have `part`, may have it, or may not.
    pub fn wants(self, part: MintPart) -> Want {
        match (self, part) {
            (_, MintPart::AccessToken) => Want::Required,
            (Grant::RefreshToken, MintPart::RefreshToken) => Want::Required,
            (Grant::RefreshToken, MintPart::ClientSecret) => Want::Optional,
            (Grant::ClientCredentials, MintPart::ClientSecret) => Want::Required,
            (Grant::ClientCredentials, MintPart::RefreshToken) => Want::Never,
            (Grant::JwtBearer, MintPart::ServiceAccount) => Want::Required,
            (Grant::GithubApp, MintPart::PrivateKey) => Want::Required,
            (Grant::JwtBearer | Grant::GithubApp, _) => Want::Never,
            (_, MintPart::ServiceAccount | MintPart::PrivateKey) => Want::Never,
        }
    }

    /// Whether it takes a `client_id`: the service account's key file names its own client
    /// (`client_email`), so `jwt_bearer` does not.
    pub fn wants_client_id(self) -> Want {
        match self {
            Grant::RefreshToken | Grant::ClientCredentials => Want::Required,
            Grant::JwtBearer | Grant::GithubApp => Want::Never,
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a grant takes a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// It cannot mint without it.
    Required,
    /// A confidential client has it, a public one does not.
    Optional,
    /// The grant has no use for it: given, it is a mistake.
    Never,
}

/// The name of a minted secret's part: `NAME.refresh_token`, `NAME.client_secret` (its
/// variable is thus `NAME_REFRESH_TOKEN`); the access token is the secret's own name.
pub fn mint_part_name(secret: &str, part: MintPart) -> String {
    match part {
        MintPart::AccessToken => secret.to_owned(),
        other => format!("{secret}.{}", other.as_str()),
    }
}

/// The name of Google's metadata server, which sluice answers for the run's one Google
/// secret ([`crate::Policy::metadata_minter`]); its address is [`METADATA_IP`].
pub const METADATA_HOST: &str = "metadata.google.internal";

/// The address of Google's metadata server (link-local; sluice never dials it).
pub const METADATA_IP: &str = "169.254.169.254";

/// The token endpoints of Google's own identity provider.
const GOOGLE_TOKEN_HOSTS: [&str; 3] = [
    "oauth2.googleapis.com",
    "accounts.google.com",
    "www.googleapis.com",
];

/// The token endpoint (`token_url:`): always `https`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenUrl {
    /// The URL as written.
    pub(crate) url: String,
    /// Its host, normalised.
    pub(crate) host: String,
    /// Its port (443 when none is written).
    pub(crate) port: u16,
    /// Its path (`/` when none is written), without a query.
    pub(crate) path: String,
}

impl TokenUrl {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// Its host, normalised (lowercased, IDNA, no trailing dot).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its path, which a sandbox's token request must name exactly.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Where the client id comes from: most are not secret and are written as they are.
#[derive(Debug)]
pub enum ClientId {
    /// `client_id: 1234.apps.example.com`.
    Literal(String),
    /// `client_id: { env | file | command }`, read at start.
    Source(Source),
}

/// How sluice's own token requests carry their parameters (`body:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenBody {
    /// `application/x-www-form-urlencoded`, as RFC 6749 says (the default).
    Form,
    /// `application/json`, for a provider that wants it.
    Json,
}

/// A minted secret (`oauth2:`), compiled.
#[derive(Debug)]
pub struct MinterDecl {
    pub(crate) name: String,
    pub(crate) token_url: TokenUrl,
    pub(crate) grant: Grant,
    /// None for `jwt_bearer` (the key file names the client).
    pub(crate) client_id: Option<ClientId>,
    pub(crate) scopes: Vec<String>,
    pub(crate) audience: Option<String>,
    pub(crate) body: TokenBody,
    /// Each part and the index of its secret in [`crate::Policy::secrets`].
    pub(crate) parts: Vec<(MintPart, usize)>,
    /// For a GitHub App: the installation and the narrowing asked for.
    pub(crate) github: Option<GithubApp>,
}

/// A GitHub App's installation token, narrowed (`github_app:`): what sluice asks GitHub for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GithubApp {
    pub(crate) app_id: u64,
    pub(crate) installation_id: u64,
    /// The API root, without a trailing `/` (`https://api.github.com` by default).
    pub(crate) api: String,
    pub(crate) repositories: Vec<String>,
    /// Permission name and level (`read`, `write`, `admin`), sorted by name.
    pub(crate) permissions: Vec<(String, String)>,
}

impl GithubApp {
    /// The App's id: the JWT's issuer.
    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// The installation the token is minted for.
    pub fn installation_id(&self) -> u64 {
        self.installation_id
    }

    /// The API root (GitHub's, or an Enterprise Server's), without a trailing `/`.
    pub fn api(&self) -> &str {
        &self.api
    }

    /// The repositories the token reaches (names within the installation's owner).
    pub fn repositories(&self) -> &[String] {
        &self.repositories
    }

    /// The permissions asked for, name and level, sorted by name.
    pub fn permissions(&self) -> &[(String, String)] {
        &self.permissions
    }
}

impl MinterDecl {
    /// The name declared under `secrets:` (the access token's secret).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token endpoint.
    pub fn token_url(&self) -> &TokenUrl {
        &self.token_url
    }

    /// The grant it mints with.
    pub fn grant(&self) -> Grant {
        self.grant
    }

    /// The client id's source (none for `jwt_bearer`: the key file names the client).
    pub fn client_id(&self) -> Option<&ClientId> {
        self.client_id.as_ref()
    }

    /// The scopes asked for (none: the provider's default).
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The audience asked for, when the declaration names one.
    pub fn audience(&self) -> Option<&str> {
        self.audience.as_deref()
    }

    /// How its token requests are written.
    pub fn body(&self) -> TokenBody {
        self.body
    }

    /// The index in [`crate::Policy::secrets`] of `part`, when the grant has it.
    pub fn part(&self, part: MintPart) -> Option<usize> {
        self.parts.iter().find(|(p, _)| *p == part).map(|(_, i)| *i)
    }

    /// Each part and the index of its secret.
    pub fn parts(&self) -> &[(MintPart, usize)] {
        &self.parts
    }

    /// The GitHub App installation and narrowing, for `github_app:`.
    pub fn github(&self) -> Option<&GithubApp> {
        self.github.as_ref()
    }

    /// Whether Google's client libraries would take this token from the metadata server:
    /// a service account's (`jwt_bearer`), or one minted by Google's token endpoint.
    pub fn is_google(&self) -> bool {
        self.grant == Grant::JwtBearer || GOOGLE_TOKEN_HOSTS.contains(&self.token_url.host())
    }
}
