//! Every way a secret's `oauth2:` can be wrong, with the one-line fix for each. Carried to
//! the writer inside [`crate::Problem::Mint`], at the entry's line and column.

/// An `oauth2:` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MintProblem {
    /// `oauth2:` beside `from:` or `value:`: the value is minted, so it has no source.
    #[error("secret {secret} is minted (oauth2: or github_app:), so it cannot also have `{key}:`")]
    AlsoSourced {
        /// The secret's name.
        secret: String,
        /// `from` or `value`.
        key: &'static str,
    },
    /// `oauth2:` beside `sign:`.
    #[error("secret {secret} cannot both sign (sign:) and be minted (oauth2: or github_app:)")]
    AlsoSigns {
        /// The secret's name.
        secret: String,
    },
    /// A grant that is not one of those sluice mints with.
    #[error("secret {secret}: unknown grant `{found}`")]
    UnknownGrant {
        /// The secret's name.
        secret: String,
        /// The grant as written.
        found: String,
    },
    /// A `token_url` that is not an `https://` URL with a host.
    #[error("secret {secret}: token_url `{found}` is not an https:// URL with a host ({why})")]
    TokenUrl {
        /// The secret's name.
        secret: String,
        /// The URL as written.
        found: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A key the grant cannot mint without.
    #[error("secret {secret}: grant {grant} needs `{key}` under oauth2:")]
    Missing {
        /// The secret's name.
        secret: String,
        /// The grant.
        grant: &'static str,
        /// The missing key.
        key: &'static str,
    },
    /// A key the grant has no use for.
    #[error("secret {secret}: grant {grant} takes no `{key}`")]
    Unused {
        /// The secret's name.
        secret: String,
        /// The grant.
        grant: &'static str,
        /// The key given.
        key: &'static str,
    },
    /// Sinks other than `[egress]` (or `[]`, redact-only): a minted token is never handed
    /// to the sandbox.
    #[error(
        "secret {secret} is minted (oauth2: or github_app:) and can only be granted egress (or sinks: [] for redact-only)"
    )]
    Sinks {
        /// The secret's name.
        secret: String,
    },
    /// `body:` other than `form` or `json`.
    #[error("secret {secret}: oauth2.body `{found}` is neither form nor json")]
    Body {
        /// The secret's name.
        secret: String,
        /// The value as written.
        found: String,
    },
    /// Both `oauth2:` and `github_app:`.
    #[error("secret {secret} has both oauth2: and github_app:")]
    TwoMinters {
        /// The secret's name.
        secret: String,
    },
    /// A key `github_app:` cannot mint without.
    #[error("secret {secret}: github_app needs `{key}`")]
    AppMissing {
        /// The secret's name.
        secret: String,
        /// The missing key.
        key: &'static str,
    },
    /// `repositories: []` or `permissions: {}`: a token narrowed to nothing, or not at all.
    #[error("secret {secret}: github_app.{key} is empty")]
    AppEmpty {
        /// The secret's name.
        secret: String,
        /// `repositories` or `permissions`.
        key: &'static str,
    },
    /// A permission level other than `read`, `write` or `admin`.
    #[error(
        "secret {secret}: permission {permission} has level `{found}`, not read, write or admin"
    )]
    AppLevel {
        /// The secret's name.
        secret: String,
        /// The permission's name.
        permission: String,
        /// The level as written.
        found: String,
    },
    /// A permission name GitHub's documentation does not list (a warning: GitHub adds
    /// permissions, and answers an unknown one with its own error at the first mint).
    #[error("secret {secret}: `{found}` is not a GitHub App permission sluice knows")]
    AppPermission {
        /// The secret's name.
        secret: String,
        /// The name as written.
        found: String,
    },
    /// A repository that is not a bare name (`owner/name`, a URL, whitespace).
    #[error("secret {secret}: repository `{found}` is not a repository name")]
    AppRepository {
        /// The secret's name.
        secret: String,
        /// As written.
        found: String,
    },
    /// An `api` that is not an `https://` URL with a host.
    #[error("secret {secret}: github_app.api `{found}` is not an https:// URL with a host ({why})")]
    AppApi {
        /// The secret's name.
        secret: String,
        /// As written.
        found: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A refresh token read from a source sluice cannot write a rotated token back to.
    #[error(
        "secret {secret}: its refresh token comes from `{key}`, where a rotated refresh token cannot be written back; it is lost when the run ends"
    )]
    RefreshTokenLost {
        /// The secret's name.
        secret: String,
        /// `env` or `command`.
        key: &'static str,
    },
}

impl MintProblem {
    /// Its stable code (`mint-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            MintProblem::AlsoSourced { .. } => "mint-also-sourced",
            MintProblem::AlsoSigns { .. } => "mint-also-signs",
            MintProblem::UnknownGrant { .. } => "mint-unknown-grant",
            MintProblem::TokenUrl { .. } => "mint-token-url",
            MintProblem::Missing { .. } => "mint-missing",
            MintProblem::Unused { .. } => "mint-unused",
            MintProblem::Sinks { .. } => "mint-sinks",
            MintProblem::Body { .. } => "mint-body",
            MintProblem::TwoMinters { .. } => "mint-two-minters",
            MintProblem::AppMissing { .. } => "mint-app-missing",
            MintProblem::AppEmpty { .. } => "mint-app-empty",
            MintProblem::AppLevel { .. } => "mint-app-level",
            MintProblem::AppPermission { .. } => "mint-app-permission",
            MintProblem::AppRepository { .. } => "mint-app-repository",
            MintProblem::AppApi { .. } => "mint-app-api",
            MintProblem::RefreshTokenLost { .. } => "mint-refresh-token-lost",
        }
    }
}

impl MintProblem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            MintProblem::AlsoSourced { secret, .. } => format!(
                "delete `from:`/`value:` under secrets.{secret}: the real parts go under oauth2: (refresh_token, client_secret)"
            ),
            MintProblem::AlsoSigns { .. } => "keep one of `sign:` and `oauth2:`".into(),
            MintProblem::UnknownGrant { .. } => {
                "use refresh_token, client_credentials or jwt_bearer".into()
            }
            MintProblem::TokenUrl { .. } => {
                "write the provider's token endpoint, e.g. https://oauth2.googleapis.com/token".into()
            }
            MintProblem::Missing { key, .. } => {
                format!("add `{key}: {{ file: PATH }}` (or env, or command) under oauth2:")
            }
            MintProblem::Unused { key, .. } => format!("delete `{key}` under oauth2:"),
            MintProblem::Sinks { .. } => {
                "write `sinks: [egress]`: the sandbox holds the placeholder, sluice the token".into()
            }
            MintProblem::Body { .. } => "write `body: json`, or delete `body:` for form".into(),
            MintProblem::TwoMinters { .. } => "keep one of oauth2: and github_app:".into(),
            MintProblem::AppMissing { key, .. } => match *key {
                "app_id" => "add `app_id: <the App's id>` (its settings page shows it)".into(),
                "installation_id" => {
                    "add `installation_id: <id>` (the number ending the installation's settings URL)".into()
                }
                "private_key" => "add `private_key: { file: PATH }` (the App's .pem)".into(),
                "repositories" => "add `repositories: [NAME, ...]`: the token reaches these only".into(),
                _ => "add `permissions: { contents: read }`: the token has these only".into(),
            },
            MintProblem::AppEmpty { key, .. } => {
                format!("name at least one under `{key}`: an empty list would not narrow the token")
            }
            MintProblem::AppLevel { .. } => "write read, write or admin".into(),
            MintProblem::AppPermission { .. } => {
                "check the name against GitHub's list of App permissions (e.g. contents, pull_requests, issues)".into()
            }
            MintProblem::AppRepository { .. } => {
                "write the repository's name only (`website`, not `owner/website` or a URL): it is within the installation's owner".into()
            }
            MintProblem::AppApi { .. } => {
                "write the API root, e.g. https://ghe.example.com/api/v3 (GitHub's own is the default)".into()
            }
            MintProblem::RefreshTokenLost { .. } => {
                "read it with `refresh_token: { file: PATH }`: sluice writes each rotated token back there".into()
            }
        }
    }
}
