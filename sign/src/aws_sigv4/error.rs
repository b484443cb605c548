//! Why a signature was not read, or not accepted. Each message says what is wrong in words
//! a client's author can act on, and holds no key, token or signature.

/// A SigV4 signature that cannot be read exactly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// The `Authorization` header is not `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
    /// Signature=…`, each component once.
    #[error(
        "the Authorization header is not `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`"
    )]
    Authorization,
    /// A header or parameter the signature relies on is given more than once.
    #[error("`{0}` is given more than once")]
    Repeated(&'static str),
    /// A presigned URL lacks one of its parameters.
    #[error("the presigned URL has no `{0}`")]
    Missing(&'static str),
    /// The credential is not `KEY/YYYYMMDD/REGION/SERVICE/aws4_request`.
    #[error("the credential scope is not `KEY/YYYYMMDD/REGION/SERVICE/aws4_request`")]
    Credential,
    /// The signed headers are not lowercase names in order, with `host` among them.
    #[error("the signed headers are not lowercase names in ascending order including `host`")]
    SignedHeaders,
    /// The signature is not 64 lowercase hex digits.
    #[error("the signature is not 64 lowercase hex digits")]
    Signature,
    /// `X-Amz-Date` is missing or not `YYYYMMDDTHHMMSSZ`.
    #[error("X-Amz-Date is missing or not `YYYYMMDDTHHMMSSZ`")]
    Date,
    /// `X-Amz-Expires` is not a number of seconds from 1 to 604800.
    #[error("X-Amz-Expires is not a number of seconds from 1 to 604800")]
    Expires,
    /// `x-amz-content-sha256` is signed but missing, or neither a digest nor a known marker.
    #[error(
        "x-amz-content-sha256 is missing or neither a SHA-256 digest nor a known payload marker"
    )]
    PayloadHash,
    /// The body's hash is signed, and the body was not given.
    #[error("the signature covers the body's hash, and the body was not read")]
    BodyNeeded,
}

/// A signature that was read, and is not the placeholder key's, or cannot be re-signed as
/// it stands.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// The access key id is not the one these credentials hold.
    #[error("the request is signed with another access key id")]
    AccessKeyId,
    /// The request carries a session token these credentials do not hold.
    #[error("the request carries a session token that is not this secret's placeholder")]
    SessionToken,
    /// The secret has a session token and the request carries none (or the reverse).
    #[error(
        "the request carries no session token, and this secret's credentials need one: set AWS_SESSION_TOKEN to its placeholder"
    )]
    SessionTokenMissing,
    /// The scope's date is not the date of `X-Amz-Date`.
    #[error("the credential scope's date is not the date of X-Amz-Date")]
    ScopeDate,
    /// A signed header is not in the request.
    #[error("the signed header `{0}` is not in the request")]
    MissingHeader(String),
    /// The signed headers are not those the signer would sign (`x-amz-date` unsigned, say).
    #[error(
        "the signed headers are not the set SigV4 signs for this request (x-amz-date and the session token must be signed)"
    )]
    SignedHeaders,
    /// The signature does not verify with the placeholder key.
    #[error("the signature does not verify with this secret's placeholder key")]
    Mismatch,
    /// The signer refused the request (a header value it cannot canonicalise, say).
    #[error("the request cannot be signed: {0}")]
    Unsignable(String),
}
