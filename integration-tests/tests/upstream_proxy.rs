//! Behind a corporate proxy (#41): every upstream connection through a real Squid, with the
//! real `sluice run` reading its `HTTPS_PROXY` and `NO_PROXY` as curl would.
//!
//! What must hold: swaps and redactions work through Squid to the origin over HTTP/1.1 and
//! HTTP/2, the TLS end to end (Squid sees CONNECT only); Squid's Basic authentication with
//! the credentials from the URL, and wrong ones a named `502 upstream-proxy-auth`; a domain
//! Squid denies a named `502 upstream-proxy` with its status; `NO_PROXY` hosts dialled
//! directly (Squid's access log does not name them); the proxy's password in no log line,
//! audit event or error body.

use std::process::{Command, Output};

use sluice_integration_tests::launch::ScriptRun;
use sluice_integration_tests::squid::{Squid, SquidConfig};
use sluice_integration_tests::{RecordingUpstream, TestPki};

const TOKEN: &str = "tok-REAL-upstream-proxy-0001";
const PASSWORD: &str = "squid-PASSWORD-1234";

async fn run(pki: &TestPki, dir: &std::path::Path, proxy_url: &str, script: &str) -> Output {
    ScriptRun {
        policy: dir.join("policy.yaml"),
        audit: dir.join("audit.jsonl"),
        ca: pki.ca_path(),
        resolve: vec!["direct.test".into()],
        cwd: dir.to_owned(),
        env: vec![
            ("HTTPS_PROXY".into(), proxy_url.into()),
            ("NO_PROXY".into(), "direct.test".into()),
        ],
    }
    .run(script)
    .await
}

fn declaration(dir: &std::path::Path) {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let yaml = format!(
        "version: 1
secrets:
  api_token:
    from: {{ file: {} }}
    hosts: [api.test, direct.test, blocked.test]
    in: [header, body]
    sinks: [egress]
egress:
  allow: [plain.test]
  allow_ips: [\"127.0.0.1/32\"]
",
        dir.join("token").display()
    );
    std::fs::write(dir.join("policy.yaml"), yaml).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_connection_goes_through_squid_but_no_proxy_hosts() {
    let pki = TestPki::new();
    let api = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
    let direct = RecordingUpstream::start(&pki, &["direct.test"], &[b"http/1.1"]).await;
    let squid = Squid::start(&SquidConfig {
        hosts: &["api.test", "blocked.test", "plain.test"],
        user: Some(("alice", PASSWORD)),
        denied: Some("blocked.test"),
    });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    declaration(d);
    // A plain-HTTP origin: Python's own file server over a directory of one file.
    let served = d.join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(served.join("hello.txt"), "hello in the clear\n").unwrap();
    let plain_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut plain = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &plain_port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&served)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", plain_port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "python's http.server did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::write(d.join("body"), format!("echo {TOKEN}")).unwrap();
    let proxy_url = format!("http://alice:{PASSWORD}@127.0.0.1:{}", squid.port());
    let (api_url, direct_url) = (
        format!("https://api.test:{}/echo", api.port()),
        format!("https://direct.test:{}/echo", direct.port()),
    );
    let blocked = format!("https://blocked.test:{}/echo", api.port());
    let script = format!(
        "curl -sS --http1.1 -H \"Authorization: Bearer $API_TOKEN\" --data-binary @body {api_url}; echo
curl -sS --http2 -H \"Authorization: Bearer $API_TOKEN\" --data-binary @body {api_url}; echo
curl -sS -H \"Authorization: Bearer $API_TOKEN\" {direct_url}; echo
curl -sS -D - -H \"Authorization: Bearer $API_TOKEN\" {blocked}; echo
curl -sS http://plain.test:{plain_port}/hello.txt"
    );
    let out = run(&pki, d, &proxy_url, &script).await;
    let _ = plain.kill();
    let _ = plain.wait();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    // Plain HTTP went through Squid in absolute form, with the credentials.
    assert!(stdout.contains("hello in the clear"), "{stdout}\n{stderr}");
    assert!(
        squid
            .access_log()
            .contains(&format!("GET http://plain.test:{plain_port}/hello.txt")),
        "{}",
        squid.access_log()
    );

    // The origin received the real value over both protocols, through Squid.
    let records = api.records();
    assert_eq!(records.len(), 2, "{stdout}\n{stderr}");
    for record in &records {
        assert_eq!(
            record.headers["authorization"],
            format!("Bearer {TOKEN}").as_str()
        );
    }
    let versions: Vec<http::Version> = records.iter().map(|r| r.version).collect();
    assert!(versions.contains(&http::Version::HTTP_2), "{versions:?}");
    // The echo came back redacted into the placeholder.
    assert_eq!(
        stdout.matches("echo SLUICE_API_TOKEN_").count(),
        2,
        "{stdout}"
    );
    // NO_PROXY: dialled directly; Squid names api.test and blocked.test only.
    assert_eq!(direct.records().len(), 1);
    let access = squid.access_log();
    assert!(
        access.contains(&format!("CONNECT api.test:{}", api.port())),
        "{access}"
    );
    assert!(!access.contains("direct.test"), "{access}");
    // The domain Squid denies: a named 502 with its status.
    assert!(stdout.contains("sluice-error: upstream-proxy"), "{stdout}");
    assert!(stdout.contains("status 403"), "{stdout}");
    // Said at start without the password; the password nowhere.
    assert!(stderr.contains("credentials elided"), "{stderr}");
    let audit = std::fs::read_to_string(d.join("audit.jsonl")).unwrap();
    for (what, text) in [
        ("output", &stdout),
        ("stderr", &stderr),
        ("audit log", &audit),
    ] {
        assert!(
            !text.contains(PASSWORD),
            "the proxy's password in the {what}: {text}"
        );
        assert!(!text.contains(TOKEN), "the value in the {what}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_proxy_credentials_and_an_unreachable_proxy_are_named_502s() {
    let pki = TestPki::new();
    let api = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let squid = Squid::start(&SquidConfig {
        hosts: &["api.test"],
        user: Some(("alice", PASSWORD)),
        denied: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    declaration(d);
    let api_url = format!("https://api.test:{}/echo", api.port());
    let script = format!("curl -sS -D - -H \"Authorization: Bearer $API_TOKEN\" {api_url}; echo");
    let wrong = format!("http://alice:not-{PASSWORD}@127.0.0.1:{}", squid.port());
    let out = run(&pki, d, &wrong, &script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stdout.contains("502") && stdout.contains("sluice-error: upstream-proxy-auth"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "{stdout}{stderr}"
    );
    // Nothing listens on the port a dropped listener had.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(&pki, d, &format!("http://127.0.0.1:{closed}"), &script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("sluice-error: upstream-proxy-unreachable"),
        "{stdout}"
    );
    assert!(api.records().is_empty(), "nothing reached the origin");
}

/// sluice's own token requests (a minted secret's refresh) take the same route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minted_token_requests_go_through_squid_too() {
    use sluice_integration_tests::{IdentityProvider, IdpConfig};
    let pki = TestPki::new();
    let idp = IdentityProvider::start(
        &pki,
        &["idp.test", "api.test"],
        IdpConfig {
            client_id: "client".into(),
            client_secret: "client-secret-REAL-0001".into(),
            refresh_token: "1//refresh-REAL-0001".into(),
            access_lifetime: std::time::Duration::from_secs(60),
            service_account: None,
        },
    )
    .await;
    let squid = Squid::start(&SquidConfig {
        hosts: &["idp.test", "api.test"],
        user: None,
        denied: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("refresh"), "1//refresh-REAL-0001\n").unwrap();
    std::fs::write(d.join("secret"), "client-secret-REAL-0001").unwrap();
    let yaml = format!(
        "version: 1
secrets:
  google:
    oauth2:
      token_url: https://idp.test:{port}/token
      grant: refresh_token
      client_id: client
      client_secret: {{ file: {secret} }}
      refresh_token: {{ file: {refresh} }}
    hosts: [api.test]
    sinks: [egress]
egress:
  allow_ips: [\"127.0.0.1/32\"]
",
        port = idp.port(),
        secret = d.join("secret").display(),
        refresh = d.join("refresh").display(),
    );
    std::fs::write(d.join("policy.yaml"), yaml).unwrap();
    let api = format!("https://api.test:{}/api/echo", idp.port());
    let script = format!("curl -sS --fail-with-body -H \"Authorization: Bearer $GOOGLE\" {api}");
    let proxy_url = format!("http://127.0.0.1:{}", squid.port());
    let out = run(&pki, d, &proxy_url, &script).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("{\"token\":\"SLUICE_GOOGLE"), "{stdout}");
    assert_eq!(idp.token_requests(), 1);
    let access = squid.access_log();
    let through = |host: &str| access.contains(&format!("CONNECT {host}:{}", idp.port()));
    assert!(through("idp.test") && through("api.test"), "{access}");
}
