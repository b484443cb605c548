//! Every way a secret's `approve:` can be wrong, with the one-line fix for each. Carried to
//! the writer inside [`crate::Problem::Approve`], at the entry's line and column.

/// An `approve:` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApproveProblem {
    /// A word other than `all`.
    #[error("`approve: {found}` is neither `all` nor a list of methods")]
    NotAList {
        /// The word as written.
        found: String,
    },
    /// `approve: []`: nothing would wait, which the key's absence says already.
    #[error("`approve: []` names no method")]
    Empty,
    /// An entry that is not an HTTP method.
    #[error("`{found}` is not an HTTP method")]
    UnknownMethod {
        /// The entry as written.
        found: String,
    },
    /// `approve:` on a signing secret.
    #[error(
        "secret {secret} signs requests (sign:), and approvals do not apply to signing secrets yet"
    )]
    OnSigningSecret {
        /// The secret's name.
        secret: String,
    },
}

impl ApproveProblem {
    /// Its stable code (`approve-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            ApproveProblem::NotAList { .. } => "approve-not-a-list",
            ApproveProblem::Empty => "approve-empty",
            ApproveProblem::UnknownMethod { .. } => "approve-unknown-method",
            ApproveProblem::OnSigningSecret { .. } => "approve-on-signing-secret",
        }
    }
}

impl ApproveProblem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            ApproveProblem::NotAList { .. } => {
                "write `approve: all`, or the methods that wait, e.g. `approve: [POST, DELETE]`"
                    .into()
            }
            ApproveProblem::Empty => {
                "list the methods that wait for a decision, or remove `approve:`".into()
            }
            ApproveProblem::UnknownMethod { .. } => {
                "write one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, in upper case"
                    .into()
            }
            ApproveProblem::OnSigningSecret { .. } => {
                "remove `approve:` from the signing secret".into()
            }
        }
    }
}
