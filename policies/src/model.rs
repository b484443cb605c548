//! The compiled vocabulary of a declaration: sinks, locations, sources and one secret's
//! grants, as the proxy and the launcher read them.
//!
//! A literal value lives here in a zeroizing buffer whose `Debug` prints nothing of it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::approve::Approve;
use crate::host::HostPattern;
use crate::pin::SpkiPin;
use crate::rules::RequestRules;

/// Where a secret's real value may go (the secret-boundary model).
///
/// The proxy enforces [`Sink::Egress`]; the launcher enforces [`Sink::Command`] and
/// [`Sink::File`]; the others are for host engines that embed this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sink {
    /// Into a model prompt.
    Prompt,
    /// Into the agent's own context.
    Agent,
    /// Into the launched command's environment (the sandbox sees the value).
    Command,
    /// Into tool-call parameters.
    Params,
    /// Into a 0600 file in a directory the run owns (the sandbox sees the value).
    File,
    /// Swapped by the proxy into requests toward the granted hosts (the sandbox never sees it).
    Egress,
}

impl Sink {
    /// Every sink, in declaration-reference order.
    pub const ALL: [Sink; 6] = [
        Sink::Prompt,
        Sink::Agent,
        Sink::Command,
        Sink::Params,
        Sink::File,
        Sink::Egress,
    ];

    /// The sinks `sluice run` serves itself: the proxy's swap, and the launcher's
    /// environment and file. `prompt`, `agent` and `params` need a host engine.
    pub const LAUNCHER: [Sink; 3] = [Sink::Egress, Sink::Command, Sink::File];

    /// The name used in declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            Sink::Prompt => "prompt",
            Sink::Agent => "agent",
            Sink::Command => "command",
            Sink::Params => "params",
            Sink::File => "file",
            Sink::Egress => "egress",
        }
    }

    /// Parses a declaration name (lowercase only).
    pub fn from_name(name: &str) -> Option<Sink> {
        Sink::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A part of a request a secret's `in:` may grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// A header value (optionally only the names in `header:`).
    Header,
    /// The URL's query string.
    Query,
    /// The request body.
    Body,
}

impl Place {
    /// Every place.
    pub const ALL: [Place; 3] = [Place::Header, Place::Query, Place::Body];

    /// The name used in declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Header => "header",
            Place::Query => "query",
            Place::Body => "body",
        }
    }

    /// Parses a declaration name (lowercase only).
    pub fn from_name(name: &str) -> Option<Place> {
        Place::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in a request a placeholder was found.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// In the value of this header (name lowercased; compared lowercased anyway).
    Header(String),
    /// In the query string.
    Query,
    /// In the body.
    Body,
}

impl Location {
    /// The kind of place, without the header name.
    pub fn place(&self) -> Place {
        match self {
            Location::Header(_) => Place::Header,
            Location::Query => Place::Query,
            Location::Body => Place::Body,
        }
    }
}

impl fmt::Display for Location {
    /// The audit log's form: `header:authorization`, `query`, `body`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Header(name) => write!(f, "header:{}", name.to_ascii_lowercase()),
            Location::Query => f.write_str("query"),
            Location::Body => f.write_str("body"),
        }
    }
}

/// A literal value from the declaration. Zeroized on drop; `Debug` prints no byte of it.
pub struct Literal(pub(crate) Zeroizing<Vec<u8>>);

impl fmt::Debug for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Literal(<{} bytes redacted>)", self.0.len())
    }
}

/// Where a secret's real value is read at launch.
#[derive(Debug)]
pub enum Source {
    /// `from: { env: VAR }`.
    Env(String),
    /// `from: { file: PATH }`, resolved against the declaration's directory when relative
    /// and the declaration was loaded from a file. One trailing newline is trimmed.
    File(PathBuf),
    /// `from: { command: [PROGRAM, ARGS...] }`: run without a shell, at start and at each
    /// reload, within [`crate::COMMAND_TIMEOUT`]; its stdout less one trailing newline is
    /// the value.
    Command(Vec<String>),
    /// `value:` in the declaration itself.
    Literal(Literal),
    /// `oauth2:`: the access token sluice mints; no source is read for it.
    Minted,
}

/// What a secret's placeholder looks like (`placeholder:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlaceholderForm {
    /// No `placeholder:`: shaped like the value when it is in a well-known format
    /// (`shape::FORMATS`), `SLUICE_<NAME>_<nonce>` otherwise.
    Default,
    /// `placeholder: shaped`: the value's own shape, whatever it is.
    Shaped,
    /// `placeholder: plain`: always `SLUICE_<NAME>_<nonce>`.
    Plain,
    /// `placeholder: "<literal>"`: this one, every run.
    Fixed(String),
    /// No `placeholder:` on a secret whose value is not known at start but whose format is
    /// (a GitHub App's installation token): shaped like this sample of the format.
    Like(&'static str),
}

/// One secret's declaration, compiled.
#[derive(Debug)]
pub struct SecretDecl {
    pub(crate) name: String,
    pub(crate) hosts: Vec<HostPattern>,
    pub(crate) sinks: Vec<Sink>,
    pub(crate) sinks_explicit: bool,
    pub(crate) locations: Vec<Place>,
    pub(crate) header_names: Option<Vec<String>>,
    pub(crate) placeholder: PlaceholderForm,
    /// `allow:`: the requests it may be swapped into; `None` admits every request.
    pub(crate) rules: Option<RequestRules>,
    /// `budget:`: how many requests per window it may be swapped into.
    pub(crate) budget: Option<Budget>,
    /// `approve:`: the uses that wait for a person's decision; `None` when none does.
    pub(crate) approve: Option<Approve>,
    /// `pin:`: the SPKI pins an upstream's verified chain must hold one of; empty when
    /// unpinned.
    pub(crate) pins: Vec<SpkiPin>,
    pub(crate) source: Source,
    /// For a part of a signing secret: the signer's index in [`crate::Policy::signers`]
    /// and which part this is.
    pub(crate) signs: Option<(usize, SigningPart)>,
    /// For a part of a minted secret: the minter's index in [`crate::Policy::minters`] and
    /// which part this is.
    pub(crate) mints: Option<(usize, MintPart)>,
}

impl SecretDecl {
    /// The secret's name (the key under `secrets:`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hosts it is granted toward (also reachable by construction).
    pub fn hosts(&self) -> &[HostPattern] {
        &self.hosts
    }

    /// Its sinks; `[Egress]` when the declaration wrote none, empty when redact-only.
    pub fn sinks(&self) -> &[Sink] {
        &self.sinks
    }

    /// Whether `sinks:` was written (false means the `[egress]` default applied).
    pub fn sinks_explicit(&self) -> bool {
        self.sinks_explicit
    }

    /// Its budget (`budget:`), when it has one.
    pub fn budget(&self) -> Option<Budget> {
        self.budget
    }

    /// Which of its uses wait for a decision (`approve:`), when any does.
    pub fn approve(&self) -> Option<&Approve> {
        self.approve.as_ref()
    }

    /// Whether a request with `method` that swaps it waits for a decision.
    pub fn needs_approval(&self, method: &str) -> bool {
        self.approve.as_ref().is_some_and(|a| a.covers(method))
    }

    /// Its certificate pins (`pin:`); empty when it has none.
    pub fn pins(&self) -> &[SpkiPin] {
        &self.pins
    }

    /// Its request rules (`allow:`), when it has them.
    pub fn rules(&self) -> Option<&RequestRules> {
        self.rules.as_ref()
    }

    /// Whether it is granted `sink`.
    pub fn grants(&self, sink: Sink) -> bool {
        self.sinks.contains(&sink)
    }

    /// Whether it is redact-only (`sinks: []`): redacted everywhere, swapped nowhere.
    pub fn is_redact_only(&self) -> bool {
        self.sinks.is_empty()
    }

    /// This secret's effective grants in one line, as `sluice check` prints them: the
    /// sinks, and for `egress` the hosts and the request parts (`header` names when
    /// narrowed); `redact-only` for `sinks: []`. Defaults applied, nothing left implied.
    ///
    /// ```
    /// use sluice_policies::Policy;
    /// let yaml = "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    hosts: [api.github.com, \"*.githubusercontent.com\"]\n    sinks: [egress]\n    header: [Authorization]\n";
    /// let loaded = Policy::parse(yaml, "p.yaml").unwrap();
    /// assert_eq!(
    ///     loaded.policy.secrets()[0].grant_line(),
    ///     "egress → api.github.com, *.githubusercontent.com; header Authorization"
    /// );
    /// ```
    pub fn grant_line(&self) -> String {
        if let Some((_, part)) = self.signs {
            let hosts: Vec<String> = self.hosts.iter().map(ToString::to_string).collect();
            return format!("signs → {}; the {} part", hosts.join(", "), part.as_str());
        }
        if let Some((_, part)) = self.mints
            && part != MintPart::AccessToken
        {
            let hosts: Vec<String> = self.hosts.iter().map(ToString::to_string).collect();
            return format!(
                "held by sluice for its token requests to {}; never swapped",
                hosts.join(", ")
            );
        }
        if self.sinks.is_empty() {
            return "redact-only".to_owned();
        }
        let sinks: Vec<&str> = self.sinks.iter().map(|sink| sink.as_str()).collect();
        let mut line = sinks.join(", ");
        if self.grants(Sink::Egress) {
            let hosts: Vec<String> = self.hosts.iter().map(ToString::to_string).collect();
            let places: Vec<String> = self
                .locations
                .iter()
                .map(|place| match (place, &self.header_names) {
                    (Place::Header, Some(names)) => {
                        let names: Vec<String> = names.iter().map(|n| display_header(n)).collect();
                        format!("header {}", names.join(", "))
                    }
                    (place, _) => place.as_str().to_owned(),
                })
                .collect();
            line.push_str(&format!(" → {}; {}", hosts.join(", "), places.join(", ")));
            if let Some(rules) = &self.rules {
                let plural = if rules.len() == 1 { "" } else { "s" };
                line.push_str(&format!("; {} request rule{plural}", rules.len()));
            }
            if let Some(budget) = self.budget {
                line.push_str(&format!("; at most {budget}"));
            }
            if let Some(approve) = &self.approve {
                line.push_str(&format!("; {approve} wait for approval"));
            }
            if !self.pins.is_empty() {
                let plural = if self.pins.len() == 1 { "" } else { "s" };
                line.push_str(&format!("; pinned to {} key{plural}", self.pins.len()));
            }
        }
        // Both granted: the launcher hands the value over one way, in the variable.
        if self.grants(Sink::Command) && self.grants(Sink::File) {
            line.push_str("; `sluice run` serves command (the value in the variable), not file");
        }
        line
    }

    /// Whether a runtime serving only `served` leaves this secret's grants unserved: it
    /// names sinks, and none of them is among `served` (a placeholder nothing would ever
    /// resolve). A redact-only secret is always served: redaction needs no sink.
    ///
    /// ```
    /// use sluice_policies::{Policy, Sink};
    /// let yaml = "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [prompt, agent]\n";
    /// let loaded = Policy::parse(yaml, "p.yaml").unwrap();
    /// assert!(loaded.policy.secrets()[0].unserved_by(&Sink::LAUNCHER));
    /// assert!(!loaded.policy.secrets()[0].unserved_by(&Sink::ALL));
    /// ```
    pub fn unserved_by(&self, served: &[Sink]) -> bool {
        !self.sinks.is_empty() && !self.sinks.iter().any(|sink| served.contains(sink))
    }

    /// The request parts `in:` grants (default `[Header]`).
    pub fn locations(&self) -> &[Place] {
        &self.locations
    }

    /// The header names `header:` allows, lowercased; `None` means any header.
    pub fn header_names(&self) -> Option<&[String]> {
        self.header_names.as_deref()
    }

    /// The fixed `placeholder:`, when the declaration gives one.
    pub fn fixed_placeholder(&self) -> Option<&str> {
        match &self.placeholder {
            PlaceholderForm::Fixed(fixed) => Some(fixed),
            _ => None,
        }
    }

    /// What `placeholder:` asks for.
    pub fn placeholder_form(&self) -> &PlaceholderForm {
        &self.placeholder
    }

    /// Where its value is read.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// For a part of a signing secret: the signer's index in [`crate::Policy::signers`]
    /// and which part this is. Such a secret is never swapped: it only signs.
    pub fn signs(&self) -> Option<(usize, SigningPart)> {
        self.signs
    }

    /// For a part of a minted secret (`oauth2:`): its minter's index in
    /// [`crate::Policy::minters`] and which part it is.
    pub fn mints(&self) -> Option<(usize, MintPart)> {
        self.mints
    }

    /// Whether the sandbox is given this secret's placeholder (in its environment and in
    /// `placeholders.env`): every secret but a minted secret's key, which only sluice uses.
    pub fn in_sandbox(&self) -> bool {
        self.mints.is_none_or(|(_, part)| part.in_sandbox())
    }
}

/// The name used in a minted placeholder: the secret's name, uppercased, with every
/// character outside `[A-Za-z0-9_]` turned into `_`.
pub fn placeholder_name(secret: &str) -> String {
    secret
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// A lowercased header name as it is usually written (`authorization` → `Authorization`,
/// `x-api-key` → `X-Api-Key`), for display only.
fn display_header(name: &str) -> String {
    name.split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// How a signing secret signs (`sign:`). Each kind is one signer in `sluice-sign`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignKind {
    /// AWS Signature Version 4: the access key id, the secret access key, and for
    /// temporary credentials the session token.
    AwsSigV4,
}

impl SignKind {
    /// The name used in declarations.
    pub fn as_str(self) -> &'static str {
        match self {
            SignKind::AwsSigV4 => "aws-sigv4",
        }
    }

    /// Parses a declaration name.
    pub fn from_name(name: &str) -> Option<SignKind> {
        (name == "aws-sigv4").then_some(SignKind::AwsSigV4)
    }

    /// The parts of its credential, required ones first.
    pub fn parts(self) -> &'static [SigningPart] {
        match self {
            SignKind::AwsSigV4 => &[
                SigningPart::AccessKeyId,
                SigningPart::SecretAccessKey,
                SigningPart::SessionToken,
            ],
        }
    }
}

impl fmt::Display for SignKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One part of a signing secret's credential. Each part is a secret of its own in
/// [`crate::Policy::secrets`], named `SIGNER.PART` (`aws_prod.access_key_id`), with its own
/// placeholder, value and variable (`AWS_PROD_ACCESS_KEY_ID`), so that the guard knows it
/// like any other: refused toward other hosts, redacted in responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SigningPart {
    /// The access key id: sent in the clear in the signature's credential scope.
    AccessKeyId,
    /// The secret access key: never sent, only signs.
    SecretAccessKey,
    /// The session token of temporary credentials: sent in `x-amz-security-token`.
    SessionToken,
}

impl SigningPart {
    /// The key under `from:`, and the part's name after the signer's.
    pub fn as_str(self) -> &'static str {
        match self {
            SigningPart::AccessKeyId => "access_key_id",
            SigningPart::SecretAccessKey => "secret_access_key",
            SigningPart::SessionToken => "session_token",
        }
    }

    /// Whether a credential of this kind must have it.
    pub fn required(self) -> bool {
        !matches!(self, SigningPart::SessionToken)
    }

    /// The standard variable an SDK reads it from (`AWS_ACCESS_KEY_ID`, …).
    pub fn standard_variable(self) -> &'static str {
        match self {
            SigningPart::AccessKeyId => "AWS_ACCESS_KEY_ID",
            SigningPart::SecretAccessKey => "AWS_SECRET_ACCESS_KEY",
            SigningPart::SessionToken => "AWS_SESSION_TOKEN",
        }
    }
}

/// A secret with `sign:`: it is never swapped into a request; sluice verifies the sandbox's
/// signature by its placeholders and signs the request again with its real parts, toward
/// its hosts (and services and regions) only.
#[derive(Debug)]
pub struct SignerDecl {
    pub(crate) name: String,
    pub(crate) kind: SignKind,
    pub(crate) hosts: Vec<HostPattern>,
    pub(crate) services: Option<Vec<String>>,
    pub(crate) regions: Option<Vec<String>>,
    /// Each part and the index of its secret in [`crate::Policy::secrets`].
    pub(crate) parts: Vec<(SigningPart, usize)>,
}

impl SignerDecl {
    /// The name declared under `secrets:`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How it signs.
    pub fn kind(&self) -> SignKind {
        self.kind
    }

    /// The hosts it signs toward.
    pub fn hosts(&self) -> &[HostPattern] {
        &self.hosts
    }

    /// The services it may sign for; `None` means every one.
    pub fn services(&self) -> Option<&[String]> {
        self.services.as_deref()
    }

    /// The regions it may sign for; `None` means every one.
    pub fn regions(&self) -> Option<&[String]> {
        self.regions.as_deref()
    }

    /// Its parts, each with the index of its secret in [`crate::Policy::secrets`].
    pub fn parts(&self) -> &[(SigningPart, usize)] {
        &self.parts
    }

    /// The index in [`crate::Policy::secrets`] of `part`, if declared.
    pub fn part(&self, part: SigningPart) -> Option<usize> {
        self.parts.iter().find(|(p, _)| *p == part).map(|(_, i)| *i)
    }
}

/// The name of a signing secret's part as a secret of its own: `SIGNER.PART`.
pub fn part_secret_name(signer: &str, part: SigningPart) -> String {
    format!("{signer}.{}", part.as_str())
}

/// A secret's `budget:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Requests per window.
    pub requests: u64,
    /// The window's length.
    pub per: Duration,
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.requests == 1 { "" } else { "s" };
        write!(
            f,
            "{} request{plural} per {}",
            self.requests,
            humantime::format_duration(self.per)
        )
    }
}

/// One part of a minted credential, each a secret of its own to the guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MintPart {
    /// The access token: the secret's own name, swapped where granted.
    AccessToken,
    /// The refresh token (`NAME.refresh_token`): rotated by the provider, held by sluice.
    RefreshToken,
    /// The client secret (`NAME.client_secret`).
    ClientSecret,
    /// A service account's key file (`NAME.service_account`, Google's JSON), for the
    /// `jwt_bearer` grant: it signs the assertion, and no client in the sandbox needs it.
    ServiceAccount,
    /// A GitHub App's private key (`NAME.private_key`, PEM RSA): it signs the app's JWT.
    PrivateKey,
}

impl MintPart {
    /// The key under `oauth2:`, and the part's name after the secret's.
    pub fn as_str(self) -> &'static str {
        match self {
            MintPart::AccessToken => "access_token",
            MintPart::RefreshToken => "refresh_token",
            MintPart::ClientSecret => "client_secret",
            MintPart::ServiceAccount => "service_account",
            MintPart::PrivateKey => "private_key",
        }
    }

    /// Whether the sandbox is given this part's placeholder: the parts a client that
    /// refreshes by itself sends (sluice answers those requests), never a key only sluice
    /// signs with.
    pub fn in_sandbox(self) -> bool {
        !matches!(self, MintPart::ServiceAccount | MintPart::PrivateKey)
    }
}
