//! Every way a secret's `allow:` can be wrong, with the one-line fix for each. Carried to
//! the writer inside [`crate::Problem::Rule`], at the entry's line and column.

/// A request rule that cannot be used, or could never match a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleProblem {
    /// `allow: []`: no request could ever carry the secret.
    #[error(
        "secret {secret} has an empty `allow:`, so its placeholder would be swapped into no request"
    )]
    EmptyAllow {
        /// The secret's name.
        secret: String,
    },
    /// A rule with neither `methods:` nor `paths:`.
    #[error("a rule with neither `methods:` nor `paths:` would admit every request")]
    EmptyRule,
    /// `methods: []` or `paths: []`.
    #[error("`{key}: []` lists nothing, so the rule could admit no request")]
    EmptyList {
        /// `methods` or `paths`.
        key: &'static str,
    },
    /// A method that is not an HTTP token.
    #[error("`{found}` is not an HTTP method")]
    BadMethod {
        /// The entry, escaped.
        found: String,
    },
    /// A method not in capitals: methods are case-sensitive, so it would never match
    /// the method the writer meant.
    #[error("methods are case-sensitive: `{found}` is not `{upper}`, and no client sends it")]
    LowercaseMethod {
        /// The entry as written.
        found: String,
        /// It in capitals.
        upper: String,
    },
    /// `CONNECT`: sluice answers it, and no request inside a tunnel is one.
    #[error(
        "CONNECT never reaches a secret's host: sluice answers it and refuses it inside a tunnel"
    )]
    ConnectMethod,
    /// A path pattern not starting with `/`.
    #[error("path pattern `{found}` does not start with `/`")]
    PathNotAbsolute {
        /// The pattern as written.
        found: String,
    },
    /// A path pattern holding `?` or `#`.
    #[error("path pattern `{found}` holds a query or a fragment, which are not part of the match")]
    PathWithQuery {
        /// The pattern as written.
        found: String,
    },
    /// A path pattern holding a space or a control character, which no request path does.
    #[error(
        "path pattern `{found}` holds a space or a control character, which no request path holds"
    )]
    PathNotVisible {
        /// The pattern, escaped.
        found: String,
    },
    /// A pattern that differs from its normal form: request paths are matched normalised,
    /// so it could never match.
    #[error(
        "path pattern `{found}` can never match: request paths are matched normalised, and it normalises to `{normal}`"
    )]
    NeverNormal {
        /// The pattern as written.
        found: String,
        /// Its normal form.
        normal: String,
    },
    /// A `*` inside a segment (`/v1/*.json`).
    #[error(
        "path pattern `{found}` has a `*` inside the segment `{segment}`; wildcards stand for whole segments"
    )]
    PartialWildcard {
        /// The pattern as written.
        found: String,
        /// The segment.
        segment: String,
    },
    /// More than one `**` in a pattern.
    #[error("path pattern `{found}` has more than one `**`")]
    TwoDoubleStars {
        /// The pattern as written.
        found: String,
    },
    /// `allow:` on a signing secret, whose requests are checked by signature.
    #[error(
        "secret {secret} signs requests (sign:), and request rules do not apply to signing secrets yet"
    )]
    OnSigningSecret {
        /// The secret's name.
        secret: String,
    },
}

impl RuleProblem {
    /// Its stable code (`rule-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            RuleProblem::EmptyAllow { .. } => "rule-empty-allow",
            RuleProblem::EmptyRule => "rule-empty-rule",
            RuleProblem::EmptyList { .. } => "rule-empty-list",
            RuleProblem::BadMethod { .. } => "rule-bad-method",
            RuleProblem::LowercaseMethod { .. } => "rule-lowercase-method",
            RuleProblem::ConnectMethod => "rule-connect-method",
            RuleProblem::PathNotAbsolute { .. } => "rule-path-not-absolute",
            RuleProblem::PathWithQuery { .. } => "rule-path-with-query",
            RuleProblem::PathNotVisible { .. } => "rule-path-not-visible",
            RuleProblem::NeverNormal { .. } => "rule-never-normal",
            RuleProblem::PartialWildcard { .. } => "rule-partial-wildcard",
            RuleProblem::TwoDoubleStars { .. } => "rule-two-double-stars",
            RuleProblem::OnSigningSecret { .. } => "rule-on-signing-secret",
        }
    }
}

impl RuleProblem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            RuleProblem::EmptyAllow { secret } => format!(
                "list the requests it is for, remove `allow:` to admit every request, or set secrets.{secret}.sinks to [] for redact-only"
            ),
            RuleProblem::EmptyRule => {
                "add `methods:`, `paths:` or both, e.g. { methods: [GET], paths: [\"/user\"] }"
                    .into()
            }
            RuleProblem::EmptyList { key } => {
                format!("list at least one entry, or remove `{key}:` to admit every one")
            }
            RuleProblem::BadMethod { .. } => "write a method such as GET, POST or DELETE".into(),
            RuleProblem::LowercaseMethod { upper, .. } => format!("write `{upper}`"),
            RuleProblem::ConnectMethod => "remove CONNECT from the rule".into(),
            RuleProblem::PathNotAbsolute { found } => format!("write `/{found}`"),
            RuleProblem::PathWithQuery { .. } => {
                "remove the query; a rule matches the path alone, whatever the query".into()
            }
            RuleProblem::PathNotVisible { .. } => {
                "write the path as it goes on the wire, with `%20` for a space".into()
            }
            RuleProblem::NeverNormal { normal, .. } => format!("write `{normal}`"),
            RuleProblem::PartialWildcard { .. } => {
                "write `*` for one whole segment or `**` for any number of them, e.g. `/v1/*`"
                    .into()
            }
            RuleProblem::TwoDoubleStars { .. } => {
                "keep one `**` and write `*` for single segments, or split it into two rules".into()
            }
            RuleProblem::OnSigningSecret { .. } => {
                "remove `allow:` and narrow the secret with `services:` and `regions:`".into()
            }
        }
    }
}
