//! What a decision standing for the run on a secret is made about (docs/approvals.md): a
//! digest of where its value comes from and which of its uses wait, worked out once per
//! declaration ([`crate::Policy::approval_basis`]). It never holds or shows a value: a
//! literal goes into a digest keyed per process, and its `Debug` prints nothing.

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::approve::Approve;
use crate::mint::{ClientId, MinterDecl};
use crate::model::{SecretDecl, Source};

/// What a decision standing for the run on a secret was made about: a digest of where its
/// value comes from and which of its uses wait (see [`crate::Policy::approval_basis`]).
///
/// Keyed with a key drawn once per process, so it compares within a run and means nothing
/// outside it: a literal `value:` goes into it, and cannot be guessed back from it. Its
/// `Debug` shows none of it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ApprovalBasis([u8; 32]);

impl fmt::Debug for ApprovalBasis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApprovalBasis(..)")
    }
}

/// Any 32 bytes: for tests that need two bases apart.
impl From<[u8; 32]> for ApprovalBasis {
    fn from(bytes: [u8; 32]) -> Self {
        ApprovalBasis(bytes)
    }
}

/// The process's key for [`ApprovalBasis`]: from the operating system's random source, or
/// (should that fail) from the per-process keys std's hash maps draw as they can.
fn process_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            use std::hash::{BuildHasher, Hasher};
            for (i, chunk) in key.chunks_mut(8).enumerate() {
                let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
                hasher.write_usize(i);
                chunk.copy_from_slice(&hasher.finish().to_le_bytes());
            }
        }
        key
    })
}

/// The [`ApprovalBasis`] of `secret`, one of `secrets`: where its value comes from (for a
/// minted secret: the minter's token endpoint, grant, client, scopes, audience, App and
/// body, and where each part of its grant comes from) and its `approve:` (its methods in
/// any order). Where, not what: a value read again from the same place (a rotation, or
/// another account's token written to the same file) does not change it; a literal
/// `value:` is its own place, so an edited literal does.
pub(crate) fn basis(
    secret: &SecretDecl,
    secrets: &[SecretDecl],
    minters: &[MinterDecl],
) -> ApprovalBasis {
    let mut digest = Sha256::new();
    field(&mut digest, process_key());
    match secret.mints.and_then(|(index, _)| minters.get(index)) {
        Some(minter) => {
            field(&mut digest, b"minted");
            field(&mut digest, minter.name.as_bytes());
            field(&mut digest, minter.token_url.url.as_bytes());
            // Words, names and numbers, none secret: their Debug text says each apart.
            field(&mut digest, format!("{:?}", minter.grant).as_bytes());
            match &minter.client_id {
                Some(ClientId::Literal(id)) => {
                    field(&mut digest, b"client id");
                    field(&mut digest, id.as_bytes());
                }
                Some(ClientId::Source(source)) => {
                    field(&mut digest, b"client id from");
                    put_source(&mut digest, source);
                }
                None => field(&mut digest, b"no client id"),
            }
            field(&mut digest, format!("{:?}", minter.scopes).as_bytes());
            field(&mut digest, format!("{:?}", minter.audience).as_bytes());
            field(&mut digest, format!("{:?}", minter.github).as_bytes());
            field(&mut digest, format!("{:?}", minter.body).as_bytes());
            for (part, index) in &minter.parts {
                field(&mut digest, format!("{part:?}").as_bytes());
                if let Some(part) = secrets.get(*index) {
                    put_source(&mut digest, &part.source);
                }
            }
        }
        None => put_source(&mut digest, &secret.source),
    }
    match &secret.approve {
        None => field(&mut digest, b"no approve"),
        Some(Approve::All) => field(&mut digest, b"approve all"),
        Some(Approve::Methods(methods)) => {
            field(&mut digest, b"approve methods");
            let mut methods: Vec<&String> = methods.iter().collect();
            methods.sort();
            for method in methods {
                field(&mut digest, method.as_bytes());
            }
        }
    }
    ApprovalBasis(digest.finalize().into())
}

fn put_source(digest: &mut Sha256, source: &Source) {
    match source {
        Source::Env(var) => {
            field(digest, b"env");
            field(digest, var.as_bytes());
        }
        Source::File(path) => {
            field(digest, b"file");
            field(digest, path.as_os_str().as_bytes());
        }
        Source::Command(argv) => {
            field(digest, b"command");
            field(digest, &(argv.len() as u64).to_le_bytes());
            for arg in argv {
                field(digest, arg.as_bytes());
            }
        }
        Source::Literal(literal) => {
            field(digest, b"value");
            field(digest, &literal.0);
        }
        Source::Minted => field(digest, b"minted part"),
    }
}

/// One field, prefixed with its length, so that no two sequences of fields digest alike.
fn field(digest: &mut Sha256, bytes: &[u8]) {
    digest.update((bytes.len() as u64).to_le_bytes());
    digest.update(bytes);
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    fn basis(secret: &str) -> Option<super::ApprovalBasis> {
        let yaml = format!(
            "version: 1\nsecrets:\n  gh:\n{secret}    hosts: [api.github.com]\n  plain:\n    from: {{ env: PLAIN }}\n    hosts: [api.github.com]\n"
        );
        let policy = Policy::parse(&yaml, "policy.yaml").unwrap().policy;
        assert_eq!(
            policy.approval_basis("plain"),
            None,
            "no approve:, no basis"
        );
        policy.approval_basis("gh")
    }

    #[test]
    fn the_basis_changes_with_the_credential_or_the_uses_that_wait_and_nothing_else() {
        let file = basis("    from: { file: /run/gh }\n    approve: [DELETE]\n");
        assert!(file.is_some());
        assert_eq!(
            file,
            basis("    from: { file: /run/gh }\n    approve: [DELETE]\n")
        );
        let others = [
            "    from: { file: /run/other }\n    approve: [DELETE]\n",
            "    from: { env: GH }\n    approve: [DELETE]\n",
            "    from: { command: [cat, /run/gh] }\n    approve: [DELETE]\n",
            "    from: { file: /run/gh }\n    approve: [DELETE, POST]\n",
            "    from: { file: /run/gh }\n    approve: all\n",
        ];
        for other in others {
            assert_ne!(file, basis(other), "{other}");
        }
        // The same methods in another order are the same uses.
        assert_eq!(
            basis("    from: { file: /run/gh }\n    approve: [POST, DELETE]\n"),
            basis("    from: { file: /run/gh }\n    approve: [DELETE, POST]\n")
        );
        let literal = |value: &str| basis(&format!("    value: {value}\n    approve: all\n"));
        assert_eq!(
            literal("ghp_0123456789abcdef"),
            literal("ghp_0123456789abcdef")
        );
        assert_ne!(
            literal("ghp_0123456789abcdef"),
            literal("ghp_fedcba9876543210")
        );
        // Keyed per process, and shown by nothing.
        let shown = format!("{:?}", literal("ghp_0123456789abcdef"));
        assert_eq!(shown, "Some(ApprovalBasis(..))");
    }
}
