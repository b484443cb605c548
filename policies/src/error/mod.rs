//! Every way a declaration, a host name or a secret source can be wrong, and the
//! diagnostics that carry those problems to the person who wrote the declaration.
//!
//! Nothing here ever holds or prints a secret value: variants carry names, YAML paths,
//! host patterns, lengths and byte classes, never the bytes of a value.

use std::fmt;

mod approve;
mod budget;
mod code;
mod help;
mod mint;
mod pin;
mod source;

pub use approve::ApproveProblem;
pub use budget::BudgetProblem;
pub use mint::MintProblem;
pub use pin::PinProblem;
pub use source::SourceError;

/// A host name or host pattern that cannot be used.
///
/// Returned by [`crate::normalize_host`] and [`crate::HostPattern::parse`]; inside a
/// declaration it arrives wrapped in [`Problem::Host`] with the entry's position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The name or pattern was empty (or only a port, or only a dot).
    #[error("empty host name where a host name was expected")]
    Empty,
    /// The name is not a valid DNS name or IP address after IDNA normalisation.
    #[error("`{host}` is not a valid host name: {reason}")]
    InvalidName {
        /// The name as given.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `*` somewhere other than as the whole leftmost label (`*.example.com`).
    #[error(
        "`{pattern}` has a `*` that is not the whole leftmost label; only `*.example.com` is a wildcard"
    )]
    BadWildcard {
        /// The pattern as given.
        pattern: String,
    },
    /// A pattern that matches too many hosts: `*`, `*.com`, or a wildcard over a public suffix.
    #[error("`{pattern}` matches too much: every host under `{suffix}`, which is a public suffix")]
    TooBroad {
        /// The pattern as given.
        pattern: String,
        /// The public suffix it would open (`*` for the bare wildcard).
        suffix: String,
    },
    /// A `:port` suffix that is not a number from 1 to 65535.
    #[error("`{pattern}` has port `{port}`, expected a number from 1 to 65535")]
    BadPort {
        /// The pattern as given.
        pattern: String,
        /// The port text as given.
        port: String,
    },
}

impl HostError {
    /// Its stable code (`host-...`): see [`crate::Problem::code`].
    pub fn code(&self) -> &'static str {
        match self {
            HostError::Empty => "host-empty",
            HostError::InvalidName { .. } => "host-invalid-name",
            HostError::BadWildcard { .. } => "host-bad-wildcard",
            HostError::TooBroad { .. } => "host-too-broad",
            HostError::BadPort { .. } => "host-bad-port",
        }
    }
}

/// Whether a diagnostic stops the declaration from loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The declaration is refused.
    Error,
    /// The declaration loads; the writer should look at this.
    Warning,
    /// The declaration loads; worth knowing, nothing to fix.
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// One thing wrong with (or worth a second look in) a declaration.
///
/// Messages say what arrived and what was expected; [`Problem::help`] says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    // ---- parse errors (from the YAML reader) ----
    /// The file is not valid YAML/JSON, or a value has the wrong type.
    #[error("{message}")]
    Syntax {
        /// The reader's message, without its position.
        message: String,
    },
    /// A key the declaration does not define (keys are never ignored).
    #[error("unknown key `{key}`, expected one of: {expected}")]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The keys allowed at this place.
        expected: String,
    },
    /// The same key twice in one mapping.
    #[error("duplicate key `{key}`")]
    DuplicateKey {
        /// The key as written.
        key: String,
    },
    /// The file cannot be read, or is not UTF-8 text.
    #[error("cannot read the declaration: {reason}")]
    Unreadable {
        /// Why (an I/O error kind, or "not UTF-8 text").
        reason: String,
    },
    /// The file holds nothing.
    #[error("the declaration is empty, expected a mapping starting with `version: 1`")]
    Empty,

    // ---- validation errors ----
    /// `version:` is absent.
    #[error("missing `version`, expected `version: 1`")]
    MissingVersion,
    /// `version:` is not 1.
    #[error("version {found} is not supported, expected 1")]
    UnsupportedVersion {
        /// The version as written.
        found: u64,
    },
    /// A secret name that is empty or holds control characters.
    #[error("secret name `{secret}` is not usable, expected letters, digits, `_`, `-` or `.`")]
    BadSecretName {
        /// The name, with control characters escaped.
        secret: String,
    },
    /// A `sinks:` entry that is not a sink.
    #[error(
        "unknown sink `{found}`, expected one of: prompt, agent, command, params, file, egress"
    )]
    UnknownSink {
        /// The entry as written.
        found: String,
    },
    /// An `in:` entry that is not a location.
    #[error("unknown location `{found}`, expected one of: header, query, body")]
    UnknownLocation {
        /// The entry as written.
        found: String,
    },
    /// A host pattern that cannot be used.
    #[error("{0}")]
    Host(HostError),
    /// A request rule (`allow:`) that cannot be used, or could never match.
    #[error("{0}")]
    Rule(crate::rules::RuleProblem),
    /// A `budget:` that cannot be used.
    #[error("{0}")]
    Budget(BudgetProblem),
    /// An `approve:` that cannot be used.
    #[error("{0}")]
    Approve(ApproveProblem),
    /// A `pin:` that cannot be used.
    #[error("{0}")]
    Pin(PinProblem),
    /// An `oauth2:` that cannot be used.
    #[error("{0}")]
    Mint(MintProblem),
    /// A secret with neither `from:` nor `value:`.
    #[error(
        "secret {secret} has no source, expected `from: {{ env: VAR }}`, `from: {{ file: PATH }}` or `value:`"
    )]
    NoSource {
        /// The secret's name.
        secret: String,
    },
    /// A secret with two sources (`from:` and `value:`, or `env` and `file`).
    #[error("secret {secret} has two sources ({first} and {second}), expected exactly one")]
    TwoSources {
        /// The secret's name.
        secret: String,
        /// The first source key.
        first: &'static str,
        /// The second source key.
        second: &'static str,
    },
    /// An empty `from:` path or variable name.
    #[error("secret {secret}: `from: {{ {key}: }}` is empty, expected a {what}")]
    EmptySource {
        /// The secret's name.
        secret: String,
        /// `env` or `file`.
        key: &'static str,
        /// What belongs there.
        what: &'static str,
    },
    /// A literal value shorter than [`MIN_VALUE_LEN`](crate::MIN_VALUE_LEN) bytes.
    #[error("secret {secret}: literal value is {len} bytes, expected at least {min}")]
    ValueTooShort {
        /// The secret's name.
        secret: String,
        /// The value's length in bytes.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// A literal value holding CR, LF or NUL with a header location.
    #[error("secret {secret}: literal value holds a {byte} byte, which cannot go in a header")]
    ValueUnfitForHeader {
        /// The secret's name.
        secret: String,
        /// `CR`, `LF` or `NUL`.
        byte: &'static str,
    },
    /// A fixed placeholder with a character outside `[A-Za-z0-9_-]`.
    #[error("secret {secret}: placeholder holds `{found}`, expected only A-Z, a-z, 0-9, _ and -")]
    PlaceholderAlphabet {
        /// The secret's name.
        secret: String,
        /// The first offending character.
        found: char,
    },
    /// A fixed placeholder shorter than [`MIN_PLACEHOLDER_LEN`](crate::MIN_PLACEHOLDER_LEN)
    /// characters.
    #[error("secret {secret}: placeholder is {len} characters, expected at least {min}")]
    PlaceholderTooShort {
        /// The secret's name.
        secret: String,
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// Two secrets with the same placeholder (fixed, or minted from names that differ only
    /// in characters turned into `_`).
    #[error("secrets {secret} and {other} would share the placeholder `{placeholder}`")]
    SharedPlaceholder {
        /// The later secret.
        secret: String,
        /// The earlier one.
        other: String,
        /// The placeholder, or its minted prefix.
        placeholder: String,
    },
    /// One fixed placeholder contains another, so matching them is ambiguous.
    #[error("secret {secret}: placeholder contains the placeholder of secret {other}")]
    PlaceholderContains {
        /// The secret whose placeholder is the longer.
        secret: String,
        /// The secret whose placeholder is inside it.
        other: String,
    },
    /// A secret granted `egress` with no hosts.
    #[error("secret {secret} is granted egress but names no hosts")]
    EgressWithoutHosts {
        /// The secret's name.
        secret: String,
    },
    /// A secret granted `egress` whose hosts are all `passthrough`.
    #[error(
        "secret {secret} is granted egress but every host it names is passthrough, where nothing is swapped"
    )]
    Unservable {
        /// The secret's name.
        secret: String,
    },
    /// `hosts`, `in` or `header` on a secret not granted `egress`: no request carries it,
    /// and its hosts would only have become reachable.
    #[error(
        "secret {secret} is not granted egress, so `{key}:` means nothing for it (its hosts would only become reachable)"
    )]
    NeedsEgress {
        /// The secret's name.
        secret: String,
        /// `hosts`, `in` or `header`.
        key: &'static str,
    },
    /// A key written with no value (a typo must not read as the default).
    #[error("`{key}` has no value; a key written empty is never taken as its default")]
    NoValue {
        /// The key's path, e.g. `secrets.github_token.in`.
        key: String,
    },
    /// A secret whose variable would replace one sluice sets, or one the workload needs.
    #[error("secret {secret} would be the command's {variable}, which is {why}")]
    ReservedVariable {
        /// The secret's name.
        secret: String,
        /// Its variable's name.
        variable: String,
        /// What that variable is.
        why: String,
    },
    /// A secret granted `egress` with `in: []`.
    #[error("secret {secret} is granted egress with an empty `in:`, so it can be swapped nowhere")]
    NoLocations {
        /// The secret's name.
        secret: String,
    },
    /// `header:` names given, but `in:` has no `header`.
    #[error("secret {secret} lists header names but `in:` does not include header")]
    HeaderNamesWithoutHeader {
        /// The secret's name.
        secret: String,
    },
    /// A header name that is not a valid HTTP token.
    #[error("secret {secret}: `{found}` is not a valid header name")]
    BadHeaderName {
        /// The secret's name.
        secret: String,
        /// The name as written.
        found: String,
    },
    /// An `allow_ips` entry that is not a CIDR.
    #[error(
        "`{found}` is not a CIDR, expected an address with a prefix length such as 127.0.0.1/32 or ::1/128"
    )]
    BadCidr {
        /// The entry as written.
        found: String,
    },
    /// A host in `egress.ask` that another list, or a secret's hosts, already reaches.
    #[error("`{ask}` in egress.ask overlaps `{other}` in {list}, which reaches it without asking")]
    AskReachable {
        /// The ask pattern.
        ask: String,
        /// The pattern it overlaps.
        other: String,
        /// Where that one is (`egress.allow`, `secrets.NAME.hosts`, ...).
        list: String,
    },
    /// A pattern both verbatim and passthrough.
    #[error(
        "`{verbatim}` in egress.verbatim overlaps `{passthrough}` in egress.passthrough; a passthrough host is never inspected"
    )]
    VerbatimPassthrough {
        /// The verbatim pattern.
        verbatim: String,
        /// The passthrough pattern.
        passthrough: String,
    },

    /// `sign:` names a kind sluice does not know.
    #[error(
        "secret {secret}: `sign: {found}` is not a signing kind sluice knows, expected aws-sigv4"
    )]
    UnknownSignKind {
        /// The secret's name.
        secret: String,
        /// The kind as written.
        found: String,
    },
    /// A key that means nothing on a signing secret: it is never placed in a request.
    #[error(
        "secret {secret} signs requests (sign: {kind}) and is never placed in one, so `{key}` means nothing there"
    )]
    SigningKey {
        /// The secret's name.
        secret: String,
        /// The kind.
        kind: &'static str,
        /// `in`, `header`, `value` or `placeholder`.
        key: &'static str,
    },
    /// `sinks:` on a signing secret other than `[egress]`.
    #[error("secret {secret} signs requests toward its hosts, so its only sink is egress")]
    SigningSinks {
        /// The secret's name.
        secret: String,
    },
    /// A signing secret whose `from:` names one source instead of its parts.
    #[error(
        "secret {secret} signs with {kind}: its `from:` names each part ({parts}), not one `{key}`"
    )]
    SigningWholeSource {
        /// The secret's name.
        secret: String,
        /// The kind.
        kind: &'static str,
        /// The parts, comma-separated.
        parts: &'static str,
        /// `env` or `file`.
        key: &'static str,
    },
    /// A signing secret without one of its required parts.
    #[error("secret {secret} signs with {kind} and its `from:` has no `{part}`")]
    MissingPart {
        /// The secret's name.
        secret: String,
        /// The kind.
        kind: &'static str,
        /// The part.
        part: &'static str,
    },
    /// Parts of a credential, or a scope narrowing, on a secret that does not sign.
    #[error("secret {secret}: `{key}` is only for a secret with `sign:`")]
    OnlyForSigning {
        /// The secret's name.
        secret: String,
        /// The key (`from.access_key_id`, `services`, …).
        key: String,
    },
    /// A `services:` or `regions:` entry that is not an AWS name.
    #[error(
        "secret {secret}: `{found}` is not a {what} name, expected lowercase letters, digits and `-` (e.g. {example})"
    )]
    BadScopeName {
        /// The secret's name.
        secret: String,
        /// `service` or `region`.
        what: &'static str,
        /// An example of a good one.
        example: &'static str,
        /// The entry as written.
        found: String,
    },
    /// A signing secret's part is named as a secret the declaration already has.
    #[error(
        "secret {secret}'s part {part} is the secret {secret}.{part}, a name the declaration already uses"
    )]
    PartNameTaken {
        /// The signing secret.
        secret: String,
        /// The part.
        part: &'static str,
    },

    /// A literal `value:` with the shape of a real credential: a declaration file is
    /// copied and committed.
    #[error("secret {secret} has a literal value with the shape of {shape}")]
    CredentialLiteral {
        /// The secret's name.
        secret: String,
        /// The shape, in words (never the value).
        shape: String,
    },

    // ---- lints ----
    /// A literal `value:` in the declaration (a note: a test fixture, a demo).
    #[error("secret {secret} has a literal value in the declaration{why}")]
    LiteralValue {
        /// The secret's name.
        secret: String,
        /// Empty, or why it looks random (never the value).
        why: String,
    },
    /// A literal value made of ordinary words: redacting it would scrub those words.
    #[error(
        "secret {secret}'s value reads as ordinary words; redacting it would scrub them from every response and every line of output"
    )]
    CommonWordValue {
        /// The secret's name.
        secret: String,
    },
    /// A secret with no `sinks:` (it gets `[egress]`).
    #[error("secret {secret} has no `sinks:`, so it gets [egress] only")]
    NoSinks {
        /// The secret's name.
        secret: String,
    },
    /// A secret whose sinks only a host engine serves (`prompt`, `agent`, `params`):
    /// `sluice run` refuses to launch with it.
    #[error(
        "secret {secret} is granted only {sinks}, which `sluice run` does not serve (it serves egress, command and file); its placeholder would resolve nowhere"
    )]
    HostEngineOnly {
        /// The secret's name.
        secret: String,
        /// Its sinks, comma-separated.
        sinks: String,
    },
    /// A wildcard grant where the declaration names only a few hosts under it.
    #[error(
        "secret {secret}: `{pattern}` grants every host under {suffix}, but the declaration names only {named} there"
    )]
    BroadWildcard {
        /// The secret's name.
        secret: String,
        /// The wildcard.
        pattern: String,
        /// The wildcard's suffix.
        suffix: String,
        /// The exact hosts named under it elsewhere.
        named: String,
    },
    /// A secret host that is also passthrough (the secret is never swapped there).
    #[error("secret {secret}: host `{host}` is passthrough, so the secret is never swapped there")]
    PassthroughHost {
        /// The secret's name.
        secret: String,
        /// The host pattern.
        host: String,
    },
    /// `allow_ips` opens the cloud metadata address.
    #[error("`{cidr}` in egress.allow_ips includes the cloud metadata address {metadata}")]
    MetadataReachable {
        /// The CIDR as written.
        cidr: String,
        /// The metadata address it covers.
        metadata: &'static str,
    },
}

impl Problem {
    /// Whether this problem refuses the declaration or only warns.
    pub fn severity(&self) -> Severity {
        match self {
            Problem::LiteralValue { .. } => Severity::Note,
            Problem::CommonWordValue { .. }
            | Problem::NoSinks { .. }
            | Problem::HostEngineOnly { .. }
            | Problem::BroadWildcard { .. }
            | Problem::PassthroughHost { .. }
            | Problem::MetadataReachable { .. }
            | Problem::Mint(MintProblem::RefreshTokenLost { .. })
            | Problem::Mint(MintProblem::AppPermission { .. }) => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

/// A [`Problem`] at a place in a declaration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name, as given to [`crate::Policy::parse`] or [`crate::Policy::load`].
    pub file: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub column: u64,
    /// The YAML path of the offending entry, e.g. `secrets.github_token.hosts[1]`
    /// (empty when the YAML reader could not say).
    pub path: String,
    /// What is wrong.
    pub problem: Problem,
}

impl Diagnostic {
    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.problem.severity()
    }

    /// Whether this diagnostic refuses the declaration.
    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// `file:line:col: error: path: message` and, on a second line, `  help: fix`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: ",
            self.file,
            self.line,
            self.column,
            self.severity()
        )?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}\n  help: {}", self.problem, self.problem.help())
    }
}

/// Every diagnostic a declaration produced, errors and warnings, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// The diagnostics that refuse the declaration.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity() == Severity::Warning)
    }

    /// The notes.
    pub fn notes(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity() == Severity::Note)
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
