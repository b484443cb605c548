//! A stand-in for the slice of GitHub's API a GitHub App secret touches, over TLS on
//! 127.0.0.1, behaving as GitHub does where it matters to sluice:
//!
//! - `POST /app/installations/{id}/access_tokens`: the App's JWT (`Authorization: Bearer`)
//!   must verify with the App's public key (RS256), name the App (`iss`), have been issued
//!   no later than a minute from now and expire within ten minutes of `iat`, and not have
//!   expired; otherwise `401`. The narrowing asked for (`repositories`, `permissions`) is
//!   recorded; a repository outside the installation is `422`. The answer is `201` with a
//!   `ghs_` token, `expires_at` an hour away, and the permissions granted (all asked, less
//!   any the App was never given).
//! - `GET /repos/{owner}/{repo}`: `Authorization: token|Bearer` with a live token; a
//!   repository outside its narrowing is `404`, an unknown or revoked token `401`.
//! - `DELETE /installation/token`: revokes the token it carries (`204`).
//! - The same API under `/api/v3` (GitHub Enterprise Server's root, which the gh CLI uses
//!   for any host but github.com).
//! - git over smart HTTP at `/{owner}/{repo}.git/...` (`git http-backend` over bare
//!   repositories), with the token as Basic credentials (`x-access-token:<token>`); a push
//!   needs `contents: write`.
//!
//! Every token it issued is kept ([`GithubApi::issued`]), so that a test can look for each
//! where none may be.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, Response};

use crate::git::git_http_backend;
use crate::pki::TestPki;
use crate::served::{ServedUpstream, basic_credentials, respond};
use crate::upstream::Recorded;

/// How the stand-in was configured.
pub struct GithubConfig {
    /// The App's id.
    pub app_id: u64,
    /// Its one installation.
    pub installation_id: u64,
    /// The App's public key, PEM.
    pub public_pem: Vec<u8>,
    /// The installation's owner.
    pub owner: String,
    /// The repositories the installation can reach.
    pub repositories: Vec<String>,
    /// A permission the App was never given: granted to no token, whatever is asked.
    pub withheld: Option<String>,
    /// Where the bare repositories are (`{root}/{owner}/{repo}.git`).
    pub git_root: PathBuf,
}

/// What one token reaches.
#[derive(Clone, Debug)]
struct Grant {
    repositories: Vec<String>,
    permissions: BTreeMap<String, String>,
    revoked: bool,
}

#[derive(Default)]
struct State {
    tokens: HashMap<String, Grant>,
    issued: Vec<String>,
    /// Each token request's narrowing (its JSON body), in order.
    asked: Vec<serde_json::Value>,
    /// Token requests refused for their JWT.
    bad_jwts: u64,
    revoked: Vec<String>,
}

/// The running stand-in.
pub struct GithubApi {
    upstream: ServedUpstream,
    state: Arc<Mutex<State>>,
}

impl GithubApi {
    /// Starts it with a certificate from `pki` for `names` (the API host and the git host).
    pub async fn start(pki: &TestPki, names: &[&str], config: GithubConfig) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let counter = AtomicU64::new(1);
        let shared = state.clone();
        let upstream = ServedUpstream::start(pki, names, move |request| {
            answer(request, &config, &shared, &counter)
        })
        .await;
        Self { upstream, state }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.upstream.port()
    }

    /// Every token it issued.
    pub fn issued(&self) -> Vec<String> {
        self.state.lock().unwrap().issued.clone()
    }

    /// The narrowing each token request asked for, in order.
    pub fn asked(&self) -> Vec<serde_json::Value> {
        self.state.lock().unwrap().asked.clone()
    }

    /// Token requests refused for their JWT.
    pub fn bad_jwts(&self) -> u64 {
        self.state.lock().unwrap().bad_jwts
    }

    /// The tokens revoked, in order.
    pub fn revoked(&self) -> Vec<String> {
        self.state.lock().unwrap().revoked.clone()
    }

    /// Every request it received.
    pub fn records(&self) -> Vec<Recorded> {
        self.upstream.records()
    }
}

fn json(status: u16, value: serde_json::Value) -> Response<Bytes> {
    respond(status, "application/json; charset=utf-8", value.to_string())
}

fn message(status: u16, text: &str) -> Response<Bytes> {
    json(
        status,
        serde_json::json!({"message": text, "documentation_url": "https://docs.github.com/rest", "status": status.to_string()}),
    )
}

fn answer(
    request: &Recorded,
    config: &GithubConfig,
    state: &Mutex<State>,
    counter: &AtomicU64,
) -> Response<Bytes> {
    // GitHub Enterprise Server's API root (`/api/v3`), as the gh CLI asks a host other
    // than github.com, is the same API.
    let path = request.uri.path();
    let path = path.strip_prefix("/api/v3").unwrap_or(path);
    let tokens_path = format!(
        "/app/installations/{}/access_tokens",
        config.installation_id
    );
    match (&request.method, path) {
        (&Method::POST, p) if p == tokens_path => mint(request, config, state, counter),
        (&Method::POST, p) if p.starts_with("/app/installations/") => message(404, "Not Found"),
        (&Method::DELETE, "/installation/token") => {
            let mut state = state.lock().unwrap();
            match bearer(request).and_then(|t| live(&state, &t).map(|_| t)) {
                Some(token) => {
                    state.tokens.get_mut(&token).unwrap().revoked = true;
                    state.revoked.push(token);
                    respond(204, "text/plain", "")
                }
                None => message(401, "Bad credentials"),
            }
        }
        (&Method::GET, p) if p.starts_with("/repos/") => {
            let state = state.lock().unwrap();
            let Some(grant) = bearer(request).and_then(|t| live(&state, &t)) else {
                return message(401, "Bad credentials");
            };
            let mut segments = p["/repos/".len()..].split('/');
            let (owner, repo) = (segments.next().unwrap_or(""), segments.next().unwrap_or(""));
            if owner != config.owner || !grant.repositories.iter().any(|r| r == repo) {
                return message(404, "Not Found");
            }
            json(
                200,
                serde_json::json!({
                    "id": 1, "name": repo, "full_name": format!("{owner}/{repo}"),
                    "private": true, "owner": {"login": owner},
                }),
            )
        }
        _ if path.contains(".git/") => git(request, config, state),
        _ => message(404, "Not Found"),
    }
}

/// The token an API request carries (`token X` or `Bearer X`).
fn bearer(request: &Recorded) -> Option<String> {
    let value = request
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer"))
        .then(|| token.trim().to_owned())
}

fn live<'s>(state: &'s State, token: &str) -> Option<&'s Grant> {
    state.tokens.get(token).filter(|grant| !grant.revoked)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn mint(
    request: &Recorded,
    config: &GithubConfig,
    state: &Mutex<State>,
    counter: &AtomicU64,
) -> Response<Bytes> {
    let mut state = state.lock().unwrap();
    let jwt_ok = bearer(request).is_some_and(|jwt| app_jwt_holds(&jwt, config));
    if !jwt_ok {
        state.bad_jwts += 1;
        return message(401, "A JSON web token could not be decoded");
    }
    let asked: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
    state.asked.push(asked.clone());
    let repositories: Vec<String> = asked["repositories"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_else(|| config.repositories.clone());
    if repositories
        .iter()
        .any(|r| !config.repositories.contains(r))
    {
        return message(
            422,
            "There is at least one repository that does not exist or is not accessible to the parent installation.",
        );
    }
    let permissions: BTreeMap<String, String> = asked["permissions"]
        .as_object()
        .map(|map| {
            map.iter()
                .filter(|(name, _)| Some(*name) != config.withheld.as_ref())
                .filter_map(|(name, level)| Some((name.clone(), level.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let token = format!("ghs_{:0>36}", format!("{nanos:x}{n}R"));
    let token: String = token.chars().take(40).collect();
    state.issued.push(token.clone());
    state.tokens.insert(
        token.clone(),
        Grant {
            repositories: repositories.clone(),
            permissions: permissions.clone(),
            revoked: false,
        },
    );
    let expires_at =
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(3600));
    json(
        201,
        serde_json::json!({
            "token": token,
            "expires_at": expires_at.to_string(),
            "permissions": permissions,
            "repository_selection": "selected",
            "repositories": repositories.iter().map(|r| serde_json::json!({"name": r, "full_name": format!("{}/{r}", config.owner)})).collect::<Vec<_>>(),
        }),
    )
}

/// The App's JWT, checked as GitHub checks it.
fn app_jwt_holds(jwt: &str, config: &GithubConfig) -> bool {
    let Ok(key) = jsonwebtoken::DecodingKey::from_rsa_pem(&config.public_pem) else {
        return false;
    };
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_issuer(&[config.app_id.to_string()]);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    validation.leeway = 60;
    let Ok(data) = jsonwebtoken::decode::<serde_json::Value>(jwt, &key, &validation) else {
        return false;
    };
    let (iat, exp) = (data.claims["iat"].as_u64(), data.claims["exp"].as_u64());
    matches!((iat, exp), (Some(iat), Some(exp)) if iat <= now() + 60 && exp > iat && exp - iat <= 600)
}

/// git over smart HTTP, the token as Basic credentials.
fn git(request: &Recorded, config: &GithubConfig, state: &Mutex<State>) -> Response<Bytes> {
    let Some((_, password)) = basic_credentials(request) else {
        return Response::builder()
            .status(401)
            .header("www-authenticate", "Basic realm=\"GitHub\"")
            .body(Bytes::from_static(b"credentials required"))
            .unwrap();
    };
    let grant = {
        let state = state.lock().unwrap();
        live(&state, &password).cloned()
    };
    let Some(grant) = grant else {
        return respond(401, "text/plain", "Invalid username or token.");
    };
    let path = request.uri.path();
    let repo = path
        .strip_prefix(&format!("/{}/", config.owner))
        .and_then(|rest| rest.split_once(".git/"))
        .map(|(repo, _)| repo);
    if !repo.is_some_and(|repo| grant.repositories.iter().any(|r| r == repo)) {
        return respond(404, "text/plain", "Repository not found.");
    }
    let pushes = path.ends_with("/git-receive-pack")
        || request.uri.query() == Some("service=git-receive-pack");
    if pushes && grant.permissions.get("contents").map(String::as_str) != Some("write") {
        return respond(
            403,
            "text/plain",
            "Permission denied: contents write is needed to push.",
        );
    }
    git_http_backend(&config.git_root, request)
}
