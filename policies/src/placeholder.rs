//! Per-run placeholders: `SLUICE_<NAME>_<nonce>` for each secret without a fixed
//! `placeholder:`, the nonce drawn from the operating system's random source, or a
//! placeholder shaped like the value ([`crate::shape`]) when minted with it
//! ([`Policy::resolve_minting`]).
//!
//! A placeholder is not a secret; this module takes a value's shape, never the value.

use crate::model::{PlaceholderForm, SecretDecl, SigningPart, placeholder_name};
use crate::policy::Policy;
use crate::random::{MintError, random_chars};
use crate::shape::Shape;

/// Random bytes per minted nonce: 96 bits, above the 64 the contract asks.
pub const NONCE_BYTES: usize = 12;

/// An access key id placeholder is shaped like a real one, 20 characters of `[A-Z0-9]`
/// (`SLUICE` and 14 random ones: 72 bits), so that every SDK takes it.
const ACCESS_KEY_ID_CHARS: usize = 14;
/// A secret access key placeholder is 40 characters, as a real one is (`SLUICE_` and 33
/// random ones of `[A-Za-z0-9]`: 196 bits).
const SECRET_KEY_CHARS: usize = 33;
const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The placeholders of one run, one per secret, in declaration order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholders {
    entries: Vec<(String, String)>,
}

impl Placeholders {
    /// The placeholder of the secret named `secret`.
    pub fn get(&self, secret: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(name, _)| name == secret)
            .map(|(_, p)| p.as_str())
    }

    /// `(secret name, placeholder)` pairs, in declaration order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.entries.iter().map(|(n, p)| (n.as_str(), p.as_str()))
    }

    /// How many placeholders there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Placeholders a run has handed out, for [`Policy::try_mint_placeholders_after`]: a proxy
/// that reloads keeps those of every secret it has known, declared now or not.
impl FromIterator<(String, String)> for Placeholders {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        Self {
            entries: pairs.into_iter().collect(),
        }
    }
}

impl Policy {
    /// Mints this run's placeholders: the fixed `placeholder:` where the declaration gives
    /// one, otherwise `SLUICE_<NAME>_<nonce>` with NAME the secret's name uppercased and
    /// every character outside `[A-Za-z0-9_]` turned into `_`, and the nonce
    /// [`NONCE_BYTES`] random bytes in lowercase hex, drawn anew for each secret and run.
    ///
    /// # Errors
    ///
    /// [`MintError`] when the operating system's random source fails.
    pub fn try_mint_placeholders(&self) -> Result<Placeholders, MintError> {
        self.try_mint_placeholders_after(&Placeholders {
            entries: Vec::new(),
        })
    }

    /// The placeholders of a reloaded declaration: a secret `earlier` already has a
    /// placeholder for keeps it (the sandbox holds it; it must go on meaning the same
    /// secret), unless the declaration now fixes another with `placeholder:`; every other
    /// secret gets one minted as [`Policy::try_mint_placeholders`] does.
    ///
    /// # Errors
    ///
    /// [`MintError`] when the operating system's random source fails.
    pub fn try_mint_placeholders_after(
        &self,
        earlier: &Placeholders,
    ) -> Result<Placeholders, MintError> {
        let mut entries = Vec::with_capacity(self.secrets.len());
        for secret in &self.secrets {
            let placeholder = match (secret.fixed_placeholder(), earlier.get(&secret.name)) {
                (Some(fixed), _) => fixed.to_owned(),
                (None, Some(kept)) => kept.to_owned(),
                (None, None) => mint_one(secret, None)?,
            };
            entries.push((secret.name.clone(), placeholder));
        }
        Ok(Placeholders { entries })
    }

    /// Like [`Policy::try_mint_placeholders`].
    ///
    /// # Panics
    ///
    /// When the operating system's random source fails; a run cannot go on without it.
    pub fn mint_placeholders(&self) -> Placeholders {
        self.try_mint_placeholders()
            .expect("the operating system's random source must work to mint placeholders")
    }
}

/// A fresh placeholder for `secret`, shaped as its kind needs: an AWS access key id's and
/// secret key's the way SDKs accept them; `value`'s shape where its `placeholder:` form asks
/// for one and `value` has one ([`Shape::known`] by default, [`Shape::of_value`] under
/// `shaped`); every other `SLUICE_<NAME>_<nonce>`. Without `value` (minting before the
/// values are read), never shaped.
pub(crate) fn mint_one(secret: &SecretDecl, value: Option<&[u8]>) -> Result<String, MintError> {
    let shape = match (secret.placeholder_form(), value) {
        _ if secret.signs.is_some() => None,
        (PlaceholderForm::Default, Some(value)) => Shape::known(value),
        (PlaceholderForm::Shaped, Some(value)) => Shape::of_value(value),
        (PlaceholderForm::Like(sample), _) => Shape::known(sample.as_bytes()),
        _ => None,
    };
    if let Some(shape) = shape {
        return shape.mint();
    }
    Ok(match secret.signs {
        Some((_, SigningPart::AccessKeyId)) => {
            format!("SLUICE{}", random_chars(ACCESS_KEY_ID_CHARS, UPPER_ALNUM)?)
        }
        Some((_, SigningPart::SecretAccessKey)) => {
            format!("SLUICE_{}", random_chars(SECRET_KEY_CHARS, ALNUM)?)
        }
        _ => {
            let mut nonce = [0u8; NONCE_BYTES];
            getrandom::fill(&mut nonce).map_err(MintError)?;
            format!(
                "SLUICE_{}_{}",
                placeholder_name(&secret.name),
                hex::encode(nonce)
            )
        }
    })
}
