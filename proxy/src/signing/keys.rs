//! The signing secrets' credentials per generation: the placeholder key the sandbox signs
//! with and the real key sluice signs with, side by side. Only [`super::verify()`] and
//! [`super::Pending::resign`] read them; nothing here writes a key anywhere.

use sluice_policies::{Policy, ResolvedSecret, SigningPart};
use sluice_sign::aws_sigv4::Credentials;

/// Each signing secret's two credentials: the placeholders the sandbox signs with, and the
/// real ones sluice signs with. Indexed as [`Policy::signers`].
#[derive(Default)]
pub(crate) struct Signers {
    pub(super) keys: Vec<Keys>,
}

pub(super) struct Keys {
    pub(super) name: String,
    pub(super) placeholder: Credentials,
    pub(super) real: Credentials,
}

impl Signers {
    /// The credentials of every signer in `policy`, from its parts' values and placeholders
    /// (`resolved`, in [`Policy::secrets`] order).
    pub(crate) fn new(policy: &Policy, resolved: &[ResolvedSecret]) -> Self {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let keys = policy
            .signers()
            .iter()
            .map(|signer| {
                let part = |p: SigningPart| signer.part(p).map(|i| &resolved[i]);
                let both =
                    |p: SigningPart| part(p).map(|r| (r.placeholder.clone(), text(&r.value)));
                let (key_ph, key) = both(SigningPart::AccessKeyId).unwrap_or_default();
                let (secret_ph, secret) = both(SigningPart::SecretAccessKey).unwrap_or_default();
                let token = both(SigningPart::SessionToken);
                Keys {
                    name: signer.name().to_owned(),
                    placeholder: Credentials::new(
                        key_ph,
                        secret_ph,
                        token.as_ref().map(|(ph, _)| ph.clone()),
                    ),
                    real: Credentials::new(key, secret, token.map(|(_, value)| value)),
                }
            })
            .collect();
        Self { keys }
    }

    /// Whether no secret signs.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The signer whose placeholder access key id is `key_id`.
    pub(super) fn by_key_id(&self, key_id: &str) -> Option<usize> {
        self.keys
            .iter()
            .position(|k| k.placeholder.access_key_id() == key_id)
    }

    /// The signer whose placeholder key id `text` holds, if any.
    pub(super) fn named_in(&self, text: &str) -> Option<usize> {
        self.keys
            .iter()
            .position(|k| text.contains(k.placeholder.access_key_id()))
    }
}
