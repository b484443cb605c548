//! AWS Signature Version 4: find the signature a request carries ([`Claim::find`]), check
//! that the placeholder key made it ([`Claim::verify`]), and sign the request again with the
//! real key ([`Verified::resign`]); for aws-chunked bodies, every chunk too ([`chunked`]).
//!
//! Both forms are covered: the `Authorization` header and the presigned query
//! (`X-Amz-Signature`). The canonical request, the string to sign and the HMAC chain are
//! `aws-sigv4`'s; this module only says which parts of the request the client signed, so
//! that the crate computes the signature over exactly those.
//!
//! It must never produce a signature by the real key over anything the placeholder key did
//! not sign: [`Verified::resign`] signs the same signed headers, the same scope and the same
//! `X-Amz-Date` the verified claim names, and a request whose signed headers the signer
//! would read differently is refused, not repaired.

pub mod chunked;
mod claim;
mod error;
mod key;
mod sign;
#[cfg(test)]
mod tests;

use std::fmt;

pub use claim::{Claim, Form, Head, Payload, Scope, without_signing_params};
pub use error::{Invalid, Malformed};
pub use sign::{Signed, Verified, sign_as_client};

use zeroize::Zeroizing;

/// One set of AWS credentials: the real ones, or the placeholders the sandbox holds for
/// them. Zeroized on drop; `Debug` prints none of it.
///
/// The identities `aws-sigv4` signs with are built here once, not per request.
#[derive(Clone)]
pub struct Credentials {
    access_key_id: Zeroizing<String>,
    session_token: Option<Zeroizing<String>>,
    /// Signing with the session token (when there is one), and without it.
    with_token: Option<Identity>,
    without_token: Identity,
    /// Chunk signing keys derived from this credential, shared by its clones.
    signing_keys: key::SigningKeys,
}

type Identity = aws_smithy_runtime_api::client::identity::Identity;

impl Credentials {
    /// The three parts of a credential (the session token only for temporary ones).
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        let access_key_id = Zeroizing::new(access_key_id.into());
        let secret_access_key = Zeroizing::new(secret_access_key.into());
        // aws-credential-types zeroizes what it holds, as this type does.
        let identity = |token: Option<&str>| -> Identity {
            aws_credential_types::Credentials::new(
                access_key_id.as_str(),
                secret_access_key.as_str(),
                token.map(str::to_owned),
                None,
                "sluice",
            )
            .into()
        };
        let with_token = session_token.as_deref().map(|token| identity(Some(token)));
        let without_token = identity(None);
        Self {
            with_token,
            without_token,
            session_token: session_token.map(Zeroizing::new),
            access_key_id,
            signing_keys: key::SigningKeys::default(),
        }
    }

    /// The access key id.
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The session token, for temporary credentials.
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref().map(String::as_str)
    }

    /// The identity `aws-sigv4` signs with: with this credential's session token, or none.
    /// A verification signs with the token the request carried, which it has checked is
    /// this credential's own.
    fn identity(&self, session_token: Option<&str>) -> &Identity {
        debug_assert!(session_token.is_none() || session_token == self.session_token());
        match (session_token, &self.with_token) {
            (Some(_), Some(with_token)) => with_token,
            _ => &self.without_token,
        }
    }
}

impl Credentials {
    /// The signing key for `time`'s date, `region` and `service`, derived once.
    fn signing_key(
        &self,
        time: std::time::SystemTime,
        scope: &Scope,
    ) -> std::sync::Arc<key::SigningKey> {
        let secret = self
            .without_token
            .data::<aws_credential_types::Credentials>()
            .map_or("", aws_credential_types::Credentials::secret_access_key);
        let name = format!("{}/{}/{}", scope.date, scope.region, scope.service);
        self.signing_keys
            .get(secret, time, &name, &scope.region, &scope.service)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

/// How a service reads the request's path when it checks a signature: S3 signs the path as
/// sent; every other service normalises it and encodes it once more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Canonicalization {
    /// Remove dot segments and repeated slashes before signing.
    pub normalize_path: bool,
    /// Percent-encode the (already encoded) path again.
    pub double_encode: bool,
}

impl Canonicalization {
    /// S3's rule (`s3`, `s3-object-lambda`, `s3-outposts`, `s3express`: the path as sent),
    /// or everyone else's.
    pub fn for_service(service: &str) -> Self {
        let s3 = service == "s3" || service == "s3express" || service.starts_with("s3-");
        Self {
            normalize_path: !s3,
            double_encode: !s3,
        }
    }
}

/// The lowercase hex SHA-256 of `bytes`: the payload hash of a body.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
