//! The approval step (`approve:` on a secret): a use of a credential that waits for a
//! person.
//!
//! [`hold`] is a step of the request path. After the scan has said which secrets a request
//! swaps, and before anything of it is charged or sent, each of them whose `approve:`
//! covers the request's method waits in the run's [`Approvals`](crate::approval::Approvals) for a decision: `allow`
//! goes on, `deny` is `403 approval-denied`, no decision within `--approval-timeout` is
//! `403 approval-timeout`, and more uses waiting than `--max-pending-approvals` is
//! `503 approvals-full`. A decision for the `run` stands for the secret (as declared: its
//! basis), host and method; a request that names other methods (an override header,
//! `_method`) is a question for each of them that waits.
//! The waiting is the run's registry's ([`crate::approval`]); decisions are made on the
//! admin endpoint (`ops::admin::approvals`), which writes the `approve` event.
//!
//! # What it must never do
//!
//! - Send or charge anything of a request before its decision.
//! - Show a value to an approver: a waiting use is described by the secret's name, the
//!   host, the method, the path as the sandbox sent it with each query value elided, and
//!   the body's size and SHA-256 taken over the body as the sandbox wrote it (its values
//!   turned back into placeholders).

use bytes::Bytes;
use http::request::Parts;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use sluice_guard::SecretId;
use sluice_policies::ApprovalBasis;

use crate::approval::{Ask, Decision, Kind, Scope, Waited};
use crate::body::{self, Body};
use crate::forward::budget::BodySwaps;
use crate::generation::shared::Shared;
use crate::refusal::{self, Refusal};

/// What [`hold`] needs of the request besides its head and body.
pub(crate) struct Use<'a> {
    /// The host as the tunnel names it.
    pub(crate) host: &'a str,
    /// The path and query as the sandbox sent them, before any swap.
    pub(crate) asked_path: &'a str,
    /// The secrets its head swapped.
    pub(crate) head: &'a [SecretId],
    /// The secrets its body swapped (read whole), or may swap (streamed).
    pub(crate) body: &'a BodySwaps,
    /// For a WebSocket handshake: the secrets its messages may swap. A message is no
    /// request of its own, so a use of an approving secret there waits at the handshake,
    /// whatever its method.
    pub(crate) frames: &'a [SecretId],
}

/// Headers and a query parameter that servers read as the request's method instead of its
/// own: a `POST` saying `DELETE` there is a `DELETE` to them, and to `approve:`.
const METHOD_OVERRIDES: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Gives every stream of a body that streams a key of its own: its bytes are not known
/// when it waits, so it is never taken for another's.
static STREAMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Holds the request until every swapped secret whose `approve:` covers its method is
/// decided; returns the body (read again from memory when it was described).
///
/// # Errors
///
/// `403 approval-denied`, `403 approval-timeout`, `503 approvals-full`.
pub(crate) async fn hold(
    shared: &Shared,
    parts: &Parts,
    body: Body,
    the_use: Use<'_>,
) -> Result<Body, Refusal> {
    // Most runs approve nothing: no lookup, no copy.
    if !shared.policy.has_approvals() {
        return Ok(body);
    }
    let method = parts.method.as_str();
    let overrides = overriding_methods(parts);
    let (in_body, read_whole) = match the_use.body {
        BodySwaps::Known(ids) => (ids, true),
        BodySwaps::Streaming(ids) => (ids, false),
    };
    // Every method the request names, as servers read it (`delete` is DELETE to some):
    // its own first, then each override. A use is one question per method that waits.
    let mut named: Vec<String> = vec![method.to_ascii_uppercase()];
    for other in overrides {
        let other = other.to_ascii_uppercase();
        if !named.contains(&other) {
            named.push(other);
        }
    }
    let requested = the_use.head.iter().chain(in_body).map(|&id| (id, false));
    let framed = the_use.frames.iter().map(|&id| (id, true));
    let mut waiting: Vec<(&str, &str, Option<ApprovalBasis>)> = Vec::new();
    for (id, in_frames) in requested.chain(framed) {
        let secret = shared.guard.name(id);
        let Some(decl) = shared.policy.secret(secret) else {
            continue;
        };
        let basis = shared.policy.approval_basis(secret);
        for (i, asked) in named.iter().enumerate() {
            // A WebSocket's messages wait at the handshake, under its own method.
            let waits =
                (in_frames && i == 0 && decl.approve().is_some()) || decl.needs_approval(asked);
            if !waits
                || waiting
                    .iter()
                    .any(|w| (w.0, w.1) == (secret, asked.as_str()))
            {
                continue;
            }
            // A decision standing for the run answers at once: nothing described, no
            // wait. It answers for the method it was made for only: a POST allowed for
            // the run that says `DELETE` in an override is asked about as a DELETE.
            match shared
                .approvals
                .standing(secret, basis, the_use.host, asked)
            {
                Some(Decision::Allow) => shared.counters.approval("allowed"),
                Some(Decision::Deny) => {
                    shared.counters.approval("denied");
                    let waited = refusal::Waited::Use {
                        secret,
                        host: the_use.host,
                    };
                    return Err(Refusal::approval_denied(waited, Scope::Run));
                }
                None => waiting.push((secret, asked, basis)),
            }
        }
    }
    if waiting.is_empty() {
        return Ok(body);
    }
    // A body in a content coding was re-encoded after its swap: its bytes hold values the
    // guard cannot see through the coding, so it is not described.
    let coded = parts.headers.contains_key(http::header::CONTENT_ENCODING);
    let (body, described) = describe(body, read_whole && !coded, shared).await?;
    let path = sluice_audit::elide_path(the_use.asked_path);
    // Identical requests (the same whole target and body) wait on one decision; the path
    // and query as sent hold placeholders, never values, and pass the guard all the same.
    let exact = match &described {
        Some((_, sha)) => format!("{}\n{sha}", shared.guard.redact_str(the_use.asked_path)),
        None => format!(
            "streamed #{}",
            STREAMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
    };
    for (secret, asked, basis) in waiting {
        let ask = Ask {
            kind: Kind::Use,
            secret: secret.to_owned(),
            basis,
            host: the_use.host.to_owned(),
            method: asked.to_owned(),
            path: shared.guard.redact_str(&path),
            body_bytes: described.as_ref().map(|(size, _)| *size),
            body_sha256: described.as_ref().map(|(_, sha)| sha.clone()),
            exact: exact.clone(),
        };
        let waited = shared.approvals.wait(ask).await;
        shared.counters.approval(match &waited {
            Waited::Decided(v) if v.decision == Decision::Allow => "allowed",
            Waited::Decided(_) => "denied",
            Waited::TimedOut => "timed-out",
            Waited::Full => "full",
        });
        let what = refusal::Waited::Use {
            secret,
            host: the_use.host,
        };
        match waited {
            Waited::Decided(v) if v.decision == Decision::Allow => {}
            Waited::Decided(v) => return Err(Refusal::approval_denied(what, v.scope)),
            Waited::TimedOut => {
                return Err(Refusal::approval_timeout(what, shared.approvals.timeout()));
            }
            Waited::Full => return Err(Refusal::approvals_full(what)),
        }
    }
    Ok(body)
}

/// The methods a request names besides its own, in the headers and the query parameter
/// servers read instead (Rails' `_method`, the `X-HTTP-Method-Override` family).
fn overriding_methods(parts: &Parts) -> Vec<String> {
    let mut methods: Vec<String> = METHOD_OVERRIDES
        .iter()
        .flat_map(|name| parts.headers.get_all(*name))
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .collect();
    if let Some(query) = parts.uri.query() {
        methods.extend(
            form_urlencoded::parse(query.as_bytes())
                .filter(|(key, _)| key == "_method")
                .map(|(_, value)| value.trim().to_owned()),
        );
    }
    methods
}

/// A body read whole, as the approver sees it: its size and the SHA-256 of it as the
/// sandbox wrote it (values turned back into placeholders); the body itself goes on as it
/// was. A streamed body is not read here: it is not described.
async fn describe(
    body: Body,
    read_whole: bool,
    shared: &Shared,
) -> Result<(Body, Option<(u64, String)>), Refusal> {
    if !read_whole {
        return Ok((body, None));
    }
    // In memory already (the body step read it whole): collecting it does not wait.
    let collected = body
        .collect()
        .await
        .map_err(|e| Refusal::bad_request(format!("the request body could not be read: {e}")))?;
    let trailers = collected.trailers().cloned();
    let bytes: Bytes = collected.to_bytes();
    let as_written = shared.guard.redact(&bytes);
    let sha256 = hex::encode(Sha256::digest(as_written.bytes()));
    let size = as_written.bytes().len() as u64;
    let body = match trailers {
        Some(trailers) => body::full_with_trailers(bytes, trailers),
        None => body::full(bytes),
    };
    Ok((body, Some((size, sha256))))
}
