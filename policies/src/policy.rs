//! The compiled declaration: [`Policy`], loaded once per run and shared read-only by the
//! proxy and the launcher; and the egress decision ([`Policy::reach`]).
//!
//! Loading reads one file; nothing here touches the network.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use zeroize::Zeroizing;

use crate::error::{Diagnostic, Diagnostics, HostError, Problem};
use crate::host::{HostPattern, normalize_host};
use crate::mint::MinterDecl;
use crate::model::{SecretDecl, SignerDecl, Sink};
use crate::raw::RawDeclaration;
use crate::validate::{Validated, validate};

/// A declaration that passed validation: immutable, `Send + Sync`, shared in an `Arc`.
///
/// # Example
///
/// ```
/// use sluice_policies::{Location, Policy, Reach, RequestLine, Sink};
///
/// let yaml = "version: 1
/// secrets:
///   github_token:
///     from: { env: GITHUB_TOKEN }
///     hosts: [api.github.com]
///     sinks: [egress]
/// ";
/// let loaded = Policy::parse(yaml, "policy.yaml").expect("valid");
/// let policy = loaded.policy;
/// assert!(matches!(policy.reach("API.GitHub.com.", 443), Reach::Intercept));
/// assert!(matches!(policy.reach("evil.example", 443), Reach::Denied(_)));
/// let auth = Location::Header("authorization".into());
/// let line = RequestLine::new("GET", "/user");
/// assert!(policy.may("github_token", Sink::Egress, "api.github.com", 443, &auth, &line).is_ok());
/// assert!(policy.may("github_token", Sink::Egress, "evil.example", 443, &auth, &line).is_err());
/// ```
#[derive(Debug)]
pub struct Policy {
    pub(crate) secrets: Vec<SecretDecl>,
    pub(crate) signers: Vec<SignerDecl>,
    pub(crate) minters: Vec<MinterDecl>,
    allow: Vec<HostPattern>,
    verbatim: Vec<HostPattern>,
    passthrough: Vec<HostPattern>,
    /// `egress.ask`: hosts that wait for a person's decision instead of being refused.
    ask: Vec<HostPattern>,
    allow_ips: Vec<IpNet>,
    /// The indexes of the secrets with request rules, for the per-request half of a grant.
    ruled: Vec<usize>,
    /// Whether any secret has a budget: without one, no request is ever charged.
    budgeted: bool,
    /// Whether any secret has an `approve:`: without one, no request ever waits.
    approving: bool,
    /// Whether any secret has a `pin:` (most runs have none, and ask nothing of chains).
    pinned: bool,
    /// Beside each secret with an `approve:`, what a decision on it is made about
    /// (`approval_basis::basis`), worked out once here rather than on every use.
    approval_bases: Vec<Option<crate::approval_basis::ApprovalBasis>>,
    sha256: String,
}

/// A declaration file read whole and not yet parsed: what a reload compares with the file
/// in force before paying for a parse and check that would give the same answer.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("sluice-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("policy.yaml");
/// std::fs::write(&path, "version: 1\negress:\n  allow: [pypi.org]\n").unwrap();
/// let first = sluice_policies::DeclarationFile::read(&path)?;
/// let again = sluice_policies::DeclarationFile::read(&path)?;
/// assert_eq!(first.digest(), again.digest());
/// let loaded = first.parse()?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), sluice_policies::Diagnostics>(())
/// ```
pub struct DeclarationFile {
    path: std::path::PathBuf,
    bytes: Zeroizing<Vec<u8>>,
}

impl DeclarationFile {
    /// Reads the file at `path`.
    ///
    /// # Errors
    ///
    /// One diagnostic at line 1 when it cannot be read.
    pub fn read(path: &Path) -> Result<Self, Diagnostics> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Self {
                path: path.to_owned(),
                bytes: Zeroizing::new(bytes),
            }),
            Err(e) => Err(Self::unreadable(path, e.kind().to_string())),
        }
    }

    /// SHA-256 of the bytes read, literals and all: to compare with another read of a
    /// declaration, never to show (what the audit log shows is [`Policy::sha256_hex`]).
    pub fn digest(&self) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(self.bytes.as_slice()).into()
    }

    /// Parses and validates what was read, as [`Policy::load`] does.
    ///
    /// # Errors
    ///
    /// Every diagnostic (errors and warnings) when the text is not UTF-8 or holds an error.
    pub fn parse(&self) -> Result<Loaded, Diagnostics> {
        let Ok(source) = std::str::from_utf8(&self.bytes) else {
            return Err(Self::unreadable(
                &self.path,
                "not UTF-8 text, expected YAML or JSON".to_owned(),
            ));
        };
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty());
        Policy::parse_in(source, &self.path.display().to_string(), dir)
    }

    /// The masked fingerprint of what was read ([`crate::fingerprint`]), when it parses.
    pub fn fingerprint(&self) -> Option<String> {
        std::str::from_utf8(&self.bytes)
            .ok()
            .and_then(crate::fingerprint)
    }

    fn unreadable(path: &Path, reason: String) -> Diagnostics {
        Diagnostics(vec![Diagnostic {
            file: path.display().to_string(),
            line: 1,
            column: 1,
            path: String::new(),
            problem: Problem::Unreadable { reason },
        }])
    }
}

/// A policy and the warnings its declaration produced.
#[derive(Debug)]
pub struct Loaded {
    /// The compiled policy.
    pub policy: Policy,
    /// Lints: the declaration loads, but these deserve a look.
    pub warnings: Vec<Diagnostic>,
}

/// What the proxy may do with a connection to a host and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Reachable, and terminated with the run CA for inspection.
    Intercept,
    /// Reachable, tunnelled without inspection (no swap, no redaction).
    Passthrough,
    /// Not reachable.
    Denied(Denied),
}

/// Why a host is not reachable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No secret grants the host and `egress` does not list it.
    #[error(
        "host {host} (port {port}) is not reachable; add it to egress.allow, or to the hosts of the secret meant for it"
    )]
    NotAllowed {
        /// The normalised host.
        host: String,
        /// The port.
        port: u16,
    },
    /// The host is not a valid name.
    #[error("host `{host}` is not a valid host name: {error}")]
    InvalidHost {
        /// The host as given.
        host: String,
        /// Why.
        error: HostError,
    },
}

impl Policy {
    /// Reads and validates a declaration file. Relative `from: { file: }` paths are taken
    /// from the file's directory.
    ///
    /// # Errors
    ///
    /// Every diagnostic (errors and warnings) when the file cannot be read or holds an
    /// error; a file that cannot be read is one diagnostic at line 1.
    pub fn load(path: &Path) -> Result<Loaded, Diagnostics> {
        DeclarationFile::read(path)?.parse()
    }

    /// Validates a declaration held in memory; `file_name` is used in diagnostics.
    /// Relative `from: { file: }` paths stay relative to the working directory.
    ///
    /// # Errors
    ///
    /// Every diagnostic (errors and warnings) when the declaration holds an error.
    pub fn parse(source: &str, file_name: &str) -> Result<Loaded, Diagnostics> {
        Self::parse_in(source, file_name, None)
    }

    fn parse_in(source: &str, file_name: &str, dir: Option<&Path>) -> Result<Loaded, Diagnostics> {
        let raw: RawDeclaration = match serde_saphyr::from_str(source) {
            Ok(raw) => raw,
            Err(e) => return Err(Diagnostics(vec![parse_error(&e, file_name)])),
        };
        // Before validation consumes the model: the literals' positions are in it.
        let sha256 = crate::fingerprint::masked_sha256(source, &raw);
        let (validated, diagnostics) = validate(raw, source, file_name, dir);
        let Some(Validated {
            secrets,
            signers,
            minters,
            allow,
            verbatim,
            passthrough,
            ask,
            allow_ips,
        }) = validated
        else {
            return Err(Diagnostics(diagnostics));
        };
        let Some(sha256) = sha256 else {
            return Err(Diagnostics(vec![Diagnostic {
                file: file_name.to_owned(),
                line: 1,
                column: 1,
                path: String::new(),
                problem: Problem::Unreadable {
                    reason: "the declaration cannot be fingerprinted for the audit log without a literal's bytes: it uses a YAML merge key (`<<`), which can hide a literal `value:`, or a literal's position cannot be located; write each secret out without `<<`, and give values with `from:`".into(),
                },
            }]));
        };
        let ruled = (0..secrets.len())
            .filter(|&i| secrets[i].rules.is_some())
            .collect();
        let budgeted = secrets.iter().any(|s| s.budget.is_some());
        let pinned = secrets.iter().any(|s| !s.pins.is_empty());
        let approving = secrets.iter().any(|s| s.approve.is_some());
        let approval_bases = secrets
            .iter()
            .map(|s| {
                s.approve
                    .is_some()
                    .then(|| crate::approval_basis::basis(s, &secrets, &minters))
            })
            .collect();
        Ok(Loaded {
            policy: Policy {
                ruled,
                budgeted,
                approving,
                pinned,
                approval_bases,
                secrets,
                signers,
                minters,
                allow,
                verbatim,
                passthrough,
                ask,
                allow_ips,
                sha256,
            },
            warnings: diagnostics,
        })
    }

    /// The declaration's [`fingerprint`](crate::fingerprint): SHA-256 of its text with
    /// every literal `value:` masked, lowercase hex, for the audit log's `start` and
    /// `reload` records.
    pub fn sha256_hex(&self) -> &str {
        &self.sha256
    }

    /// The secrets, in declaration order; a signing secret's parts (`NAME.PART`) stand
    /// where it was declared.
    pub fn secrets(&self) -> &[SecretDecl] {
        &self.secrets
    }

    /// The indexes in [`Policy::secrets`] of the secrets with request rules (`allow:`),
    /// whose grant depends on each request's method and path
    /// ([`Policy::may_request`]).
    pub fn ruled_secrets(&self) -> &[usize] {
        &self.ruled
    }

    /// Whether any secret has a budget (`budget:`).
    pub fn has_budgets(&self) -> bool {
        self.budgeted
    }

    /// Whether any secret has uses that wait for a decision (`approve:`).
    pub fn has_approvals(&self) -> bool {
        self.approving
    }

    /// Whether any secret is pinned (`pin:`), worked out once at load.
    pub fn has_pins(&self) -> bool {
        self.pinned
    }

    /// The signing secrets (`sign:`), in declaration order.
    pub fn signers(&self) -> &[SignerDecl] {
        &self.signers
    }

    /// Each secret a runtime serving only `served` leaves unserved
    /// ([`SecretDecl::unserved_by`]), as `secret NAME asks for SINK, SINK`: the words every
    /// runtime's refusal (or warning) names them with.
    pub fn unserved(&self, served: &[Sink]) -> Vec<String> {
        self.secrets
            .iter()
            .filter(|decl| decl.unserved_by(served))
            .map(|decl| {
                let sinks: Vec<&str> = decl.sinks().iter().map(|sink| sink.as_str()).collect();
                format!("secret {} asks for {}", decl.name(), sinks.join(", "))
            })
            .collect()
    }

    /// The minted secrets (`oauth2:`, `github_app:`), in declaration order; each part's secret stands in
    /// [`Policy::secrets`] where it was declared (the access token under the secret's name).
    pub fn minters(&self) -> &[MinterDecl] {
        &self.minters
    }

    /// The minted secret Google's metadata server answers for, inside the sandbox: the
    /// run's one Google secret (a `jwt_bearer` grant, or a token endpoint of Google's). None
    /// when there is none, or more than one (which one a library means cannot be told).
    pub fn metadata_minter(&self) -> Option<&MinterDecl> {
        let mut google = self.minters.iter().filter(|m| m.is_google());
        let one = google.next()?;
        google.next().is_none().then_some(one)
    }

    /// The index in [`Policy::secrets`] of the secret named `name`.
    pub fn secret_index(&self, name: &str) -> Option<usize> {
        self.secrets.iter().position(|s| s.name == name)
    }

    /// What a decision standing for the run on the secret named `name` is made about: where
    /// its value comes from (for a minted one, its minter and the sources of its grant)
    /// and its `approve:`, digested. A decision made under another basis no longer stands
    /// (a reload pointed the name at another credential, or changed which uses wait); a
    /// value rotated in the same place keeps it. None for a secret without `approve:`.
    ///
    /// ```
    /// let yaml = |var: &str| format!(
    ///     "version: 1\nsecrets:\n  gh:\n    from: {{ env: {var} }}\n    hosts: [api.github.com]\n    approve: [DELETE]\n"
    /// );
    /// let load = |text: String| sluice_policies::Policy::parse(&text, "policy.yaml").unwrap().policy;
    /// let (first, rotated) = (load(yaml("GH_TOKEN")), load(yaml("GH_TOKEN")));
    /// assert_eq!(first.approval_basis("gh"), rotated.approval_basis("gh"));
    /// assert_ne!(first.approval_basis("gh"), load(yaml("OTHER_TOKEN")).approval_basis("gh"));
    /// ```
    pub fn approval_basis(&self, name: &str) -> Option<crate::approval_basis::ApprovalBasis> {
        self.approval_bases
            .get(self.secret_index(name)?)
            .copied()
            .flatten()
    }

    /// The secret named `name`.
    pub fn secret(&self, name: &str) -> Option<&SecretDecl> {
        self.secrets.iter().find(|s| s.name == name)
    }

    /// `egress.allow`.
    pub fn allow(&self) -> &[HostPattern] {
        &self.allow
    }

    /// `egress.verbatim`.
    pub fn verbatim(&self) -> &[HostPattern] {
        &self.verbatim
    }

    /// `egress.passthrough`.
    pub fn passthrough(&self) -> &[HostPattern] {
        &self.passthrough
    }

    /// The egress decision for a CONNECT (or plain-HTTP) target. `host` is normalised
    /// here. Passthrough wins over interception; a host is reachable when a secret grants
    /// it or `egress.allow`, `egress.verbatim` or `egress.passthrough` lists it; anything
    /// else is denied.
    pub fn reach(&self, host: &str, port: u16) -> Reach {
        let normalized = match normalize_host(host) {
            Ok(h) => h,
            Err(error) => {
                return Reach::Denied(Denied::InvalidHost {
                    host: host.to_owned(),
                    error,
                });
            }
        };
        let hit =
            |list: &[HostPattern]| list.iter().any(|p| p.matches_normalized(&normalized, port));
        if hit(&self.passthrough) {
            return Reach::Passthrough;
        }
        // Only a secret granted egress makes its hosts reachable (validation refuses
        // `hosts:` on any other; this holds even so).
        let granted = |s: &&SecretDecl| s.grants(Sink::Egress);
        if hit(&self.allow)
            || hit(&self.verbatim)
            || self.secrets.iter().filter(granted).any(|s| hit(&s.hosts))
        {
            return Reach::Intercept;
        }
        Reach::Denied(Denied::NotAllowed {
            host: normalized,
            port,
        })
    }

    /// Whether a name lookup for `host` should be answered: some port of it is reachable
    /// (a secret granted `egress` names it, or `egress.allow`, `verbatim` or `passthrough`
    /// does), or may be once a person decides (`egress.ask`: the connection is then held). The jail's resolver answers these and refuses every other name, so that no
    /// query for an unreachable name leaves the machine.
    pub fn resolvable(&self, host: &str) -> bool {
        let Ok(normalized) = normalize_host(host) else {
            return false;
        };
        let hit =
            |list: &[HostPattern]| list.iter().any(|p| p.matches_name_normalized(&normalized));
        normalized == crate::mint::METADATA_HOST && self.metadata_minter().is_some()
            || hit(&self.allow)
            || hit(&self.verbatim)
            || hit(&self.passthrough)
            || hit(&self.ask)
            || self
                .secrets
                .iter()
                .filter(|s| s.grants(Sink::Egress))
                .any(|s| hit(&s.hosts))
    }

    /// Whether a host [`Policy::reach`] refuses as not allowed waits for a person's decision
    /// instead (`egress.ask`): once allowed, it is intercepted like an `egress.allow` host.
    ///
    /// ```
    /// use sluice_policies::{Policy, Reach};
    /// let yaml = "version: 1\negress:\n  ask: [\"*.internal.example.com\"]\n";
    /// let policy = Policy::parse(yaml, "p.yaml").unwrap().policy;
    /// assert!(matches!(policy.reach("wiki.internal.example.com", 443), Reach::Denied(_)));
    /// assert!(policy.asks("wiki.internal.example.com", 443));
    /// assert!(!policy.asks("example.com", 443));
    /// ```
    pub fn asks(&self, host: &str, port: u16) -> bool {
        normalize_host(host)
            .map(|h| self.ask.iter().any(|p| p.matches_normalized(&h, port)))
            .unwrap_or(false)
    }

    /// Whether anything waits for a person's decision: a secret's `approve:`, or a host
    /// in `egress.ask`. Decisions are made on the admin endpoint.
    pub fn needs_decisions(&self) -> bool {
        self.approving || !self.ask.is_empty()
    }

    /// Whether ungranted placeholders toward this host are forwarded unchanged (and
    /// audited) instead of refused.
    pub fn is_verbatim(&self, host: &str, port: u16) -> bool {
        normalize_host(host)
            .map(|h| self.verbatim.iter().any(|p| p.matches_normalized(&h, port)))
            .unwrap_or(false)
    }

    /// `egress.allow_ips`: private, loopback or link-local networks that may be dialled.
    pub fn allow_ips(&self) -> &[IpNet] {
        &self.allow_ips
    }

    /// Whether `ip` is inside one of `egress.allow_ips`.
    pub fn ip_allowed(&self, ip: IpAddr) -> bool {
        self.allow_ips.iter().any(|net| net.contains(&ip))
    }

    /// Every reachable pattern that is not wholly passthrough (each secret's hosts,
    /// `egress.allow`, `egress.verbatim`), deduplicated: the names the run CA may sign for.
    pub fn intercepted_hosts(&self) -> Vec<HostPattern> {
        let mut out: Vec<HostPattern> = self
            .secrets
            .iter()
            .filter(|s| s.grants(Sink::Egress))
            .flat_map(|s| s.hosts.iter())
            .chain(&self.allow)
            .chain(&self.verbatim)
            .chain(&self.ask)
            .filter(|p| !self.passthrough.contains(p))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Turns a YAML reader error into a diagnostic with a position and a fix.
fn parse_error(e: &serde_saphyr::Error, file: &str) -> Diagnostic {
    let (line, column) = e
        .location()
        .map(|l| (l.line().max(1), l.column().max(1)))
        .unwrap_or((1, 1));
    let mut message = e.without_snippet().to_string();
    if let Some(m) = message.strip_suffix(&format!(" at line {line}, column {column}")) {
        message = m.to_owned();
    }
    let problem = if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = expected
            .trim_start_matches(',')
            .trim()
            .trim_start_matches("expected ")
            .trim_start_matches("one of ")
            .replace('`', "");
        Problem::UnknownKey {
            key: key.to_owned(),
            expected: if expected.is_empty() {
                "(none)".into()
            } else {
                expected
            },
        }
    } else if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        Problem::DuplicateKey {
            key: key.to_owned(),
        }
    } else if message.starts_with("unexpected end of input") && line == 1 && column == 1 {
        Problem::Empty
    } else {
        Problem::Syntax { message }
    };
    Diagnostic {
        file: file.to_owned(),
        line,
        column,
        path: String::new(),
        problem,
    }
}
