//! Minted credentials the way Google's service accounts work (#34), end to end through the
//! real `sluice run` and its jail: the `jwt_bearer` grant (a service account's key file
//! signs an RS256 assertion; the stand-in provider verifies it as Google's endpoint does),
//! and Google's metadata server answered by sluice, so that google-auth's Application
//! Default Credentials find a token with no key file in the sandbox.
//!
//! What must hold: the sandbox holds the access token's placeholder only (never the key
//! file, nor a variable for it); the API receives live tokens, minted again as they expire;
//! google-auth's `compute_engine` credentials, found by `google.auth.default()`, carry the
//! placeholder; nothing the provider issued, no assertion and no byte of the key reach the
//! sandbox's output, sluice's stderr or the audit log; a key file that cannot sign stops the
//! run before the command starts; without a Google secret, the metadata address is refused,
//! never dialled.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use sluice_integration_tests::launch::{ScriptRun, python_venv};
use sluice_integration_tests::{IdentityProvider, IdpConfig, ServiceAccountConfig, TestPki};

const KEY: &str = include_str!("../../sign/tests/fixtures/rsa-2048.pem");
const PUBLIC: &[u8] = include_bytes!("../../sign/tests/fixtures/rsa-2048.pub.pem");
const EMAIL: &str = "agent@sluice-test.iam.gserviceaccount.com";
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

struct Fixture {
    pki: TestPki,
    idp: IdentityProvider,
    dir: tempfile::TempDir,
}

async fn fixture(lifetime: Duration, private_key: &str) -> Fixture {
    let pki = TestPki::new();
    let idp = IdentityProvider::start(
        &pki,
        &["idp.test", "api.test"],
        IdpConfig {
            client_id: "unused".into(),
            client_secret: "unused-client-secret".into(),
            refresh_token: "1//unused-refresh-token".into(),
            access_lifetime: lifetime,
            service_account: Some(ServiceAccountConfig {
                client_email: EMAIL.into(),
                key_id: "test-key-1".into(),
                public_pem: PUBLIC.to_vec(),
            }),
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let token_url = format!("https://idp.test:{}/token", idp.port());
    let key_file = serde_json::json!({
        "type": "service_account",
        "project_id": "sluice-test",
        "private_key_id": "test-key-1",
        "private_key": private_key,
        "client_email": EMAIL,
        "client_id": "1234567890",
        "token_uri": token_url,
    });
    std::fs::write(d.join("sa.json"), key_file.to_string()).unwrap();
    let yaml = format!(
        "version: 1
secrets:
  google:
    oauth2:
      token_url: {token_url}
      grant: jwt_bearer
      service_account: {{ file: {key} }}
      scopes: [{SCOPE}]
    hosts: [api.test]
    sinks: [egress]
egress:
  allow_ips: [\"127.0.0.1/32\"]
",
        key = d.join("sa.json").display(),
    );
    std::fs::write(d.join("policy.yaml"), yaml).unwrap();
    Fixture { pki, idp, dir }
}

impl Fixture {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sluice run` (jailed) with `script` under `sh -c`, its audit log at `audit.jsonl`.
    async fn run(&self, script: &str) -> Output {
        ScriptRun {
            policy: self.path("policy.yaml"),
            audit: self.path("audit.jsonl"),
            ca: self.pki.ca_path(),
            resolve: vec!["idp.test".into(), "api.test".into()],
            cwd: self.dir.path().to_owned(),
            env: Vec::new(),
        }
        .run(script)
        .await
    }

    /// Asserts that nothing the provider issued, no assertion sluice signed and no line of
    /// the key is in `text`.
    fn assert_holds_no_value(&self, text: &str, what: &str) {
        let key_lines = KEY
            .lines()
            .filter(|l| l.len() > 20 && !l.starts_with("-----"));
        let issued = self.idp.issued();
        let assertions = self.idp.assertions();
        for value in issued
            .iter()
            .chain(&assertions)
            .map(String::as_str)
            .chain(key_lines)
        {
            assert!(!text.contains(value), "{what} holds a real value: {text}");
        }
    }
}

/// Google's Application Default Credentials inside the jail, with no key file: ADC probes
/// the metadata server, reads the account and its token, and calls the API with it.
const ADC: &str = r#"import os
import google.auth
from google.auth.transport.requests import AuthorizedSession, Request
creds, project = google.auth.default()
print("adc", type(creds).__module__, type(creds).__name__)
creds.refresh(Request())
print("adc-token-is-placeholder", creds.token == os.environ["GOOGLE"], creds.service_account_email)
r = AuthorizedSession(creds).get(os.environ["API"])
print("adc-api", r.status_code, r.text)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_mints_by_jwt_bearer_and_google_auth_finds_it_at_the_metadata_server() {
    let f = fixture(Duration::from_secs(2), KEY).await;
    std::fs::write(f.path("adc.py"), ADC).unwrap();
    let python = python_venv().join("bin/python");
    let api = format!("https://api.test:{}/api/echo", f.idp.port());
    let metadata = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts";
    // Two expiries: the token minted on first use, google-auth's own round through the
    // metadata server, and the API again after the token in force has expired.
    let script = format!(
        "set -e
curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo
mkdir -p gcloud-empty
CLOUDSDK_CONFIG=$PWD/gcloud-empty API={api} {python} adc.py
sleep 2.5
curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}; echo
echo no-flavor $(curl -s -o /dev/null -w '%{{http_code}}' {metadata}/default/token)
echo other-path $(curl -s -o /dev/null -w '%{{http_code}}' -H 'Metadata-Flavor: Google' http://169.254.169.254/computeMetadata/v1/project/project-id)
echo by-ip $(curl -s -H 'Metadata-Flavor: Google' http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/email)
env | grep -E '^GOOGLE' | sort",
        python = python.display(),
    );
    let out = f.run(&script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    // The sandbox holds the access token's placeholder, and no variable for the key file.
    let access = stdout
        .lines()
        .find_map(|l| l.strip_prefix("GOOGLE="))
        .unwrap_or_else(|| panic!("GOOGLE not in {stdout}"))
        .to_owned();
    assert!(access.starts_with("SLUICE_GOOGLE"), "{access}");
    assert!(!stdout.contains("GOOGLE_SERVICE_ACCOUNT"), "{stdout}");
    // The API echoed the live token each time: curl twice, google-auth once.
    let echoed = format!("{{\"token\":\"{access}\"}}");
    assert_eq!(stdout.matches(&echoed).count(), 3, "{stdout}\n{stderr}");
    for line in [
        "adc google.auth.compute_engine.credentials Credentials".to_owned(),
        format!("adc-token-is-placeholder True {EMAIL}"),
        format!("adc-api 200 {echoed}"),
        "no-flavor 403".to_owned(),
        "other-path 404".to_owned(),
        format!("by-ip {EMAIL}"),
    ] {
        assert!(stdout.contains(&line), "{line:?} not in {stdout}\n{stderr}");
    }
    // One assertion per token minted, each verified by the provider: at least one more
    // after the first token expired, never one per request.
    let (requests, assertions) = (f.idp.token_requests(), f.idp.assertions().len() as u64);
    assert_eq!(requests, assertions);
    assert!((2..=3).contains(&requests), "{requests} token requests");
    f.assert_holds_no_value(&stdout, "the sandbox's output");
    f.assert_holds_no_value(&stderr, "sluice's stderr");
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    f.assert_holds_no_value(&audit, "the audit log");
    assert_eq!(
        audit.matches("minted jwt_bearer; expires in").count() as u64,
        requests,
        "{audit}"
    );
    assert!(
        audit.contains("answered the sandbox's metadata-server token request"),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_that_cannot_sign_stops_the_run_before_the_command() {
    // The public half where the private key belongs: a mistake that would otherwise show
    // only as the provider's refusal at the first request.
    let public = String::from_utf8(PUBLIC.to_vec()).unwrap();
    let f = fixture(Duration::from_secs(60), &public).await;
    let out = f.run("touch started").await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(!f.path("started").exists(), "the command ran");
    assert!(
        stderr.contains("google.service_account") && stderr.contains("not an RSA private key"),
        "{stderr}"
    );
    for line in public.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!stderr.contains(line), "{stderr}");
    }
    assert_eq!(f.idp.token_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_google_secret_the_metadata_server_is_refused_never_dialled() {
    let f = fixture(Duration::from_secs(60), KEY).await;
    // The same run with the service account declared as an ordinary secret instead.
    let yaml = format!(
        "version: 1
secrets:
  other:
    from: {{ file: {key} }}
    hosts: [api.test]
    sinks: [egress]
egress:
  allow_ips: [\"127.0.0.1/32\"]
",
        key = f.path("sa.json").display()
    );
    std::fs::write(f.path("policy.yaml"), yaml).unwrap();
    let script = "echo by-name $(curl -s -o /dev/null -w '%{http_code}' -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token)
echo by-ip $(curl -s -D - -o /dev/null -H 'Metadata-Flavor: Google' --noproxy '*' http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token | tr -d '\\r' | grep -i -E '^(HTTP|sluice-error)' | tr '\\n' ' ')";
    let out = f.run(script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // By name: the proxy refuses a host no grant names.
    assert!(stdout.contains("by-name 403"), "{stdout}\n{stderr}");
    // By address, captured by the jail: refused by the egress decision, never dialled.
    assert!(
        stdout.contains("by-ip HTTP/1.1 403") && stdout.contains("sluice-error: host-not-allowed"),
        "{stdout}\n{stderr}"
    );
    let audit = std::fs::read_to_string(f.path("audit.jsonl")).unwrap();
    assert!(!audit.contains("metadata-server"), "{audit}");
}
