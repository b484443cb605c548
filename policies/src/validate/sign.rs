//! A signing secret (`sign:`), checked: a known kind, a source for each part of its
//! credential, hosts, and the optional `services` and `regions`; no key that would place it
//! in a request (`in`, `header`, `value`, `placeholder`), since it is never placed in one.
//!
//! It compiles into one [`SignerDecl`] and one [`SecretDecl`] per part (`NAME.PART`), so
//! that every part is known to the guard like any secret. Like the rest of validation, it
//! never reads a source and never puts a value into a diagnostic.

use std::path::Path;

use serde_saphyr::Spanned;

use super::secret::{check_name, granted_hosts};
use super::source::{Sources, one_source};
use super::{Ctx, Pos, push_at};
use crate::error::Problem;
use crate::error::{ApproveProblem, BudgetProblem, PinProblem};
use crate::host::HostPattern;
use crate::launcher_env::reserved;
use crate::model::{
    Place, PlaceholderForm, SecretDecl, SignKind, SignerDecl, SigningPart, Sink, part_secret_name,
    placeholder_name,
};
use crate::raw::{RawPartFrom, RawSecret, SpannedList};
use crate::rules::RuleProblem;

/// A compiled signing secret: the signer (its `parts` indexes still to be set) and its
/// parts' secrets.
pub(super) type Compiled = (SignerDecl, Vec<(SigningPart, SecretDecl)>);

/// Validates one secret with `sign:`. `declared` is every name under `secrets:`, so that a
/// part's name (`NAME.PART`) cannot shadow a declared secret.
pub(super) fn signer_decl(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    secret: &Spanned<RawSecret>,
    passthrough: &[HostPattern],
    base_dir: Option<&Path>,
    declared: &[&str],
) -> (Option<Compiled>, Vec<(HostPattern, Pos)>) {
    let n = &name.value;
    let base = format!("secrets.{n}");
    let errors_before = cx.out.iter().filter(|d| d.is_error()).count();
    let s = &secret.value;
    check_name(cx, name, &base);

    let sign = s.sign.as_ref().expect("called for a secret with sign:");
    let kind = SignKind::from_name(&sign.value);
    if kind.is_none() {
        cx.at(
            sign,
            format!("{base}.sign"),
            Problem::UnknownSignKind {
                secret: n.clone(),
                found: sign.value.clone(),
            },
        );
    }
    let kind_name = kind.unwrap_or(SignKind::AwsSigV4).as_str();

    // Keys that would place it in a request.
    let placing = [
        ("in", s.locations.as_ref().map(Pos::of)),
        ("header", s.header.as_ref().map(Pos::of)),
        ("value", s.value.as_ref().map(Pos::of)),
        ("placeholder", s.placeholder.as_ref().map(Pos::of)),
    ];
    for (key, at) in placing {
        if let Some(at) = at {
            push_at(
                cx,
                at,
                format!("{base}.{key}"),
                Problem::SigningKey {
                    secret: n.clone(),
                    kind: kind_name,
                    key,
                },
            );
        }
    }
    if let Some(oauth2) = &s.oauth2 {
        cx.at(
            oauth2,
            format!("{base}.oauth2"),
            Problem::Mint(crate::error::MintProblem::AlsoSigns { secret: n.clone() }),
        );
    }
    if let Some(app) = &s.github_app {
        cx.at(
            app,
            format!("{base}.github_app"),
            Problem::Mint(crate::error::MintProblem::AlsoSigns { secret: n.clone() }),
        );
    }
    if let Some(allow) = &s.allow {
        cx.at(
            allow,
            format!("{base}.allow"),
            Problem::Rule(RuleProblem::OnSigningSecret { secret: n.clone() }),
        );
    }
    if let Some(budget) = &s.budget {
        cx.at(
            budget,
            format!("{base}.budget"),
            Problem::Budget(BudgetProblem::OnSigningSecret { secret: n.clone() }),
        );
    }
    if let Some(approve) = &s.approve {
        cx.at(
            approve,
            format!("{base}.approve"),
            Problem::Approve(ApproveProblem::OnSigningSecret { secret: n.clone() }),
        );
    }
    if let Some(pin) = &s.pin {
        cx.at(
            pin,
            format!("{base}.pin"),
            Problem::Pin(PinProblem::OnSigningSecret { secret: n.clone() }),
        );
    }
    if let Some(sinks) = &s.sinks
        && !(sinks.value.len() == 1 && sinks.value[0].value == "egress")
    {
        cx.at(
            sinks,
            format!("{base}.sinks"),
            Problem::SigningSinks { secret: n.clone() },
        );
    }

    let hosts = granted_hosts(cx, name, s.hosts.as_ref(), &base, true, passthrough);
    let services = scope_names(cx, n, s.services.as_ref(), &base, "services");
    let regions = scope_names(cx, n, s.regions.as_ref(), &base, "regions");

    // The parts, each with a source of its own.
    let mut parts = Vec::new();
    let kind_parts = kind.unwrap_or(SignKind::AwsSigV4).parts();
    match &s.from {
        None => {
            for part in kind_parts.iter().filter(|p| p.required()) {
                missing_part(cx, Pos::of(name), n, &base, kind_name, *part);
            }
        }
        Some(from) => {
            for (key, node) in [("env", &from.value.env), ("file", &from.value.file)] {
                if let Some(node) = node {
                    cx.at(
                        node,
                        format!("{base}.from.{key}"),
                        Problem::SigningWholeSource {
                            secret: n.clone(),
                            kind: kind_name,
                            parts: "access_key_id, secret_access_key, session_token",
                            key,
                        },
                    );
                }
            }
            for &part in kind_parts {
                let node: Option<&Spanned<RawPartFrom>> = match part {
                    SigningPart::AccessKeyId => from.value.access_key_id.as_ref(),
                    SigningPart::SecretAccessKey => from.value.secret_access_key.as_ref(),
                    SigningPart::SessionToken => from.value.session_token.as_ref(),
                };
                let Some(node) = node else {
                    if part.required() {
                        missing_part(cx, Pos::of(from), n, &base, kind_name, part);
                    }
                    continue;
                };
                let part_name = part_secret_name(n, part);
                if declared.contains(&part_name.as_str()) {
                    cx.at(
                        name,
                        base.clone(),
                        Problem::PartNameTaken {
                            secret: n.clone(),
                            part: part.as_str(),
                        },
                    );
                }
                let variable = placeholder_name(&part_name);
                if let Some(why) = reserved(&variable) {
                    cx.at(
                        name,
                        base.clone(),
                        Problem::ReservedVariable {
                            secret: part_name.clone(),
                            variable,
                            why: why.to_string(),
                        },
                    );
                }
                let sources = Sources {
                    env: node.value.env.as_ref(),
                    file: node.value.file.as_ref(),
                    command: node.value.command.as_ref(),
                };
                let source = one_source(
                    cx,
                    &part_name,
                    &sources,
                    Pos::of(node),
                    &format!("{base}.from.{}", part.as_str()),
                    base_dir,
                );
                if let Some(source) = source {
                    parts.push((part, part_name, source));
                }
            }
        }
    }

    let errors_after = cx.out.iter().filter(|d| d.is_error()).count();
    if errors_after != errors_before {
        return (None, hosts);
    }
    let kind = kind.expect("no error, so the kind is known");
    let patterns: Vec<HostPattern> = hosts.iter().map(|(h, _)| h.clone()).collect();
    let part_decls = parts
        .into_iter()
        .map(|(part, part_name, source)| {
            let decl = SecretDecl {
                rules: None,
                budget: None,
                approve: None,
                pins: Vec::new(),
                name: part_name,
                hosts: patterns.clone(),
                sinks: vec![Sink::Egress],
                sinks_explicit: true,
                // Never swapped anywhere: a placeholder of a part found outside the
                // signature it belongs in is refused like any ungranted one.
                locations: Vec::<Place>::new(),
                header_names: None,
                placeholder: PlaceholderForm::Plain,
                source,
                signs: None,
                mints: None,
            };
            (part, decl)
        })
        .collect();
    let signer = SignerDecl {
        name: n.clone(),
        kind,
        hosts: patterns,
        services,
        regions,
        parts: Vec::new(),
    };
    (Some((signer, part_decls)), hosts)
}

fn missing_part(
    cx: &mut Ctx<'_>,
    at: Pos,
    secret: &str,
    base: &str,
    kind: &'static str,
    part: SigningPart,
) {
    push_at(
        cx,
        at,
        format!("{base}.from"),
        Problem::MissingPart {
            secret: secret.to_owned(),
            kind,
            part: part.as_str(),
        },
    );
}

/// `services:` or `regions:`: AWS names (lowercase letters, digits, `-`), at least one.
fn scope_names(
    cx: &mut Ctx<'_>,
    secret: &str,
    list: Option<&SpannedList>,
    base: &str,
    key: &'static str,
) -> Option<Vec<String>> {
    let list = list?;
    if list.value.is_empty() {
        cx.at(
            list,
            format!("{base}.{key}"),
            Problem::NoValue {
                key: format!("{base}.{key}"),
            },
        );
        return None;
    }
    let (what, example) = match key {
        "services" => ("service", "s3"),
        _ => ("region", "eu-west-1"),
    };
    let mut names = Vec::new();
    for (i, entry) in list.value.iter().enumerate() {
        let v = &entry.value;
        let ok = !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            names.push(v.clone());
        } else {
            cx.at(
                entry,
                format!("{base}.{key}[{i}]"),
                Problem::BadScopeName {
                    secret: secret.to_owned(),
                    what,
                    example,
                    found: v.escape_debug().to_string(),
                },
            );
        }
    }
    Some(names)
}
