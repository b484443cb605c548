//! A minted secret (`oauth2:`), checked: a known grant, an `https` token endpoint, exactly
//! the parts the grant takes, each with one source; sinks `[egress]` (or redact-only).
//!
//! The access token is compiled by `secret.rs` like any secret (its hosts, `in`, rules,
//! budget and pins are the grants of the token), with [`Source::Minted`]; this file
//! compiles the `oauth2:` block into a [`MinterDecl`] and one secret per part the sandbox
//! holds a placeholder for (`NAME.refresh_token`, `NAME.client_secret`). A part is granted
//! toward the token endpoint only, and never swapped anywhere: a sandbox's token request
//! carrying its placeholder is answered by sluice, never forwarded. Like the rest of
//! validation, it never reads a source and never puts a value into a diagnostic.

use std::path::Path;

use serde_saphyr::Spanned;

use super::source::{Sources, one_source};
use super::{Ctx, Pos, push_at};
use crate::error::{MintProblem, Problem};
use crate::host::HostPattern;
use crate::launcher_env::reserved;
use crate::mint::{ClientId, Grant, MinterDecl, TokenBody, TokenUrl, Want, mint_part_name};
use crate::model::MintPart;
use crate::model::{PlaceholderForm, SecretDecl, Sink, Source, placeholder_name};
use crate::raw::{RawClientId, RawOauth2, RawPartFrom, RawSecret};

/// A compiled minted secret: the minter (its `parts` indexes still to be set) and the
/// secrets of its parts other than the access token.
pub(super) type Compiled = (MinterDecl, Vec<(MintPart, SecretDecl)>);

/// The access token's source, for `secret.rs`: [`Source::Minted`], after checking that
/// nothing else claims to be its source and that it is granted egress or nothing.
pub(super) fn minted_source(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    s: &RawSecret,
    sinks: &[Sink],
    base: &str,
) -> Option<Source> {
    let n = &name.value;
    let sourced = [
        ("from", s.from.as_ref().map(Pos::of)),
        ("value", s.value.as_ref().map(Pos::of)),
    ];
    for (key, at) in sourced {
        if let Some(at) = at {
            let problem = MintProblem::AlsoSourced {
                secret: n.clone(),
                key,
            };
            push_at(cx, at, format!("{base}.{key}"), Problem::Mint(problem));
        }
    }
    if !sinks.is_empty() && sinks != [Sink::Egress] {
        let at = s.sinks.as_ref().map_or(Pos::of(name), Pos::of);
        let problem = MintProblem::Sinks { secret: n.clone() };
        push_at(cx, at, format!("{base}.sinks"), Problem::Mint(problem));
    }
    Some(Source::Minted)
}

/// Validates the `oauth2:` of one secret. `declared` is every name under `secrets:`, so
/// that a part's name (`NAME.PART`) cannot shadow a declared secret.
pub(super) fn minter(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    oauth2: &Spanned<RawOauth2>,
    base_dir: Option<&Path>,
    declared: &[&str],
) -> Option<Compiled> {
    let n = &name.value;
    let base = format!("secrets.{n}.oauth2");
    let errors_before = cx.out.iter().filter(|d| d.is_error()).count();
    let o = &oauth2.value;
    let mint = |cx: &mut Ctx<'_>, at: Pos, key: &str, problem: MintProblem| {
        push_at(cx, at, format!("{base}{key}"), Problem::Mint(problem));
    };

    let token_url = match &o.token_url {
        None => {
            let problem = MintProblem::Missing {
                secret: n.clone(),
                grant: o
                    .grant
                    .as_ref()
                    .and_then(|g| Grant::from_name(&g.value))
                    .map_or("every grant", Grant::as_str),
                key: "token_url",
            };
            mint(cx, Pos::of(oauth2), "", problem);
            None
        }
        Some(url) => match token_url(&url.value) {
            Ok(parsed) => Some(parsed),
            Err(why) => {
                let problem = MintProblem::TokenUrl {
                    secret: n.clone(),
                    found: url.value.escape_debug().to_string(),
                    why,
                };
                mint(cx, Pos::of(url), ".token_url", problem);
                None
            }
        },
    };

    let grant = match &o.grant {
        None => {
            let problem = MintProblem::Missing {
                secret: n.clone(),
                grant: "every grant",
                key: "grant",
            };
            mint(cx, Pos::of(oauth2), "", problem);
            None
        }
        Some(g) => match Grant::from_name(&g.value) {
            Some(grant) => Some(grant),
            None => {
                let problem = MintProblem::UnknownGrant {
                    secret: n.clone(),
                    found: g.value.escape_debug().to_string(),
                };
                mint(cx, Pos::of(g), ".grant", problem);
                None
            }
        },
    };

    let client_id = match &o.client_id {
        Some(id) if grant.map(Grant::wants_client_id) == Some(Want::Never) => {
            let problem = MintProblem::Unused {
                secret: n.clone(),
                grant: grant.map_or("this", Grant::as_str),
                key: "client_id",
            };
            mint(cx, Pos::of(id), ".client_id", problem);
            None
        }
        None if grant.map(Grant::wants_client_id) == Some(Want::Never) => None,
        None => {
            let problem = MintProblem::Missing {
                secret: n.clone(),
                grant: grant.map_or("every grant", Grant::as_str),
                key: "client_id",
            };
            mint(cx, Pos::of(oauth2), "", problem);
            None
        }
        Some(id) => match &id.value {
            RawClientId::Literal(literal) if literal.trim().is_empty() => {
                let problem = Problem::NoValue {
                    key: format!("{base}.client_id"),
                };
                cx.at(id, format!("{base}.client_id"), problem);
                None
            }
            RawClientId::Literal(literal) => Some(ClientId::Literal(literal.clone())),
            RawClientId::Source(from) => source_of(
                cx,
                &format!("{n}.client_id"),
                from,
                Pos::of(id),
                &format!("{base}.client_id"),
                base_dir,
            )
            .map(ClientId::Source),
        },
    };

    let scopes = o
        .scopes
        .as_ref()
        .map(|list| list.value.iter().map(|s| s.value.clone()).collect())
        .unwrap_or_default();
    let body = match &o.body {
        None => TokenBody::Form,
        Some(b) if b.value == "form" => TokenBody::Form,
        Some(b) if b.value == "json" => TokenBody::Json,
        Some(b) => {
            let problem = MintProblem::Body {
                secret: n.clone(),
                found: b.value.escape_debug().to_string(),
            };
            mint(cx, Pos::of(b), ".body", problem);
            TokenBody::Form
        }
    };
    // The parts the grant takes, each a secret of its own.
    let mut parts = Vec::new();
    if let (Some(grant), Some(url)) = (grant, &token_url) {
        let nodes = [
            (MintPart::RefreshToken, o.refresh_token.as_ref()),
            (MintPart::ClientSecret, o.client_secret.as_ref()),
            (MintPart::ServiceAccount, o.service_account.as_ref()),
        ];
        for (part, node) in nodes {
            let key = part.as_str();
            match (grant.wants(part), node) {
                (Want::Required, None) => {
                    let problem = MintProblem::Missing {
                        secret: n.clone(),
                        grant: grant.as_str(),
                        key,
                    };
                    mint(cx, Pos::of(oauth2), "", problem);
                }
                (Want::Never, Some(node)) => {
                    let problem = MintProblem::Unused {
                        secret: n.clone(),
                        grant: grant.as_str(),
                        key,
                    };
                    mint(cx, Pos::of(node), &format!(".{key}"), problem);
                }
                (_, None) => {}
                (_, Some(node)) => {
                    let part_name = mint_part_name(n, part);
                    part_name_free(cx, name, part, &part_name, declared);
                    if part == MintPart::RefreshToken {
                        lost_on_rotation(cx, n, &node.value, &format!("{base}.{key}"));
                    }
                    let path = format!("{base}.{key}");
                    if let Some(source) =
                        source_of(cx, &part_name, &node.value, Pos::of(node), &path, base_dir)
                    {
                        parts.push((part, part_decl(part_name, url, source)));
                    }
                }
            }
        }
    }

    let errors_after = cx.out.iter().filter(|d| d.is_error()).count();
    if errors_after != errors_before {
        return None;
    }
    let minter = MinterDecl {
        name: n.clone(),
        token_url: token_url?,
        grant: grant?,
        client_id,
        scopes,
        audience: o.audience.as_ref().map(|a| a.value.clone()),
        body,
        parts: Vec::new(),
        github: None,
    };
    Some((minter, parts))
}

/// A part's secret: granted toward the token endpoint only (which makes that endpoint
/// reachable and intercepted), in no place of a request: its placeholder found anywhere is
/// refused, unless sluice answers the request itself.
pub(super) fn part_decl(name: String, url: &TokenUrl, source: Source) -> SecretDecl {
    let endpoint = HostPattern::parse(&format!("{}:{}", bracketed(&url.host), url.port))
        .expect("a token URL's host was parsed as a host pattern already");
    SecretDecl {
        name,
        hosts: vec![endpoint],
        sinks: vec![Sink::Egress],
        sinks_explicit: true,
        locations: Vec::new(),
        header_names: None,
        placeholder: PlaceholderForm::Plain,
        rules: None,
        budget: None,
        approve: None,
        pins: Vec::new(),
        source,
        signs: None,
        mints: None,
    }
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// A part's name must not be a secret declared under `secrets:`, nor its variable one the
/// launcher sets.
pub(super) fn part_name_free(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    part: MintPart,
    part_name: &str,
    declared: &[&str],
) {
    let base = format!("secrets.{}", name.value);
    if declared.contains(&part_name) {
        let problem = Problem::PartNameTaken {
            secret: name.value.clone(),
            part: part.as_str(),
        };
        cx.at(name, base.clone(), problem);
    }
    let variable = placeholder_name(part_name);
    if let Some(why) = reserved(&variable) {
        let problem = Problem::ReservedVariable {
            secret: part_name.to_owned(),
            variable,
            why: why.to_string(),
        };
        cx.at(name, base, problem);
    }
}

/// A refresh token from `env` or `command` cannot take a rotated token back: warned.
fn lost_on_rotation(cx: &mut Ctx<'_>, secret: &str, from: &RawPartFrom, path: &str) {
    let given = [
        ("env", from.env.as_ref().map(Pos::of)),
        ("command", from.command.as_ref().map(Pos::of)),
    ];
    for (key, at) in given {
        if let Some(at) = at {
            let problem = MintProblem::RefreshTokenLost {
                secret: secret.to_owned(),
                key,
            };
            push_at(cx, at, format!("{path}.{key}"), Problem::Mint(problem));
        }
    }
}

pub(super) fn source_of(
    cx: &mut Ctx<'_>,
    secret: &str,
    from: &RawPartFrom,
    at: Pos,
    path: &str,
    base_dir: Option<&Path>,
) -> Option<Source> {
    let sources = Sources {
        env: from.env.as_ref(),
        file: from.file.as_ref(),
        command: from.command.as_ref(),
    };
    one_source(cx, secret, &sources, at, path, base_dir)
}

/// Parses `https://HOST[:PORT][/PATH]`; no user info, query or fragment.
pub(super) fn token_url(url: &str) -> Result<TokenUrl, &'static str> {
    let rest = match url.get(..8) {
        Some(scheme) if scheme.eq_ignore_ascii_case("https://") => &url[8..],
        _ => return Err("the scheme must be https"),
    };
    if rest.contains(['?', '#']) {
        return Err("a token URL has no query or fragment");
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err("credentials go under oauth2:, never in the URL");
    }
    if authority.is_empty() {
        return Err("no host");
    }
    if path
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err("the path holds whitespace");
    }
    let pattern = HostPattern::parse(authority).map_err(|_| "the host is not a valid name")?;
    if pattern.is_wildcard() {
        return Err("the host is a wildcard");
    }
    Ok(TokenUrl {
        url: url.to_owned(),
        host: pattern.name().to_owned(),
        port: pattern.port().unwrap_or(443),
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::token_url;

    #[test]
    fn a_token_url_is_https_with_a_host_and_maybe_a_port_and_a_path() {
        let url = token_url("https://OAuth2.Example.com/token").unwrap();
        assert_eq!(
            (url.host(), url.port(), url.path()),
            ("oauth2.example.com", 443, "/token")
        );
        let url = token_url("https://idp.test:8443").unwrap();
        assert_eq!(
            (url.host(), url.port(), url.path()),
            ("idp.test", 8443, "/")
        );
        for bad in [
            "http://idp.test/token",
            "idp.test/token",
            "https:///token",
            "https://u:p@idp.test/token",
            "https://idp.test/token?x=1",
            "https://*.idp.test/token",
            "https://idp.test:0/token",
        ] {
            assert!(token_url(bad).is_err(), "{bad}");
        }
    }
}
