//! What a request says about its own signature: the algorithm, the key id and scope, the
//! signed headers, the date, the payload hash and the signature, read strictly from the
//! `Authorization` header or the presigned query.
//!
//! Strict on purpose: a component given twice, an unknown component, signed headers out of
//! order or a scope that is not five parts is [`Malformed`], never guessed at, since the
//! signer would read such a request one way and an upstream perhaps another.

use std::borrow::Cow;
use std::time::SystemTime;

use super::error::Malformed;

/// The one algorithm handled: SigV4 with HMAC-SHA256.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The presigned query's own parameters: signed by construction, so held out of the query
/// the signer canonicalises and written anew when the request is re-signed.
pub(crate) const SIGNING_PARAMS: [&str; 7] = [
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
];

/// The longest a presigned URL may be valid, as AWS allows: seven days.
const MAX_EXPIRES: u64 = 7 * 24 * 3600;

/// A request head as the client sent it, as far as a signature covers it.
#[derive(Clone, Debug)]
pub struct Head<'a> {
    /// The method.
    pub method: &'a str,
    /// The authority the client addressed (its `Host`, or HTTP/2's `:authority`), as sent.
    pub host: &'a str,
    /// The path and query, as sent (percent-encoded).
    pub path_and_query: &'a str,
    /// Every header but `Host`, names in any case, in the order received.
    pub headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Head<'a> {
    /// Every value of the header `name` (compared case-insensitively), in order.
    pub fn values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a str> + 's {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The one value of `name`: `None` when absent, an error when given twice.
    fn single(&self, name: &'static str) -> Result<Option<&'a str>, Malformed> {
        let mut values = self.values(name);
        let first = values.next();
        if values.next().is_some() {
            return Err(Malformed::Repeated(name));
        }
        Ok(first)
    }

    /// The path, without the query.
    pub(crate) fn path(&self) -> &'a str {
        self.path_and_query
            .split_once('?')
            .map_or(self.path_and_query, |(path, _)| path)
    }

    /// The raw query, without `?`.
    pub(crate) fn query(&self) -> &'a str {
        self.path_and_query.split_once('?').map_or("", |(_, q)| q)
    }
}

/// Where the signature travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`.
    Header,
    /// A presigned URL: `X-Amz-Algorithm`, `X-Amz-Credential`, … `X-Amz-Signature`.
    Query,
}

/// The credential scope: `DATE/REGION/SERVICE/aws4_request`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// `YYYYMMDD`.
    pub date: String,
    /// The region (`eu-west-1`).
    pub region: String,
    /// The signing name of the service (`s3`, `bedrock`, `sts`).
    pub service: String,
}

/// What the signature says of the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `x-amz-content-sha256`, signed: a hex digest of the body, `UNSIGNED-PAYLOAD`, or an
    /// aws-chunked marker (`STREAMING-…`).
    Declared(String),
    /// No payload hash was sent: the signature covers the SHA-256 of the body itself, so the
    /// body must be read whole before it can be checked.
    BodyHash,
    /// A presigned S3 URL: the body is not signed.
    Unsigned,
}

impl Payload {
    /// Whether the body is aws-chunked with a signature on every chunk
    /// (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`, with or without a signed trailer).
    pub fn signed_chunks(&self) -> bool {
        matches!(self, Payload::Declared(v) if v.starts_with(SIGNED_CHUNKS))
    }

    /// Whether the body's own SHA-256 is part of what was signed (a declared digest, or the
    /// hash of the body itself): a body that sluice rewrote needs its hash recomputed.
    pub fn hashes_body(&self) -> bool {
        match self {
            Payload::Declared(v) => is_hex_digest(v),
            Payload::BodyHash => true,
            Payload::Unsigned => false,
        }
    }
}

/// The `x-amz-content-sha256` of a body sent in signed aws-chunks.
pub(crate) const SIGNED_CHUNKS: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
/// The same, with a signed trailer after the last chunk.
pub(crate) const SIGNED_CHUNKS_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
/// The declared payloads that are not a digest.
const MARKERS: [&str; 4] = [
    "UNSIGNED-PAYLOAD",
    "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    SIGNED_CHUNKS,
    SIGNED_CHUNKS_TRAILER,
];

/// A SigV4 signature found on a request: what the client claims it signed, and with which
/// key. Nothing in it is trusted until [`Claim::verify`] has passed.
#[derive(Clone, Debug)]
pub struct Claim {
    pub(crate) form: Form,
    pub(crate) access_key_id: String,
    pub(crate) scope: Scope,
    pub(crate) signed_headers: Vec<String>,
    pub(crate) signature: String,
    pub(crate) date_time: String,
    pub(crate) time: SystemTime,
    pub(crate) expires: Option<u64>,
    pub(crate) payload: Payload,
    pub(crate) session_token: Option<String>,
    pub(crate) session_token_signed: bool,
}

impl Claim {
    /// The SigV4 signature on `head`: `Ok(None)` when it carries none (no `Authorization`
    /// of this algorithm, no presigned query), an error when it carries one that cannot be
    /// read exactly.
    ///
    /// # Errors
    ///
    /// [`Malformed`], naming the part that is wrong.
    pub fn find(head: &Head<'_>) -> Result<Option<Claim>, Malformed> {
        let mut authorizations = head
            .values("authorization")
            .filter(|v| v.starts_with(ALGORITHM));
        if let Some(authorization) = authorizations.next() {
            if authorizations.next().is_some() {
                return Err(Malformed::Repeated("authorization"));
            }
            return from_header(head, authorization).map(Some);
        }
        let params = query_params(head.query());
        match single_param(&params, "X-Amz-Algorithm")? {
            Some(algorithm) if algorithm == ALGORITHM => from_query(&params).map(Some),
            _ => Ok(None),
        }
    }

    /// Where the signature travels.
    pub fn form(&self) -> Form {
        self.form
    }

    /// The access key id the client signed with (a placeholder, if the sandbox's).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The credential scope: date, region, service.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The signed headers, lowercase, in order.
    pub fn signed_headers(&self) -> &[String] {
        &self.signed_headers
    }

    /// The session token the request carried, if any.
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref()
    }

    /// The signature, lowercase hex (the seed of an aws-chunked body's chunk signatures).
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// What the signature says of the body.
    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// `X-Amz-Date` as sent (`YYYYMMDDTHHMMSSZ`).
    pub fn date_time(&self) -> &str {
        &self.date_time
    }

    /// The payload hash the canonical request holds: the declared one, `UNSIGNED-PAYLOAD`,
    /// or `body_sha256` (the hex SHA-256 of the body) where the body itself is hashed; a
    /// declared digest is replaced by `body_sha256` when one is given (the body was
    /// rewritten, and its hash with it).
    ///
    /// # Errors
    ///
    /// [`Malformed::BodyNeeded`] when the body's hash is signed and none was given.
    pub fn payload_hash<'s>(
        &'s self,
        body_sha256: Option<&'s str>,
    ) -> Result<Cow<'s, str>, Malformed> {
        Ok(match (&self.payload, body_sha256) {
            (Payload::Declared(v), Some(hash)) if is_hex_digest(v) => Cow::Borrowed(hash),
            (Payload::Declared(v), _) => Cow::Borrowed(v.as_str()),
            (Payload::BodyHash, Some(hash)) => Cow::Borrowed(hash),
            (Payload::BodyHash, None) => return Err(Malformed::BodyNeeded),
            (Payload::Unsigned, _) => Cow::Borrowed("UNSIGNED-PAYLOAD"),
        })
    }

    /// The names of the headers that carry this signature and its credentials
    /// (`authorization`, `x-amz-security-token`): held out of the request while sluice
    /// scans it, and written anew by [`Verified::resign`](super::Verified::resign). None for a presigned URL.
    pub fn carrier_headers(&self) -> &'static [&'static str] {
        match self.form {
            Form::Header => &["authorization", "x-amz-security-token"],
            Form::Query => &[],
        }
    }
}

/// The header form.
fn from_header(head: &Head<'_>, authorization: &str) -> Result<Claim, Malformed> {
    let rest = &authorization[ALGORITHM.len()..];
    let rest = rest.strip_prefix(' ').ok_or(Malformed::Authorization)?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for component in rest.split(',') {
        let (key, value) = component
            .trim_start_matches(' ')
            .split_once('=')
            .ok_or(Malformed::Authorization)?;
        let slot = match key {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed,
            "Signature" => &mut signature,
            _ => return Err(Malformed::Authorization),
        };
        if slot.replace(value).is_some() {
            return Err(Malformed::Authorization);
        }
    }
    let (credential, signed, signature) = match (credential, signed, signature) {
        (Some(c), Some(h), Some(s)) => (c, h, s),
        _ => return Err(Malformed::Authorization),
    };
    let (access_key_id, scope) = parse_credential(credential)?;
    let signed_headers = parse_signed_headers(signed)?;
    let signature = parse_signature(signature)?;
    let date_time = head.single("x-amz-date")?.ok_or(Malformed::Date)?;
    let time = parse_date_time(date_time)?;
    let payload = if signed_headers.iter().any(|h| h == "x-amz-content-sha256") {
        let declared = head
            .single("x-amz-content-sha256")?
            .ok_or(Malformed::PayloadHash)?;
        if !is_hex_digest(declared) && !MARKERS.contains(&declared) {
            return Err(Malformed::PayloadHash);
        }
        Payload::Declared(declared.to_owned())
    } else {
        Payload::BodyHash
    };
    let session_token = head.single("x-amz-security-token")?.map(str::to_owned);
    let session_token_signed = signed_headers.iter().any(|h| h == "x-amz-security-token");
    Ok(Claim {
        form: Form::Header,
        access_key_id,
        scope,
        signed_headers,
        signature,
        date_time: date_time.to_owned(),
        time,
        expires: None,
        payload,
        session_token,
        session_token_signed,
    })
}

/// The presigned form.
fn from_query(params: &[(Cow<'_, str>, Cow<'_, str>)]) -> Result<Claim, Malformed> {
    let required = |name: &'static str| single_param(params, name)?.ok_or(Malformed::Missing(name));
    let (access_key_id, scope) = parse_credential(&required("X-Amz-Credential")?)?;
    let signed_headers = parse_signed_headers(&required("X-Amz-SignedHeaders")?)?;
    let signature = parse_signature(&required("X-Amz-Signature")?)?;
    let date_time = required("X-Amz-Date")?.into_owned();
    let time = parse_date_time(&date_time)?;
    let expires = required("X-Amz-Expires")?
        .parse::<u64>()
        .ok()
        .filter(|&e| (1..=MAX_EXPIRES).contains(&e))
        .ok_or(Malformed::Expires)?;
    let payload = if super::Canonicalization::for_service(&scope.service).double_encode {
        Payload::BodyHash
    } else {
        Payload::Unsigned
    };
    let session_token = single_param(params, "X-Amz-Security-Token")?.map(Cow::into_owned);
    Ok(Claim {
        form: Form::Query,
        access_key_id,
        scope,
        signed_headers,
        signature,
        date_time,
        time,
        expires: Some(expires),
        payload,
        session_token_signed: session_token.is_some(),
        session_token,
    })
}

/// `AKID/YYYYMMDD/REGION/SERVICE/aws4_request`.
fn parse_credential(credential: &str) -> Result<(String, Scope), Malformed> {
    let parts: Vec<&str> = credential.split('/').collect();
    let [key, date, region, service, "aws4_request"] = parts[..] else {
        return Err(Malformed::Credential);
    };
    let name_like = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if key.is_empty()
        || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        || date.len() != 8
        || !date.bytes().all(|b| b.is_ascii_digit())
        || !name_like(region)
        || !name_like(service)
    {
        return Err(Malformed::Credential);
    }
    Ok((
        key.to_owned(),
        Scope {
            date: date.to_owned(),
            region: region.to_owned(),
            service: service.to_owned(),
        },
    ))
}

/// `host;x-amz-date;…`: lowercase header names, strictly ascending (as canonicalisation
/// sorts them), `host` among them.
fn parse_signed_headers(signed: &str) -> Result<Vec<String>, Malformed> {
    let names: Vec<String> = signed.split(';').map(str::to_owned).collect();
    let token = |n: &String| {
        !n.is_empty()
            && n.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
            })
    };
    let ascending = names.windows(2).all(|w| w[0] < w[1]);
    if !names.iter().all(token)
        || !ascending
        || !names.iter().any(|n| n == "host")
        || names.iter().any(|n| n == "authorization")
    {
        return Err(Malformed::SignedHeaders);
    }
    Ok(names)
}

/// 64 lowercase hex digits.
fn parse_signature(signature: &str) -> Result<String, Malformed> {
    if is_hex_digest(signature) {
        Ok(signature.to_owned())
    } else {
        Err(Malformed::Signature)
    }
}

/// Whether `v` is a lowercase hex SHA-256.
pub(crate) fn is_hex_digest(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `YYYYMMDDTHHMMSSZ`, UTC.
pub(crate) fn parse_date_time(s: &str) -> Result<SystemTime, Malformed> {
    let b = s.as_bytes();
    let shaped = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    if !shaped {
        return Err(Malformed::Date);
    }
    let num = |range: std::ops::Range<usize>| s[range].parse::<u16>().map_err(|_| Malformed::Date);
    let month = time::Month::try_from(num(4..6)? as u8).map_err(|_| Malformed::Date)?;
    let date = time::Date::from_calendar_date(i32::from(num(0..4)?), month, num(6..8)? as u8)
        .map_err(|_| Malformed::Date)?;
    let clock = time::Time::from_hms(num(9..11)? as u8, num(11..13)? as u8, num(13..15)? as u8)
        .map_err(|_| Malformed::Date)?;
    Ok(time::PrimitiveDateTime::new(date, clock)
        .assume_utc()
        .into())
}

/// The query's parameters, percent-decoded, in order.
fn query_params(query: &str) -> Vec<(Cow<'_, str>, Cow<'_, str>)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

/// A percent-decoded query component (`+` is a plus: AWS clients encode spaces as `%20`).
fn decode(s: &str) -> Cow<'_, str> {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy()
}

/// The one value of the query parameter `name`.
fn single_param<'q>(
    params: &'q [(Cow<'q, str>, Cow<'q, str>)],
    name: &'static str,
) -> Result<Option<Cow<'q, str>>, Malformed> {
    let mut values = params.iter().filter(|(n, _)| n == name);
    let first = values.next();
    if values.next().is_some() {
        return Err(Malformed::Repeated(name));
    }
    Ok(first.map(|(_, v)| v.clone()))
}

/// The raw query without the presigned form's own parameters (`X-Amz-Algorithm`, …,
/// `X-Amz-Signature`), the others as sent and in their order: what is left of a presigned
/// URL once its signature is held out.
///
/// ```
/// use sluice_sign::aws_sigv4::without_signing_params;
/// let query = "versionId=3&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00";
/// assert_eq!(without_signing_params(query), "versionId=3");
/// ```
pub fn without_signing_params(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(n, _)| n);
            !SIGNING_PARAMS.iter().any(|p| decode(name) == *p)
        })
        .collect::<Vec<_>>()
        .join("&")
}
