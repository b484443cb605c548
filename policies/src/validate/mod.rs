//! From the raw declaration to the compiled one: every rule of the declaration checked,
//! every error and lint collected with its YAML path and line:column (never only the
//! first), and, when no error was found, the parts a [`crate::Policy`] is built from.
//!
//! This module owns the order of the checks and the hand-off ([`Validated`]); the rules
//! live beside it, one concern per file: `egress.rs` (the `egress:` lists), `secret.rs`
//! (each secret's grant, and the lints across secrets) and `source.rs` (where a secret's
//! value comes from). It must never stop at the first error, read a secret's source (that
//! happens at launch, in [`crate::Policy::resolve`]) or touch the network.
//!
//! Messages produced here name secrets, keys and hosts, never a secret value.

mod approve;
mod budget;
mod egress;
mod empty;
mod github;
mod mint;
mod pin;
mod rules;
mod secret;
mod sign;
mod source;

use std::path::Path;

use ipnet::IpNet;
use serde_saphyr::Spanned;

use crate::error::{Diagnostic, Problem};
use crate::host::HostPattern;
use crate::mint::MinterDecl;
use crate::model::MintPart;
use crate::model::{SecretDecl, SignerDecl};
use crate::raw::{RawDeclaration, SpannedList};

pub(crate) use source::header_unfit_byte;

/// A declaration that passed validation, ready to become a [`crate::Policy`].
pub(crate) struct Validated {
    pub(crate) secrets: Vec<SecretDecl>,
    pub(crate) signers: Vec<SignerDecl>,
    pub(crate) minters: Vec<MinterDecl>,
    pub(crate) allow: Vec<HostPattern>,
    pub(crate) verbatim: Vec<HostPattern>,
    pub(crate) passthrough: Vec<HostPattern>,
    pub(crate) ask: Vec<HostPattern>,
    pub(crate) allow_ips: Vec<IpNet>,
}

/// Collects diagnostics for one file.
struct Ctx<'a> {
    file: &'a str,
    out: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn at<T>(&mut self, node: &Spanned<T>, path: impl Into<String>, problem: Problem) {
        self.out.push(Diagnostic {
            file: self.file.to_owned(),
            line: node.referenced.line(),
            column: node.referenced.column(),
            path: path.into(),
            problem,
        });
    }

    fn at_start(&mut self, path: impl Into<String>, problem: Problem) {
        self.out.push(Diagnostic {
            file: self.file.to_owned(),
            line: 1,
            column: 1,
            path: path.into(),
            problem,
        });
    }

    /// Parses every entry of a host list, reporting each bad one.
    fn hosts(&mut self, list: Option<&SpannedList>, path: &str) -> Vec<(HostPattern, Pos)> {
        let mut out = Vec::new();
        for (i, entry) in list
            .map(|l| l.value.as_slice())
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            match HostPattern::parse(&entry.value) {
                Ok(p) => out.push((p, Pos::of(entry))),
                Err(e) => self.at(entry, format!("{path}[{i}]"), Problem::Host(e)),
            }
        }
        out
    }
}

/// A position kept after the raw node is gone.
#[derive(Clone, Copy)]
struct Pos {
    line: u64,
    column: u64,
}

impl Pos {
    fn of<T>(node: &Spanned<T>) -> Pos {
        Pos {
            line: node.referenced.line(),
            column: node.referenced.column(),
        }
    }
}

/// Checks `raw` (parsed from `source`) against every rule. Returns the diagnostics (errors and warnings, in file
/// order) and, when none is an error, the validated parts.
pub(crate) fn validate(
    raw: RawDeclaration,
    source: &str,
    file: &str,
    base_dir: Option<&Path>,
) -> (Option<Validated>, Vec<Diagnostic>) {
    let mut cx = Ctx {
        file,
        out: Vec::new(),
    };
    empty::empty_keys(&mut cx, source);

    match &raw.version {
        None if raw.secrets.is_none() && raw.egress.is_none() => cx.at_start("", Problem::Empty),
        None => cx.at_start("version", Problem::MissingVersion),
        Some(v) if v.value != 1 => {
            cx.at(v, "version", Problem::UnsupportedVersion { found: v.value })
        }
        Some(_) => {}
    }

    let egress = egress::egress(&mut cx, raw.egress.as_ref().map(|e| &e.value));
    let passthrough_patterns: Vec<HostPattern> =
        egress.passthrough.iter().map(|(p, _)| p.clone()).collect();

    // secrets: each compiles to one secret, or (with `sign:`) to a signer and its parts
    let mut compiled: Vec<Option<Compiled>> = Vec::new();
    let mut secret_hosts: Vec<Vec<(HostPattern, Pos)>> = Vec::new();
    if let Some(list) = &raw.secrets {
        let declared: Vec<&str> = list.value.0.iter().map(|(n, _)| n.value.as_str()).collect();
        for (name, secret) in list.value.0.iter() {
            let (entry, hosts) = if secret.value.sign.is_some() {
                let (signer, hosts) = sign::signer_decl(
                    &mut cx,
                    name,
                    secret,
                    &passthrough_patterns,
                    base_dir,
                    &declared,
                );
                (signer.map(Compiled::Signer), hosts)
            } else if let Some(app) = &secret.value.github_app {
                if let Some(oauth2) = &secret.value.oauth2 {
                    let problem = crate::error::MintProblem::TwoMinters {
                        secret: name.value.clone(),
                    };
                    let path = format!("secrets.{}.oauth2", name.value);
                    cx.at(oauth2, path, Problem::Mint(problem));
                }
                let (decl, hosts) =
                    secret::secret_decl(&mut cx, name, secret, &passthrough_patterns, base_dir);
                let minter = github::app(&mut cx, name, app, base_dir, &declared);
                let both = decl.zip(minter);
                (
                    both.map(|(decl, minter)| Compiled::Minted(decl, Box::new(minter))),
                    hosts,
                )
            } else if let Some(oauth2) = &secret.value.oauth2 {
                let (decl, hosts) =
                    secret::secret_decl(&mut cx, name, secret, &passthrough_patterns, base_dir);
                let minter = mint::minter(&mut cx, name, oauth2, base_dir, &declared);
                let both = decl.zip(minter);
                (
                    both.map(|(decl, minter)| Compiled::Minted(decl, Box::new(minter))),
                    hosts,
                )
            } else {
                let (decl, hosts) =
                    secret::secret_decl(&mut cx, name, secret, &passthrough_patterns, base_dir);
                (decl.map(Compiled::Secret), hosts)
            };
            compiled.push(entry);
            secret_hosts.push(hosts);
        }
    }
    let names: Vec<Option<String>> = compiled
        .iter()
        .map(|c| {
            c.as_ref().map(|c| match c {
                Compiled::Secret(decl) | Compiled::Minted(decl, _) => decl.name.clone(),
                Compiled::Signer((signer, _)) => signer.name.clone(),
            })
        })
        .collect();

    secret::placeholders(
        &mut cx,
        raw.secrets
            .as_ref()
            .map(|s| &s.value.0[..])
            .unwrap_or_default(),
    );
    secret::broad_wildcards(
        &mut cx,
        &names,
        &secret_hosts,
        &egress.allow,
        &egress.verbatim,
    );

    // A host asked about that a secret's hosts reach already (the egress lists were
    // weighed in `egress.rs`).
    for (a, apos) in &egress.ask {
        let granted = names.iter().zip(&secret_hosts).find_map(|(name, hosts)| {
            let (other, _) = hosts.iter().find(|(p, _)| a.overlaps(p))?;
            Some((name.clone().unwrap_or_default(), other.to_string()))
        });
        if let Some((name, other)) = granted {
            push_at(
                &mut cx,
                *apos,
                "egress.ask".into(),
                Problem::AskReachable {
                    ask: a.to_string(),
                    other,
                    list: format!("secrets.{name}.hosts"),
                },
            );
        }
    }

    cx.out.sort_by_key(|d| (d.line, d.column));
    if cx.out.iter().any(Diagnostic::is_error) {
        return (None, cx.out);
    }
    // Parts take their place in declaration order, so that a secret's index (the guard's
    // id for it) follows the file.
    let mut secrets = Vec::new();
    let mut signers = Vec::new();
    let mut minters = Vec::new();
    for entry in compiled {
        match entry.expect("no error, so every secret compiled") {
            Compiled::Secret(decl) => secrets.push(decl),
            Compiled::Minted(mut decl, compiled) => {
                let (mut minter, parts) = *compiled;
                let index = minters.len();
                decl.mints = Some((index, MintPart::AccessToken));
                minter.parts.push((MintPart::AccessToken, secrets.len()));
                secrets.push(decl);
                for (part, mut decl) in parts {
                    decl.mints = Some((index, part));
                    minter.parts.push((part, secrets.len()));
                    secrets.push(decl);
                }
                minters.push(minter);
            }
            Compiled::Signer((mut signer, parts)) => {
                for (part, mut decl) in parts {
                    decl.signs = Some((signers.len(), part));
                    signer.parts.push((part, secrets.len()));
                    secrets.push(decl);
                }
                signers.push(signer);
            }
        }
    }
    let strip = |v: Vec<(HostPattern, Pos)>| v.into_iter().map(|(p, _)| p).collect();
    let validated = Validated {
        secrets,
        signers,
        minters,
        allow: strip(egress.allow),
        verbatim: strip(egress.verbatim),
        passthrough: passthrough_patterns,
        ask: strip(egress.ask),
        allow_ips: egress.allow_ips,
    };
    (Some(validated), cx.out)
}

/// One entry under `secrets:`, compiled.
enum Compiled {
    Secret(SecretDecl),
    /// The access token's secret, and the minter with its other parts.
    Minted(SecretDecl, Box<mint::Compiled>),
    Signer(sign::Compiled),
}

fn push_at(cx: &mut Ctx<'_>, pos: Pos, path: String, problem: Problem) {
    cx.out.push(Diagnostic {
        file: cx.file.to_owned(),
        line: pos.line,
        column: pos.column,
        path,
        problem,
    });
}
