//! Every refusal the proxy makes: its typed [`Code`], the mapping from every step's error to
//! a refusal, and the one place where a refusal becomes an HTTP response.
//!
//! A refusal names what was refused and what would allow it, in one line a person or an
//! agent can act on. It never carries a secret value: its fields are names, hosts,
//! addresses and reasons written by sluice itself, and its message passes through the guard
//! on its way to the wire. Recording it in the audit log is the door's (`generation::door`),
//! which every step's refusal takes.

use std::fmt;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

mod approval;

pub(crate) use approval::Waited;

use crate::body::codec::CodecError;
use crate::body::{self, Body};
use crate::upstream::{SendError, Timeouts, UpstreamError};
use sluice_audit::EventKind;

/// What kind of refusal it is: the `sluice-error` header's value, and what the audit log
/// records it as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// `407`: no or wrong proxy credentials.
    ProxyAuthRequired,
    /// `403`: the host is not reachable under the declaration.
    HostNotAllowed,
    /// `403`: the address a host resolved to is blocked.
    AddressBlocked,
    /// `421`: a request inside a tunnel named another host.
    MisdirectedRequest,
    /// `400`: a request sluice cannot read, or will not repair.
    BadRequest,
    /// `403`: a placeholder where its secret is not granted.
    PlaceholderNotGranted,
    /// `403`: a real value toward a host its secret does not grant.
    SecretValueRefused,
    /// `403`: a placeholder toward a host its secret grants, in a request (method and
    /// path) that no rule of its `allow:` admits.
    RequestNotAllowed,
    /// `429`: a placeholder whose secret has used its `budget:` for the window.
    BudgetExhausted,
    /// `403`: an operator denied a use that waited for approval (`approve:`).
    ApprovalDenied,
    /// `403`: nobody decided a use that waited for approval in time.
    ApprovalTimeout,
    /// `503`: too many uses wait for approval already.
    ApprovalsFull,
    /// `431`: the request head is over the limit.
    RequestHeadTooLarge,
    /// `413`: a body that must be buffered is over the bound.
    BodyTooLarge,
    /// `408`: a body that must be buffered did not arrive in time.
    RequestBodyTimeout,
    /// `502`: the exchange with the upstream failed.
    UpstreamFailed,
    /// `502`: the organisation's egress proxy could not be reached.
    UpstreamProxyUnreachable,
    /// `502`: the egress proxy refused sluice's credentials (`407`).
    UpstreamProxyAuth,
    /// `502`: the egress proxy refused the tunnel (its status in the body).
    UpstreamProxy,
    /// `502`: the response is in a coding sluice cannot scan.
    UpstreamEncoding,
    /// `502`: the upstream's certificate did not verify, or its TLS failed.
    UpstreamTls,
    /// `502`: the upstream's certificate verified, but its chain holds no pin of a pinned
    /// secret the request carries (`pin:`); nothing was sent.
    PinMismatch,
    /// `502`: the upstream's name did not resolve.
    DnsFailure,
    /// `502`: the upstream could not be dialled.
    UpstreamConnect,
    /// `504`: the upstream did not answer in time.
    UpstreamTimeout,
    /// `503`: sluice cannot serve requests (fail closed).
    SluiceUnavailable,
    /// `403`: a request signed with a signing secret's placeholders whose signature does
    /// not verify, or cannot be read.
    SignatureInvalid,
    /// `403`: a signing secret is not granted the host, service or region a request names.
    SigningNotGranted,
    /// A client's TLS handshake refused (its server name is not the tunnel's target, or the
    /// handshake failed): the connection is closed, no response can carry it.
    TlsHandshakeRefused,
    /// A name the jail's resolver refused (NXDOMAIN): not reachable under the declaration.
    DnsNameNotAllowed,
    /// `502`: a minted secret's token could not be minted (the provider refused, or could
    /// not be reached); nothing was sent.
    MintFailed,
    /// `421`: a tunnel opened under a declaration since replaced, asked for a minted token
    /// newer than its generation knows: the client opens a new tunnel.
    TunnelOutdated,
    /// `403`: a request to a minted secret's token endpoint that sluice does not answer
    /// (not a refresh or client-credentials grant with the secret's placeholders).
    TokenRequestRefused,
    /// A captured connection with no name to decide on (no original destination, an address
    /// sluice's resolver never handed out and no TLS server name, a server name that is not
    /// a host name): closed.
    NoTarget,
}

impl Code {
    /// The kebab-case code, as sent in `sluice-error` and written in the audit log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ProxyAuthRequired => "proxy-auth-required",
            Self::HostNotAllowed => "host-not-allowed",
            Self::AddressBlocked => "address-blocked",
            Self::MisdirectedRequest => "misdirected-request",
            Self::BadRequest => "bad-request",
            Self::PlaceholderNotGranted => "placeholder-not-granted",
            Self::SecretValueRefused => "secret-value-refused",
            Self::RequestNotAllowed => "request-not-allowed",
            Self::BudgetExhausted => "budget-exhausted",
            Self::ApprovalDenied => "approval-denied",
            Self::ApprovalTimeout => "approval-timeout",
            Self::ApprovalsFull => "approvals-full",
            Self::RequestHeadTooLarge => "request-head-too-large",
            Self::BodyTooLarge => "body-too-large",
            Self::RequestBodyTimeout => "request-body-timeout",
            Self::UpstreamFailed => "upstream-failed",
            Self::UpstreamEncoding => "upstream-encoding",
            Self::UpstreamTls => "upstream-tls",
            Self::PinMismatch => "pin-mismatch",
            Self::DnsFailure => "dns-failure",
            Self::UpstreamConnect => "upstream-connect",
            Self::UpstreamProxyUnreachable => "upstream-proxy-unreachable",
            Self::UpstreamProxyAuth => "upstream-proxy-auth",
            Self::UpstreamProxy => "upstream-proxy",
            Self::UpstreamTimeout => "upstream-timeout",
            Self::SluiceUnavailable => "sluice-unavailable",
            Self::SignatureInvalid => "signature-invalid",
            Self::SigningNotGranted => "signing-not-granted",
            Self::TlsHandshakeRefused => "tls-handshake-refused",
            Self::DnsNameNotAllowed => "dns-name-not-allowed",
            Self::NoTarget => "no-target",
            Self::MintFailed => "mint-failed",
            Self::TunnelOutdated => "tunnel-outdated",
            Self::TokenRequestRefused => "token-request-refused",
        }
    }

    /// The audit event a refusal of this kind is: `deny` for the egress decision (a host, an
    /// address, a name, a connection with no target, a handshake for another name),
    /// `auth_fail` for missing proxy credentials, `refuse` for the rest.
    pub(crate) fn event_kind(self) -> EventKind {
        match self {
            Self::HostNotAllowed
            | Self::AddressBlocked
            | Self::TlsHandshakeRefused
            | Self::DnsNameNotAllowed
            | Self::NoTarget => EventKind::Deny,
            Self::ProxyAuthRequired => EventKind::AuthFail,
            _ => EventKind::Refuse,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Where a step that cannot answer the client itself (a body adapter, deep in a stream)
/// leaves the refusal it stopped a request with, for the step that answers to find.
#[derive(Clone, Default)]
pub(crate) struct RefusalSlot(std::sync::Arc<std::sync::Mutex<Option<Refusal>>>);

impl RefusalSlot {
    /// Leaves `refusal` (the first one left is kept).
    pub(crate) fn leave(&self, refusal: Refusal) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(refusal);
        }
    }

    /// The refusal left, if any.
    pub(crate) fn take(&self) -> Option<Refusal> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Who was at fault for a refusal; reported in logs, not on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The sandboxed client asked for something the declaration does not allow.
    Client,
    /// The upstream failed (unreachable, bad certificate, timeout, bad framing).
    Upstream,
    /// sluice itself cannot serve the request (for example its audit log failed).
    Sluice,
}

/// A refused request: status, machine-readable code and a one-line reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The HTTP status sent back.
    pub status: StatusCode,
    /// What kind of refusal: the `sluice-error` header value and the audit event kind.
    pub code: Code,
    /// One line of plain text: what was refused, and what grant or change would allow it.
    pub message: String,
    /// Who was at fault.
    pub fault: Fault,
    /// The secret a refusal is about, for the audit log (its name, never its value).
    pub secret: Option<String>,
    /// Where in the request the refused match was (`header:authorization`, `query`, ...).
    pub location: Option<String>,
    /// Whether the audit log has it already (a streamed body's cut is recorded as it
    /// happens): the one refusal path then only answers it.
    pub(crate) audited: bool,
    /// Seconds after which the client may try again (`Retry-After`), for a budget.
    pub(crate) retry_after: Option<u64>,
}

impl Refusal {
    /// `407`: no or wrong `Proxy-Authorization`.
    pub(crate) fn proxy_auth() -> Self {
        Self::new(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            Code::ProxyAuthRequired,
            "proxy authentication required: use the credentials in the run directory's proxy-url"
                .into(),
            Fault::Client,
        )
    }

    /// `403`: the host is not reachable under the declaration.
    pub(crate) fn host_not_allowed(host: &str, port: u16, why: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            Code::HostNotAllowed,
            format!("sluice refused {host}:{port}: {why}"),
            Fault::Client,
        )
    }

    /// `403`: the address a host resolved to is blocked.
    pub(crate) fn address_blocked(host: &str, why: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            Code::AddressBlocked,
            format!("sluice refused to dial {host}: {why}"),
            Fault::Client,
        )
    }

    /// A client TLS handshake refused; `why` is sluice's wording (its caller passes any
    /// server name it quotes through the guard). Never answered: the connection closes.
    pub(crate) fn tls_handshake_refused(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            Code::TlsHandshakeRefused,
            why.into(),
            Fault::Client,
        )
    }

    /// A name the jail's resolver answers NXDOMAIN: no grant and no `egress.allow` names it.
    pub(crate) fn dns_name_not_allowed(name: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            Code::DnsNameNotAllowed,
            format!("sluice refused to resolve {name}: not reachable under the declaration"),
            Fault::Client,
        )
    }

    /// A captured connection with nothing to decide on; `why` says what was missing.
    pub(crate) fn no_target(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            Code::NoTarget,
            why.into(),
            Fault::Client,
        )
    }

    /// `421`: a request inside a tunnel named another host than the tunnel's.
    pub(crate) fn misdirected(named: &str, tunnel: &str) -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            Code::MisdirectedRequest,
            format!(
                "request names {named} but this tunnel was opened for {tunnel}; open a CONNECT tunnel to {named} instead"
            ),
            Fault::Client,
        )
    }

    /// `400`: the request cannot be understood or is ambiguous; it is not repaired.
    pub(crate) fn bad_request(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            Code::BadRequest,
            why.into(),
            Fault::Client,
        )
    }

    /// `502`: the upstream could not be reached or failed.
    pub(crate) fn bad_gateway(code: Code, why: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, code, why.into(), Fault::Upstream)
    }

    /// `502`: a pinned secret's pins were not met by `host`'s verified chain. The
    /// handshake failed, so nothing of the request was sent.
    fn pin_mismatch(host: &str, secrets: &[String]) -> Self {
        let names = secrets.join(", ");
        let mut refusal = Self::bad_gateway(
            Code::PinMismatch,
            format!(
                "sluice refused to send secret {names} to {host}: its certificate chain verified but holds none of the secret's pins (pin:), so nothing was sent; if {host} changed its key, add the new key's pin to the secret's pin: list"
            ),
        );
        refusal.secret = secrets.first().cloned();
        refusal
    }

    /// `502`: the token of minted secret `secret` could not be minted. Names the provider's
    /// error code (never its body or description, which may echo what was sent).
    pub(crate) fn mint_failed(
        secret: &str,
        failure: &crate::mint::MintFailure,
        detail: &str,
    ) -> Self {
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(" ({detail})")
        };
        let mut refusal = Self::new(
            StatusCode::BAD_GATEWAY,
            Code::MintFailed,
            format!(
                "sluice could not mint a token for secret {secret}: {failure}{detail}; error code {}; nothing was sent, and sluice tries again with backoff",
                failure.code()
            ),
            Fault::Upstream,
        );
        refusal.secret = Some(secret.to_owned());
        refusal
    }

    /// `421`: the tunnel predates a reload of the declaration and cannot carry a newer token.
    pub(crate) fn outdated_tunnel() -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            Code::TunnelOutdated,
            "this tunnel was opened under a declaration since reloaded, and cannot carry the token minted since; open a new connection".into(),
            Fault::Client,
        )
    }

    /// `403`: a request to `secret`'s token endpoint that sluice does not answer.
    pub(crate) fn token_request_refused(secret: &str, why: &str) -> Self {
        let mut refusal = Self::new(
            StatusCode::FORBIDDEN,
            Code::TokenRequestRefused,
            format!(
                "sluice answers the token endpoint of secret {secret} itself, and refused this request: {why}; send a refresh_token or client_credentials grant (POST) with the placeholders in {} and its _REFRESH_TOKEN / _CLIENT_SECRET twins",
                sluice_policies::placeholder_name(secret)
            ),
            Fault::Client,
        );
        refusal.secret = Some(secret.to_owned());
        refusal
    }

    /// `504`: the upstream did not answer in time.
    pub(crate) fn gateway_timeout(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            Code::UpstreamTimeout,
            why.into(),
            Fault::Upstream,
        )
    }

    /// `503`: sluice cannot serve requests (its audit log failed: fail closed).
    pub(crate) fn unavailable(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::SluiceUnavailable,
            why.into(),
            Fault::Sluice,
        )
    }

    /// `403`: a placeholder where its secret is not granted, or a real value toward a host
    /// its secret does not grant. `message` names the secret, the place, the host and the
    /// grant that would allow it.
    pub(crate) fn secret_refused(
        code: Code,
        message: String,
        secret: &str,
        location: String,
    ) -> Self {
        let mut refusal = Self::new(StatusCode::FORBIDDEN, code, message, Fault::Client);
        refusal.secret = Some(secret.to_owned());
        refusal.location = Some(location);
        refusal
    }

    /// `429`: the secret's budget for this window is used up; `Retry-After` says when it
    /// resets. Nothing of the request is sent.
    pub(crate) fn budget_exhausted(exhausted: &sluice_policies::Exhausted, place: &str) -> Self {
        let mut refusal = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            Code::BudgetExhausted,
            format!("sluice refused the request: {exhausted}"),
            Fault::Client,
        );
        refusal.secret = Some(exhausted.secret.clone());
        refusal.location = Some(place.to_owned());
        // Rounded up: a client that waits this long finds the window open.
        let secs =
            exhausted.resets_in.as_secs() + u64::from(exhausted.resets_in.subsec_nanos() > 0);
        refusal.retry_after = Some(secs.max(1));
        refusal
    }

    /// `403`: a request signed by a signing secret's placeholder key whose signature does
    /// not verify or cannot be read: nothing is signed, nothing is sent.
    pub(crate) fn signature_invalid(secret: &str, why: &dyn fmt::Display) -> Self {
        let mut refusal = Self::new(
            StatusCode::FORBIDDEN,
            Code::SignatureInvalid,
            format!(
                "sluice refused a request signed with secret {secret}'s placeholders: {why}; sign it, unchanged, with the placeholder credentials sluice set"
            ),
            Fault::Client,
        );
        refusal.secret = Some(secret.to_owned());
        refusal.location = Some(sluice_audit::SIGNATURE_LOCATION.to_owned());
        refusal
    }

    /// `403`: a signing secret asked to sign toward a host, service or region it is not
    /// granted; the message names the grant that would allow it.
    pub(crate) fn signing_not_granted(
        secret: &str,
        ungranted: &sluice_policies::Ungranted,
    ) -> Self {
        let mut refusal = Self::new(
            StatusCode::FORBIDDEN,
            Code::SigningNotGranted,
            format!("sluice refused to sign: {ungranted}"),
            Fault::Client,
        );
        refusal.secret = Some(secret.to_owned());
        refusal.location = Some(sluice_audit::SIGNATURE_LOCATION.to_owned());
        refusal
    }

    /// `431`: the request head is larger than the limit.
    pub(crate) fn head_too_large(size: usize, limit: usize) -> Self {
        Self::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Code::RequestHeadTooLarge,
            format!("the request head is {size} bytes, over sluice's limit of {limit}"),
            Fault::Client,
        )
    }

    /// `413`: a body that must be buffered to be rewritten is larger than the bound.
    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Code::BodyTooLarge,
            format!(
                "the request body must be buffered to swap a placeholder and recompute Content-Length, and it exceeds sluice's bound of {limit} bytes; send it chunked (without Content-Length) or smaller"
            ),
            Fault::Client,
        )
    }

    /// `408`: a body that must be buffered to be rewritten did not arrive in time.
    pub(crate) fn body_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            Code::RequestBodyTimeout,
            format!(
                "the request body must be buffered to be scanned, and it did not arrive within sluice's {}s limit",
                limit.as_secs()
            ),
            Fault::Client,
        )
    }

    /// The refusal for a failed exchange: a body sluice could not code or read is the
    /// client's fault; a failed dial is [`Refusal::from_dial`]'s; the rest is the upstream's.
    pub(crate) fn from_send(error: &SendError, timeouts: Timeouts, target: &str) -> Self {
        if let Some(codec) = error.find_source::<CodecError>() {
            return Self::bad_request(format!("the request body: {codec}"));
        }
        // The client's own body failed (a malformed chunk, a cut connection): its fault, and
        // the upstream request was aborted, not completed.
        if let Some(body) = error.find_source::<hyper::Error>().filter(|e| e.is_user()) {
            let why = std::error::Error::source(body)
                .map_or_else(|| body.to_string(), ToString::to_string);
            return Self::bad_request(format!("the request body could not be read: {why}"));
        }
        match error {
            SendError::Dial(dial) => Self::from_dial(dial),
            SendError::Timeout => Self::gateway_timeout(format!(
                "{target} did not answer within {}s",
                timeouts.response.as_secs()
            )),
            SendError::Http(why) => Self::bad_gateway(
                Code::UpstreamFailed,
                format!("the exchange with {target} failed: {why}"),
            ),
        }
    }

    /// The refusal for a failed dial: blocked addresses are the client's doing (`403`),
    /// everything else the upstream's (`502`, or `504` for timeouts).
    pub(crate) fn from_dial(error: &UpstreamError) -> Self {
        match error {
            UpstreamError::Blocked { host, addr, why } => {
                Self::address_blocked(host, &format!("{} is {why}", addr.ip()))
            }
            UpstreamError::ConnectTimeout { .. } | UpstreamError::TlsTimeout { .. } => {
                Self::gateway_timeout(error.to_string())
            }
            UpstreamError::Tls { .. } => Self::bad_gateway(Code::UpstreamTls, error.to_string()),
            UpstreamError::PinMismatch { host, secrets } => Self::pin_mismatch(host, secrets),
            UpstreamError::Resolve { .. } => Self::bad_gateway(Code::DnsFailure, error.to_string()),
            UpstreamError::Connect { .. } | UpstreamError::BadTarget(_) => {
                Self::bad_gateway(Code::UpstreamConnect, error.to_string())
            }
            UpstreamError::ProxyUnreachable { .. } => {
                Self::bad_gateway(Code::UpstreamProxyUnreachable, error.to_string())
            }
            UpstreamError::ProxyAuth { .. } => {
                Self::bad_gateway(Code::UpstreamProxyAuth, error.to_string())
            }
            UpstreamError::ProxyRefused { .. } => {
                Self::bad_gateway(Code::UpstreamProxy, error.to_string())
            }
        }
    }

    /// A request body that cannot be decoded or encoded again: refused, never sent unscanned.
    pub(crate) fn request_codec(error: &CodecError) -> Self {
        Self::bad_request(format!("the request body: {error}"))
    }

    /// A response that cannot be decoded to be scanned: refused, never passed on unscanned.
    pub(crate) fn response_codec(error: &CodecError) -> Self {
        Self::bad_gateway(
            Code::UpstreamEncoding,
            format!("the response cannot be scanned, so it is not passed on: {error}"),
        )
    }

    fn new(status: StatusCode, code: Code, message: String, fault: Fault) -> Self {
        Self {
            status,
            code,
            message,
            fault,
            secret: None,
            location: None,
            audited: false,
            retry_after: None,
        }
    }

    /// The same refusal, already in the audit log.
    pub(crate) fn audited(mut self) -> Self {
        self.audited = true;
        self
    }

    /// The response sent to the client: the status, a `sluice-error` header and the one-line
    /// reason as a plain-text body. The only place a refusal turns into bytes on the wire, so
    /// the one place its message passes through the guard: a reason may quote text the
    /// client or an upstream chose (a host, a Host header, a coding name), which could spell
    /// a value.
    pub(crate) fn into_response(self, guard: &sluice_guard::Guard) -> Response<Body> {
        // In any letter case: a quoted coding name or host has been lowercased on the way.
        let mut line = guard.redact_string(self.message);
        line.push('\n');
        let mut response = Response::new(body::full(Bytes::from(line)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert("sluice-error", HeaderValue::from_static(self.code.as_str()));
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
            headers.insert(
                header::PROXY_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"sluice\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use sluice_guard::{Guard, Placeholder, SecretValue};

    fn no_secrets() -> Guard {
        Guard::builder().build().unwrap()
    }

    /// A guard over one secret, `tok`, holding `value`.
    fn guard_of(value: &str) -> Guard {
        let mut builder = Guard::builder();
        builder
            .add(
                "tok",
                Placeholder::parse("SLUICE_TOK_0123456789abcdef").unwrap(),
                SecretValue::from(value),
            )
            .unwrap();
        builder.build().unwrap()
    }

    /// The one-line body a refusal's response carries.
    async fn body_of(refusal: Refusal, guard: &Guard) -> String {
        let body = refusal
            .into_response(guard)
            .into_body()
            .collect()
            .await
            .unwrap();
        String::from_utf8(body.to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_message_quoting_a_value_is_redacted_on_the_wire() {
        let guard = guard_of("very-secret-value-42");
        let refusal = Refusal::misdirected("very-secret-value-42.test", "a.test:443");
        let text = body_of(refusal, &guard).await;
        assert!(!text.contains("very-secret-value-42"), "{text}");
        assert!(text.contains("SLUICE_TOK_0123456789abcdef.test"), "{text}");
    }

    #[tokio::test]
    async fn a_message_quoting_a_case_folded_value_is_redacted_on_the_wire() {
        let guard = guard_of("Very-Secret-Value-42");
        // What a coding name or a host looks like once the peer's text has been lowercased.
        let refusal = Refusal::bad_gateway(
            Code::UpstreamEncoding,
            "content coding `very-secret-value-42` is not supported",
        );
        let text = body_of(refusal, &guard).await;
        assert!(
            !text.to_ascii_lowercase().contains("very-secret-value-42"),
            "{text}"
        );
        assert!(text.contains("SLUICE_TOK_0123456789abcdef"), "{text}");
    }

    #[test]
    fn response_carries_code_header_and_one_line_body() {
        let response = Refusal::misdirected("b.test", "a.test:443").into_response(&no_secrets());
        assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST);
        assert_eq!(response.headers()["sluice-error"], "misdirected-request");
    }

    #[test]
    fn proxy_auth_refusal_asks_for_basic() {
        let response = Refusal::proxy_auth().into_response(&no_secrets());
        assert_eq!(response.status(), StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        assert_eq!(
            response.headers()[header::PROXY_AUTHENTICATE],
            "Basic realm=\"sluice\""
        );
    }
}
