//! The declaration in force, and replacing it while the proxy runs (`SIGHUP`,
//! `POST /reload`).
//!
//! A [`Declared`] is one generation: the compiled declaration, its guard and signers, the
//! placeholders. [`Live`] holds the one in force. A reload reads and checks the file again,
//! re-reads every source, builds the next generation whole, off the request path, and puts
//! it in force at once; a connection takes the generation in force when it is accepted and
//! keeps it until it closes (`Shared::current`), so every check of one request, and every
//! request of one tunnel, is made under one generation.
//!
//! # What it must never do
//!
//! - Forget a value. Every value the run has known is in every later guard: as a retired
//!   value of its secret (redacted into the same placeholder, refused outbound, never
//!   swapped in), or, once its declaration is gone, as a redact-only secret under its old
//!   name and placeholder. A rotated or removed credential that comes back is caught.
//! - Put a half-built generation in force. A declaration that fails `check`, a source that
//!   fails, a guard that cannot be built, a host the run CA's name constraints do not
//!   cover: the reload is refused, with the reason, and the generation in force stays.
//! - Change a placeholder the sandbox holds: a secret still declared keeps its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use sluice_ca::RunCa;
use sluice_guard::{Guard, Placeholder, SecretValue};
use sluice_policies::{
    DeclarationFile, Diagnostics, Placeholders, Policy, ResolvedSecret, SourceError,
};
use zeroize::Zeroizing;

use crate::signing::Signers;

/// One generation of the declaration: what a reload replaces whole.
pub(crate) struct Declared {
    pub(crate) policy: Arc<Policy>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) signers: Arc<Signers>,
    pub(crate) placeholders: Placeholders,
    /// 0 at start, one more at each reload put in force.
    pub(crate) generation: u64,
    /// The SHA-256 of what the guard was built from (`GuardInput`): a reload whose
    /// secrets, placeholders and values are all unchanged keeps the guard.
    guard_input: [u8; 32],
    /// The SHA-256 of the declaration file's bytes this generation was parsed from (none
    /// for the first: its file was read by whoever started the proxy, maybe before a
    /// change): a reload of the same bytes keeps the policy, parsed and checked already.
    file_digest: Option<[u8; 32]>,
}

/// Why a reload was refused (the generation in force stays). Never holds a value: the
/// declaration's diagnostics quote positions and keys, sources name secrets and files.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The proxy was started without a declaration file to read again.
    #[error("this proxy was started without a declaration file; nothing to reload")]
    NoFile,
    /// The declaration does not pass `sluice check`: its first diagnostic.
    #[error("{first}")]
    Declaration {
        /// The first diagnostic's first line.
        first: String,
        /// The SHA-256 of the file read, when it could be read.
        sha256: Option<String>,
    },
    /// A secret's source could not be read, or its value not guarded.
    #[error("{0}")]
    Secret(#[from] SourceError),
    /// A host the new declaration intercepts lies outside the run CA's name constraints,
    /// fixed when it was minted (the sandbox trusts that certificate only).
    #[error(
        "host {pattern} is outside the run CA's name constraints, fixed at start; restart sluice to intercept it"
    )]
    Uncovered {
        /// The host pattern.
        pattern: String,
    },
    /// A minted secret's key file cannot sign (it names what is wrong, never a value).
    #[error("{0}")]
    MintKey(String),
    /// The new declaration asks for what this run cannot serve (its words say what).
    #[error("{0}")]
    Unserved(String),
    /// No randomness for a new secret's placeholder.
    #[error("{0}")]
    Random(#[from] sluice_policies::MintError),
}

/// Every value the run has known, per secret (by name), with the placeholder it had; and
/// the value in force of every minted part, which no source holds.
#[derive(Default, Clone)]
struct Known {
    secrets: BTreeMap<String, KnownSecret>,
    /// The access token and rotated refresh token in force, per secret: what a generation
    /// puts in the guard instead of what the source says (a stand-in, or a refresh token
    /// the provider has since rotated).
    minted: BTreeMap<String, Zeroizing<Vec<u8>>>,
}

#[derive(Clone)]
struct KnownSecret {
    placeholder: String,
    values: Vec<Zeroizing<Vec<u8>>>,
}

impl Known {
    /// Replaces the value of every minted part in `resolved` by the one in force.
    fn overlay(&self, resolved: &mut [ResolvedSecret]) {
        for secret in resolved {
            if let Some(value) = self.minted.get(&secret.name) {
                secret.value = value.clone();
            }
        }
    }

    /// Remembers `value` as one `name` has had, redacted into its placeholder for the rest
    /// of the run (a token replaced, an id token that came with one).
    fn remember(&mut self, name: &str, value: &[u8]) {
        if let Some(known) = self.secrets.get_mut(name)
            && known.values.iter().all(|v| **v != *value)
        {
            known.values.push(Zeroizing::new(value.to_vec()));
        }
    }

    /// Remembers what `resolved` holds.
    fn learn(&mut self, resolved: &[ResolvedSecret]) {
        for secret in resolved {
            match self.secrets.get_mut(&secret.name) {
                Some(known) => {
                    if known.values.iter().all(|v| **v != *secret.value) {
                        known.values.push(secret.value.clone());
                    }
                    known.placeholder.clone_from(&secret.placeholder);
                }
                None => {
                    self.secrets.insert(
                        secret.name.clone(),
                        KnownSecret {
                            placeholder: secret.placeholder.clone(),
                            values: vec![secret.value.clone()],
                        },
                    );
                }
            }
        }
    }
}

/// The generation in force, and how to build the next.
pub(crate) struct Live {
    current: ArcSwap<Declared>,
    /// Held for the whole of a reload: one at a time, and the known values with it.
    known: Mutex<Known>,
    /// The declaration file a reload reads, when the proxy was started from one.
    path: Option<PathBuf>,
    /// The generation in force, for whoever follows reloads (the run directory's files).
    announce: tokio::sync::watch::Sender<u64>,
    /// What whoever started the proxy cannot serve in a reloaded declaration (a launcher
    /// cannot hand a new value to a command already running): such a reload is refused.
    pub(crate) gate: Option<crate::config::ReloadGate>,
}

impl Live {
    /// The first generation: `policy` with placeholders minted for this run, every source
    /// read once.
    pub(crate) fn start(policy: Policy, path: Option<PathBuf>) -> Result<Self, ReloadError> {
        let mut known = Known::default();
        let declared = build(
            Arc::new(policy),
            &Placeholders::from_iter([]),
            &mut known,
            None,
        )?;
        Ok(Self {
            current: ArcSwap::from_pointee(declared),
            known: Mutex::new(known),
            path,
            announce: tokio::sync::watch::Sender::new(0),
            gate: None,
        })
    }

    /// The generation in force now.
    pub(crate) fn current(&self) -> Arc<Declared> {
        self.current.load_full()
    }

    /// `f` of the generation in force now, without taking a reference to it: for what runs
    /// several times per request on every worker (the audit log's redactor, once per field
    /// of every event), where [`Live::current`]'s shared reference count would be written
    /// from every core.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&Declared) -> R) -> R {
        f(&self.current.load())
    }

    /// The generation number in force now: a cheap check for whether a snapshot is stale.
    pub(crate) fn generation(&self) -> u64 {
        self.current.load().generation
    }

    /// Reads the declaration file again and, if everything about it holds, puts its
    /// generation in force. Blocking (files, sources): call it off the async runtime.
    pub(crate) fn reload(&self, ca: &RunCa) -> Result<Arc<Declared>, ReloadError> {
        let path = self.path.as_deref().ok_or(ReloadError::NoFile)?;
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = self.current.load_full();
        // The diagnostic may quote the file: through the guard in force before it goes to
        // a log line, an HTTP answer or the audit log.
        let refused = |error: ReloadError| match error {
            ReloadError::Declaration { first, sha256 } => ReloadError::Declaration {
                first: previous.guard.redact_str(&first),
                sha256,
            },
            other => other,
        };
        let file = DeclarationFile::read(path).map_err(|d| refused(declaration_error(&d, None)))?;
        let file_digest = file.digest();
        // The bytes in force already: the same parse and check would follow, so only the
        // sources are read again (a rotated value is one of theirs).
        let policy = if previous.file_digest == Some(file_digest) {
            previous.policy.clone()
        } else {
            let policy = parse(&file).map_err(refused)?;
            if let Some(gate) = &self.gate {
                gate(&policy).map_err(ReloadError::Unserved)?;
            }
            for pattern in ca_patterns(&policy) {
                if !ca.covers(&pattern).unwrap_or(false) {
                    return Err(ReloadError::Uncovered { pattern });
                }
            }
            Arc::new(policy)
        };
        // Every placeholder the run has handed out, of secrets declared now or before: a
        // secret declared again gets back the one the sandbox may still hold.
        let earlier: Placeholders = known
            .secrets
            .iter()
            .map(|(name, k)| (name.clone(), k.placeholder.clone()))
            .collect();
        let mut next = build(policy, &earlier, &mut known, Some(&previous))?;
        next.file_digest = Some(file_digest);
        let next = Arc::new(next);
        self.current.store(next.clone());
        self.announce.send_replace(next.generation);
        Ok(next)
    }

    /// Puts minted values in force: `current` (secret name, value) become the values of
    /// those secrets (an access token, a rotated refresh token), the values they replace
    /// stay redacted, and `also` (an id token) is redacted into its secret's placeholder.
    /// The declaration, the placeholders and every other value stay as they are; the guard
    /// is built anew, once, off the request path of everyone but the minting request.
    pub(crate) fn put_minted(
        &self,
        current: &[(&str, &[u8])],
        also: &[(&str, &[u8])],
    ) -> Result<Arc<Declared>, ReloadError> {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        // Put back if the guard refuses a value: kept, a refused token would be overlaid
        // on every later build, and every reload and mint after would fail.
        let before = known.clone();
        let previous = self.current.load_full();
        for (name, value) in current {
            known
                .minted
                .insert((*name).to_owned(), Zeroizing::new(value.to_vec()));
        }
        for (name, value) in also {
            known.remember(name, value);
        }
        let mut resolved = Vec::with_capacity(previous.policy.secrets().len());
        for secret in previous.policy.secrets() {
            let name = secret.name();
            let (Some(id), Some(placeholder)) =
                (previous.guard.id(name), previous.placeholders.get(name))
            else {
                continue;
            };
            resolved.push(ResolvedSecret {
                name: name.to_owned(),
                placeholder: placeholder.to_owned(),
                value: Zeroizing::new(previous.guard.value(id).expose().to_vec()),
            });
        }
        known.overlay(&mut resolved);
        let placeholders = previous.placeholders.clone();
        let assembled = assemble(
            previous.policy.clone(),
            placeholders,
            resolved,
            &mut known,
            Some(&previous),
        );
        let mut next = match assembled {
            Ok(next) => next,
            Err(error) => {
                *known = before;
                return Err(error);
            }
        };
        next.file_digest = previous.file_digest;
        let next = Arc::new(next);
        self.current.store(next.clone());
        self.announce.send_replace(next.generation);
        Ok(next)
    }

    /// Follows the generation in force: changes at each reload put in force.
    pub(crate) fn follow(&self) -> tokio::sync::watch::Receiver<u64> {
        self.announce.subscribe()
    }
}

/// The guard in force, followed across reloads: for what redacts outside the request path
/// (the launcher's copy of the command's output), so that a value a reload brought in is
/// redacted there too.
#[derive(Clone)]
pub struct GuardInForce {
    live: Arc<Live>,
    generations: tokio::sync::watch::Receiver<u64>,
}

impl GuardInForce {
    pub(crate) fn new(live: Arc<Live>) -> Self {
        let generations = live.follow();
        Self { live, generations }
    }

    /// The guard in force now.
    pub fn current(&self) -> Arc<Guard> {
        self.live.current().guard.clone()
    }

    /// Whether a reload put another generation in force since the last call (or since
    /// this was made); the next [`GuardInForce::current`] is then the new one's.
    pub fn changed(&mut self) -> bool {
        let changed = self.generations.has_changed().unwrap_or(false);
        if changed {
            self.generations.mark_unchanged();
        }
        changed
    }
}

/// The hosts `policy` intercepts, as the run CA's name constraints take them (`host`,
/// `*.suffix`): what the CA is minted for at start, and what a reload must stay within.
pub(crate) fn ca_patterns(policy: &Policy) -> Vec<String> {
    policy
        .intercepted_hosts()
        .iter()
        .map(|pattern| {
            if pattern.is_wildcard() {
                format!("*.{}", pattern.name())
            } else {
                pattern.name().to_owned()
            }
        })
        .collect()
}

/// Parses and checks a declaration file read again.
fn parse(file: &DeclarationFile) -> Result<Policy, ReloadError> {
    match file.parse() {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                tracing::warn!("{warning}");
            }
            Ok(loaded.policy)
        }
        Err(diagnostics) => Err(declaration_error(&diagnostics, file.fingerprint())),
    }
}

/// A refused declaration: its first diagnostic's first line, and the file's masked
/// fingerprint (none when it does not parse, or could not be read).
fn declaration_error(diagnostics: &Diagnostics, sha256: Option<String>) -> ReloadError {
    let first = diagnostics
        .0
        .first()
        .map(|d| d.to_string().lines().next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| "the declaration does not pass check".to_owned());
    ReloadError::Declaration { first, sha256 }
}

/// What one guard is built from, in order: each secret's name, placeholder, value and
/// retired values. Kept only as a SHA-256, to tell whether a reload changed any of it;
/// never shown anywhere.
struct GuardInput<'a> {
    entries: Vec<GuardEntry<'a>>,
}

/// One secret of a [`GuardInput`].
struct GuardEntry<'a> {
    name: &'a str,
    placeholder: &'a str,
    value: &'a [u8],
    retired: Vec<&'a [u8]>,
}

impl GuardInput<'_> {
    fn digest(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        for entry in &self.entries {
            field(entry.name.as_bytes());
            field(entry.placeholder.as_bytes());
            field(entry.value);
            for old in &entry.retired {
                field(old);
            }
            field(b"");
        }
        hash.finalize().into()
    }

    fn build(&self) -> Result<Guard, SourceError> {
        let mut builder = Guard::builder();
        for entry in &self.entries {
            let id = builder.add(
                entry.name,
                Placeholder::parse(entry.placeholder)?,
                SecretValue::new(entry.value.to_vec()),
            )?;
            for old in &entry.retired {
                builder.add_retired(id, SecretValue::new(old.to_vec()))?;
            }
        }
        Ok(builder.build()?)
    }
}

/// What the guard of `resolved` is built from, with every value `known` holds besides.
fn guard_input<'a>(resolved: &'a [ResolvedSecret], known: &'a Known) -> GuardInput<'a> {
    let declared: BTreeSet<&str> = resolved.iter().map(|s| s.name.as_str()).collect();
    // Each value belongs to one secret of the guard: a declared secret's current value to
    // it; an earlier value to the first secret that held it and holds no claim now. A value
    // that moved between secrets (a rename, two files swapped) is thus redacted as its
    // new owner, and two secrets never share one (which the guard refuses).
    let mut claimed: BTreeSet<&[u8]> = resolved.iter().map(|s| s.value.as_slice()).collect();
    let mut unclaimed = |values: &mut dyn Iterator<Item = &'a [u8]>| -> Vec<&'a [u8]> {
        values.filter(|value| claimed.insert(*value)).collect()
    };
    let mut input = GuardInput {
        entries: Vec::with_capacity(known.secrets.len().max(resolved.len())),
    };
    for secret in resolved {
        let earlier = known.secrets.get(&secret.name).map(|k| &k.values);
        let retired = unclaimed(&mut earlier.into_iter().flatten().map(|v| v.as_slice()));
        input.entries.push(GuardEntry {
            name: secret.name.as_str(),
            placeholder: secret.placeholder.as_str(),
            value: secret.value.as_slice(),
            retired,
        });
    }
    // Secrets no longer declared: redacted for the rest of the run, granted nothing (the
    // declaration does not name them, so every plan refuses them).
    for (name, gone) in &known.secrets {
        if declared.contains(name.as_str()) {
            continue;
        }
        let values = unclaimed(&mut gone.values.iter().map(|v| v.as_slice()));
        let Some((first, rest)) = values.split_first() else {
            continue;
        };
        input.entries.push(GuardEntry {
            name: name.as_str(),
            placeholder: gone.placeholder.as_str(),
            value: first,
            retired: rest.to_vec(),
        });
    }
    input
}

/// Builds a generation: every source read and the placeholders minted with them (a secret
/// `earlier` knows keeps its; the others are shaped like their values where they may be),
/// the guard over every value the run has known
/// (the guard in force reused when none of that changed: a reload that changes grants
/// only), the signers; `known` learns the new values only once everything succeeded.
fn build(
    policy: Arc<Policy>,
    earlier: &Placeholders,
    known: &mut Known,
    previous: Option<&Declared>,
) -> Result<Declared, ReloadError> {
    let (placeholders, mut resolved) = policy.resolve_minting(earlier)?;
    super::minted::check_keys(&policy, &resolved).map_err(ReloadError::MintKey)?;
    known.overlay(&mut resolved);
    assemble(policy, placeholders, resolved, known, previous)
}

/// Builds a generation from secrets already resolved: the signers, and the guard over every
/// value the run has known (the guard in force reused when none of that changed);
/// `known` learns the new values only once everything succeeded.
fn assemble(
    policy: Arc<Policy>,
    placeholders: Placeholders,
    resolved: Vec<ResolvedSecret>,
    known: &mut Known,
    previous: Option<&Declared>,
) -> Result<Declared, ReloadError> {
    let signers = Arc::new(Signers::new(&policy, &resolved));
    let input = guard_input(&resolved, known);
    let digest = input.digest();
    let guard = match previous {
        Some(previous) if previous.guard_input == digest => previous.guard.clone(),
        _ => Arc::new(input.build()?),
    };
    drop(input);
    known.learn(&resolved);
    Ok(Declared {
        policy,
        guard,
        signers,
        placeholders,
        generation: previous.map_or(0, |p| p.generation + 1),
        guard_input: digest,
        file_digest: None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_ca::CaConfig;

    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        live: Live,
        ca: RunCa,
    }

    fn declaration(dir: &Path, secrets: &[(&str, &str)], allow: &str) -> String {
        let mut yaml = String::from("version: 1\nsecrets:\n");
        for (name, host) in secrets {
            yaml.push_str(&format!(
                "  {name}:\n    from: {{ file: {} }}\n    hosts: [{host}]\n    sinks: [egress]\n",
                dir.join(name).display()
            ));
        }
        yaml.push_str(&format!("egress:\n  allow: [{allow}]\n"));
        yaml
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "value-a-0000-first").unwrap();
        std::fs::write(dir.path().join("b"), "value-b-0000-first").unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(
            &path,
            declaration(
                dir.path(),
                &[("a", "a.test"), ("b", "b.test")],
                "other.test",
            ),
        )
        .unwrap();
        let policy = Policy::load(&path).unwrap().policy;
        let ca = RunCa::mint(CaConfig::new("run", ["a.test", "b.test", "other.test"])).unwrap();
        let live = Live::start(policy, Some(path)).unwrap();
        Fixture { dir, live, ca }
    }

    impl Fixture {
        fn write(&self, file: &str, text: &str) {
            std::fs::write(self.dir.path().join(file), text).unwrap();
        }
    }

    #[test]
    fn a_rotated_value_is_swapped_and_the_old_one_stays_redacted_under_its_placeholder() {
        let f = fixture();
        let first = f.live.current();
        let placeholder = first.placeholders.get("a").unwrap().to_owned();
        f.write("a", "value-a-0001-second");
        let next = f.live.reload(&f.ca).unwrap();
        assert_eq!(next.generation, 1);
        assert_eq!(f.live.generation(), 1);
        assert_eq!(next.placeholders.get("a"), Some(placeholder.as_str()));
        let id = next.guard.id("a").unwrap();
        assert_eq!(next.guard.value(id).expose(), b"value-a-0001-second");
        assert_eq!(
            next.guard
                .redact_str("value-a-0000-first and value-a-0001-second"),
            format!("{placeholder} and {placeholder}")
        );
        // The generation a tunnel already holds is untouched.
        let old = first.guard.id("a").unwrap();
        assert_eq!(first.guard.value(old).expose(), b"value-a-0000-first");
    }

    /// A minted value the guard refuses (too short to be a token) is not put in force and
    /// leaves nothing behind: the next reload and the next mint build as before it.
    #[test]
    fn a_minted_value_the_guard_refuses_leaves_nothing_behind() {
        let f = fixture();
        assert!(
            f.live
                .put_minted(&[("a", b"short")], &[("b", b"tiny")])
                .is_err()
        );
        assert_eq!(f.live.generation(), 0);
        let next = f.live.reload(&f.ca).expect("the refused value is not kept");
        let id = next.guard.id("a").unwrap();
        assert_eq!(next.guard.value(id).expose(), b"value-a-0000-first");
        let minted = f
            .live
            .put_minted(&[("a", b"value-a-minted-0002")], &[])
            .expect("a token the guard holds");
        let id = minted.guard.id("a").unwrap();
        assert_eq!(minted.guard.value(id).expose(), b"value-a-minted-0002");
    }

    #[test]
    fn a_reload_that_changes_grants_only_keeps_the_guard_and_a_rotation_builds_a_new_one() {
        let f = fixture();
        let first = f.live.current();
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(
                f.dir.path(),
                &[("a", "other.test"), ("b", "b.test")],
                "a.test",
            ),
        )
        .unwrap();
        let regranted = f.live.reload(&f.ca).unwrap();
        assert!(Arc::ptr_eq(&first.guard, &regranted.guard));
        assert!(regranted.policy.may_reach("a", "other.test", 443).is_ok());
        f.write("b", "value-b-0001-second");
        let rotated = f.live.reload(&f.ca).unwrap();
        assert!(!Arc::ptr_eq(&regranted.guard, &rotated.guard));
        // The declaration's bytes as they were: its parse and check are kept, and the
        // sources were read all the same (the rotation above).
        assert!(Arc::ptr_eq(&regranted.policy, &rotated.policy));
        // Unchanged again from there: kept, the retired value with it.
        let again = f.live.reload(&f.ca).unwrap();
        assert!(Arc::ptr_eq(&rotated.guard, &again.guard));
        let placeholder = again.placeholders.get("b").unwrap();
        assert_eq!(again.guard.redact_str("value-b-0000-first"), placeholder);
    }

    #[test]
    fn a_reload_that_narrows_allow_ips_holds_for_the_generation_before_it_too() {
        let f = fixture();
        let path = f.dir.path().join("policy.yaml");
        let base = declaration(f.dir.path(), &[("a", "a.test")], "other.test");
        std::fs::write(&path, format!("{base}  allow_ips: [\"127.0.0.1/32\"]\n")).unwrap();
        let live =
            Arc::new(Live::start(Policy::load(&path).unwrap().policy, Some(path.clone())).unwrap());
        let first = live.current();
        let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
        let check = crate::generation::shared::allow_ips(&first.policy, &live);
        assert!(check(loopback));
        std::fs::write(&path, &base).unwrap();
        live.reload(&f.ca).unwrap();
        // What the first generation's tunnels dial from now on is held to the new policy.
        assert!(!check(loopback));
        // A reload never widens what an older generation may dial.
        std::fs::write(&path, format!("{base}  allow_ips: [\"127.0.0.0/8\"]\n")).unwrap();
        live.reload(&f.ca).unwrap();
        assert!(check(loopback));
        assert!(!check(std::net::IpAddr::from([127, 0, 0, 2])));
    }

    #[test]
    fn a_value_that_moves_between_secrets_belongs_to_its_new_owner() {
        let f = fixture();
        // Two files swapped: each value now another secret's.
        f.write("a", "value-b-0000-first");
        f.write("b", "value-a-0000-first");
        let swapped = f.live.reload(&f.ca).unwrap();
        let (a, b) = (
            swapped.placeholders.get("a").unwrap().to_owned(),
            swapped.placeholders.get("b").unwrap().to_owned(),
        );
        assert_eq!(swapped.guard.redact_str("value-a-0000-first"), b);
        assert_eq!(swapped.guard.redact_str("value-b-0000-first"), a);
        // A rename: `b` goes, `c` reads its file; and reloads keep working after both.
        std::fs::write(f.dir.path().join("c"), "value-a-0000-first").unwrap();
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(
                f.dir.path(),
                &[("a", "a.test"), ("c", "b.test")],
                "other.test",
            ),
        )
        .unwrap();
        let renamed = f.live.reload(&f.ca).unwrap();
        let c = renamed.placeholders.get("c").unwrap().to_owned();
        assert_eq!(renamed.guard.redact_str("value-a-0000-first"), c);
        f.write("a", "value-a-0001-third");
        let again = f.live.reload(&f.ca).unwrap();
        assert_eq!(again.guard.redact_str("value-b-0000-first"), a);
        assert_eq!(again.generation, 3);
    }

    #[test]
    fn a_secret_no_longer_declared_is_still_redacted_and_granted_nothing() {
        let f = fixture();
        let placeholder = f.live.current().placeholders.get("b").unwrap().to_owned();
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(f.dir.path(), &[("a", "a.test")], "other.test, b.test"),
        )
        .unwrap();
        let next = f.live.reload(&f.ca).unwrap();
        assert!(next.policy.secret("b").is_none());
        assert_eq!(next.guard.redact_str("value-b-0000-first"), placeholder);
        assert!(
            next.policy.may_reach("b", "b.test", 443).is_err(),
            "a secret gone from the declaration is granted nothing"
        );
        // Declared again later, it gets the placeholder it had.
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(
                f.dir.path(),
                &[("a", "a.test"), ("b", "b.test")],
                "other.test",
            ),
        )
        .unwrap();
        let again = f.live.reload(&f.ca).unwrap();
        assert_eq!(again.placeholders.get("b"), Some(placeholder.as_str()));
    }

    #[test]
    fn a_reload_that_cannot_be_put_in_force_whole_leaves_the_generation_in_force() {
        let f = fixture();
        // A declaration that fails check: the first diagnostic; no fingerprint for a file
        // whose literals cannot be located (an unknown key), one for any other.
        f.write("policy.yaml", "version: 1\nsecrets:\n  a:\n    frm: {}\n");
        match f.live.reload(&f.ca) {
            Err(ReloadError::Declaration { first, sha256 }) => {
                assert!(first.contains("policy.yaml:4:5"), "{first}");
                assert_eq!(sha256, None);
            }
            other => panic!("{:?}", other.map(|d| d.generation)),
        }
        let refused =
            "version: 1\nsecrets:\n  a:\n    value: literal-value-0001\n    hosts: [\"*\"]\n";
        f.write("policy.yaml", refused);
        match f.live.reload(&f.ca) {
            Err(ReloadError::Declaration { sha256, .. }) => {
                assert_eq!(sha256, sluice_policies::fingerprint(refused));
                assert_eq!(sha256.unwrap().len(), 64);
            }
            other => panic!("{:?}", other.map(|d| d.generation)),
        }
        // A source that cannot be read: named, no value.
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(
                f.dir.path(),
                &[("a", "a.test"), ("gone", "a.test")],
                "other.test",
            ),
        )
        .unwrap();
        let error = f.live.reload(&f.ca).map(|d| d.generation).unwrap_err();
        assert!(matches!(error, ReloadError::Secret(_)), "{error}");
        assert!(error.to_string().contains("gone"), "{error}");
        // A host outside the run CA's name constraints.
        std::fs::write(
            f.dir.path().join("policy.yaml"),
            declaration(f.dir.path(), &[("a", "a.test")], "new.test"),
        )
        .unwrap();
        let error = f.live.reload(&f.ca).map(|d| d.generation).unwrap_err();
        assert!(
            matches!(&error, ReloadError::Uncovered { pattern } if pattern == "new.test"),
            "{error}"
        );
        assert_eq!(f.live.generation(), 0);
        assert!(f.live.current().policy.secret("b").is_some());
        // And a proxy started without a file has nothing to read again.
        let policy = Policy::parse("version: 1\n", "inline.yaml").unwrap().policy;
        let bare = Live::start(policy, None).unwrap();
        assert!(matches!(bare.reload(&f.ca), Err(ReloadError::NoFile)));
    }
}
