//! The approval webhook (`--approval-webhook URL`): each use that starts waiting for
//! approval is POSTed, as JSON (what `GET /v1/approvals` lists of it), to the operator's
//! URL; an answer `200` with `{"decision": "allow" | "deny", "scope": "once" | "run"}`
//! decides it (channel `webhook`, through [`Control::decide`] like every channel), an
//! answer `202` leaves it to the other channels, and anything else (an error, no answer
//! within 10 s) is logged and leaves it to them too.
//!
//! # What it must never do
//!
//! - Send a value: the JSON is the listing's (names, a path with its query values elided,
//!   a body's size and digest).
//! - Go through the proxy's upstream leg: the webhook is the operator's, dialled directly,
//!   never subject to (or a way around) the sandbox's egress policy.
//! - Hold a request longer than its own timeout: a webhook that never answers only leaves
//!   the use to the other channels.
//! - Make more than [`MAX_CALLS`] calls at once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

use crate::approval::{Decision, Listed, Scope, Verdict};
use crate::config::Webhook;
use crate::ops::control::Control;

/// How long one call may take, connection to answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read.
const MAX_ANSWER: usize = 4096;

/// Calls in flight at once: a sandbox that opens and drops waiting requests fast must not
/// turn them into unbounded sockets and tasks.
const MAX_CALLS: usize = 16;

/// Calls `webhook` for each use that starts waiting, from now on.
pub(crate) fn start(control: &Arc<Control>, webhook: Webhook) {
    let decider = control.clone();
    let webhook = Arc::new(webhook);
    let calls = Arc::new(tokio::sync::Semaphore::new(MAX_CALLS));
    control.on_arrival(Box::new(move |listed: Listed| {
        let (control, webhook) = (decider.clone(), webhook.clone());
        // Calls in flight are bounded: beyond, a use waits for the other channels.
        let Ok(call_slot) = calls.clone().try_acquire_owned() else {
            tracing::warn!(
                id = listed.id,
                "approval webhook: {MAX_CALLS} calls in flight already; the use waits for another channel"
            );
            return;
        };
        tokio::spawn(async move {
            let _call_slot = call_slot;
            match tokio::time::timeout(CALL_TIMEOUT, call(&webhook, &listed)).await {
                Ok(Ok(Some(verdict))) => {
                    // Decided elsewhere in the meantime: nothing to do.
                    let _ = control.decide(listed.id, verdict);
                }
                Ok(Ok(None)) => {}
                Ok(Err(why)) => tracing::warn!(
                    id = listed.id,
                    "approval webhook failed ({why}); the use waits for another channel"
                ),
                Err(_) => tracing::warn!(
                    id = listed.id,
                    "approval webhook did not answer within {}s; the use waits for another channel",
                    CALL_TIMEOUT.as_secs()
                ),
            }
        });
    }));
}

/// One call: the decision the webhook made, `None` when it left it to the others.
async fn call(webhook: &Webhook, listed: &Listed) -> Result<Option<Verdict>, String> {
    let body = serde_json::to_vec(listed).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect(&webhook.authority)
        .await
        .map_err(|e| format!("{}: {e}", webhook.authority))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = Request::builder()
        .method(Method::POST)
        .uri(webhook.path.as_str())
        .header(http::header::HOST, webhook.authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = send
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let answer = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| format!("its answer: {e}"))?
        .to_bytes();
    match status {
        StatusCode::ACCEPTED => Ok(None),
        StatusCode::OK => verdict(&answer).map(Some),
        other => Err(format!("it answered {other}")),
    }
}

/// The decision an answer says.
fn verdict(answer: &[u8]) -> Result<Verdict, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        decision: String,
        #[serde(default)]
        scope: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(answer)
        .map_err(|_| "its answer is not {\"decision\": ..., \"scope\": ...}".to_owned())?;
    let decision = Decision::parse(&answer.decision)
        .ok_or_else(|| "its decision is neither allow nor deny".to_owned())?;
    let scope = match answer.scope.as_deref() {
        None => Scope::Once,
        Some(word) => {
            Scope::parse(word).ok_or_else(|| "its scope is neither once nor run".to_owned())?
        }
    };
    Ok(Verdict {
        decision,
        scope,
        channel: "webhook".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_is_plain_http_with_a_host() {
        let hook = Webhook::parse("http://127.0.0.1:9000/decide?team=ops").unwrap();
        assert_eq!(hook.authority, "127.0.0.1:9000");
        assert_eq!(hook.path, "/decide?team=ops");
        assert_eq!(
            Webhook::parse("http://hooks.internal").unwrap().authority,
            "hooks.internal:80"
        );
        for bad in [
            "https://hooks.internal/x",
            "hooks.internal:9000",
            "http://u:p@h:1/",
            "ftp://h/",
        ] {
            assert!(Webhook::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_answer_decides_only_when_it_says_a_decision() {
        let v = verdict(br#"{"decision": "deny", "scope": "run"}"#).unwrap();
        assert_eq!(
            (v.decision, v.scope, v.channel.as_str()),
            (Decision::Deny, Scope::Run, "webhook")
        );
        assert_eq!(
            verdict(br#"{"decision": "allow"}"#).unwrap().scope,
            Scope::Once
        );
        for bad in [
            &br#"{"decision": "yes"}"#[..],
            br#"{"scope": "run"}"#,
            b"allow",
        ] {
            assert!(verdict(bad).is_err());
        }
    }
}
