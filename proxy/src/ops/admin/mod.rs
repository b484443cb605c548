//! The admin endpoint (`--admin ADDR`): health, readiness, metrics and reload for the
//! operator, and the guard's redaction and the secrets' placeholders for a host engine.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | `200 ok` while the process serves |
//! | `GET /readyz` | `200 ready`, or `503` with why not (the audit log failed; stopping) |
//! | `GET /metrics` | the Prometheus page |
//! | `POST /reload` | `200` with the generation now in force, or `422` with why the declaration was refused |
//! | `POST /v1/redact` | the body, streamed back with every known value turned into its placeholder |
//! | `GET /v1/secrets` | each secret's name, sinks, hosts and placeholder (JSON), never a value |
//! | `GET /v1/approvals`, `POST /v1/approvals/{id}` | the uses waiting for approval, and a decision on one (`approvals`) |
//!
//! # What it must never do
//!
//! - Answer anyone without the admin credentials (`Authorization: Basic`, the pair in the
//!   run directory's `admin-url`): `401` before any route is looked at. The proxy's own
//!   credentials are not these; the workload holds those, and must never reload the
//!   declaration, read the metrics or probe the guard with guessed values.
//! - Be reachable through the proxy: its address is one of the proxy's own listeners,
//!   which the upstream leg never dials.

mod approvals;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::auth::Credentials;
use crate::body::{self, Body};
use crate::generation::shared::{serve_until_stopped, until_stopped};
use crate::ops::control::Control;
use crate::scan::stream::{Outcome, RewriteBody};
use sluice_audit::{Event, EventKind};

/// Admin connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 16;

/// The admin user name in `admin-url`.
pub const USER: &str = "sluice-admin";

/// Serves the admin endpoint on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    control: Arc<Control>,
    credentials: Arc<Credentials>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            () = until_stopped(&mut shutdown) => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let slot = tokio::select! {
            () = until_stopped(&mut shutdown) => return,
            slot = slots.clone().acquire_owned() => slot,
        };
        let Ok(slot) = slot else {
            return;
        };
        let control = control.clone();
        let credentials = credentials.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |request| {
                let control = control.clone();
                let credentials = credentials.clone();
                async move { Ok::<_, Infallible>(answer(request, &control, &credentials).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            serve_until_stopped(conn, shutdown, "admin").await;
        });
    }
}

/// One admin request: the credentials first, then the route.
async fn answer(
    request: Request<Incoming>,
    control: &Arc<Control>,
    credentials: &Credentials,
) -> Response<Body> {
    if !credentials.is_authorized_by(request.headers(), &AUTHORIZATION) {
        let mut response = text(
            StatusCode::UNAUTHORIZED,
            "admin credentials required: use the run directory's admin-url\n",
        );
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"sluice-admin\""),
        );
        // Whoever does not hold the credentials gets no kept-alive slot either.
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    let route = (request.method().clone(), request.uri().path().to_owned());
    match (&route.0, route.1.as_str()) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => match control.not_ready() {
            None => text(StatusCode::OK, "ready\n"),
            Some(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        (&Method::GET, "/metrics") => {
            let mut response = text(StatusCode::OK, control.scrape());
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        (&Method::POST, "/reload") => match control.reload().await {
            Ok(declared) => text(
                StatusCode::OK,
                format!(
                    "reloaded: generation {} in force for new connections, policy sha256 {}\n",
                    declared.generation,
                    declared.policy.sha256_hex()
                ),
            ),
            Err(error) => text(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("reload refused, the declaration in force stays: {error}\n"),
            ),
        },
        (&Method::POST, "/v1/redact") => redact(request, control).await,
        (&Method::GET, "/v1/secrets") => secrets(control),
        (&Method::GET, "/v1/approvals") => approvals::pending(control),
        (&Method::POST, path) if path.starts_with("/v1/approvals/") => {
            let id = path.trim_start_matches("/v1/approvals/").to_owned();
            approvals::decide(request, &id, control).await
        }
        (_, "/healthz" | "/readyz" | "/metrics" | "/v1/secrets" | "/v1/approvals") => {
            text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n")
        }
        (_, path) if path.starts_with("/v1/approvals/") => {
            text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n")
        }
        (_, "/reload" | "/v1/redact") => text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "no such route: /healthz, /readyz, /metrics, /reload, /v1/redact, /v1/secrets, /v1/approvals\n",
        ),
    }
}

/// `POST /v1/redact`: the model-boundary redaction, with the guard in force, streamed (the
/// answer flows as the body arrives, holding back only what could still be a match); what
/// it redacted is audited (`redact`, `location: v1/redact`).
async fn redact(request: Request<Incoming>, control: &Arc<Control>) -> Response<Body> {
    let guard = control.declared().guard.clone();
    let auditing = (control.clone(), guard.clone());
    let redacted = RewriteBody::redacting(
        body::incoming(request.into_body()),
        guard,
        move |outcome: Outcome| {
            let (control, guard) = auditing;
            for (id, counts) in outcome.tally.iter() {
                if counts.redacted > 0 {
                    control.record(
                        Event::new(EventKind::Redact)
                            .secret(guard.name(id))
                            .location("v1/redact")
                            .count(counts.redacted),
                    );
                }
            }
        },
    );
    let mut response = Response::new(BodyExt::boxed(redacted));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// `GET /v1/secrets`: what a host engine needs to serve the other sinks; never a value.
fn secrets(control: &Control) -> Response<Body> {
    let declared = control.declared();
    let secrets: Vec<serde_json::Value> = declared
        .policy
        .secrets()
        .iter()
        .map(|decl| {
            serde_json::json!({
                "name": decl.name(),
                "sinks": decl.sinks().iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                "hosts": decl.hosts().iter().map(ToString::to_string).collect::<Vec<_>>(),
                "placeholder": declared.placeholders.get(decl.name()),
            })
        })
        .collect();
    let body = serde_json::json!({ "generation": declared.generation, "secrets": secrets });
    json(StatusCode::OK, &body)
}

/// A JSON answer, one line.
fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = text(status, format!("{body}\n"));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(body::full(Bytes::from(message.into())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
