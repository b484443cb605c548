//! The refusals of what waited for a person's decision (docs/approvals.md): a use of a
//! secret (`approve:`) or a connection to an `egress.ask` host, denied, not decided in
//! time, or one too many waiting.

use http::StatusCode;

use super::{Code, Fault, Refusal};
use crate::approval::Scope;

/// What waited, as a refusal names it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Waited<'a> {
    /// A use of `secret` toward `host`.
    Use { secret: &'a str, host: &'a str },
    /// A connection to `host` (`egress.ask`).
    Host { host: &'a str },
}

impl Waited<'_> {
    fn what(self) -> String {
        match self {
            Waited::Use { secret, host } => {
                format!("this use of secret {secret} toward {host} for approval (approve:)")
            }
            Waited::Host { host } => format!("this connection to {host} for approval (egress.ask)"),
        }
    }

    fn secret(self) -> Option<String> {
        match self {
            Waited::Use { secret, .. } => Some(secret.to_owned()),
            Waited::Host { .. } => None,
        }
    }
}

impl Refusal {
    /// `403 approval-denied`.
    pub(crate) fn approval_denied(waited: Waited<'_>, scope: Scope) -> Self {
        let scope = match (waited, scope) {
            (_, Scope::Once) => "it",
            (Waited::Use { .. }, Scope::Run) => {
                "this secret, host and method for the rest of the run"
            }
            (Waited::Host { .. }, Scope::Run) => "this host for the rest of the run",
        };
        let mut refusal = Self::new(
            StatusCode::FORBIDDEN,
            Code::ApprovalDenied,
            format!(
                "sluice held {}, and the operator denied {scope}",
                waited.what()
            ),
            Fault::Client,
        );
        refusal.secret = waited.secret();
        refusal
    }

    /// `403 approval-timeout`: nobody decided within `waited`.
    pub(crate) fn approval_timeout(waited: Waited<'_>, timeout: std::time::Duration) -> Self {
        let mut refusal = Self::new(
            StatusCode::FORBIDDEN,
            Code::ApprovalTimeout,
            format!(
                "sluice held {}, and nobody decided within {}s; ask the operator to approve it (sluice approve), then try again",
                waited.what(),
                timeout.as_secs()
            ),
            Fault::Client,
        );
        refusal.secret = waited.secret();
        refusal
    }

    /// `503 approvals-full`: too many wait already (`--max-pending-approvals`).
    pub(crate) fn approvals_full(waited: Waited<'_>) -> Self {
        let mut refusal = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::ApprovalsFull,
            format!(
                "sluice would hold {}, and too many wait for a decision already; try again later",
                waited.what()
            ),
            Fault::Client,
        );
        refusal.secret = waited.secret();
        refusal
    }
}
