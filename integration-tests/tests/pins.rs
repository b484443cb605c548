//! Certificate pins (`pin:`) through the real `sluice serve` binary: curl as the client, a
//! recording upstream saying what arrived. The pins are printed by openssl with the very
//! commands docs/declaration.md gives, from the upstream's certificate as `openssl
//! s_client` fetches it and from the CA's file.

use std::process::{Command, Stdio};

use sluice_integration_tests::{Curl, CurlOutput, RecordingUpstream, ServeBinary, TestPki};

const GH: &str = "gh-REAL-token-0123456789abcdef";
const LEAFY: &str = "leafy-REAL-token-0123456789ab";
const ELSEWHERE: &str = "elsewhere-REAL-token-01234567";

/// `sh -c script`'s stdout, trimmed; the test fails with its stderr when it fails.
fn sh(script: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The pin of the certificate in the PEM file `cert`, as docs/declaration.md prints it.
fn pin_of(cert: &std::path::Path) -> String {
    let hash = sh(&format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        cert.display()
    ));
    format!("sha256/{hash}")
}

/// The pin of the leaf certificate `port` presents for api.test.
fn served_pin(port: u16, dir: &std::path::Path) -> String {
    let leaf = dir.join("served-leaf.pem");
    sh(&format!(
        "openssl s_client -connect 127.0.0.1:{port} -servername api.test </dev/null 2>/dev/null | openssl x509 -outform pem > '{}'",
        leaf.display()
    ));
    pin_of(&leaf)
}

struct World {
    pki: TestPki,
    upstream: RecordingUpstream,
    serve: ServeBinary,
}

impl World {
    async fn new() -> World {
        let pki = TestPki::new();
        let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
        let ca_pin = pin_of(&pki.ca_path());
        let leaf_pin = served_pin(upstream.port(), pki.dir());
        // A key nobody serves: that of a fresh CA.
        let elsewhere = pin_of(&TestPki::new().ca_path());
        assert_ne!(ca_pin, leaf_pin);
        let yaml = format!(
            r#"version: 1
secrets:
  gh:
    value: "{GH}"
    hosts: [api.test]
    pin: ["{elsewhere}", "{ca_pin}"]
  leafy:
    value: "{LEAFY}"
    hosts: [api.test]
    pin: ["{leaf_pin}"]
  elsewhere:
    value: "{ELSEWHERE}"
    hosts: [api.test]
    pin: ["{elsewhere}"]
egress:
  allow_ips: ["127.0.0.1/32"]
"#
        );
        let serve = ServeBinary::start(&yaml, &pki, &["api.test"], &[]);
        World {
            pki,
            upstream,
            serve,
        }
    }

    /// curl on `/path` of api.test with a header per placeholder variable in `vars`.
    async fn call(&self, path: &str, vars: &[&str], extra: &[&str]) -> CurlOutput {
        let mut args: Vec<String> = vec!["-i".into()];
        for var in vars {
            args.push("-H".into());
            args.push(format!("x-{var}: {}", self.serve.placeholder(var)));
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let proxy = self.serve.proxy();
        let url = format!("https://api.test:{}{path}", self.upstream.port());
        tokio::task::spawn_blocking(move || Curl::new(&proxy.url, &proxy.ca).args(args).get(&url))
            .await
            .expect("curl task")
    }
}

fn assert_no_value(what: &str, text: &str) {
    for value in [GH, LEAFY, ELSEWHERE] {
        assert!(!text.contains(value), "{what} holds a value: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_secret_goes_only_to_a_chain_holding_its_pin() {
    let world = World::new().await;
    // Unpinned traffic is untouched, and leaves an idle connection in the ordinary pool.
    let plain = world.call("/plain", &[], &[]).await;
    assert_eq!(plain.status, 200, "{plain:?}");

    // The CA's key (the anchor of the verified path) and the leaf's both meet a pin, over
    // HTTP/2 and over HTTP/1.1.
    for extra in [&[][..], &["--http1.1"][..]] {
        for (var, value, path) in [("GH", GH, "/root-pinned"), ("LEAFY", LEAFY, "/leaf-pinned")] {
            let out = world.call(path, &[var], extra).await;
            assert_eq!(out.status, 200, "{var} {extra:?}: {out:?}");
            let records = world.upstream.records();
            let record = records.last().expect("a request arrived");
            assert_eq!(record.uri.path(), path);
            assert_eq!(record.headers[format!("x-{var}").as_str()], value);
        }
    }
    let arrived = world.upstream.records().len();
    assert_eq!(arrived, 5);

    // A pin nobody serves: refused, and although connections to api.test stand idle in
    // the pools, nothing of the request reaches it.
    for extra in [&[][..], &["--http1.1"][..]] {
        let out = world.call("/never", &["ELSEWHERE"], extra).await;
        assert_eq!(out.status, 502, "{extra:?}: {out:?}");
        assert!(
            out.body.contains("sluice-error: pin-mismatch"),
            "{}",
            out.body
        );
        assert!(
            out.body.contains("secret elsewhere to api.test"),
            "{}",
            out.body
        );
        assert_no_value("a refusal", &out.body);
    }
    // Two pinned secrets together: each must be met; the refusal names the one that is not.
    let both = world.call("/never", &["GH", "ELSEWHERE"], &[]).await;
    assert_eq!(both.status, 502, "{both:?}");
    assert!(
        both.body.contains("secret elsewhere to api.test"),
        "{}",
        both.body
    );
    assert!(!both.body.contains("secret gh"), "{}", both.body);
    assert_eq!(
        world.upstream.records().len(),
        arrived,
        "a request whose pin was not met reached the upstream"
    );
    // The pinned legs met pins at handshakes of their own: the two admitted pinned secrets
    // over each protocol, plus the ordinary connection.
    assert!(
        world.upstream.connections() >= 5,
        "{}",
        world.upstream.connections()
    );

    let audit = world.serve.stop();
    let refusals: Vec<&String> = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"refuse\"") && l.contains("pin-mismatch"))
        .collect();
    assert_eq!(refusals.len(), 3, "{audit:#?}");
    assert!(
        refusals
            .iter()
            .all(|l| l.contains("\"secret\":\"elsewhere\"")),
        "{refusals:#?}"
    );
    assert_no_value("the audit log", &audit.join("\n"));
    drop(world.pki);
}

#[test]
fn check_names_a_bad_pin_with_its_position_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(
        &path,
        "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    hosts: [api.test]\n    pin: [\"sha256/AAAA\"]\n",
    )
    .unwrap();
    let out = Command::new(sluice_integration_tests::sluice_bin())
        .arg("check")
        .arg(&path)
        .output()
        .expect("sluice check runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("policy.yaml:6:11"), "{stderr}");
    assert!(stderr.contains("secrets.gh.pin[0]"), "{stderr}");
    assert!(
        stderr.contains("openssl dgst -sha256 -binary | base64"),
        "{stderr}"
    );
}
