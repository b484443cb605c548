//! A GitHub App secret (`github_app:`), checked: the App and its installation, the key that
//! signs its JWT (one source), the narrowing (at least one repository, each a bare name;
//! at least one permission, each `read`, `write` or `admin`), an `https` API root.
//!
//! It compiles into a [`MinterDecl`] of the `github_app` kind, whose token endpoint is
//! `{api}/app/installations/{id}/access_tokens`, and the private key's part
//! (`NAME.private_key`), granted toward that endpoint only and never given to the sandbox.
//! The access token itself is compiled by `secret.rs` like any secret; its placeholder is an
//! installation token's shape (`ghs_…`) unless `placeholder:` says otherwise. Like the rest
//! of validation, it never reads a source (`sluice run` proves the key when it starts).

use std::path::Path;

use serde_saphyr::Spanned;

use super::mint::{Compiled, part_decl, part_name_free, source_of, token_url};
use super::{Ctx, Pos, push_at};
use crate::error::{MintProblem, Problem};
use crate::mint::{GithubApp, Grant, MinterDecl, TokenBody, mint_part_name};
use crate::model::MintPart;
use crate::raw::RawGithubApp;

/// GitHub's API root, when `api:` is not given.
pub(crate) const GITHUB_API: &str = "https://api.github.com";

/// The levels a permission is asked at.
const LEVELS: [&str; 3] = ["read", "write", "admin"];

/// The App permissions GitHub documents (repository, organization and account ones).
const PERMISSIONS: &[&str] = &[
    "actions",
    "administration",
    "attestations",
    "checks",
    "codespaces",
    "contents",
    "dependabot_secrets",
    "deployments",
    "discussions",
    "environments",
    "issues",
    "merge_queues",
    "metadata",
    "packages",
    "pages",
    "pull_requests",
    "repository_custom_properties",
    "repository_hooks",
    "repository_projects",
    "secret_scanning_alerts",
    "secrets",
    "security_events",
    "single_file",
    "statuses",
    "vulnerability_alerts",
    "workflows",
    "members",
    "organization_administration",
    "organization_announcement_banners",
    "organization_copilot_seat_management",
    "organization_custom_org_roles",
    "organization_custom_properties",
    "organization_custom_roles",
    "organization_events",
    "organization_hooks",
    "organization_packages",
    "organization_personal_access_token_requests",
    "organization_personal_access_tokens",
    "organization_plan",
    "organization_projects",
    "organization_secrets",
    "organization_self_hosted_runners",
    "organization_user_blocking",
    "team_discussions",
    "email_addresses",
    "followers",
    "git_ssh_keys",
    "gpg_keys",
    "interaction_limits",
    "profile",
    "starring",
];

/// Validates the `github_app:` of one secret. `declared` is every name under `secrets:`,
/// so that the key's part name (`NAME.private_key`) cannot shadow a declared secret.
pub(super) fn app(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    app: &Spanned<RawGithubApp>,
    base_dir: Option<&Path>,
    declared: &[&str],
) -> Option<Compiled> {
    let n = &name.value;
    let base = format!("secrets.{n}.github_app");
    let errors_before = cx.out.iter().filter(|d| d.is_error()).count();
    let a = &app.value;
    let problem = |cx: &mut Ctx<'_>, at: Pos, key: &str, problem: MintProblem| {
        push_at(cx, at, format!("{base}{key}"), Problem::Mint(problem));
    };
    let missing = |cx: &mut Ctx<'_>, key: &'static str| {
        let at = Pos::of(app);
        problem(
            cx,
            at,
            "",
            MintProblem::AppMissing {
                secret: n.clone(),
                key,
            },
        );
    };

    let app_id = a.app_id.as_ref().map(|id| id.value);
    let installation_id = a.installation_id.as_ref().map(|id| id.value);
    if app_id.is_none() {
        missing(cx, "app_id");
    }
    if installation_id.is_none() {
        missing(cx, "installation_id");
    }

    let api = match &a.api {
        None => Some(GITHUB_API.to_owned()),
        Some(api) => match token_url(&api.value) {
            Ok(_) => Some(api.value.trim_end_matches('/').to_owned()),
            Err(why) => {
                let found = api.value.escape_debug().to_string();
                let at = Pos::of(api);
                problem(
                    cx,
                    at,
                    ".api",
                    MintProblem::AppApi {
                        secret: n.clone(),
                        found,
                        why,
                    },
                );
                None
            }
        },
    };

    let repositories = match &a.repositories {
        None => {
            missing(cx, "repositories");
            Vec::new()
        }
        Some(list) if list.value.is_empty() => {
            let key = "repositories";
            problem(
                cx,
                Pos::of(list),
                ".repositories",
                MintProblem::AppEmpty {
                    secret: n.clone(),
                    key,
                },
            );
            Vec::new()
        }
        Some(list) => {
            for (i, repo) in list.value.iter().enumerate() {
                if !is_repository_name(&repo.value) {
                    let found = repo.value.escape_debug().to_string();
                    let at = Pos::of(repo);
                    let key = format!(".repositories[{i}]");
                    problem(
                        cx,
                        at,
                        &key,
                        MintProblem::AppRepository {
                            secret: n.clone(),
                            found,
                        },
                    );
                }
            }
            list.value.iter().map(|r| r.value.clone()).collect()
        }
    };

    let permissions = match &a.permissions {
        None => {
            missing(cx, "permissions");
            Vec::new()
        }
        Some(map) if map.value.is_empty() => {
            let key = "permissions";
            problem(
                cx,
                Pos::of(map),
                ".permissions",
                MintProblem::AppEmpty {
                    secret: n.clone(),
                    key,
                },
            );
            Vec::new()
        }
        Some(map) => {
            for (permission, level) in &map.value {
                let key = format!(".permissions.{permission}");
                if !LEVELS.contains(&level.value.as_str()) {
                    let problem_ = MintProblem::AppLevel {
                        secret: n.clone(),
                        permission: permission.clone(),
                        found: level.value.escape_debug().to_string(),
                    };
                    problem(cx, Pos::of(level), &key, problem_);
                }
                if !PERMISSIONS.contains(&permission.as_str()) {
                    let found = permission.escape_debug().to_string();
                    let at = Pos::of(level);
                    problem(
                        cx,
                        at,
                        &key,
                        MintProblem::AppPermission {
                            secret: n.clone(),
                            found,
                        },
                    );
                }
            }
            map.value
                .iter()
                .map(|(p, level)| (p.clone(), level.value.clone()))
                .collect()
        }
    };

    // The endpoint the token is minted at: its host is intercepted (the key's part is
    // granted toward it), so that a sandbox asking it for a token is answered by sluice.
    let endpoint = match (&api, installation_id) {
        (Some(api), Some(id)) => {
            token_url(&format!("{api}/app/installations/{id}/access_tokens")).ok()
        }
        _ => None,
    };

    let mut parts = Vec::new();
    match (&a.private_key, &endpoint) {
        (None, _) => missing(cx, "private_key"),
        (Some(key), Some(url)) => {
            let part_name = mint_part_name(n, MintPart::PrivateKey);
            part_name_free(cx, name, MintPart::PrivateKey, &part_name, declared);
            let path = format!("{base}.private_key");
            if let Some(source) =
                source_of(cx, &part_name, &key.value, Pos::of(key), &path, base_dir)
            {
                parts.push((MintPart::PrivateKey, part_decl(part_name, url, source)));
            }
        }
        (Some(_), None) => {}
    }

    let errors_after = cx.out.iter().filter(|d| d.is_error()).count();
    if errors_after != errors_before {
        return None;
    }
    let minter = MinterDecl {
        name: n.clone(),
        token_url: endpoint?,
        grant: Grant::GithubApp,
        client_id: None,
        scopes: Vec::new(),
        audience: None,
        body: TokenBody::Json,
        parts: Vec::new(),
        github: Some(GithubApp {
            app_id: app_id?,
            installation_id: installation_id?,
            api: api?,
            repositories,
            permissions,
        }),
    };
    Some((minter, parts))
}

/// A repository's name as GitHub allows one: letters, digits, `-`, `_`, `.`, at most 100,
/// not `.` or `..`.
fn is_repository_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
