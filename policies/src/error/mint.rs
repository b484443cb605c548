//! Every way a secret's `oauth2:` can be wrong, with the one-line fix for each. Carried to
//! the writer inside [`crate::Problem::Mint`], at the entry's line and column.

/// An `oauth2:` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MintProblem {
    /// `oauth2:` beside `from:` or `value:`: the value is minted, so it has no source.
    #[error("secret {secret} is minted (oauth2:), so it cannot also have `{key}:`")]
    AlsoSourced {
        /// The secret's name.
        secret: String,
        /// `from` or `value`.
        key: &'static str,
    },
    /// `oauth2:` beside `sign:`.
    #[error("secret {secret} cannot both sign (sign:) and be minted (oauth2:)")]
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
        "secret {secret} is minted (oauth2:) and can only be granted egress (or sinks: [] for redact-only)"
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
            MintProblem::RefreshTokenLost { .. } => {
                "read it with `refresh_token: { file: PATH }`: sluice writes each rotated token back there".into()
            }
        }
    }
}
