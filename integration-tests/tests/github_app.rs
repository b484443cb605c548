//! GitHub App installation tokens (#35), end to end through the real `sluice run` and its
//! jail, against a stand-in for GitHub's API and git hosting
//! (`sluice_integration_tests::github`) that verifies the App's JWT as GitHub does.
//!
//! What must hold: the sandbox holds a `ghs_`-shaped placeholder only (never the App's key,
//! nor a variable for it); the token sluice mints is narrowed to the declared repositories
//! and permissions (a repository outside them is `404`); curl, git (clone and push over
//! smart HTTP with the placeholder as Basic credentials), Octokit and GitHub's own CLI (`gh
//! api`) all work with it; the
//! token is revoked when the run ends; a JWT signed with the wrong key is a loud
//! `mint-failed`; no token GitHub issued reaches the sandbox's output, sluice's stderr or
//! the audit log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice_integration_tests::git::git;
use sluice_integration_tests::launch::{ScriptRun, node_dir, require_program};
use sluice_integration_tests::{GithubApi, GithubConfig, TestPki, sluice_bin};

const KEY: &str = include_str!("../../sign/tests/fixtures/rsa-2048.pem");
const OTHER_KEY: &str = include_str!("../../sign/tests/fixtures/rsa-2048-other.pem");
const PUBLIC: &[u8] = include_bytes!("../../sign/tests/fixtures/rsa-2048.pub.pem");

struct Fixture {
    pki: TestPki,
    github: GithubApi,
    dir: tempfile::TempDir,
}

/// A bare repository `acme/NAME.git` under `root`, with one commit.
fn bare_repo(root: &Path, home: &Path, name: &str) {
    let source = root.join(format!("src-{name}"));
    std::fs::create_dir_all(&source).unwrap();
    git(&source, home, &["init", "-q", "-b", "main"]);
    std::fs::write(source.join("README"), format!("{name}\n")).unwrap();
    git(&source, home, &["add", "README"]);
    let commit = [
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t.test",
        "commit",
        "-q",
        "-m",
        "first",
    ];
    git(&source, home, &commit);
    let bare = format!("acme/{name}.git");
    git(
        root,
        home,
        &["clone", "-q", "--bare", &format!("src-{name}"), &bare],
    );
}

async fn fixture(key: &str) -> Fixture {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (home, root) = (d.join("home"), d.join("git"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(root.join("acme")).unwrap();
    for name in ["website", "secret-plans"] {
        bare_repo(&root, &home, name);
    }
    let github = GithubApi::start(
        &pki,
        &["api.github.test", "github.test"],
        GithubConfig {
            app_id: 4242,
            installation_id: 77,
            public_pem: PUBLIC.to_vec(),
            owner: "acme".into(),
            repositories: vec!["website".into(), "secret-plans".into()],
            withheld: Some("issues".into()),
            git_root: root,
        },
    )
    .await;
    std::fs::write(d.join("app.pem"), key).unwrap();
    let yaml = format!(
        "version: 1
secrets:
  gh:
    github_app:
      app_id: 4242
      installation_id: 77
      private_key: {{ file: {key} }}
      repositories: [website]
      permissions: {{ contents: write, metadata: read, issues: read }}
      api: https://api.github.test:{port}
    hosts: [api.github.test, github.test]
    in: [header]
    sinks: [egress]
egress:
  allow_ips: [\"127.0.0.1/32\"]
",
        key = d.join("app.pem").display(),
        port = github.port(),
    );
    std::fs::write(d.join("policy.yaml"), yaml).unwrap();
    Fixture { pki, github, dir }
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sluice run` (jailed) with `script` under `sh -c`, its audit log at `audit.jsonl`.
    async fn run(&self, script: &str) -> Output {
        let cwd = self.path("work");
        std::fs::create_dir_all(&cwd).unwrap();
        let home = self.path("home").display().to_string();
        ScriptRun {
            policy: self.path("policy.yaml"),
            audit: self.path("audit.jsonl"),
            ca: self.pki.ca_path(),
            resolve: vec!["api.github.test".into(), "github.test".into()],
            cwd,
            env: [
                ("HOME", home.as_str()),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_TERMINAL_PROMPT", "0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        }
        .run(script)
        .await
    }

    /// Asserts that no token GitHub issued, and no line of the App's key, is in `text`.
    fn assert_holds_no_value(&self, text: &str, what: &str) {
        let key_lines = KEY
            .lines()
            .filter(|l| l.len() > 20 && !l.starts_with("-----"));
        let issued = self.github.issued();
        for value in issued.iter().map(String::as_str).chain(key_lines) {
            assert!(!text.contains(value), "{what} holds a real value: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_token_narrowed_to_the_run_serves_curl_git_and_octokit_and_is_revoked_at_the_end() {
    require_program(
        "gh",
        "./test.sh installs it with `apt-get install gh` when absent",
    );
    let f = fixture(KEY).await;
    let port = f.github.port();
    let api = format!("https://api.github.test:{port}");
    let node = node_dir();
    let script = format!(
        "set -e
echo \"placeholder $GH\"
curl -sS -w ' %{{http_code}}\\n' -H \"Authorization: token $GH\" {api}/repos/acme/website
curl -sS -o /dev/null -w 'outside %{{http_code}}\\n' -H \"Authorization: Bearer $GH\" {api}/repos/acme/secret-plans
url=\"https://x-access-token:$GH@github.test:{port}/acme/website.git\"
git clone -q \"$url\" clone
cd clone
echo change > CHANGE
git add CHANGE
git -c user.name=agent -c user.email=agent@t.test commit -q -m change
git push -q origin HEAD:refs/heads/agent-branch
cd ..
echo pushed $(git ls-remote \"$url\" | grep -c agent-branch)
echo other-clone $(git clone -q \"https://x-access-token:$GH@github.test:{port}/acme/secret-plans.git\" other 2>/dev/null && echo cloned || echo refused)
node {octokit} {api} acme website secret-plans
echo gh-cli $(GH_HOST=api.github.test:{port} GH_ENTERPRISE_TOKEN=\"$GH\" GH_CONFIG_DIR=$PWD/gh-config gh api repos/acme/website --jq .full_name)
env | grep -E '^GH' | sort",
        octokit = node.join("octokit.mjs").display(),
    );
    let out = f.run(&script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");

    // A `ghs_`-shaped placeholder, with GitHub's checksum; no variable for the key.
    let placeholder = stdout
        .lines()
        .find_map(|l| l.strip_prefix("placeholder "))
        .unwrap()
        .to_owned();
    assert!(
        placeholder.starts_with("ghs_") && placeholder.len() == 40,
        "{placeholder}"
    );
    assert!(
        sluice_policies::shape::checksum_holds(&placeholder),
        "{placeholder}"
    );
    assert!(!stdout.contains("GH_PRIVATE_KEY"), "{stdout}");
    for line in [
        "\"full_name\":\"acme/website\"",
        "outside 404",
        "pushed 1",
        "other-clone refused",
        "octokit acme/website",
        "octokit-refused 404",
        "gh-cli acme/website",
    ] {
        assert!(stdout.contains(line), "{line:?} not in {stdout}\n{stderr}");
    }
    // The push reached the bare repository.
    let branches = git(
        &f.path("git/acme/website.git"),
        &f.path("home"),
        &["branch", "--list", "agent-branch"],
    );
    assert!(branches.contains("agent-branch"), "{branches}");

    // One token, narrowed as declared, and revoked when the run ended.
    let issued = f.github.issued();
    assert_eq!(issued.len(), 1, "{issued:?}");
    for asked in f.github.asked() {
        assert_eq!(
            asked,
            serde_json::json!({
                "repositories": ["website"],
                "permissions": {"contents": "write", "issues": "read", "metadata": "read"},
            })
        );
    }
    assert_eq!(f.github.revoked(), issued);

    f.assert_holds_no_value(&stdout, "the sandbox's output");
    f.assert_holds_no_value(&stderr, "sluice's stderr");
    let config = std::fs::read_to_string(f.path("work/clone/.git/config")).unwrap();
    f.assert_holds_no_value(&config, "the clone's remembered remote");
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    f.assert_holds_no_value(&audit, "the audit log");
    assert!(
        audit.contains("minted github_app; expires in")
            && audit.contains("granted less than asked: issues")
            && audit.contains("revoked the github_app token"),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_signed_with_the_wrong_key_is_a_loud_mint_failure() {
    let f = fixture(OTHER_KEY).await;
    let api = format!("https://api.github.test:{}", f.github.port());
    let script = format!(
        "curl -sS -D - -H \"Authorization: token $GH\" {api}/repos/acme/website; echo
curl -sS -o /dev/null -w 'again %{{http_code}}\\n' -H \"Authorization: token $GH\" {api}/repos/acme/website"
    );
    let out = f.run(&script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for line in [
        "HTTP/2 502",
        "sluice-error: mint-failed",
        "secret gh",
        "bad_credentials",
        "again 502",
    ] {
        assert!(stdout.contains(line), "{line:?} not in {stdout}\n{stderr}");
    }
    // Refused once, then the backoff answers without asking again.
    assert_eq!(f.github.bad_jwts(), 1);
    assert!(f.github.issued().is_empty());
    assert!(
        !stdout.contains("JSON web token"),
        "GitHub's words: {stdout}"
    );
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    assert!(
        audit.contains("refused github_app: bad_credentials"),
        "{audit}"
    );
}

/// `check` previews the narrowing and diagnoses each misuse; a key that is not an RSA private
/// key stops `sluice run` before the command starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_previews_the_narrowing_and_a_key_that_cannot_sign_stops_the_run() {
    let f = fixture(std::str::from_utf8(PUBLIC).unwrap()).await;
    let check = Command::new(sluice_bin())
        .arg("check")
        .arg(f.path("policy.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check.status.success(), "{text}");
    assert!(
        text.contains("narrowed to 1 repository (website)"),
        "{text}"
    );
    let out = f.run("touch started").await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(!f.path("work/started").exists());
    assert!(
        stderr.contains("gh.private_key") && stderr.contains("not an RSA private key"),
        "{stderr}"
    );
    let yaml = std::fs::read_to_string(f.path("policy.yaml")).unwrap();
    for (broken, says) in [
        (
            yaml.replace("repositories: [website]", "repositories: []"),
            "github_app.repositories is empty",
        ),
        (
            yaml.replace("issues: read", "issues: maintain"),
            "level `maintain`",
        ),
        (
            yaml.replace("repositories: [website]", "repositories: [acme/website]"),
            "is not a repository name",
        ),
        (
            yaml.replace("      app_id: 4242\n", ""),
            "github_app needs `app_id`",
        ),
    ] {
        std::fs::write(f.path("broken.yaml"), &broken).unwrap();
        let check = Command::new(sluice_bin())
            .arg("check")
            .arg(f.path("broken.yaml"))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        assert!(!check.status.success(), "{broken}\n{text}");
        assert!(
            text.contains(says) && text.contains("help:"),
            "{says:?} not in {text}"
        );
    }
}

/// Under `sluice serve`, a reload that changes the narrowing revokes the token in force and
/// mints one narrowed anew at the next request; stopping sluice revokes the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_the_narrowing_revokes_the_old_token_and_mints_a_new_one() {
    use sluice_integration_tests::{Curl, ServeBinary};
    let f = fixture(KEY).await;
    let yaml = std::fs::read_to_string(f.path("policy.yaml")).unwrap();
    let serve = ServeBinary::start(&yaml, &f.pki, &["api.github.test", "github.test"], &[]);
    let api = format!("https://api.github.test:{}", f.github.port());
    let get = |repo: &'static str| {
        let (proxy, auth, url) = (
            serve.proxy(),
            format!("Authorization: token {}", serve.placeholder("GH")),
            format!("{api}/repos/acme/{repo}"),
        );
        move || {
            Curl::new(&proxy.url, &proxy.ca)
                .args(["-H", &auth])
                .get(&url)
                .status
        }
    };
    let status = tokio::task::spawn_blocking(get("website")).await.unwrap();
    assert_eq!(status, 200, "{}", serve.stderr());
    let first = f.github.issued();
    assert_eq!(first.len(), 1);
    // A kept-alive tunnel opened before the reload, used once.
    let authority = format!("api.github.test:{}", f.github.port());
    let mut old = serve
        .proxy()
        .open(&authority, "api.github.test", &[b"http/1.1"])
        .await
        .expect("a tunnel");
    let website = || {
        http::Request::get(format!("{api}/repos/acme/website"))
            .header("host", authority.as_str())
            .header(
                "authorization",
                format!("token {}", serve.placeholder("GH")),
            )
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    assert_eq!(old.send(website()).await.unwrap().status(), 200);

    // The same run, narrowed to the other repository instead.
    serve.reload(&yaml.replace("repositories: [website]", "repositories: [secret-plans]"));
    let status = tokio::task::spawn_blocking(get("secret-plans"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{}", serve.stderr());
    let status = tokio::task::spawn_blocking(get("website")).await.unwrap();
    assert_eq!(status, 404, "the old narrowing is gone");
    // The tunnel from before the reload cannot bring the old narrowing back: it may not
    // start a chain of its own (which would revoke the one in force and mint the wider
    // token again); the client is told to open a new tunnel.
    let outdated = old.send(website()).await.unwrap();
    assert_eq!(outdated.status(), 421);
    assert_eq!(outdated.headers()["sluice-error"], "tunnel-outdated");
    let issued = f.github.issued();
    assert_eq!(issued.len(), 2, "{issued:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while f.github.revoked() != first {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            f.github.revoked()
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let asked: Vec<serde_json::Value> = f
        .github
        .asked()
        .iter()
        .map(|a| a["repositories"].clone())
        .collect();
    assert_eq!(
        asked,
        [
            serde_json::json!(["website"]),
            serde_json::json!(["secret-plans"])
        ]
    );

    // Stopping sluice revokes the token in force.
    let audit = serve.stop().join("\n");
    assert_eq!(f.github.revoked(), issued);
    assert_eq!(
        audit.matches("revoked the github_app token").count(),
        2,
        "{audit}"
    );
    f.assert_holds_no_value(&audit, "the audit log");
}
