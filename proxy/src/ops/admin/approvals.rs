//! The approvers' routes: the uses waiting for a decision, and a decision on one.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/approvals` | `{"pending": [...]}`: each waiting use's `id`, `secret`, `host`, `method`, `path` (query values elided), `body_bytes` and `body_sha256` (a body read whole), `waited_secs` |
//! | `POST /v1/approvals/{id}` | `{"decision": "allow"\|"deny", "scope": "once"\|"run"}` decides it: `200` with what was decided, `404` when nothing waits under that id, `400` for a body that says something else |
//!
//! Behind the admin credentials like every route here (`super::answer` checks them first):
//! the workload can neither see what waits nor decide. Never a value: a waiting use is
//! described in names, a path as the sandbox sent it, and a digest of its body.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Deserialize;

use super::{json, text};
use crate::approval::{Decision, Scope, Verdict};
use crate::body::Body;
use crate::ops::control::Control;

/// The largest decision body read.
const MAX_DECISION_BYTES: usize = 4096;

/// Channels a caller of the admin API may name for its decision (`sluice approve` says
/// `terminal`); the webhook's is sluice's own.
const CALLER_CHANNELS: [&str; 2] = ["admin-api", "terminal"];

/// `GET /v1/approvals`.
pub(super) fn pending(control: &Control) -> Response<Body> {
    let pending = control.pending_approvals();
    json(StatusCode::OK, &serde_json::json!({ "pending": pending }))
}

/// A decision as posted.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Posted {
    decision: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    channel: Option<String>,
}

/// `POST /v1/approvals/{id}`.
pub(super) async fn decide(
    request: Request<Incoming>,
    id: &str,
    control: &Arc<Control>,
) -> Response<Body> {
    let Ok(id) = id.parse::<u64>() else {
        return text(StatusCode::NOT_FOUND, "no such approval: ids are numbers\n");
    };
    let bytes: Bytes = match Limited::new(request.into_body(), MAX_DECISION_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("the decision is JSON of at most {MAX_DECISION_BYTES} bytes\n"),
            );
        }
    };
    let verdict = match verdict(&bytes) {
        Ok(verdict) => verdict,
        Err(why) => return text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    };
    match control.decide(id, verdict.clone()) {
        Ok(answered) => json(
            StatusCode::OK,
            &serde_json::json!({
                "id": id,
                "decision": verdict.decision.as_str(),
                "scope": verdict.scope.as_str(),
                "answered": answered.requests,
                "uses": 1 + answered.also,
            }),
        ),
        Err(_) => text(
            StatusCode::NOT_FOUND,
            format!(
                "nothing waits under id {id}: decided already, timed out, or its client went away\n"
            ),
        ),
    }
}

/// The decision a body says, or why it says none.
fn verdict(bytes: &[u8]) -> Result<Verdict, String> {
    const SHAPE: &str = r#"write {"decision": "allow" or "deny", "scope": "once" or "run"}"#;
    let posted: Posted =
        serde_json::from_slice(bytes).map_err(|e| format!("not a decision ({e}); {SHAPE}"))?;
    let decision =
        Decision::parse(&posted.decision).ok_or_else(|| format!("unknown decision; {SHAPE}"))?;
    let scope = match posted.scope.as_deref() {
        None => Scope::Once,
        Some(word) => Scope::parse(word).ok_or_else(|| format!("unknown scope; {SHAPE}"))?,
    };
    let channel = posted.channel.unwrap_or_else(|| "admin-api".to_owned());
    if !CALLER_CHANNELS.contains(&channel.as_str()) {
        return Err(format!(
            "unknown channel: one of {}",
            CALLER_CHANNELS.join(", ")
        ));
    }
    Ok(Verdict {
        decision,
        scope,
        channel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_body_is_read_strictly() {
        let v = verdict(br#"{"decision": "allow", "scope": "run"}"#).unwrap();
        assert_eq!((v.decision, v.scope), (Decision::Allow, Scope::Run));
        assert_eq!(v.channel, "admin-api");
        let v = verdict(br#"{"decision": "deny", "channel": "terminal"}"#).unwrap();
        assert_eq!((v.decision, v.scope), (Decision::Deny, Scope::Once));
        assert_eq!(v.channel, "terminal");
        for bad in [
            &br#"{"decision": "maybe"}"#[..],
            br#"{"decision": "allow", "scope": "forever"}"#,
            br#"{"decision": "allow", "channel": "webhook"}"#,
            br#"{"decision": "allow", "extra": 1}"#,
            b"allow",
        ] {
            assert!(verdict(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
