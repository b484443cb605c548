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
        World::with_args(yaml, &[]).await
    }

    async fn with_args(yaml: &str, args: &[&str]) -> World {
        let pki = TestPki::new();
        let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
        let serve = ServeBinary::start(yaml, &pki, &["api.test"], args);
        World {
            _pki: pki,
            upstream,
            serve,
        }
    }

    /// curl `method` on `path` of api.test with the placeholder as a bearer token; the
    /// path goes as written (`--path-as-is`), dot segments and all.
    async fn call(&self, method: &str, path: &str) -> CurlOutput {
        let auth = format!("Authorization: Bearer {}", self.serve.placeholder("GH"));
        self.curl(path, &["-i", "--path-as-is", "-X", method, "-H", &auth])
            .await
    }

    /// curl on `path` of api.test with `args`.
    async fn curl(&self, path: &str, args: &[&str]) -> CurlOutput {
        let proxy = self.serve.proxy();
        let url = format!("https://api.test:{}{path}", self.upstream.port());
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        tokio::task::spawn_blocking(move || Curl::new(&proxy.url, &proxy.ca).args(args).get(&url))
            .await
            .expect("curl task")
    }

    /// One series of the admin endpoint's `/metrics` (0 when absent).
    fn metric(&self, series: &str) -> u64 {
        let admin = self.serve.read("admin-url");
        let (auth, addr) = admin
            .trim_start_matches("http://")
            .rsplit_once('@')
            .expect("user:token@host:port");
        let out = std::process::Command::new("curl")
            .args(["-sS", "-u", auth, &format!("http://{addr}/metrics")])
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
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
    // The refusal quotes the path: a real value in it (which may go to this host, and so
    // is kept there) is its placeholder in the answer, never the value.
    let quoting = world.call("DELETE", &format!("/repos/acme/{TOKEN}")).await;
    assert_eq!(quoting.status, 403, "{quoting:?}");
    assert!(
        quoting.body.contains("add DELETE to its methods"),
        "{}",
        quoting.body
    );
    assert_no_token("a refusal quoting the path", &quoting.body);
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
    assert_eq!(refusals, near_misses.len() + 1, "{audit:#?}");
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

const BUDGETED: &str = r#"version: 1
secrets:
  gh:
    value: "gh-REAL-token-0123456789abcdef"
    hosts: [api.test]
    sinks: [egress]
    in: [header, body]
    budget: { requests: 3, per: 4s }
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

/// A body read whole is scanned before the budget is charged: one that swaps the secret
/// and is then refused (`429`) leaves its refusal in the log and no `swap`, as a head does.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_refused_after_its_scan_is_not_logged_as_swapped() {
    let world = World::with_args(BUDGETED, &["--admin", "127.0.0.1:0"]).await;
    let placeholder = world.serve.placeholder("GH");
    let body = format!("token={placeholder}");
    let whole = ["-i", "--http1.1", "--data-binary", body.as_str()];
    assert_eq!(world.curl("/first", &whole).await.status, 200);
    for path in ["/second", "/third"] {
        assert_eq!(world.call("GET", path).await.status, 200);
    }
    let refused = world.curl("/fourth", &whole).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(world.upstream.records().len(), 3);
    let audit = world.serve.stop();
    let swaps_to = |path: &str| {
        audit
            .iter()
            .filter(|l| l.contains("\"event\":\"swap\""))
            .filter(|l| l.contains(&format!("\"path\":\"{path}\"")))
            .count()
    };
    assert_eq!(swaps_to("/first"), 1, "{audit:#?}");
    assert_eq!(swaps_to("/fourth"), 0, "{audit:#?}");
    assert!(
        audit
            .iter()
            .any(|l| l.contains("budget-exhausted") && l.contains("/fourth")),
        "{audit:#?}"
    );
    assert_no_token("the audit log", &audit.join("\n"));
}

/// The value of a response header in curl's `-i` output.
fn header<'a>(out: &'a CurlOutput, name: &str) -> Option<&'a str> {
    out.body.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budget_is_spent_refused_when_used_up_and_reset_with_its_window() {
    let world = World::with_args(BUDGETED, &["--admin", "127.0.0.1:0"]).await;
    let placeholder = world.serve.placeholder("GH");
    // A request that swaps nothing spends nothing.
    assert_eq!(world.curl("/free", &[]).await.status, 200);
    // A streamed body that could swap the secret, and does not, gives its use back.
    let chunked = [
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "no secret here",
    ];
    assert_eq!(world.curl("/upload", &chunked).await.status, 200);
    assert_eq!(world.metric("sluice_budget_used{secret=\"gh\"}"), 0);
    // Three uses: in a header, twice, and in a streamed body.
    assert_eq!(world.call("GET", "/one").await.status, 200);
    assert_eq!(world.call("GET", "/two").await.status, 200);
    let body = format!("token={placeholder}");
    let streamed = ["-H", "Transfer-Encoding: chunked", "--data-binary", &body];
    assert_eq!(world.curl("/three", &streamed).await.status, 200);
    assert_eq!(world.metric("sluice_budget_used{secret=\"gh\"}"), 3);
    assert_eq!(world.metric("sluice_budget_limit{secret=\"gh\"}"), 3);
    let sent = world.upstream.records();
    assert_eq!(sent.len(), 5);
    assert_eq!(sent[4].body, format!("token={TOKEN}").as_bytes());

    // The fourth: 429, when it resets, and nothing sent.
    let refused = world.call("GET", "/four").await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(header(&refused, "sluice-error"), Some("budget-exhausted"));
    let retry: u64 = header(&refused, "retry-after").unwrap().parse().unwrap();
    assert!((1..=4).contains(&retry), "Retry-After: {retry}");
    assert!(
        refused
            .body
            .contains("secret gh has used its budget of 3 requests per 4s"),
        "{}",
        refused.body
    );
    assert_no_token("a refusal", &refused.body);
    // A streamed body that could swap it is refused too, before anything leaves. (Over
    // HTTP/1.1: over HTTP/2 the answer may reset the stream while curl 7.88 still uploads,
    // which curl reports as a framing error.)
    let chunked_h1 = [&chunked[..], &["--http1.1", "-i"]].concat();
    let refused_stream = world.curl("/five", &chunked_h1).await;
    assert_eq!(refused_stream.status, 429, "{refused_stream:?}");
    // Requests that swap nothing still pass.
    assert_eq!(world.curl("/free", &[]).await.status, 200);
    assert_eq!(
        world.upstream.records().len(),
        6,
        "a refused request reached the upstream"
    );
    assert_eq!(
        world.metric("sluice_refusals_total{reason=\"budget-exhausted\"}"),
        2
    );

    // The window closes, and the next use opens another.
    tokio::time::sleep(std::time::Duration::from_secs(retry)).await;
    let again = world.call("GET", "/again").await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(world.metric("sluice_budget_used{secret=\"gh\"}"), 1);

    let audit = world.serve.stop();
    let refusals: Vec<&String> = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"refuse\"") && l.contains("budget-exhausted"))
        .collect();
    assert_eq!(refusals.len(), 2, "{audit:#?}");
    assert!(
        refusals.iter().all(|l| l.contains("\"secret\":\"gh\"")),
        "{refusals:?}"
    );
    // A swap is recorded for the requests that went, never for the one refused after its
    // head was scanned: the log must not say a value left in a request that did not.
    let swaps_to = |path: &str| {
        audit
            .iter()
            .filter(|l| l.contains("\"event\":\"swap\""))
            .filter(|l| l.contains(&format!("\"path\":\"{path}\"")))
            .count()
    };
    for path in ["/one", "/two", "/again"] {
        assert_eq!(swaps_to(path), 1, "{path}: {audit:#?}");
    }
    assert_eq!(swaps_to("/four"), 0, "{audit:#?}");
    assert_no_token("the audit log", &audit.join("\n"));
}
