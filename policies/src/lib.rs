//! sluice's declaration: which secret may go where. This crate reads a declaration (YAML,
//! or JSON, which is YAML), refuses anything ambiguous with `file:line:col` diagnostics
//! that say what was expected and how to fix it, and compiles it into an immutable
//! [`Policy`] that the proxy and the launcher share: the egress decision
//! ([`Policy::reach`]), the grant decision ([`Policy::may`]), placeholder minting and
//! secret sources.
//!
//! It must never touch the network, and never print, log or put into an error a secret
//! value: diagnostics and refusals name secrets, keys and hosts only.
//!
//! # Pipeline
//!
//! raw (serde model, unknown keys refused, positions kept) → validated (every error and
//! lint collected with its YAML path and line:column) → compiled ([`Policy`]).
//!
//! # Example
//!
//! ```
//! use sluice_policies::{Policy, Sink};
//!
//! let yaml = "version: 1
//! secrets:
//!   github_token:
//!     from: { env: GITHUB_TOKEN }
//!     hosts: [api.github.com]
//!     sinks: [egress]
//! ";
//! let loaded = Policy::parse(yaml, "policy.yaml").expect("valid declaration");
//! assert!(loaded.warnings.is_empty());
//! let placeholders = loaded.policy.mint_placeholders();
//! assert!(placeholders.get("github_token").unwrap().starts_with("SLUICE_GITHUB_TOKEN_"));
//!
//! let err = Policy::parse("version: 1\nsecrets:\n  t:\n    hosts: [\"*\"]\n", "p.yaml").unwrap_err();
//! assert!(err.to_string().contains("p.yaml:4:13: error: secrets.t.hosts[0]: `*` matches too much"));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod approval_basis;
mod approve;
mod budget;
mod command;
pub mod credentials;
mod error;
mod fingerprint;
mod grant;
mod host;
pub mod launcher_env;
mod lint;
mod mint;
mod model;
mod pin;
mod placeholder;
mod policy;
mod random;
mod raw;
mod rules;
pub mod shape;
mod source;
mod validate;

pub use approval_basis::ApprovalBasis;
pub use approve::Approve;
pub use budget::{BudgetLedger, Charge, Exhausted};
pub use command::COMMAND_TIMEOUT;
pub use error::{
    ApproveProblem, BudgetProblem, Diagnostic, Diagnostics, HostError, MintProblem, PinProblem,
    Problem, Severity, SourceError,
};
pub use fingerprint::fingerprint;
pub use grant::{Permit, Ungranted};
pub use host::{HostPattern, normalize_host};
pub use ipnet::IpNet;
pub use mint::{
    ClientId, GithubApp, Grant, METADATA_HOST, METADATA_IP, MinterDecl, TokenBody, TokenUrl, Want,
    mint_part_name,
};
pub use model::{
    Budget, Literal, Location, MintPart, Place, PlaceholderForm, SecretDecl, SignKind, SignerDecl,
    SigningPart, Sink, Source, part_secret_name, placeholder_name,
};
pub use pin::SpkiPin;
pub use placeholder::{NONCE_BYTES, Placeholders};
pub use policy::{DeclarationFile, Denied, Loaded, Policy, Reach};
pub use random::MintError;
pub use rules::{RequestLine, RequestRules, RuleProblem, normalize_path};
/// The guard's limits, which validation checks a declaration against: defined once, in
/// sluice-guard.
pub use sluice_guard::{MIN_PLACEHOLDER_LEN, MIN_VALUE_LEN};
pub use source::ResolvedSecret;

#[cfg(test)]
mod tests;
