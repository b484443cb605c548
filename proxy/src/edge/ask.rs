//! `egress.ask`: a host nobody allowed, which a person may. A `CONNECT` to one (or a
//! connection the jail captured for one) is held, nothing dialled, until an operator decides
//! in the run's approvals (docs/approvals.md): allowed, once or for the run, it is
//! intercepted as an `egress.allow` host is (no secret is granted toward it, so every
//! placeholder in it is refused); denied, or not decided in time, it is refused.

use crate::approval::{Ask, Decision, Kind, Scope, Waited};
use crate::generation::shared::Shared;
use crate::refusal::{self, Refusal};
use crate::tls::target::Target;

/// The method an approver sees for a connection.
const CONNECT: &str = "CONNECT";

/// Waits for a decision on reaching `target`.
///
/// # Errors
///
/// `403 approval-denied`, `403 approval-timeout`, `503 approvals-full`.
pub(crate) async fn hold(shared: &Shared, target: &Target) -> Result<(), Refusal> {
    let host = target.authority();
    let what = refusal::Waited::Host { host: &host };
    // A decision standing for the run answers at once.
    match shared.approvals.standing("", None, &host, CONNECT) {
        Some(Decision::Allow) => {
            shared.counters.approval("allowed");
            return Ok(());
        }
        Some(Decision::Deny) => {
            shared.counters.approval("denied");
            return Err(Refusal::approval_denied(what, Scope::Run));
        }
        None => {}
    }
    let ask = Ask {
        kind: Kind::Host,
        secret: String::new(),
        basis: None,
        host: host.clone(),
        method: CONNECT.to_owned(),
        path: String::new(),
        body_bytes: None,
        body_sha256: None,
        exact: String::new(),
    };
    let waited = shared.approvals.wait(ask).await;
    match waited {
        Waited::Decided(v) if v.decision == Decision::Allow => {
            shared.counters.approval("allowed");
            Ok(())
        }
        Waited::Decided(v) => {
            shared.counters.approval("denied");
            Err(Refusal::approval_denied(what, v.scope))
        }
        Waited::TimedOut => {
            shared.counters.approval("timed-out");
            Err(Refusal::approval_timeout(what, shared.approvals.timeout()))
        }
        Waited::Full => {
            shared.counters.approval("full");
            Err(Refusal::approvals_full(what))
        }
    }
}
