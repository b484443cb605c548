//! GitHub App secrets (`github_app:`): what a good declaration compiles into (a minter of
//! the `github_app` kind at `{api}/app/installations/{id}/access_tokens`, the token under
//! the secret's name with an installation token's placeholder shape, the key as a part the
//! sandbox never hears of), and each misuse refused at its position.

use super::*;
use crate::{Grant, MintPart, MintProblem};

const APP: &str = "version: 1
secrets:
  gh:
    github_app:
      app_id: 12345
      installation_id: 678
      private_key: { file: /run/app.pem }
      repositories: [website, docs]
      permissions: { pull_requests: write, contents: read }
    hosts: [api.github.com, github.com]
    in: [header]
    sinks: [egress]
";

#[test]
fn a_github_app_compiles_into_a_narrowed_minter_and_a_key_the_sandbox_never_holds() {
    let loaded = Policy::parse(APP, "p.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let policy = loaded.policy;
    let names: Vec<&str> = policy.secrets().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["gh", "gh.private_key"]);
    let minter = &policy.minters()[0];
    assert_eq!(minter.grant(), Grant::GithubApp);
    assert_eq!(
        minter.token_url().as_str(),
        "https://api.github.com/app/installations/678/access_tokens"
    );
    let app = minter.github().unwrap();
    assert_eq!((app.app_id(), app.installation_id()), (12345, 678));
    assert_eq!(app.repositories(), ["website", "docs"]);
    let permissions: Vec<(&str, &str)> = app
        .permissions()
        .iter()
        .map(|(n, l)| (n.as_str(), l.as_str()))
        .collect();
    assert_eq!(
        permissions,
        [("contents", "read"), ("pull_requests", "write")]
    );
    assert_eq!(minter.part(MintPart::PrivateKey), Some(1));
    assert!(!policy.secrets()[1].in_sandbox());
    // The token's placeholder is an installation token's shape, with GitHub's checksum.
    let placeholders = policy.mint_placeholders();
    let placeholder = placeholders.get("gh").unwrap();
    assert!(
        placeholder.starts_with("ghs_") && placeholder.len() == 40,
        "{placeholder}"
    );
    assert!(crate::shape::checksum_holds(placeholder), "{placeholder}");
    // `placeholder: plain` is honoured.
    let plain = APP.replace(
        "    in: [header]\n",
        "    in: [header]\n    placeholder: plain\n",
    );
    let policy = Policy::parse(&plain, "p.yaml").unwrap().policy;
    assert!(
        policy
            .mint_placeholders()
            .get("gh")
            .unwrap()
            .starts_with("SLUICE_GH_")
    );
}

#[test]
fn each_github_app_misuse_is_one_diagnostic_at_its_position() {
    type Case = (String, u64, fn(&Problem) -> bool);
    let cases: [Case; 6] = [
        (APP.replace("      app_id: 12345\n", ""), 5, |p| {
            matches!(
                p,
                Problem::Mint(MintProblem::AppMissing { key: "app_id", .. })
            )
        }),
        (APP.replace("[website, docs]", "[]"), 8, |p| {
            matches!(
                p,
                Problem::Mint(MintProblem::AppEmpty {
                    key: "repositories",
                    ..
                })
            )
        }),
        (
            APP.replace("[website, docs]", "[website, acme/docs]"),
            8,
            |p| matches!(p, Problem::Mint(MintProblem::AppRepository { .. })),
        ),
        (
            APP.replace("contents: read", "contents: maintain"),
            9,
            |p| matches!(p, Problem::Mint(MintProblem::AppLevel { .. })),
        ),
        (
            APP.replace(
                "      repositories:",
                "      api: http://ghe.test/api/v3\n      repositories:",
            ),
            8,
            |p| matches!(p, Problem::Mint(MintProblem::AppApi { .. })),
        ),
        (
            APP.replace("    hosts:", "    from: { env: GH }\n    hosts:"),
            10,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::AlsoSourced { key: "from", .. })
                )
            },
        ),
    ];
    for (yaml, line, is) in cases {
        let diagnostics = Policy::parse(&yaml, "p.yaml").unwrap_err().0;
        let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
        assert_eq!(errors.len(), 1, "{yaml}\n{diagnostics:?}");
        assert!(is(&errors[0].problem), "{yaml}\n{:?}", errors[0]);
        assert_eq!(errors[0].line, line, "{yaml}\n{}", errors[0]);
        assert!(!errors[0].problem.help().is_empty());
    }
    // A permission GitHub may have added since: a warning, and the declaration loads.
    let novel = APP.replace("contents: read", "contents: read, copilot_spaces: read");
    let loaded = Policy::parse(&novel, "p.yaml").unwrap();
    assert!(matches!(
        loaded.warnings[0].problem,
        Problem::Mint(MintProblem::AppPermission { .. })
    ));
}
