//! Random characters for placeholders, from the operating system's random source.
//!
//! Shared by per-run placeholders ([`crate::Policy::try_mint_placeholders`]) and shaped
//! ones (the `shape` module); it never sees a secret value.

/// Why placeholders could not be minted.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct MintError(pub(crate) getrandom::Error);

/// `n` characters drawn uniformly from `alphabet` (rejection sampling: no modulo bias).
pub(crate) fn random_chars(n: usize, alphabet: &[u8]) -> Result<String, MintError> {
    let limit = 256 - 256 % alphabet.len();
    let mut out = String::with_capacity(n);
    let mut buf = [0u8; 64];
    while out.len() < n {
        getrandom::fill(&mut buf).map_err(MintError)?;
        for &b in &buf {
            if out.len() < n && usize::from(b) < limit {
                out.push(char::from(alphabet[usize::from(b) % alphabet.len()]));
            }
        }
    }
    Ok(out)
}
