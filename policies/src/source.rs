//! Reading each secret's real value at launch, from the environment, a file, or the
//! declaration's literal, and checking it before the guard is built.
//!
//! Values go straight into zeroizing buffers; errors name the secret, never the value.

use std::fmt;

use sluice_guard::{Guard, MIN_VALUE_LEN, Placeholder, SecretValue};
use zeroize::Zeroizing;

use crate::error::SourceError;
use crate::model::{Place, SecretDecl, Sink, Source};
use crate::placeholder::Placeholders;
use crate::policy::Policy;
use crate::validate::header_unfit_byte;

/// One secret ready for the guard: name, this run's placeholder, and the real value.
///
/// `Debug` prints the name and placeholder only.
pub struct ResolvedSecret {
    /// The secret's name.
    pub name: String,
    /// This run's placeholder.
    pub placeholder: String,
    /// The real value, zeroized on drop.
    pub value: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for ResolvedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedSecret")
            .field("name", &self.name)
            .field("placeholder", &self.placeholder)
            .field("value", &"<redacted>")
            .finish()
    }
}

impl Policy {
    /// Reads every secret's value: `env` from the process environment (bytes as they are),
    /// `file` with one trailing newline (`\n` or `\r\n`) trimmed, `value` as written; then
    /// checks each is at least [`MIN_VALUE_LEN`] bytes and, where the secret may be swapped into a header,
    /// free of CR, LF and NUL.
    ///
    /// # Errors
    ///
    /// The first [`SourceError`], naming the secret and never its value.
    pub fn resolve(&self, placeholders: &Placeholders) -> Result<Vec<ResolvedSecret>, SourceError> {
        let mut out = Vec::with_capacity(self.secrets.len());
        for secret in &self.secrets {
            let value = read_value(secret)?;
            let name = secret.name.clone();
            let Some(placeholder) = placeholders.get(&name) else {
                return Err(SourceError::NoPlaceholder { secret: name });
            };
            out.push(ResolvedSecret {
                placeholder: placeholder.to_owned(),
                name,
                value,
            });
        }
        Ok(out)
    }

    /// Reads every secret's value, as [`Policy::resolve`] does, and mints this run's
    /// placeholders with them: a secret `earlier` has a placeholder for keeps it (the sandbox
    /// holds it), a fixed `placeholder:` is itself, and every other is minted as
    /// [`Policy::try_mint_placeholders_after`] mints it, except that a value in a well-known
    /// format (or any value, under `placeholder: shaped`) gets a placeholder of its shape
    /// ([`crate::shape`]). The value is read for its shape only.
    ///
    /// # Errors
    ///
    /// The first [`SourceError`]; [`SourceError::Random`] when the random source fails.
    pub fn resolve_minting(
        &self,
        earlier: &Placeholders,
    ) -> Result<(Placeholders, Vec<ResolvedSecret>), SourceError> {
        let mut out: Vec<ResolvedSecret> = Vec::with_capacity(self.secrets.len());
        for secret in &self.secrets {
            let value = read_value(secret)?;
            let placeholder = match (secret.fixed_placeholder(), earlier.get(&secret.name)) {
                (Some(fixed), _) => fixed.to_owned(),
                (None, Some(kept)) => kept.to_owned(),
                (None, None) => loop {
                    // Unique in the run and never the value: a draw that collides (as good
                    // as impossible at 64 random bits) is drawn again.
                    let minted = crate::placeholder::mint_one(secret, Some(&value))?;
                    if minted.as_bytes() != value.as_slice()
                        && out.iter().all(|o| o.placeholder != minted)
                    {
                        break minted;
                    }
                },
            };
            out.push(ResolvedSecret {
                name: secret.name.clone(),
                placeholder,
                value,
            });
        }
        let placeholders = out
            .iter()
            .map(|r| (r.name.clone(), r.placeholder.clone()))
            .collect();
        Ok((placeholders, out))
    }
}

impl Policy {
    /// Reads every secret's value ([`Policy::resolve`]) and builds the run's guard over
    /// the placeholders and values, in declaration order (so a secret's
    /// [`sluice_guard::SecretId`] index is its index in [`Policy::secrets`]).
    ///
    /// # Errors
    ///
    /// The first [`SourceError`]; [`SourceError::Guard`] when the guard refuses the
    /// entries (it names the secret, never the value).
    pub fn build_guard(&self, placeholders: &Placeholders) -> Result<Guard, SourceError> {
        Self::guard_of(self.resolve(placeholders)?)
    }

    /// The guard over secrets already resolved ([`Policy::resolve`]), in their order: for a
    /// caller that needs some values itself too (the proxy's re-signer), so that each
    /// source is read once.
    ///
    /// # Errors
    ///
    /// [`SourceError::Guard`] when the guard refuses the entries.
    pub fn guard_of(resolved: Vec<ResolvedSecret>) -> Result<Guard, SourceError> {
        let mut builder = Guard::builder();
        for mut secret in resolved {
            let placeholder = Placeholder::parse(&secret.placeholder)?;
            let value = SecretValue::new(std::mem::take(&mut *secret.value));
            builder.add(secret.name.clone(), placeholder, value)?;
        }
        Ok(builder.build()?)
    }
}

#[cfg(unix)]
fn os_bytes(v: std::ffi::OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStringExt;
    v.into_vec()
}

#[cfg(not(unix))]
fn os_bytes(v: std::ffi::OsString) -> Vec<u8> {
    v.to_string_lossy().into_owned().into_bytes()
}

/// A file's bytes, in a buffer sized from its length before reading: one grown by
/// reallocation would leave earlier copies of the value in freed memory. (A file that
/// grows while it is read still reallocates; a secret file does not.)
fn read_whole(path: &std::path::Path) -> std::io::Result<Zeroizing<Vec<u8>>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut bytes = Zeroizing::new(Vec::with_capacity(usize::try_from(len).unwrap_or(0) + 1));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// One secret's value, read from its source and checked: at least [`MIN_VALUE_LEN`] bytes,
/// printable ASCII for a signing part, free of CR, LF and NUL where it may be swapped into a
/// header.
fn read_value(secret: &SecretDecl) -> Result<Zeroizing<Vec<u8>>, SourceError> {
    let name = secret.name.clone();
    let value = secret.source.read(&name)?;
    if value.len() < MIN_VALUE_LEN {
        return Err(SourceError::TooShort {
            secret: name,
            len: value.len(),
            min: MIN_VALUE_LEN,
        });
    }
    // A signing part is written into a header by the re-signer (the key id in
    // `Authorization`, the token in `x-amz-security-token`): printable ASCII only.
    if secret.signs.is_some() && !value.iter().all(u8::is_ascii_graphic) {
        return Err(SourceError::UnfitForSigning { secret: name });
    }
    if secret.grants(Sink::Egress)
        && secret.locations.contains(&Place::Header)
        && let Some(byte) = header_unfit_byte(&value)
    {
        return Err(SourceError::UnfitForHeader { secret: name, byte });
    }
    Ok(value)
}

impl Source {
    /// Reads this source's bytes for secret `name` (named in errors, never the value):
    /// `env` as they are, `file` with one trailing newline trimmed, `command`'s stdout less
    /// one trailing newline, a literal as written; for [`Source::Minted`], a stand-in of 32
    /// random bytes (hex) that no one holds, in the guard until the first token is minted
    /// (the proxy mints before it swaps, so the stand-in is never sent).
    ///
    /// # Errors
    ///
    /// The [`SourceError`] of the source, naming `name`.
    pub fn read(&self, name: &str) -> Result<Zeroizing<Vec<u8>>, SourceError> {
        let name = name.to_owned();
        Ok(match self {
            Source::Env(var) => match std::env::var_os(var) {
                Some(v) => Zeroizing::new(os_bytes(v)),
                None => {
                    return Err(SourceError::EnvMissing {
                        secret: name,
                        var: var.clone(),
                    });
                }
            },
            Source::File(path) => {
                let mut bytes = read_whole(path).map_err(|e| SourceError::FileUnreadable {
                    secret: name.clone(),
                    path: path.clone(),
                    kind: e.kind(),
                })?;
                if bytes.last() == Some(&b'\n') {
                    bytes.pop();
                    if bytes.last() == Some(&b'\r') {
                        bytes.pop();
                    }
                }
                bytes
            }
            Source::Command(argv) => {
                crate::command::run(&name, argv, crate::command::COMMAND_TIMEOUT)?
            }
            Source::Literal(lit) => Zeroizing::new(lit.0.to_vec()),
            Source::Minted => {
                let mut random = Zeroizing::new([0u8; 32]);
                getrandom::fill(&mut *random).map_err(crate::random::MintError)?;
                Zeroizing::new(format!("sluice-unminted-{}", hex::encode(*random)).into_bytes())
            }
        })
    }
}
