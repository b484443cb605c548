//! The credential recognisers on whole environments as they are found: a GitHub-hosted
//! runner's step, a GitLab CI job, a developer's shell (`tests/env-dumps/`, names as those
//! environments set them, values fakes of the same shape). Each dump's withheld set is
//! asserted exactly, so a change to the heuristics that withholds one more innocent
//! variable, or lets one credential through, fails here; docs/launcher.md quotes the
//! counts.

use std::path::Path;

use sluice_policies::credentials::judge;

/// The `NAME=VALUE` lines of a dump (comments and blank lines skipped; `\n` in a value is
/// a newline, as a shell's `$'...'` would give).
fn dump(name: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/env-dumps")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (name, value) = line.split_once('=').expect("NAME=VALUE");
            (name.to_owned(), value.replace("\\n", "\n"))
        })
        .collect()
}

/// The names the launcher would withhold, in dump order, and how many variables there are.
fn withheld(name: &str) -> (Vec<String>, usize) {
    let vars = dump(name);
    let names = vars
        .iter()
        .filter(|(name, value)| judge(name, value.as_bytes()).is_some())
        .map(|(name, _)| name.clone())
        .collect();
    (names, vars.len())
}

#[test]
fn a_github_hosted_runner_step_loses_its_tokens_and_nothing_else() {
    let (names, total) = withheld("github-actions-ubuntu.env");
    assert_eq!(
        names,
        [
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "ACTIONS_RUNTIME_TOKEN",
            "GITHUB_TOKEN",
            "NPM_TOKEN",
        ]
    );
    assert_eq!(total, 106);
}

#[test]
fn a_gitlab_job_loses_its_job_token_in_every_variable_that_carries_it() {
    let (names, total) = withheld("gitlab-ci.env");
    assert_eq!(
        names,
        [
            "CI_BUILD_TOKEN",
            "CI_DEPENDENCY_PROXY_PASSWORD",
            "CI_JOB_JWT_V2",
            "CI_JOB_TOKEN",
            "CI_REGISTRY_PASSWORD",
            // The clone URL carries the job token as its password.
            "CI_REPOSITORY_URL",
            // The one false positive: the first 8 characters of the runner's token, which
            // authenticate nothing. Withholding it costs a log label.
            "CI_RUNNER_SHORT_TOKEN",
            "DEPLOY_SSH_KEY",
        ]
    );
    assert_eq!(total, 75);
}

#[test]
fn a_developer_shell_loses_its_exported_keys_and_keeps_its_tools() {
    let (names, total) = withheld("developer-shell.env");
    assert_eq!(
        names,
        [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "HF_TOKEN",
            "HOMEBREW_GITHUB_API_TOKEN",
            // A path, but to the key itself: the command would read the key through it.
            "GOOGLE_APPLICATION_CREDENTIALS",
            "DATABASE_URL",
        ]
    );
    // What no heuristic sees: a credential of no recognisable shape under an innocent
    // name. `--clear-env` is the answer (docs/threat-model.md).
    let vars = dump("developer-shell.env");
    let (name, value) = vars.iter().find(|(n, _)| n == "NOTES_FOR_LATER").unwrap();
    assert_eq!(judge(name, value.as_bytes()), None);
    assert_eq!(total, 77);
}
