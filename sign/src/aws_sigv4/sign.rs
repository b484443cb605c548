//! The signature by a given key over exactly what a [`Claim`] says was signed, computed by
//! `aws-sigv4`: compared with the claim's to verify, or written into the request to
//! re-sign it.

use std::fmt;
use std::time::Duration;

use aws_sigv4::http_request::{
    self, PayloadChecksumKind, PercentEncodingMode, SessionTokenMode, SignableBody,
    SignableRequest, SignatureLocation, SigningInstructions, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::claim::{Claim, Form, Head, Scope, without_signing_params};
use super::{Canonicalization, Credentials, Invalid};

/// What SigV4 leaves unencoded in a query value: `A-Z a-z 0-9 - _ . ~`.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A request signed again by the real key: what to write into it. Holds the real key id
/// and session token, so it is zeroized on drop and its `Debug` prints neither.
pub struct Signed {
    /// Header form: the headers to set, names lowercase (`x-amz-date`, `authorization`,
    /// and `x-amz-content-sha256`, `x-amz-security-token` where they are signed).
    pub headers: Vec<(&'static str, Zeroizing<String>)>,
    /// Presigned form: the new path and query.
    pub path_and_query: Option<Zeroizing<String>>,
    /// The new signature: the seed of an aws-chunked body's chunk signatures.
    pub signature: String,
}

impl fmt::Debug for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        f.debug_struct("Signed")
            .field("headers", &names)
            .field(
                "path_and_query",
                &self.path_and_query.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// A claim whose signature the placeholder key was found to have made: the only thing
/// that can be re-signed.
#[derive(Clone, Debug)]
pub struct Verified(pub(crate) Claim);

impl Verified {
    /// The claim as verified.
    pub fn claim(&self) -> &Claim {
        &self.0
    }
}

/// Signs a request in the header form as a client does, for tests and benchmarks that play
/// the sandbox: `signed_headers` (lowercase, ascending, `host` and `x-amz-date` among them)
/// over `head`, which carries `x-amz-date` (and `x-amz-content-sha256` when signed). Returns
/// the `Authorization` value and the claim it makes, whose signature seeds a chunk chain.
///
/// # Errors
///
/// [`Invalid`] when the signer refuses, or `head` lacks a signed header.
pub fn sign_as_client(
    head: &Head<'_>,
    scope: Scope,
    signed_headers: &[&str],
    payload_hash: &str,
    credentials: &Credentials,
) -> Result<(String, Claim), Invalid> {
    let date_time = head
        .values("x-amz-date")
        .next()
        .ok_or_else(|| Invalid::MissingHeader("x-amz-date".into()))?;
    let time =
        super::claim::parse_date_time(date_time).map_err(|e| Invalid::Unsignable(e.to_string()))?;
    let signed: Vec<String> = signed_headers.iter().map(|h| (*h).to_owned()).collect();
    let payload = if signed.iter().any(|h| h == "x-amz-content-sha256") {
        super::Payload::Declared(payload_hash.to_owned())
    } else {
        super::Payload::BodyHash
    };
    let mut claim = Claim {
        form: Form::Header,
        access_key_id: credentials.access_key_id().to_owned(),
        scope,
        session_token_signed: signed.iter().any(|h| h == "x-amz-security-token"),
        signed_headers: signed,
        signature: String::new(),
        date_time: date_time.to_owned(),
        time,
        expires: None,
        payload,
        session_token: credentials.session_token().map(str::to_owned),
    };
    let canon = Canonicalization::for_service(&claim.scope.service);
    let signed = Verified(claim.clone()).resign(head, payload_hash, credentials, canon)?;
    let authorization = signed
        .headers
        .iter()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_string())
        .ok_or_else(|| Invalid::Unsignable("no Authorization was written".into()))?;
    claim.signature = signed.signature;
    Ok((authorization, claim))
}

impl Claim {
    /// Checks that `credentials` (the placeholders) made this signature over `head` and
    /// `payload_hash` ([`Claim::payload_hash`]), read as `canon` says the service reads it.
    ///
    /// A presigned URL does not say whether its session token was signed (some services
    /// want it added after signing): both readings are tried, and the one that verifies is
    /// the one re-signed.
    ///
    /// # Errors
    ///
    /// [`Invalid`]: another key id or session token, a scope dated otherwise than
    /// `X-Amz-Date`, a signed header absent or a signed set the signer would not make, or
    /// a signature that does not match.
    pub fn verify(
        &self,
        head: &Head<'_>,
        payload_hash: &str,
        credentials: &Credentials,
        canon: Canonicalization,
    ) -> Result<Verified, Invalid> {
        if !same(&self.access_key_id, credentials.access_key_id()) {
            return Err(Invalid::AccessKeyId);
        }
        if let Some(sent) = &self.session_token
            && !credentials
                .session_token()
                .is_some_and(|own| same(sent, own))
        {
            return Err(Invalid::SessionToken);
        }
        let (_, signature) = self.compute(
            head,
            payload_hash,
            credentials,
            self.session_token.as_deref(),
            canon,
        )?;
        if same(&signature, &self.signature) {
            return Ok(Verified(self.clone()));
        }
        if self.form == Form::Query && self.session_token.is_some() {
            let unsigned_token = Claim {
                session_token_signed: false,
                ..self.clone()
            };
            let (_, signature) = unsigned_token.compute(
                head,
                payload_hash,
                credentials,
                self.session_token.as_deref(),
                canon,
            )?;
            if same(&signature, &self.signature) {
                return Ok(Verified(unsigned_token));
            }
        }
        Err(Invalid::Mismatch)
    }
}

impl Verified {
    /// Signs `head` (the request as it will leave: its `Host` the upstream's) again with
    /// `credentials` (the real ones): the same signed headers, scope, `X-Amz-Date` and
    /// expiry as the verified claim, over `payload_hash`.
    ///
    /// # Errors
    ///
    /// [`Invalid`] when the request no longer carries a signed header, or the signer
    /// refuses it.
    pub fn resign(
        &self,
        head: &Head<'_>,
        payload_hash: &str,
        credentials: &Credentials,
        canon: Canonicalization,
    ) -> Result<Signed, Invalid> {
        let claim = &self.0;
        // The placeholder's token stands for the real one: a request without it would be
        // signed over a different set of headers than the client signed.
        if credentials.session_token().is_some() != claim.session_token.is_some() {
            return Err(Invalid::SessionTokenMissing);
        }
        let (instructions, signature) = claim.compute(
            head,
            payload_hash,
            credentials,
            credentials.session_token(),
            canon,
        )?;
        let (headers, params) = instructions.into_parts();
        Ok(match claim.form {
            Form::Header => Signed {
                headers: headers
                    .into_iter()
                    .map(|h| (h.name(), Zeroizing::new(h.value().to_owned())))
                    .collect(),
                path_and_query: None,
                signature,
            },
            Form::Query => {
                let mut query = Zeroizing::new(without_signing_params(head.query()));
                for (name, value) in &params {
                    if !query.is_empty() {
                        query.push('&');
                    }
                    query.push_str(name);
                    query.push('=');
                    query.extend(utf8_percent_encode(value, QUERY_VALUE));
                }
                let path_and_query = Zeroizing::new(format!("{}?{}", head.path(), *query));
                Signed {
                    headers: Vec::new(),
                    path_and_query: Some(path_and_query),
                    signature,
                }
            }
        })
    }
}

impl Claim {
    /// `aws-sigv4`'s signature by `credentials` (with `session_token`) over what this claim
    /// says was signed; refused when the signer's signed headers would not be the claim's.
    fn compute(
        &self,
        head: &Head<'_>,
        payload_hash: &str,
        credentials: &Credentials,
        session_token: Option<&str>,
        canon: Canonicalization,
    ) -> Result<(SigningInstructions, String), Invalid> {
        if !self.date_time.starts_with(&self.scope.date) {
            return Err(Invalid::ScopeDate);
        }
        // The signer writes the date, the payload hash and the session token itself in the
        // header form; every other signed header is given as the request carries it.
        let written_by_signer = |name: &str| {
            self.form == Form::Header
                && matches!(
                    name,
                    "x-amz-date" | "x-amz-content-sha256" | "x-amz-security-token"
                )
        };
        let mut headers: Vec<(&str, &str)> = Vec::with_capacity(self.signed_headers.len());
        for name in &self.signed_headers {
            if name == "host" {
                headers.push(("host", head.host));
            } else if !written_by_signer(name) {
                let before = headers.len();
                headers.extend(head.values(name).map(|value| (name.as_str(), value)));
                if headers.len() == before {
                    return Err(Invalid::MissingHeader(name.clone()));
                }
            }
        }
        let mut settings = SigningSettings::default();
        settings.excluded_headers = None;
        settings.percent_encoding_mode = if canon.double_encode {
            PercentEncodingMode::Double
        } else {
            PercentEncodingMode::Single
        };
        settings.uri_path_normalization_mode = if canon.normalize_path {
            UriPathNormalizationMode::Enabled
        } else {
            UriPathNormalizationMode::Disabled
        };
        settings.payload_checksum_kind = if self.form == Form::Header
            && self
                .signed_headers
                .iter()
                .any(|h| h == "x-amz-content-sha256")
        {
            PayloadChecksumKind::XAmzSha256
        } else {
            PayloadChecksumKind::NoHeader
        };
        settings.session_token_mode = if self.session_token.is_some() && !self.session_token_signed
        {
            SessionTokenMode::Exclude
        } else {
            SessionTokenMode::Include
        };
        settings.signature_location = match self.form {
            Form::Header => SignatureLocation::Headers,
            Form::Query => SignatureLocation::QueryParams,
        };
        settings.expires_in = self.expires.map(Duration::from_secs);

        let uri = match self.form {
            Form::Header => format!("https://{}{}", head.host, head.path_and_query),
            Form::Query => {
                let query = without_signing_params(head.query());
                let sep = if query.is_empty() { "" } else { "?" };
                format!("https://{}{}{sep}{query}", head.host, head.path())
            }
        };
        let identity = credentials.identity(session_token);
        let params = v4::SigningParams::builder()
            .identity(identity)
            .region(&self.scope.region)
            .name(&self.scope.service)
            .time(self.time)
            .settings(settings)
            .build()
            .map_err(|e| Invalid::Unsignable(e.to_string()))?
            .into();
        let signable = SignableRequest::new(
            head.method,
            uri,
            headers.into_iter(),
            SignableBody::Precomputed(payload_hash.to_owned()),
        )
        .map_err(|e| Invalid::Unsignable(e.to_string()))?;
        let (instructions, signature) = http_request::sign(signable, &params)
            .map_err(|e| Invalid::Unsignable(e.to_string()))?
            .into_parts();
        if signed_headers_of(&instructions, self.form).as_deref()
            != Some(&self.signed_headers.join(";"))
        {
            return Err(Invalid::SignedHeaders);
        }
        Ok((instructions, signature))
    }
}

/// The signed headers the signer chose, read back from its instructions.
fn signed_headers_of(instructions: &SigningInstructions, form: Form) -> Option<String> {
    match form {
        Form::Header => instructions
            .headers()
            .find(|(name, _)| *name == "authorization")
            .and_then(|(_, value)| {
                value
                    .split(", ")
                    .find_map(|c| c.strip_prefix("SignedHeaders="))
                    .map(str::to_owned)
            }),
        Form::Query => instructions
            .params()
            .iter()
            .find(|(name, _)| *name == "X-Amz-SignedHeaders")
            .map(|(_, value)| value.to_string()),
    }
}

/// Constant-time equality of two strings (their lengths are not secret).
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}
