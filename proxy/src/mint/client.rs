//! sluice's own token requests: the `oauth2` crate writes the refresh and client-credentials
//! grants and reads their answers; the `jwt_bearer` grant (which the crate does not have)
//! is a form of two fields, its assertion signed by `sluice_sign::jwt`, its answer read by
//! [`read_answer`] into the same token type. sluice's upstream leg carries every one (so the
//! endpoint's certificate is verified, `allow_ips` and `--resolve` apply, and sluice's own
//! listener is never dialled).
//!
//! What comes back is bounded ([`MAX_TOKEN_RESPONSE`]) and must be a token: a body that is
//! not JSON, lacks `access_token`, or is an error is a failed mint. A failure carries the
//! provider's `error` code only, never its body or description (either may echo what was
//! sent, a refresh token included).

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, Version, header};
use http_body_util::BodyExt;
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthType, Client, EndpointNotSet, EndpointSet, ExtraTokenFields, RequestTokenError,
    StandardRevocableToken, StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::body;
use crate::upstream::{SendError, Upstream};
use sluice_policies::{GithubApp, Grant, TokenBody};
use sluice_sign::jwt::RsaKey;
use sluice_sign::jwt::google::ServiceAccount;

/// The `grant_type` of RFC 7523's JWT bearer grant.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The largest token response read: a token response is a few kilobytes at most (an id
/// token included); anything longer is refused, never buffered whole.
pub(crate) const MAX_TOKEN_RESPONSE: usize = 64 * 1024;

/// What one mint asks for.
pub(crate) struct Ask<'a> {
    pub(crate) token_url: &'a str,
    pub(crate) grant: Grant,
    /// None for `jwt_bearer`: the key file names the client.
    pub(crate) client_id: Option<&'a str>,
    /// The key that signs a `jwt_bearer` assertion.
    pub(crate) service_account: Option<&'a ServiceAccount>,
    /// A GitHub App's installation and narrowing, and the key that signs its JWT.
    pub(crate) github: Option<(&'a GithubApp, &'a RsaKey)>,
    pub(crate) client_secret: Option<&'a [u8]>,
    pub(crate) refresh_token: Option<&'a [u8]>,
    pub(crate) scopes: &'a [String],
    pub(crate) audience: Option<&'a str>,
    pub(crate) body: TokenBody,
}

/// A token the endpoint issued. Every value zeroized on drop; `Debug` prints none.
pub(crate) struct Issued {
    pub(crate) access_token: Zeroizing<String>,
    /// A rotated refresh token, when the provider sent one.
    pub(crate) refresh_token: Option<Zeroizing<String>>,
    /// An OpenID Connect id token, when the provider sent one: known, so redacted.
    pub(crate) id_token: Option<Zeroizing<String>>,
    /// Its lifetime (`expires_in`), when the provider said.
    pub(crate) expires_in: Option<Duration>,
    /// Permissions granted below what was asked (a GitHub App's), by name.
    pub(crate) narrower: Vec<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("refresh_token", &self.refresh_token.is_some())
            .field("id_token", &self.id_token.is_some())
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// Why a mint failed, in words safe for a log line, an audit event and a response body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MintFailure {
    /// The provider answered an OAuth error: its `error` code when the OAuth RFCs define
    /// it, else `other_error`. Never the provider's own string: a provider that echoes what
    /// it was sent (a client secret is plain alphanumerics) would put it into the sandbox's
    /// 502, the audit log and the metrics.
    #[error("the token endpoint answered error `{0}`")]
    Provider(&'static str),
    /// The answer was not a token response (not JSON, no `access_token`, too large).
    #[error("the token endpoint's answer is not a token response ({0})")]
    NotAToken(&'static str),
    /// The endpoint could not be reached, or its certificate did not verify.
    #[error("the token endpoint could not be reached ({0})")]
    Unreachable(String),
    /// A part the grant needs has no usable value (not UTF-8, say).
    #[error("{0}")]
    Unusable(&'static str),
}

/// The error codes a token endpoint may answer, as the OAuth RFCs define them (6749 §5.2
/// and §4.1.2.1, 6750 §3.1, 8628 §3.5): the only provider codes sluice repeats.
pub(crate) const OAUTH_ERRORS: [&str; 15] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "access_denied",
    "server_error",
    "temporarily_unavailable",
    "unsupported_response_type",
    "invalid_token",
    "insufficient_scope",
    "authorization_pending",
    "slow_down",
    "expired_token",
];

/// The provider's `error`, as sluice repeats it: a code of [`OAUTH_ERRORS`], or
/// `other_error`.
pub(crate) fn provider_code(error: &str) -> &'static str {
    OAUTH_ERRORS
        .iter()
        .find(|known| **known == error)
        .copied()
        .unwrap_or("other_error")
}

impl MintFailure {
    /// The short code for the audit log's `reason`, the response and the metrics' `result`
    /// label, one of a fixed set: the provider's `error` (when the RFCs define it), or what
    /// kind of failure it was.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            MintFailure::Provider(code) => code,
            MintFailure::NotAToken(_) => "not_a_token_response",
            MintFailure::Unreachable(_) => "unreachable",
            MintFailure::Unusable(_) => "unusable_part",
        }
    }
}

/// The extra field sluice keeps from a token response: an OpenID Connect `id_token`.
#[derive(Clone, Default, Deserialize, Serialize)]
pub(crate) struct IdToken {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
}

/// Whether there is one, never the token (the crate's traits ask for `Debug`).
impl std::fmt::Debug for IdToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = self.id_token.as_ref().map(|_| "<redacted>");
        f.debug_struct("IdToken").field("id_token", &shown).finish()
    }
}

impl ExtraTokenFields for IdToken {}

pub(crate) type Answer = StandardTokenResponse<IdToken, BasicTokenType>;

type OauthClient = Client<
    BasicErrorResponse,
    Answer,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// Why sluice's own HTTP leg failed a token request: kept as words, never a body.
#[derive(Debug, thiserror::Error)]
pub(super) enum LegError {
    /// The exchange failed.
    #[error("{0}")]
    Failed(String),
    /// The answer was over [`MAX_TOKEN_RESPONSE`].
    #[error("the answer is over 64 KiB")]
    TooLarge,
}

/// Asks the token endpoint for a token, over `upstream`.
pub(crate) async fn mint(upstream: &Upstream, ask: &Ask<'_>) -> Result<Issued, MintFailure> {
    let answer = match ask.grant {
        Grant::RefreshToken | Grant::ClientCredentials => by_oauth2(upstream, ask).await?,
        Grant::JwtBearer => jwt_bearer(upstream, ask).await?,
        Grant::GithubApp => {
            let (app, key) = ask
                .github
                .ok_or(MintFailure::Unusable("no App key to sign with"))?;
            return super::github::mint(upstream, ask.token_url, app, key).await;
        }
    };
    let access_token = Zeroizing::new(answer.access_token().secret().clone());
    if access_token.is_empty() {
        return Err(MintFailure::NotAToken("an empty access_token"));
    }
    Ok(Issued {
        access_token,
        refresh_token: answer
            .refresh_token()
            .map(|r| Zeroizing::new(r.secret().clone())),
        id_token: answer.extra_fields().id_token.clone().map(Zeroizing::new),
        expires_in: answer.expires_in(),
        narrower: Vec::new(),
    })
}

/// The refresh and client-credentials grants, written and read by the `oauth2` crate.
async fn by_oauth2(upstream: &Upstream, ask: &Ask<'_>) -> Result<Answer, MintFailure> {
    let text = |bytes: &[u8]| -> Result<String, MintFailure> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| MintFailure::Unusable("a part of the grant is not UTF-8 text"))
    };
    let token_url = oauth2::TokenUrl::new(ask.token_url.to_owned())
        .map_err(|_| MintFailure::Unusable("the token URL does not parse"))?;
    let client_id = ask
        .client_id
        .ok_or(MintFailure::Unusable("no client_id to ask with"))?;
    let mut client: OauthClient = Client::new(oauth2::ClientId::new(client_id.to_owned()))
        .set_token_uri(token_url)
        .set_auth_type(AuthType::BasicAuth);
    if let Some(secret) = ask.client_secret {
        client = client.set_client_secret(oauth2::ClientSecret::new(text(secret)?));
    }
    let http = Leg {
        upstream: upstream.clone(),
        body: ask.body,
    };
    let answered = match ask.grant {
        Grant::RefreshToken => {
            let refresh = ask
                .refresh_token
                .ok_or(MintFailure::Unusable("no refresh token to refresh with"))?;
            let refresh = oauth2::RefreshToken::new(text(refresh)?);
            let mut request = client.exchange_refresh_token(&refresh);
            for scope in ask.scopes {
                request = request.add_scope(oauth2::Scope::new(scope.clone()));
            }
            if let Some(audience) = ask.audience {
                request = request.add_extra_param("audience", audience.to_owned());
            }
            request.request_async(&http).await
        }
        Grant::ClientCredentials => {
            let mut request = client.exchange_client_credentials();
            for scope in ask.scopes {
                request = request.add_scope(oauth2::Scope::new(scope.clone()));
            }
            if let Some(audience) = ask.audience {
                request = request.add_extra_param("audience", audience.to_owned());
            }
            request.request_async(&http).await
        }
        Grant::JwtBearer | Grant::GithubApp => {
            unreachable!("only the refresh and client-credentials grants are the oauth2 crate's")
        }
    };
    answered.map_err(failure)
}

/// RFC 7523 §2.1: an assertion signed by the service account's key, for the token endpoint
/// (its `aud`), asking for the declared scopes; no client authentication.
async fn jwt_bearer(upstream: &Upstream, ask: &Ask<'_>) -> Result<Answer, MintFailure> {
    let account = ask
        .service_account
        .ok_or(MintFailure::Unusable("no service account key to sign with"))?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let assertion = account
        .assertion(ask.token_url, ask.scopes, now)
        .map_err(|_| MintFailure::Unusable("the service account's key does not sign"))?;
    // Sized once, so that no reallocation leaves an unwiped copy of the assertion behind.
    let body = {
        let mut form =
            form_urlencoded::Serializer::new(String::with_capacity(assertion.len() + 256));
        form.append_pair("grant_type", JWT_BEARER)
            .append_pair("assertion", &assertion);
        if let Some(audience) = ask.audience {
            form.append_pair("audience", audience);
        }
        Zeroizing::new(form.finish())
    };
    let request = Request::post(ask.token_url)
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        )
        .header(header::ACCEPT, HeaderValue::from_static("application/json"))
        .body(body.as_bytes().to_vec())
        .map_err(|_| MintFailure::Unusable("the token URL does not parse"))?;
    let response = send(upstream, request, ask.body)
        .await
        .map_err(|error| failure(RequestTokenError::Request(error)))?;
    read_answer(response.status(), response.body())
}

/// A token endpoint's answer, read as the `oauth2` crate reads one: a success status with a
/// token response (RFC 6749 §5.1), or an error response (§5.2) whose code is kept.
pub(crate) fn read_answer(status: StatusCode, body: &[u8]) -> Result<Answer, MintFailure> {
    if !status.is_success() {
        return Err(match serde_json::from_slice::<BasicErrorResponse>(body) {
            Ok(error) => MintFailure::Provider(provider_code(error.error().as_ref())),
            Err(_) => MintFailure::NotAToken("an error status without an OAuth error"),
        });
    }
    serde_json::from_slice(body)
        .map_err(|_| MintFailure::NotAToken("not JSON, or no access_token in it"))
}

/// The failure a token request's error is, in safe words.
pub(super) fn failure(error: RequestTokenError<LegError, BasicErrorResponse>) -> MintFailure {
    match error {
        RequestTokenError::ServerResponse(response) => {
            // The code only: `error_description` and `error_uri` are the provider's prose.
            MintFailure::Provider(provider_code(response.error().as_ref()))
        }
        RequestTokenError::Request(LegError::TooLarge) => {
            MintFailure::NotAToken("larger than 64 KiB")
        }
        RequestTokenError::Request(LegError::Failed(why)) => MintFailure::Unreachable(why),
        RequestTokenError::Parse(..) => {
            MintFailure::NotAToken("not JSON, or no access_token in it")
        }
        RequestTokenError::Other(_) => MintFailure::NotAToken("an unexpected answer"),
    }
}

/// sluice's upstream leg as the `oauth2` crate's HTTP client.
struct Leg {
    upstream: Upstream,
    body: TokenBody,
}

impl<'c> oauth2::AsyncHttpClient<'c> for Leg {
    type Error = LegError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, LegError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(send(&self.upstream, request, self.body))
    }
}

/// Sends one token request over sluice's upstream leg and reads its answer, bounded.
pub(super) async fn send(
    upstream: &Upstream,
    request: oauth2::HttpRequest,
    form: TokenBody,
) -> Result<oauth2::HttpResponse, LegError> {
    let (mut parts, bytes) = request.into_parts();
    let bytes = match form {
        TokenBody::Form => bytes,
        TokenBody::Json => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            form_as_json(&bytes)
        }
    };
    let authority = parts
        .uri
        .authority()
        .ok_or_else(|| LegError::Failed("the token URL has no host".into()))?
        .clone();
    let host = match parts.uri.port_u16() {
        Some(443) | None => authority.host().to_owned(),
        Some(_) => authority.as_str().to_owned(),
    };
    parts.headers.insert(
        header::HOST,
        HeaderValue::from_str(&host)
            .map_err(|_| LegError::Failed("the token URL's host".into()))?,
    );
    parts.headers.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(bytes.len() as u64),
    );
    parts.version = Version::HTTP_11;
    let request = Request::from_parts(parts, body::full(Bytes::from(bytes)));
    let response = upstream
        .send(request, Version::HTTP_11, None)
        .await
        .map_err(|e| {
            LegError::Failed(match e {
                SendError::Dial(dial) => dial.to_string(),
                SendError::Timeout => "no answer in time".into(),
                SendError::Http(_) => "the HTTP exchange failed".into(),
            })
        })?;
    let (parts, incoming) = response.into_parts();
    let limited = http_body_util::Limited::new(incoming, MAX_TOKEN_RESPONSE);
    let collected = limited.collect().await.map_err(|e| {
        if e.downcast_ref::<http_body_util::LengthLimitError>()
            .is_some()
        {
            LegError::TooLarge
        } else {
            LegError::Failed("the answer was cut short".into())
        }
    })?;
    Ok(http::Response::from_parts(
        parts,
        collected.to_bytes().to_vec(),
    ))
}

/// A form body (`a=1&b=2`) as one JSON object of strings, for a provider that takes JSON.
fn form_as_json(form: &[u8]) -> Vec<u8> {
    let object: serde_json::Map<String, serde_json::Value> = form_urlencoded::parse(form)
        .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
        .collect();
    serde_json::to_vec(&object).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_token_is_never_printed() {
        let token: IdToken =
            serde_json::from_str(r#"{"id_token": "eyJ-REAL-id-token-0123456789"}"#).unwrap();
        let shown = format!("{token:?}");
        assert!(!shown.contains("REAL"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn a_form_becomes_one_json_object_of_strings() {
        let json = form_as_json(b"grant_type=refresh_token&refresh_token=a%2Bb&scope=x+y");
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["grant_type"], "refresh_token");
        assert_eq!(value["refresh_token"], "a+b");
        assert_eq!(value["scope"], "x y");
    }

    #[test]
    fn a_failure_says_the_providers_code_and_never_its_prose() {
        let body = br#"{"error":"invalid_grant","error_description":"token tok-SECRET-1234 was used twice"}"#;
        let response: BasicErrorResponse = serde_json::from_slice(body).unwrap();
        let refused = failure(RequestTokenError::ServerResponse(response));
        assert_eq!(refused.code(), "invalid_grant");
        assert!(!refused.to_string().contains("SECRET"), "{refused}");
        let odd = BasicErrorResponse::new(
            oauth2::basic::BasicErrorResponseType::Extension("x y\n<tok-SECRET>".repeat(20)),
            None,
            None,
        );
        let code = failure(RequestTokenError::ServerResponse(odd)).code();
        assert!(
            code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{code}"
        );
        // A provider echoing a client secret (alphanumerics, a valid-looking code) as its
        // `error`: not repeated anywhere.
        let echoed = BasicErrorResponse::new(
            oauth2::basic::BasicErrorResponseType::Extension("clientSECRET0123456789".into()),
            None,
            None,
        );
        let echoed = failure(RequestTokenError::ServerResponse(echoed));
        assert_eq!(echoed.code(), "other_error");
        assert!(!echoed.to_string().contains("SECRET"), "{echoed}");
        let other = failure(RequestTokenError::Other("tok-SECRET-1234".into()));
        assert_eq!(other.code(), "not_a_token_response");
        assert!(!other.to_string().contains("SECRET"));
    }
}
