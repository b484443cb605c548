//! Every way a secret's `budget:` can be wrong, with the one-line fix for each. Carried to
//! the writer inside [`crate::Problem::Budget`], at the entry's line and column.

/// A `budget:` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetProblem {
    /// `requests:` or `per:` left out.
    #[error("a budget names both `requests:` and `per:`; `{missing}:` is missing")]
    Incomplete {
        /// The key left out.
        missing: &'static str,
    },
    /// `requests: 0`: the secret would never be swapped.
    #[error("a budget of 0 requests would swap the secret into none")]
    NoRequests,
    /// `per:` that is not a duration.
    #[error("`{found}` is not a duration")]
    BadDuration {
        /// The entry as written.
        found: String,
    },
    /// `per:` shorter than a second or longer than 31 days.
    #[error("a budget's window of `{found}` is outside 1s to 31d")]
    WindowOutOfRange {
        /// The entry as written.
        found: String,
    },
    /// `budget:` on a signing secret.
    #[error(
        "secret {secret} signs requests (sign:), and budgets do not apply to signing secrets yet"
    )]
    OnSigningSecret {
        /// The secret's name.
        secret: String,
    },
}

impl BudgetProblem {
    /// Its stable code (`budget-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            BudgetProblem::Incomplete { .. } => "budget-incomplete",
            BudgetProblem::NoRequests => "budget-no-requests",
            BudgetProblem::BadDuration { .. } => "budget-bad-duration",
            BudgetProblem::WindowOutOfRange { .. } => "budget-window-out-of-range",
            BudgetProblem::OnSigningSecret { .. } => "budget-on-signing-secret",
        }
    }
}

impl BudgetProblem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            BudgetProblem::Incomplete { .. } => {
                "write both, e.g. `budget: { requests: 600, per: 1h }`".into()
            }
            BudgetProblem::NoRequests => {
                "allow at least one request, or set the secret's sinks to [] for redact-only".into()
            }
            BudgetProblem::BadDuration { .. } | BudgetProblem::WindowOutOfRange { .. } => {
                "write a window from 1s to 31d, such as 30s, 15m, 1h or 1d".into()
            }
            BudgetProblem::OnSigningSecret { .. } => "remove `budget:`".into(),
        }
    }
}
