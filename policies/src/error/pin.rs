//! Every way a secret's `pin:` can be wrong, with the one-line fix for each. Carried to the
//! writer inside [`crate::Problem::Pin`], at the entry's line and column.

/// How to print a pin, for every fix that asks for one.
const HOW_TO_PIN: &str = "openssl x509 -in CERT.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64";

/// A `pin:` that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PinProblem {
    /// `pin: []`: no connection could ever receive the secret.
    #[error("an empty pin list would swap the secret into no connection")]
    Empty,
    /// An entry that does not start with `sha256/`.
    #[error("pin `{found}` does not start with `sha256/`; only SHA-256 SPKI pins are supported")]
    Prefix {
        /// The entry as written.
        found: String,
    },
    /// `sha256/` followed by something other than the standard base64 of 32 bytes.
    #[error("pin `{found}` is not `sha256/` and the standard base64 of a 32-byte hash")]
    Hash {
        /// The entry as written.
        found: String,
    },
    /// `pin:` on a signing secret.
    #[error("secret {secret} signs requests (sign:), and pins do not apply to signing secrets yet")]
    OnSigningSecret {
        /// The secret's name.
        secret: String,
    },
}

impl PinProblem {
    /// Its stable code (`pin-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            PinProblem::Empty => "pin-empty",
            PinProblem::Prefix { .. } => "pin-prefix",
            PinProblem::Hash { .. } => "pin-hash",
            PinProblem::OnSigningSecret { .. } => "pin-on-signing-secret",
        }
    }
}

impl PinProblem {
    /// How to fix it, in one line.
    pub fn help(&self) -> String {
        match self {
            PinProblem::Empty => "list at least one `sha256/...` pin, or remove `pin:`".into(),
            PinProblem::Prefix { .. } | PinProblem::Hash { .. } => {
                format!(
                    "write `sha256/` and the base64 of the key's SHA-256, as `{HOW_TO_PIN}` prints it"
                )
            }
            PinProblem::OnSigningSecret { .. } => "remove `pin:`".into(),
        }
    }
}
