//! Every refusal the proxy makes, and the one place where a refusal becomes an HTTP
//! response.
//!
//! A refusal names what was refused and what would allow it, in one line a person or an
//! agent can act on. It never carries a secret value: its fields are names, hosts,
//! addresses and reasons written by sluice itself.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::body::{self, Body};

/// Who was at fault for a refusal; reported in logs, not on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The sandboxed client asked for something the declaration does not allow.
    Client,
    /// The upstream failed (unreachable, bad certificate, timeout, bad framing).
    Upstream,
    /// sluice itself cannot serve the request (for example its audit log failed).
    Sluice,
}

/// A refused request: status, machine-readable code and a one-line reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status sent back.
    pub status: StatusCode,
    /// The `sluice-error` header value: a short kebab-case code.
    pub code: &'static str,
    /// One line of plain text: what was refused, and what grant or change would allow it.
    pub message: String,
    /// Who was at fault.
    pub fault: Fault,
    /// The secret a refusal is about, for the audit log (its name, never its value).
    pub secret: Option<String>,
    /// Where in the request the refused match was (`header:authorization`, `query`, ...).
    pub location: Option<String>,
}

impl Refusal {
    /// `407`: no or wrong `Proxy-Authorization`.
    pub fn proxy_auth() -> Self {
        Self::new(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "proxy-auth-required",
            "proxy authentication required: use the credentials in the run directory's proxy-url"
                .into(),
            Fault::Client,
        )
    }

    /// `403`: the host is not reachable under the declaration.
    pub fn host_not_allowed(host: &str, port: u16, why: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "host-not-allowed",
            format!("sluice refused {host}:{port}: {why}"),
            Fault::Client,
        )
    }

    /// `403`: the address a host resolved to is blocked.
    pub fn address_blocked(host: &str, why: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "address-blocked",
            format!("sluice refused to dial {host}: {why}"),
            Fault::Client,
        )
    }

    /// `421`: a request inside a tunnel named another host than the tunnel's.
    pub fn misdirected(named: &str, tunnel: &str) -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected-request",
            format!(
                "request names {named} but this tunnel was opened for {tunnel}; open a CONNECT tunnel to {named} instead"
            ),
            Fault::Client,
        )
    }

    /// `400`: the request cannot be understood or is ambiguous; it is not repaired.
    pub fn bad_request(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            why.into(),
            Fault::Client,
        )
    }

    /// `502`: the upstream could not be reached or failed.
    pub fn bad_gateway(code: &'static str, why: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, code, why.into(), Fault::Upstream)
    }

    /// `504`: the upstream did not answer in time.
    pub fn gateway_timeout(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream-timeout",
            why.into(),
            Fault::Upstream,
        )
    }

    /// `503`: sluice cannot serve requests (its audit log failed: fail closed).
    pub fn unavailable(why: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "sluice-unavailable",
            why.into(),
            Fault::Sluice,
        )
    }

    /// `403`: a placeholder where its secret is not granted, or a real value toward a host
    /// its secret does not grant. `message` names the secret, the place, the host and the
    /// grant that would allow it.
    pub fn secret_refused(
        code: &'static str,
        message: String,
        secret: &str,
        location: String,
    ) -> Self {
        let mut refusal = Self::new(StatusCode::FORBIDDEN, code, message, Fault::Client);
        refusal.secret = Some(secret.to_owned());
        refusal.location = Some(location);
        refusal
    }

    /// `431`: the request head is larger than the limit.
    pub fn head_too_large(size: usize, limit: usize) -> Self {
        Self::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request-head-too-large",
            format!("the request head is {size} bytes, over sluice's limit of {limit}"),
            Fault::Client,
        )
    }

    /// `413`: a body that must be buffered to be rewritten is larger than the bound.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            format!(
                "the request body must be buffered to swap a placeholder and recompute Content-Length, and it exceeds sluice's bound of {limit} bytes; send it chunked (without Content-Length) or smaller"
            ),
            Fault::Client,
        )
    }

    /// `408`: a body that must be buffered to be rewritten did not arrive in time.
    pub fn body_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "request-body-timeout",
            format!(
                "the request body must be buffered to be scanned, and it did not arrive within sluice's {}s limit",
                limit.as_secs()
            ),
            Fault::Client,
        )
    }

    fn new(status: StatusCode, code: &'static str, message: String, fault: Fault) -> Self {
        Self {
            status,
            code,
            message,
            fault,
            secret: None,
            location: None,
        }
    }

    /// The response sent to the client: the status, a `sluice-error` header and the one-line
    /// reason as a plain-text body. The only place a refusal turns into bytes on the wire, so
    /// the one place its message passes through the guard: a reason may quote text the
    /// client or an upstream chose (a host, a Host header, a coding name), which could spell
    /// a value.
    pub fn into_response(self, guard: &sluice_guard::Guard) -> Response<Body> {
        let mut line = if guard.is_match(self.message.as_bytes()) {
            guard.redact_str(&self.message)
        } else {
            self.message
        };
        line.push('\n');
        let mut response = Response::new(body::full(Bytes::from(line)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert("sluice-error", HeaderValue::from_static(self.code));
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

    #[tokio::test]
    async fn a_message_quoting_a_value_is_redacted_on_the_wire() {
        let mut builder = Guard::builder();
        builder
            .add(
                "tok",
                Placeholder::parse("SLUICE_TOK_0123456789abcdef").unwrap(),
                SecretValue::from("very-secret-value-42"),
            )
            .unwrap();
        let guard = builder.build().unwrap();
        let refusal = Refusal::misdirected("very-secret-value-42.test", "a.test:443");
        let body = refusal
            .into_response(&guard)
            .into_body()
            .collect()
            .await
            .unwrap();
        let text = String::from_utf8(body.to_bytes().to_vec()).unwrap();
        assert!(!text.contains("very-secret-value-42"), "{text}");
        assert!(text.contains("SLUICE_TOK_0123456789abcdef.test"), "{text}");
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
