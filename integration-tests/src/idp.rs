//! A stand-in identity provider and the API it guards, over TLS on 127.0.0.1, behaving as
//! real providers do where it matters to sluice:
//!
//! - `POST /token` (RFC 6749): the `refresh_token` grant rotates on every use (the old
//!   refresh token dies, a new one comes back with the access token and an OpenID `id_token`);
//!   a refresh token presented a second time revokes its whole family (every access and
//!   refresh token descended from the same grant), as reuse detection does; the
//!   `client_credentials` grant mints an access token. The client authenticates with Basic
//!   or in the body, and a wrong secret is `invalid_client`. Form or JSON bodies.
//! - The JWT bearer grant (RFC 7523, as Google's token endpoint takes it): an RS256
//!   assertion whose signature verifies with the service account's public key (the `kid`
//!   naming it), issued by its email, for this endpoint (`aud`), good for an hour at most
//!   and not expired, asking for a scope; anything else is `invalid_grant` (a missing scope
//!   `invalid_scope`). No refresh token comes back.
//! - Access tokens expire after the configured lifetime.
//! - `GET /api/echo` answers `{"token": ...}` with the bearer token it received, when that
//!   token is live; `401` otherwise.
//! - Faults on demand ([`Fault`]): an OAuth error whose description echoes the refresh
//!   token sent, a body that is not JSON, an answer over a megabyte.
//!
//! Every value it ever issued is kept ([`IdentityProvider::issued`]), so that a test can
//! look for each of them where none may be.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;

use crate::listen::{TlsListener, serve_by_alpn};
use crate::pki::TestPki;

/// A fault the token endpoint answers with, instead of a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `400` with `{"error": CODE, "error_description": "... <the refresh token sent> ..."}`.
    Error(String),
    /// `200` with an HTML page quoting the refresh token sent.
    NotJson,
    /// `200` with a JSON body over a megabyte.
    Huge,
}

/// How the provider was configured.
pub struct IdpConfig {
    /// The one client it knows.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// The refresh token it issued before the test (the start of one family).
    pub refresh_token: String,
    /// How long an access token lives.
    pub access_lifetime: Duration,
    /// The service account the JWT bearer grant takes assertions from, when it is offered.
    pub service_account: Option<ServiceAccountConfig>,
}

/// A service account the provider knows: its email, its key's id and public half.
pub struct ServiceAccountConfig {
    /// `client_email`: the assertion's issuer.
    pub client_email: String,
    /// `private_key_id`: the assertion header's `kid`.
    pub key_id: String,
    /// The public key, PEM.
    pub public_pem: Vec<u8>,
}

#[derive(Default)]
struct State {
    /// refresh token → (family, used)
    refresh: HashMap<String, (u64, bool)>,
    /// access token → (family, expires)
    access: HashMap<String, (u64, Instant)>,
    revoked: HashSet<u64>,
    issued: Vec<String>,
    token_requests: u64,
    reuse_detected: u64,
    /// The refresh tokens presented, in order.
    presented: Vec<String>,
    /// The assertions presented (JWT bearer grant), in order.
    assertions: Vec<String>,
    /// Token requests whose body was JSON.
    json_bodies: u64,
    fault: Option<Fault>,
}

/// The running provider.
pub struct IdentityProvider {
    listener: TlsListener,
    state: Arc<Mutex<State>>,
}

struct Shared {
    config: IdpConfig,
    state: Arc<Mutex<State>>,
    counter: AtomicU64,
}

impl IdentityProvider {
    /// Starts it with a certificate from `pki` for `names` (the token host and the API host).
    pub async fn start(pki: &TestPki, names: &[&str], config: IdpConfig) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        {
            let mut s = state.lock().unwrap();
            s.refresh.insert(config.refresh_token.clone(), (1, false));
            s.issued.push(config.refresh_token.clone());
        }
        let shared = Arc::new(Shared {
            config,
            state: state.clone(),
            counter: AtomicU64::new(1),
        });
        let listener = TlsListener::start(
            pki.server_config(names, &[b"h2", b"http/1.1"]),
            move |tls, _| {
                let shared = shared.clone();
                let service = service_fn(move |req| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(answer(req, &shared).await) }
                });
                serve_by_alpn(tls, service)
            },
        )
        .await;
        Self { listener, state }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.listener.addr().port()
    }

    /// Every value it ever issued (the first refresh token included).
    pub fn issued(&self) -> Vec<String> {
        self.state.lock().unwrap().issued.clone()
    }

    /// Token requests it answered (tokens and errors alike).
    pub fn token_requests(&self) -> u64 {
        self.state.lock().unwrap().token_requests
    }

    /// How many times a used refresh token came back (each revoked a family).
    pub fn reuse_detected(&self) -> u64 {
        self.state.lock().unwrap().reuse_detected
    }

    /// The refresh tokens presented, in order.
    pub fn presented(&self) -> Vec<String> {
        self.state.lock().unwrap().presented.clone()
    }

    /// Token requests whose body was JSON (`Content-Type: application/json`).
    pub fn json_bodies(&self) -> u64 {
        self.state.lock().unwrap().json_bodies
    }

    /// The JWT bearer assertions presented, in order.
    pub fn assertions(&self) -> Vec<String> {
        self.state.lock().unwrap().assertions.clone()
    }

    /// The live refresh token of the family, if it has one not yet used.
    pub fn live_refresh_token(&self) -> Option<String> {
        let state = self.state.lock().unwrap();
        state
            .refresh
            .iter()
            .find(|(_, (family, used))| !used && !state.revoked.contains(family))
            .map(|(token, _)| token.clone())
    }

    /// Answers every token request with `fault` from now on (`None`: tokens again).
    pub fn set_fault(&self, fault: Option<Fault>) {
        self.state.lock().unwrap().fault = fault;
    }
}

fn json(status: StatusCode, value: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    response
}

async fn answer(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    match (&parts.method, parts.uri.path()) {
        (&Method::POST, "/token") => token(&parts.headers, &body, shared, parts.uri.path()),
        (&Method::GET, "/api/echo") => echo(&parts.headers, shared),
        _ => json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "not_found"}),
        ),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

fn params(headers: &HeaderMap, body: &[u8]) -> HashMap<String, String> {
    if is_json(headers) {
        let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        value
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        form_urlencoded::parse(body).into_owned().collect()
    }
}

fn client_ok(headers: &HeaderMap, params: &HashMap<String, String>, config: &IdpConfig) -> bool {
    use base64::Engine;
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let (id, secret) = match basic {
        Some(pair) => {
            let (id, secret) = pair.split_once(':').unwrap_or((&pair, ""));
            let decode = |s: &str| {
                form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            (decode(id), decode(secret))
        }
        None => (
            params.get("client_id").cloned().unwrap_or_default(),
            params.get("client_secret").cloned().unwrap_or_default(),
        ),
    };
    id == config.client_id && secret == config.client_secret
}

fn token(headers: &HeaderMap, body: &[u8], shared: &Shared, path: &str) -> Response<Full<Bytes>> {
    let params = params(headers, body);
    let mut state = shared.state.lock().unwrap();
    state.token_requests += 1;
    if is_json(headers) {
        state.json_bodies += 1;
    }
    if params.get("grant_type").map(String::as_str) == Some(JWT_BEARER) {
        return jwt_bearer(&params, shared, &mut state, headers, path);
    }
    let presented = params.get("refresh_token").cloned().unwrap_or_default();
    if !presented.is_empty() {
        state.presented.push(presented.clone());
    }
    if let Some(fault) = state.fault.clone() {
        return match fault {
            Fault::Error(code) => json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": code, "error_description": format!("refresh token {presented} is not valid")}),
            ),
            Fault::NotJson => {
                let mut response = Response::new(Full::new(Bytes::from(format!(
                    "<html>token {presented} rejected</html>"
                ))));
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, "text/html".parse().unwrap());
                response
            }
            Fault::Huge => json(
                StatusCode::OK,
                serde_json::json!({"access_token": "x".repeat(1 << 20), "token_type": "Bearer"}),
            ),
        };
    }
    if !client_ok(headers, &params, &shared.config) {
        return json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": "invalid_client"}),
        );
    }
    let mint = |prefix: &str, state: &mut State| mint(shared, prefix, state);
    let lifetime = shared.config.access_lifetime;
    match params.get("grant_type").map(String::as_str) {
        Some("refresh_token") => {
            let Some(&(family, used)) = state.refresh.get(&presented) else {
                return json(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "invalid_grant"}),
                );
            };
            if used || state.revoked.contains(&family) {
                // Reuse: the whole family is revoked.
                state.reuse_detected += 1;
                state.revoked.insert(family);
                return json(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({"error": "invalid_grant"}),
                );
            }
            state.refresh.insert(presented, (family, true));
            let access = mint("ya29.at-", &mut state);
            let refresh = mint("1//rt-", &mut state);
            let id_token = mint("eyJid.", &mut state);
            state
                .access
                .insert(access.clone(), (family, Instant::now() + lifetime));
            state.refresh.insert(refresh.clone(), (family, false));
            json(
                StatusCode::OK,
                serde_json::json!({
                    "access_token": access,
                    "refresh_token": refresh,
                    "id_token": id_token,
                    "token_type": "Bearer",
                    "expires_in": lifetime.as_secs(),
                }),
            )
        }
        Some("client_credentials") => {
            let access = mint("cc.at-", &mut state);
            state
                .access
                .insert(access.clone(), (0, Instant::now() + lifetime));
            json(
                StatusCode::OK,
                serde_json::json!({"access_token": access, "token_type": "Bearer", "expires_in": lifetime.as_secs()}),
            )
        }
        _ => json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "unsupported_grant_type"}),
        ),
    }
}

/// A new value, kept in [`State::issued`].
fn mint(shared: &Shared, prefix: &str, state: &mut State) -> String {
    let n = shared.counter.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let value = format!("{prefix}{nanos:x}{n:04}");
    state.issued.push(value.clone());
    value
}

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The JWT bearer grant, checked as Google's endpoint checks it.
fn jwt_bearer(
    params: &HashMap<String, String>,
    shared: &Shared,
    state: &mut State,
    headers: &HeaderMap,
    path: &str,
) -> Response<Full<Bytes>> {
    let refused = |status, code: &str, why: &str| {
        json(
            status,
            serde_json::json!({"error": code, "error_description": why}),
        )
    };
    let Some(account) = &shared.config.service_account else {
        return refused(StatusCode::BAD_REQUEST, "unsupported_grant_type", "");
    };
    let assertion = params.get("assertion").cloned().unwrap_or_default();
    state.assertions.push(assertion.clone());
    let Ok(header) = jsonwebtoken::decode_header(&assertion) else {
        return refused(StatusCode::BAD_REQUEST, "invalid_grant", "Invalid JWT.");
    };
    if header.alg != jsonwebtoken::Algorithm::RS256
        || header.kid.as_deref() != Some(account.key_id.as_str())
    {
        return refused(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "Invalid JWT Signature.",
        );
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let audience = format!("https://{host}{path}");
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(&account.public_pem).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[audience.as_str()]);
    validation.set_issuer(&[account.client_email.as_str()]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    let claims = match jsonwebtoken::decode::<serde_json::Value>(&assertion, &key, &validation) {
        Ok(data) => data.claims,
        Err(e) => {
            let why = match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => "Invalid JWT Signature.",
                _ => {
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
                }
            };
            return refused(StatusCode::BAD_REQUEST, "invalid_grant", why);
        }
    };
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let timely = matches!((iat, exp), (Some(iat), Some(exp)) if exp > iat && exp - iat <= 3600 && iat <= now + 60);
    if !timely {
        return refused(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.",
        );
    }
    if claims["scope"].as_str().is_none_or(str::is_empty) {
        return refused(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "Invalid OAuth scope or ID token audience provided.",
        );
    }
    let access = mint(shared, "ya29.c.sa-", state);
    let lifetime = shared.config.access_lifetime;
    state
        .access
        .insert(access.clone(), (0, Instant::now() + lifetime));
    json(
        StatusCode::OK,
        serde_json::json!({"access_token": access, "expires_in": lifetime.as_secs(), "token_type": "Bearer"}),
    )
}

fn echo(headers: &HeaderMap, shared: &Shared) -> Response<Full<Bytes>> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let state = shared.state.lock().unwrap();
    let live = state.access.get(&token).is_some_and(|(family, expires)| {
        Instant::now() < *expires && !state.revoked.contains(family)
    });
    if live {
        json(StatusCode::OK, serde_json::json!({"token": token}))
    } else {
        json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": "invalid_token"}),
        )
    }
}
