//! Finer grants through the real `sluice serve` binary: request rules (`allow:`) with curl
//! as the client and a recording upstream saying what arrived. Every refusal checks that
//! nothing reached the upstream and that no value is in the answer or the audit log.

use sluice_integration_tests::{Curl, CurlOutput, RecordingUpstream, ServeBinary, TestPki};

const TOKEN: &str = "gh-REAL-token-0123456789abcdef";

const RULED: &str = r#"version: 1
secrets:
  gh:
    value: "gh-REAL-token-0123456789abcdef"
    hosts: [api.test]
    sinks: [egress]
    allow:
      - { methods: [GET, HEAD], paths: ["/repos/acme/**", "/user"] }
      - { methods: [POST], paths: ["/repos/acme/*/issues"] }
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

struct World {
    _pki: TestPki,
    upstream: RecordingUpstream,
    serve: ServeBinary,
}

impl World {
    async fn new(yaml: &str) -> World {
        let pki = TestPki::new();
        let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
        let serve = ServeBinary::start(yaml, &pki, &["api.test"], &[]);
        World {
            _pki: pki,
            upstream,
            serve,
        }
    }

    /// curl `method` on `path` of api.test with the placeholder as a bearer token; the
    /// path goes as written (`--path-as-is`), dot segments and all.
    async fn call(&self, method: &str, path: &str) -> CurlOutput {
        let proxy = self.serve.proxy();
        let auth = format!("Authorization: Bearer {}", self.serve.placeholder("GH"));
        let url = format!("https://api.test:{}{path}", self.upstream.port());
        let args = ["-i", "--path-as-is", "-X", method, "-H", &auth].map(str::to_owned);
        tokio::task::spawn_blocking(move || Curl::new(&proxy.url, &proxy.ca).args(args).get(&url))
            .await
            .expect("curl task")
    }
}

fn assert_no_token(what: &str, text: &str) {
    assert!(!text.contains(TOKEN), "{what} holds the token: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rule_admits_its_requests_and_refuses_every_near_miss() {
    let world = World::new(RULED).await;
    // Admitted: the upstream gets the value, on the path the rule matched.
    let admitted = [
        ("GET", "/repos/acme/widgets", "/repos/acme/widgets"),
        ("GET", "/user?next=/admin", "/user"),
        (
            "POST",
            "/repos/acme/widgets/issues",
            "/repos/acme/widgets/issues",
        ),
        ("GET", "/repos/other/../acme/x", "/repos/acme/x"),
        ("GET", "//repos//acme/./y", "/repos/acme/y"),
        ("GET", "/repos/acme/%77idgets", "/repos/acme/widgets"),
    ];
    for (i, (method, path, arrived)) in admitted.iter().enumerate() {
        let out = world.call(method, path).await;
        assert_eq!(out.status, 200, "{method} {path}: {out:?}");
        let records = world.upstream.records();
        assert_eq!(records.len(), i + 1, "{method} {path}");
        let record = &records[i];
        assert_eq!(record.method.as_str(), *method);
        assert_eq!(record.uri.path(), *arrived, "{method} {path}");
        assert_eq!(record.headers["authorization"], format!("Bearer {TOKEN}"));
    }
    // The query is not part of the match, and goes as it came.
    assert_eq!(world.upstream.records()[1].uri.query(), Some("next=/admin"));

    // Refused: the method, encoded slashes, `..` out of the tree, case, a trailing slash.
    let near_misses = [
        ("DELETE", "/repos/acme/widgets", "add DELETE to its methods"),
        (
            "GET",
            "/repos/acme/x%2F..%2F..%2Fadmin",
            "paths: [\"/repos/acme/x%2F..%2F..%2Fadmin\"]",
        ),
        ("GET", "/repos/acme/..%5Cadmin", "to secrets.gh.allow"),
        ("GET", "/repos/acme/../admin", "paths: [\"/repos/admin\"]"),
        (
            "GET",
            "/repos/acme/%2e%2e/admin",
            "paths: [\"/repos/admin\"]",
        ),
        (
            "GET",
            "/Repos/acme/widgets",
            "paths: [\"/Repos/acme/widgets\"]",
        ),
        ("GET", "/user/", "paths: [\"/user/\"]"),
        ("get", "/user", "add get to its methods"),
        ("POST", "/repos/acme/a/b/issues", "add POST to its methods"),
    ];
    let before = world.upstream.records().len();
    for (method, path, fix) in near_misses {
        let out = world.call(method, path).await;
        assert_eq!(out.status, 403, "{method} {path}: {out:?}");
        assert!(
            out.body.contains("sluice-error: request-not-allowed"),
            "{method} {path}: {}",
            out.body
        );
        assert!(out.body.contains(fix), "{method} {path}: {}", out.body);
        assert_no_token("a refusal", &out.body);
    }
    assert_eq!(
        world.upstream.records().len(),
        before,
        "a refused request reached the upstream"
    );

    let audit = world.serve.stop();
    let refusals = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"refuse\"") && l.contains("request-not-allowed"))
        .count();
    assert_eq!(refusals, near_misses.len(), "{audit:#?}");
    assert_no_token("the audit log", &audit.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_without_a_placeholder_is_not_touched_by_the_rules() {
    let world = World::new(RULED).await;
    let proxy = world.serve.proxy();
    let url = format!(
        "https://api.test:{}/anything/../else",
        world.upstream.port()
    );
    let out = tokio::task::spawn_blocking(move || {
        Curl::new(&proxy.url, &proxy.ca)
            .args(["-X", "DELETE", "--path-as-is"])
            .get(&url)
    })
    .await
    .unwrap();
    assert_eq!(out.status, 200, "{out:?}");
    // No rule admitted a swap into it: its path goes as the client wrote it.
    assert_eq!(world.upstream.records()[0].uri.path(), "/anything/../else");
    world.serve.stop();
}

#[test]
fn check_names_each_bad_rule_with_its_position_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    let yaml = RULED
        .replace("\"/user\"", "\"/user/./me\"")
        .replace("[POST]", "[post]");
    std::fs::write(&path, yaml).unwrap();
    let out = std::process::Command::new(sluice_integration_tests::sluice_bin())
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("policy.yaml:8:59: error: secrets.gh.allow[0].paths[1]: path pattern `/user/./me` can never match"), "{text}");
    assert!(text.contains("help: write `/user/me`"), "{text}");
    assert!(
        text.contains(
            "policy.yaml:9:21: error: secrets.gh.allow[1].methods[0]: methods are case-sensitive"
        ),
        "{text}"
    );
}
