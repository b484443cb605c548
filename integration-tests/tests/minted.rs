//! Minted credentials (#34), end to end: the real `sluice run` owning an OAuth refresh chain
//! against a stand-in provider that rotates refresh tokens and revokes a family on reuse
//! (`sluice_integration_tests::idp`), with curl and Python's own HTTP client in the sandbox.
//!
//! What must hold: the sandbox holds placeholders only (its environment, its output, what it
//! received); the API receives live tokens; a client refreshing by itself is answered by
//! sluice with placeholders; every token the provider ever issued is absent from the
//! sandbox's output, sluice's stderr and the audit log; no refresh token is ever presented
//! twice; the rotated refresh token is written back, so a second run starts from it; a
//! failed mint is a `502 mint-failed` naming the provider's error code and nothing of its
//! body, retried with backoff rather than per request.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use sluice_integration_tests::launch::{ScriptRun, python_venv};
use sluice_integration_tests::{Fault, IdentityProvider, IdpConfig, TestPki, sluice_bin};

const CLIENT_ID: &str = "sluice-test-client";
const CLIENT_SECRET: &str = "client-secret-REAL-0001";
const FIRST_REFRESH: &str = "1//first-refresh-REAL-0001";

struct Fixture {
    pki: TestPki,
    idp: IdentityProvider,
    dir: tempfile::TempDir,
}

async fn fixture(lifetime: Duration) -> Fixture {
    let pki = TestPki::new();
    let idp = IdentityProvider::start(
        &pki,
        &["idp.test", "api.test"],
        IdpConfig {
            client_id: CLIENT_ID.into(),
            client_secret: CLIENT_SECRET.into(),
            refresh_token: FIRST_REFRESH.into(),
            access_lifetime: lifetime,
            service_account: None,
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("refresh"), format!("{FIRST_REFRESH}\n")).unwrap();
    std::fs::write(d.join("client_secret"), CLIENT_SECRET).unwrap();
    let yaml = format!(
        "version: 1
secrets:
  google:
    oauth2:
      token_url: https://idp.test:{port}/token
      grant: refresh_token
      client_id: {CLIENT_ID}
      client_secret: {{ file: {secret} }}
      refresh_token: {{ file: {refresh} }}
    hosts: [api.test]
    sinks: [egress]
egress:
  allow_ips: [\"127.0.0.1/32\"]
",
        port = idp.port(),
        secret = d.join("client_secret").display(),
        refresh = d.join("refresh").display(),
    );
    std::fs::write(d.join("policy.yaml"), yaml).unwrap();
    Fixture { pki, idp, dir }
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sluice run` with `script` under `sh -c`, its audit log at `audit`.
    async fn run(&self, script: &str, audit: &str) -> Output {
        ScriptRun {
            policy: self.path("policy.yaml"),
            audit: self.path(audit),
            ca: self.pki.ca_path(),
            resolve: vec!["idp.test".into(), "api.test".into()],
            cwd: self.dir.path().to_owned(),
            env: Vec::new(),
        }
        .run(script)
        .await
    }

    /// Asserts that no value the provider ever issued, nor the client secret, is in `text`.
    fn assert_holds_no_value(&self, text: &str, what: &str) {
        for value in self
            .idp
            .issued()
            .iter()
            .map(String::as_str)
            .chain([CLIENT_SECRET])
        {
            assert!(!text.contains(value), "{what} holds a real value: {text}");
        }
    }
}

/// Refreshes by itself, as a client library does: posts the refresh grant with the
/// placeholders it was given to the token endpoint, and prints what came back.
const SELF_REFRESH: &str = r#"import json, os, ssl, urllib.parse, urllib.request
body = urllib.parse.urlencode({
    "grant_type": "refresh_token",
    "refresh_token": os.environ["GOOGLE_REFRESH_TOKEN"],
    "client_id": "sluice-test-client",
    "client_secret": os.environ["GOOGLE_CLIENT_SECRET"],
}).encode()
url = "https://idp.test:%s/token" % os.environ["IDP_PORT"]
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
opener = urllib.request.build_opener(urllib.request.ProxyHandler(), urllib.request.HTTPSHandler(context=ctx))
answer = json.load(opener.open(urllib.request.Request(url, data=body)))
print("refresh-answer-is-placeholders",
      answer["access_token"] == os.environ["GOOGLE"],
      answer["refresh_token"] == os.environ["GOOGLE_REFRESH_TOKEN"],
      0 < answer["expires_in"] <= 3)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_owns_the_refresh_chain_and_the_sandbox_holds_placeholders_only() {
    let f = fixture(Duration::from_secs(3)).await;
    std::fs::write(f.path("refresh.py"), SELF_REFRESH).unwrap();
    let port = f.idp.port();
    let api = format!("https://api.test:{port}/api/echo");
    // Three expiries: a token minted on first use, refreshed as it nears its end, and a
    // self-refresh by the sandbox in between that never reaches the provider.
    let script = format!(
        "set -e
curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo
IDP_PORT={port} python3 refresh.py
sleep 3.2
curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo
sleep 3.2
curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo
env | grep -E '^GOOGLE' | sort"
    );
    let out = f.run(&script, "audit.jsonl").await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let var = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} not in {stdout}"))
            .to_owned()
    };
    let (access, refresh, secret) = (
        var("GOOGLE"),
        var("GOOGLE_REFRESH_TOKEN"),
        var("GOOGLE_CLIENT_SECRET"),
    );
    for placeholder in [&access, &refresh, &secret] {
        assert!(placeholder.starts_with("SLUICE_GOOGLE"), "{placeholder}");
    }
    // The API echoed the live token it got each time: the sandbox saw its placeholder.
    let echoed = format!("{{\"token\":\"{access}\"}}");
    assert_eq!(stdout.matches(&echoed).count(), 3, "{stdout}");
    assert!(
        stdout.contains("refresh-answer-is-placeholders True True True"),
        "{stdout}"
    );
    // One token request per expiry at most, never a refresh token twice, and the chain
    // went on through rotations (three or more mints, one per lifetime).
    let requests = f.idp.token_requests();
    assert!((3..=4).contains(&requests), "{requests} token requests");
    assert_eq!(f.idp.reuse_detected(), 0);
    let presented = f.idp.presented();
    let mut unique = presented.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        presented.len(),
        "a refresh token was presented twice"
    );
    assert_eq!(presented[0], FIRST_REFRESH);
    // Nothing the provider issued is in the sandbox's output, sluice's stderr or the log.
    f.assert_holds_no_value(&stdout, "the sandbox's output");
    f.assert_holds_no_value(&stderr, "sluice's stderr");
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    f.assert_holds_no_value(&audit, "the audit log");
    let mints: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"mint\""))
        .collect();
    assert!(
        mints
            .iter()
            .filter(|l| l.contains("minted refresh_token; expires in"))
            .count() as u64
            == requests,
        "{audit}"
    );
    assert!(
        mints
            .iter()
            .any(|l| l.contains("answered the sandbox's refresh_token request"))
    );
    assert!(audit.contains("\"event\":\"swap\""), "{audit}");
    // The rotated refresh token was written back: the file holds the provider's live one.
    let written = std::fs::read_to_string(f.path("refresh")).unwrap();
    assert_eq!(
        Some(written.trim_end().to_owned()),
        f.idp.live_refresh_token()
    );
    assert_ne!(written.trim_end(), FIRST_REFRESH);

    // A second run starts from the written-back token, and works.
    let again = f
        .run(
            &format!("curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}"),
            "audit2.jsonl",
        )
        .await;
    let stdout = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(
        again.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(stdout.contains("{\"token\":\"SLUICE_GOOGLE"), "{stdout}");
    assert_eq!(f.idp.reuse_detected(), 0);
    f.assert_holds_no_value(&stdout, "the second run's output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_requests_in_flight_across_expiries_share_one_token_request_each() {
    let f = fixture(Duration::from_secs(2)).await;
    let api = format!("https://api.test:{}/api/echo", f.idp.port());
    // Three rounds of 64 concurrent requests, each round after the token in force expired.
    let script = format!(
        "for round in 1 2 3; do
  for i in $(seq 64); do
    curl -sS -o /dev/null -w '%{{http_code}}\\n' -H \"Authorization: Bearer $GOOGLE\" {api} &
  done
  wait
  sleep 2.2
done"
    );
    let out = f.run(&script, "audit.jsonl").await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().filter(|l| *l == "200").count(),
        192,
        "{stdout}\n{stderr}"
    );
    assert_eq!(f.idp.token_requests(), 3, "one token request per expiry");
    assert_eq!(f.idp.reuse_detected(), 0);
    f.assert_holds_no_value(&stderr, "sluice's stderr");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mint_is_a_502_naming_the_providers_code_and_nothing_of_its_body() {
    let f = fixture(Duration::from_secs(60)).await;
    let api = format!("https://api.test:{}/api/echo", f.idp.port());
    let curl = format!(
        "curl -sS -D - -H \"Authorization: Bearer $GOOGLE\" {api}; echo; curl -sS -o /dev/null -w '%{{http_code}}\\n' -H \"Authorization: Bearer $GOOGLE\" {api}"
    );
    for (fault, code) in [
        (Fault::Error("invalid_grant".into()), "invalid_grant"),
        (Fault::NotJson, "not_a_token_response"),
        (Fault::Huge, "not_a_token_response"),
    ] {
        f.idp.set_fault(Some(fault.clone()));
        let before = f.idp.token_requests();
        let out = f.run(&curl, &format!("audit-{code}.jsonl")).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            stdout.contains("HTTP/2 502"),
            "{fault:?}: {stdout}\n{stderr}"
        );
        assert!(stdout.contains("sluice-error: mint-failed"), "{stdout}");
        assert!(stdout.contains("secret google"), "{stdout}");
        assert!(
            stdout.contains(&format!("error code {code}")),
            "{fault:?}: {stdout}"
        );
        // The second request within the backoff got the same answer without a new try.
        assert!(stdout.trim_end().ends_with("502"), "{stdout}");
        assert_eq!(
            f.idp.token_requests() - before,
            1,
            "{fault:?}: retried per request"
        );
        // Nothing of the provider's body: its description and page quote the refresh token.
        assert!(
            !stdout.contains("is not valid") && !stdout.contains("rejected"),
            "{stdout}"
        );
        f.assert_holds_no_value(&stdout, "a failure's answer");
        f.assert_holds_no_value(&stderr, "sluice's stderr");
        let audit = std::fs::read_to_string(f.path(&format!("audit-{code}.jsonl"))).unwrap();
        assert!(
            audit.contains(&format!("refused refresh_token: {code}")),
            "{audit}"
        );
        f.assert_holds_no_value(&audit, "the audit log");
    }
}

/// `oauth2: { body: json }`: sluice's own token requests go as a JSON object (for a provider
/// that wants one), here for the client-credentials grant, and the token is swapped as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_credentials_grant_asked_in_json_mints_and_swaps() {
    let f = fixture(Duration::from_secs(60)).await;
    let yaml = std::fs::read_to_string(f.path("policy.yaml"))
        .unwrap()
        .replace(
            "grant: refresh_token",
            "grant: client_credentials\n      body: json",
        );
    let refresh_line = yaml
        .lines()
        .find(|l| l.contains("refresh_token:"))
        .unwrap()
        .to_owned();
    std::fs::write(
        f.path("policy.yaml"),
        yaml.replace(&format!("{refresh_line}\n"), ""),
    )
    .unwrap();
    let api = format!("https://api.test:{}/api/echo", f.idp.port());
    let script = format!(
        "set -e; for i in 1 2; do curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo; done; env | grep -E '^GOOGLE=' "
    );
    let out = f.run(&script, "audit.jsonl").await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let access = stdout
        .lines()
        .find_map(|l| l.strip_prefix("GOOGLE="))
        .expect("GOOGLE in the env dump");
    let echoed = format!("{{\"token\":\"{access}\"}}");
    assert_eq!(stdout.matches(&echoed).count(), 2, "{stdout}");
    // One token request, and it was JSON.
    assert_eq!((f.idp.token_requests(), f.idp.json_bodies()), (1, 1));
    f.assert_holds_no_value(&stdout, "the sandbox's output");
    f.assert_holds_no_value(&stderr, "sluice's stderr");
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    assert!(
        audit.contains("minted client_credentials; expires in"),
        "{audit}"
    );
}

/// `check` reads an `oauth2:` block, previews where the token is minted, and diagnoses
/// each misuse at its line and column with the fix.
#[test]
fn check_previews_a_minted_secret_and_diagnoses_each_misuse() {
    let dir = tempfile::tempdir().unwrap();
    let check = |yaml: &str| -> (bool, String) {
        let path = dir.path().join("p.yaml");
        std::fs::write(&path, yaml).unwrap();
        let out = Command::new(sluice_bin())
            .arg("check")
            .arg(&path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let base = |oauth2: &str, extra: &str| {
        format!(
            "version: 1\nsecrets:\n  google:\n    oauth2:\n{oauth2}    hosts: [api.test]\n    sinks: [egress]\n{extra}"
        )
    };
    let good = "      token_url: https://idp.test/token\n      grant: refresh_token\n      client_id: c\n      refresh_token: { file: /run/rt }\n";
    let (ok, text) = check(&base(good, ""));
    assert!(ok, "{text}");
    assert!(
        text.contains("minted at first use from idp.test (refresh_token grant)"),
        "{text}"
    );
    assert!(text.contains("google.refresh_token"), "{text}");
    let cases: [(String, &str); 7] = [
        (
            base(&good.replace("{ file: /run/rt }", "{ env: RT }"), ""),
            "cannot be written back",
        ),
        (
            base(
                &good.replace("https://idp.test/token", "http://idp.test/token"),
                "",
            ),
            "p.yaml:5:18",
        ),
        (
            base(&good.replace("refresh_token\n", "password\n"), ""),
            "unknown grant `password`",
        ),
        (
            base(
                &good.replace("      refresh_token: { file: /run/rt }\n", ""),
                "",
            ),
            "grant refresh_token needs `refresh_token`",
        ),
        (
            base(
                &good.replace("grant: refresh_token", "grant: client_credentials"),
                "",
            ),
            "takes no `refresh_token`",
        ),
        (
            base(good, "    from: { env: X }\n"),
            "cannot also have `from:`",
        ),
        (
            base(good, "").replace("sinks: [egress]", "sinks: [egress, command]"),
            "can only be granted egress",
        ),
    ];
    for (yaml, expected) in cases {
        let (ok, text) = check(&yaml);
        if expected == "cannot be written back" {
            assert!(ok, "a warning only: {text}");
        } else {
            assert!(!ok, "{yaml}\n{text}");
        }
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
        assert!(
            text.contains("help:") || expected == "p.yaml:5:18",
            "{text}"
        );
    }
}

/// Google's own library and requests-oauthlib, each holding placeholders and refreshing by
/// itself: google-auth's `Credentials` with a refresh token and `token_uri` (no access token
/// yet, so it refreshes before its first request, and again once the token expires), and an
/// `OAuth2Session` whose token has expired, with `auto_refresh_url`.
const LIBRARIES: &str = r#"import os, sys, time
import google.oauth2.credentials
from google.auth.transport.requests import AuthorizedSession
from requests_oauthlib import OAuth2Session
port = os.environ["IDP_PORT"]
token_url = "https://idp.test:%s/token" % port
api = "https://api.test:%s/api/echo" % port
creds = google.oauth2.credentials.Credentials(
    token=None,
    refresh_token=os.environ["GOOGLE_REFRESH_TOKEN"],
    token_uri=token_url,
    client_id="sluice-test-client",
    client_secret=os.environ["GOOGLE_CLIENT_SECRET"],
)
session = AuthorizedSession(creds)
for round in range(2):
    r = session.get(api)
    print("google-auth", round, r.status_code, r.text, creds.token == os.environ["GOOGLE"])
    time.sleep(3.2)
updated = []
expired = {
    "access_token": os.environ["GOOGLE"],
    "refresh_token": os.environ["GOOGLE_REFRESH_TOKEN"],
    "token_type": "Bearer",
    "expires_at": time.time() - 10,
}
oauth = OAuth2Session(
    "sluice-test-client",
    token=expired,
    auto_refresh_url=token_url,
    auto_refresh_kwargs={"client_id": "sluice-test-client", "client_secret": os.environ["GOOGLE_CLIENT_SECRET"]},
    token_updater=updated.append,
)
r = oauth.get(api)
print("requests-oauthlib", r.status_code, r.text, len(updated),
      updated[0]["access_token"] == os.environ["GOOGLE"],
      updated[0]["refresh_token"] == os.environ["GOOGLE_REFRESH_TOKEN"])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_auth_and_requests_oauthlib_refresh_by_themselves_against_sluice() {
    let f = fixture(Duration::from_secs(3)).await;
    let python = python_venv().join("bin/python");
    std::fs::write(f.path("libraries.py"), LIBRARIES).unwrap();
    let script = format!(
        "IDP_PORT={} {} libraries.py && env | grep -E '^GOOGLE=' ",
        f.idp.port(),
        python.display()
    );
    let out = f.run(&script, "audit.jsonl").await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let access = stdout
        .lines()
        .find_map(|l| l.strip_prefix("GOOGLE="))
        .expect("GOOGLE in the env dump")
        .to_owned();
    let echoed = format!("{{\"token\":\"{access}\"}}");
    for line in [
        format!("google-auth 0 200 {echoed} True"),
        format!("google-auth 1 200 {echoed} True"),
        format!("requests-oauthlib 200 {echoed} 1 True True"),
    ] {
        assert!(stdout.contains(&line), "{line:?} not in {stdout}\n{stderr}");
    }
    // The libraries' own refreshes were answered by sluice: the provider saw sluice's, one
    // per lifetime at most, never a refresh token twice.
    assert_eq!(f.idp.reuse_detected(), 0);
    assert!(f.idp.token_requests() <= 3, "{}", f.idp.token_requests());
    f.assert_holds_no_value(&stdout, "the libraries' output");
    f.assert_holds_no_value(&stderr, "sluice's stderr");
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    f.assert_holds_no_value(&audit, "the audit log");
    assert!(
        audit
            .matches("answered the sandbox's refresh_token request")
            .count()
            >= 3,
        "{audit}"
    );
}
