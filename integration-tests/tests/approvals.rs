//! Approvals (`approve:`, docs/approvals.md) through the real `sluice serve` binary: a use
//! held until the admin endpoint decides it, with nothing reaching the upstream before;
//! denied; timed out; a decision for the run answering later uses without asking; twenty
//! identical requests on one decision; the workload unable to list or decide; and no value
//! in any listing, event or metric.

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use sha2::{Digest, Sha256};
use sluice_integration_tests::client::ProxyAt;
use sluice_integration_tests::launch::require_program;
use sluice_integration_tests::{RecordingUpstream, ServeBinary, TestPki, sluice_bin};

const VALUE: &str = "prod-REAL-token-0123456789abcdef";

const YAML: &str = r#"version: 1
secrets:
  prod:
    value: "prod-REAL-token-0123456789abcdef"
    hosts: [api.test]
    sinks: [egress]
    in: [header]
    approve: [POST, DELETE]
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

struct World {
    _pki: TestPki,
    upstream: RecordingUpstream,
    serve: ServeBinary,
    proxy: ProxyAt,
    placeholder: String,
    /// `user:token@host:port` of the admin endpoint.
    admin: String,
}

impl World {
    async fn new(timeout: &str) -> World {
        World::with_args(timeout, &[]).await
    }

    async fn with_args(timeout: &str, extra: &[&str]) -> World {
        World::with(YAML, timeout, extra).await
    }

    async fn with(yaml: &str, timeout: &str, extra: &[&str]) -> World {
        let pki = TestPki::new();
        let names = ["api.test", "ask.test"];
        let upstream = RecordingUpstream::start(&pki, &names, &[b"http/1.1"]).await;
        let mut args = vec!["--admin", "127.0.0.1:0", "--approval-timeout", timeout];
        args.extend_from_slice(extra);
        let serve = ServeBinary::start(yaml, &pki, &names, &args);
        let proxy = serve.proxy();
        let placeholder = serve.placeholder("PROD");
        let admin = serve
            .read("admin-url")
            .trim_start_matches("http://")
            .to_owned();
        World {
            _pki: pki,
            upstream,
            serve,
            proxy,
            placeholder,
            admin,
        }
    }

    /// `curl` against the admin endpoint as `auth` (`user:token`): status and body.
    fn curl(&self, method: &str, path: &str, auth: &str, body: Option<&str>) -> (u16, String) {
        let address = self.admin.rsplit('@').next().unwrap();
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "-X", method, "-w", "\n%{http_code}", "-u", auth]);
        if let Some(body) = body {
            cmd.args(["-H", "content-type: application/json", "--data", body]);
        }
        let out = cmd
            .arg(format!("http://{address}{path}"))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (status.parse().unwrap_or(0), body.to_owned())
    }

    fn admin_auth(&self) -> String {
        self.admin.rsplit_once('@').unwrap().0.to_owned()
    }

    /// The uses waiting now, as the approvers see them.
    fn pending(&self) -> Vec<serde_json::Value> {
        let (status, body) = self.curl("GET", "/v1/approvals", &self.admin_auth(), None);
        assert_eq!(status, 200, "{body}");
        let listing: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        listing["pending"].as_array().expect("pending").clone()
    }

    /// Waits until `n` uses wait.
    async fn await_pending(&self, n: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pending = self.pending();
            if pending.len() == n {
                return pending;
            }
            assert!(Instant::now() < deadline, "never {n} waiting: {pending:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A `POST` that waits, allowed for the run: later `POST`s go on without asking.
    async fn allow_post_for_the_run(&self) {
        let held = self.send("POST", "/a", "one");
        let pending = self.await_pending(1).await;
        let (status, answer) = self.decide(
            &pending[0]["id"],
            r#"{"decision": "allow", "scope": "run"}"#,
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(held.await.unwrap().0, 200);
    }

    fn decide(&self, id: &serde_json::Value, body: &str) -> (u16, String) {
        self.curl(
            "POST",
            &format!("/v1/approvals/{id}"),
            &self.admin_auth(),
            Some(body),
        )
    }

    /// One request with the placeholder, on a tunnel of its own: status, `sluice-error`,
    /// body.
    fn send(
        &self,
        method: &'static str,
        path: &'static str,
        body: &'static str,
    ) -> tokio::task::JoinHandle<(u16, String, String)> {
        self.send_with(method, path, body, &[])
    }

    /// [`World::send`] with `headers` besides.
    fn send_with(
        &self,
        method: &'static str,
        path: &'static str,
        body: &'static str,
        headers: &[(&'static str, &'static str)],
    ) -> tokio::task::JoinHandle<(u16, String, String)> {
        let headers = headers.to_vec();
        let (proxy, placeholder) = (self.proxy.clone(), self.placeholder.clone());
        let port = self.upstream.port();
        tokio::spawn(async move {
            let authority = format!("api.test:{port}");
            let mut client = proxy
                .open(&authority, "api.test", &[b"http/1.1"])
                .await
                .expect("a tunnel");
            let mut request = Request::builder()
                .method(method)
                .uri(format!("https://{authority}{path}"))
                .header("host", authority.as_str())
                .header("authorization", format!("Bearer {placeholder}"));
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let request = request
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap();
            let response = client.send(request).await.expect("an answer");
            let code = response
                .headers()
                .get("sluice-error")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let text = String::from_utf8_lossy(response.body()).into_owned();
            (response.status().as_u16(), code, text)
        })
    }

    fn audit(self) -> String {
        self.serve.stop().join("\n")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_use_waits_for_its_decision_and_nothing_leaves_before() {
    let world = World::new("30s").await;
    let held = world.send("POST", "/items/7?force=yes", "{\"delete\": true}");
    let pending = world.await_pending(1).await;
    let ask = &pending[0];
    assert_eq!(ask["secret"], "prod");
    assert_eq!(ask["host"], format!("api.test:{}", world.upstream.port()));
    assert_eq!(ask["method"], "POST");
    assert_eq!(ask["path"], "/items/7?force=…");
    assert_eq!(ask["body_bytes"], 16);
    let sha = hex(Sha256::digest(b"{\"delete\": true}"));
    assert_eq!(ask["body_sha256"], sha);
    assert!(ask["waited_secs"].as_f64().unwrap() >= 0.0);
    assert!(
        !ask.to_string().contains(VALUE),
        "a value in the listing: {ask}"
    );
    // Held: nothing reached the upstream.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(world.upstream.records().is_empty());
    assert!(!held.is_finished());

    // The workload holds the proxy's credentials, never the admin's: refused.
    let proxy_auth = world.proxy.url.trim_start_matches("http://");
    let proxy_auth = proxy_auth.rsplit_once('@').unwrap().0;
    assert_eq!(world.curl("GET", "/v1/approvals", proxy_auth, None).0, 401);
    let (status, _) = world.curl(
        "POST",
        &format!("/v1/approvals/{}", ask["id"]),
        proxy_auth,
        Some(r#"{"decision": "allow"}"#),
    );
    assert_eq!(status, 401);
    assert!(!held.is_finished());

    // A bad decision changes nothing; an unknown id is not found.
    assert_eq!(world.decide(&ask["id"], r#"{"decision": "yes"}"#).0, 400);
    assert_eq!(
        world
            .decide(&serde_json::json!(999), r#"{"decision": "allow"}"#)
            .0,
        404
    );
    let (status, answer) = world.decide(&ask["id"], r#"{"decision": "allow"}"#);
    assert_eq!(status, 200, "{answer}");
    let (status, code, _) = held.await.unwrap();
    assert_eq!((status, code.as_str()), (200, ""));
    let records = world.upstream.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {VALUE}").as_str()
    );
    assert!(world.pending().is_empty());

    // A method `approve:` does not name goes through without asking.
    let (status, _, _) = world.send("GET", "/items", "").await.unwrap();
    assert_eq!(status, 200);
    // Once: the same use waits again, and this time it is denied.
    let held = world.send("POST", "/items/7?force=yes", "{\"delete\": true}");
    let pending = world.await_pending(1).await;
    let (status, _) = world.decide(&pending[0]["id"], r#"{"decision": "deny"}"#);
    assert_eq!(status, 200);
    let (status, code, text) = held.await.unwrap();
    assert_eq!((status, code.as_str()), (403, "approval-denied"));
    assert!(
        text.contains("secret prod") && text.contains("denied"),
        "{text}"
    );
    assert_eq!(world.upstream.records().len(), 2, "the denied use left");

    let metrics = world.curl("GET", "/metrics", &world.admin_auth(), None).1;
    assert!(
        metrics.contains("sluice_approvals_total{result=\"allowed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_approvals_total{result=\"denied\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains(VALUE));
    let audit = world.audit();
    assert!(!audit.contains(VALUE));
    let approves: Vec<serde_json::Value> = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"approve\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(approves.len(), 2, "{audit}");
    assert_eq!(approves[0]["secret"], "prod");
    assert_eq!(approves[0]["method"], "POST");
    assert_eq!(approves[0]["path"], "/items/7?force=…");
    assert_eq!(approves[0]["approval"]["decision"], "allow");
    assert_eq!(approves[0]["approval"]["scope"], "once");
    assert_eq!(approves[0]["approval"]["channel"], "admin-api");
    assert!(approves[0]["approval"]["waited_ms"].as_u64().unwrap() >= 300);
    assert_eq!(approves[1]["approval"]["decision"], "deny");
    assert!(audit.contains("\"reason\":\"approval-denied\""), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_for_the_run_answers_later_uses_and_identical_ones_share_one() {
    let world = World::new("30s").await;
    // Twenty identical requests at once: one use waits, one decision answers them all.
    let held: Vec<_> = (0..20)
        .map(|_| world.send("DELETE", "/items/1", ""))
        .collect();
    let pending = world.await_pending(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        world.pending().len(),
        1,
        "identical uses wait on one decision"
    );
    let (status, answer) = world.decide(
        &pending[0]["id"],
        r#"{"decision": "allow", "scope": "once"}"#,
    );
    assert_eq!(status, 200, "{answer}");
    for request in held {
        assert_eq!(request.await.unwrap().0, 200);
    }
    assert_eq!(world.upstream.records().len(), 20);

    // For the run: this secret, host and method go on without asking from now on.
    world.allow_post_for_the_run().await;
    for _ in 0..10 {
        let (status, _, _) = world.send("POST", "/b", "other").await.unwrap();
        assert_eq!(status, 200);
    }
    assert!(world.pending().is_empty());
    // Another method is another use: DELETE still waits.
    let held = world.send("DELETE", "/b", "");
    let pending = world.await_pending(1).await;
    world.decide(&pending[0]["id"], r#"{"decision": "deny", "scope": "run"}"#);
    assert_eq!(held.await.unwrap().1, "approval-denied");
    let (status, code, _) = world.send("DELETE", "/c", "").await.unwrap();
    assert_eq!((status, code.as_str()), (403, "approval-denied"));
    assert_eq!(
        world.upstream.records().len(),
        31,
        "20 + 1 + 10 allowed; none denied"
    );

    let audit = world.audit();
    let approves = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"approve\""))
        .count();
    assert_eq!(approves, 3, "one event per decision: {audit}");
    assert!(!audit.contains(VALUE));
}

/// A decision for the run stands for the credential decided on: a reload that reads the
/// same declaration keeps it, one that points the secret's name at another value asks
/// again, and nothing of the new value reaches the host before its decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_points_the_name_at_another_credential_asks_again() {
    let world = World::new("30s").await;
    world.allow_post_for_the_run().await;

    // The same declaration again: the decision stands.
    world.serve.reload(YAML);
    assert_eq!(world.send("POST", "/b", "two").await.unwrap().0, 200);

    // Another credential under the same name: its first use waits for a decision of its own.
    const OTHER: &str = "prod-OTHER-token-fedcba9876543210";
    world.serve.reload(&YAML.replace(VALUE, OTHER));
    let held = world.send("POST", "/c", "three");
    let pending = world.await_pending(1).await;
    assert_eq!(pending[0]["secret"], "prod", "{pending:?}");
    assert_eq!(
        world.upstream.records().len(),
        2,
        "nothing sent before the decision"
    );
    world.decide(
        &pending[0]["id"],
        r#"{"decision": "deny", "scope": "once"}"#,
    );
    let (status, code, _) = held.await.unwrap();
    assert_eq!((status, code.as_str()), (403, "approval-denied"));
    let records = world.upstream.records();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| !format!("{r:?}").contains(OTHER)));
    assert!(!world.audit().contains(OTHER));
}

/// A decision for the run answers for its method only: a `POST` allowed for the run that
/// says `DELETE` in an override header or `_method` waits, listed as a `DELETE`, and
/// nothing of it leaves before its decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_is_not_answered_by_the_request_lines_decision_for_the_run() {
    let world = World::new("30s").await;
    world.allow_post_for_the_run().await;
    assert_eq!(world.send("POST", "/b", "two").await.unwrap().0, 200);
    let by_header = world.send_with(
        "POST",
        "/c",
        "three",
        &[("x-http-method-override", "DELETE")],
    );
    let by_query = world.send("POST", "/d?_method=delete", "four");
    let pending = world.await_pending(2).await;
    for use_ in &pending {
        assert_eq!(use_["method"], "DELETE", "{pending:?}");
    }
    assert_eq!(world.upstream.records().len(), 2, "nothing sent before");
    for use_ in &pending {
        world.decide(&use_["id"], r#"{"decision": "deny", "scope": "once"}"#);
    }
    assert_eq!(by_header.await.unwrap().1, "approval-denied");
    assert_eq!(by_query.await.unwrap().1, "approval-denied");
    assert_eq!(world.upstream.records().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_deciding_in_time_refuses_the_use() {
    let world = World::new("1s").await;
    let started = Instant::now();
    let (status, code, text) = world.send("POST", "/items", "{}").await.unwrap();
    assert_eq!((status, code.as_str()), (403, "approval-timeout"));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(text.contains("sluice approve"), "{text}");
    assert!(world.upstream.records().is_empty());
    assert!(
        world.pending().is_empty(),
        "a timed-out use is no longer listed"
    );
    let audit = world.audit();
    assert!(audit.contains("\"reason\":\"approval-timeout\""), "{audit}");
    assert!(!audit.contains(VALUE));
}

/// `sluice approve` in a terminal (util-linux's `script` gives it a pseudo-terminal): it
/// shows the waiting use, a key typed without Enter decides it for the run, and later uses
/// go on without waiting; `q` quits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_approve_decides_from_a_terminal_one_key_per_decision() {
    use std::io::{Read, Write};
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    require_program("script", "util-linux ships with the machine");
    let world = World::new("30s").await;
    let held = world.send("DELETE", "/items/9?cascade=yes", "");
    world.await_pending(1).await;

    let command = format!(
        "{} approve --run-dir {}",
        sluice_bin().display(),
        world.serve.dir().join("run").display()
    );
    let mut terminal = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script runs");
    let screen = Arc::new(Mutex::new(String::new()));
    let mut stdout = terminal.stdout.take().unwrap();
    let reader = {
        let screen = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let shown = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !screen.lock().unwrap().contains(text) {
            assert!(
                Instant::now() < deadline,
                "never shown {text:?}: {}",
                screen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    shown("[a] allow once");
    {
        let screen = screen.lock().unwrap();
        assert!(screen.contains("  secret   prod"), "{screen}");
        assert!(
            screen.contains("  request  DELETE /items/9?cascade=…"),
            "{screen}"
        );
        assert!(
            screen.contains("  body     0 bytes, sha256 e3b0c442"),
            "{screen}"
        );
        assert!(!screen.contains(VALUE));
    }
    let mut keys = terminal.stdin.take().unwrap();
    keys.write_all(b"r").unwrap();
    keys.flush().unwrap();
    shown(": allow, for the rest of the run");
    assert_eq!(held.await.unwrap().0, 200);
    // For the run: the next DELETE does not wait.
    assert_eq!(world.send("DELETE", "/items/10", "").await.unwrap().0, 200);
    keys.write_all(b"q").unwrap();
    keys.flush().unwrap();
    let status = terminal.wait().unwrap();
    assert!(status.success(), "{status}: {}", screen.lock().unwrap());
    drop(keys);
    reader.join().unwrap();

    let audit = world.audit();
    let approve = audit
        .lines()
        .find(|l| l.contains("\"event\":\"approve\""))
        .expect("an approve event");
    assert!(approve.contains("\"channel\":\"terminal\""), "{approve}");
    assert!(approve.contains("\"scope\":\"run\""), "{approve}");
}

/// An operator's approval service, as `--approval-webhook` calls it: it records what it is
/// sent, and answers by the waiting request's path: `/later` 202 (left to the other
/// channels), `/deny` a denial, anything else an allowance for the run.
async fn webhook() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/decide", listener.local_addr().unwrap());
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            assert_eq!(request.uri().path(), "/decide");
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let ask: serde_json::Value = serde_json::from_slice(&body).unwrap();
                            let path = ask["path"].as_str().unwrap_or_default().to_owned();
                            seen.lock().unwrap().push(ask);
                            let (status, answer) = match path.as_str() {
                                "/later" => (202, ""),
                                "/deny" => (200, r#"{"decision": "deny"}"#),
                                _ => (200, r#"{"decision": "allow", "scope": "run"}"#),
                            };
                            Ok::<_, std::convert::Infallible>(
                                http::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(answer.as_bytes())))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (url, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_decides_or_leaves_the_decision_to_the_other_channels() {
    let (url, calls) = webhook().await;
    let world = World::with_args("30s", &["--approval-webhook", &url]).await;
    // 202: the use goes on waiting, and the admin API decides it.
    let held = world.send("POST", "/later", "{}");
    let pending = world.await_pending(1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the webhook was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!held.is_finished());
    world.decide(&pending[0]["id"], r#"{"decision": "allow"}"#);
    assert_eq!(held.await.unwrap().0, 200);
    // Denied by the webhook.
    let (status, code, _) = world.send("DELETE", "/deny", "").await.unwrap();
    assert_eq!((status, code.as_str()), (403, "approval-denied"));
    // Allowed for the run by the webhook: the next POST is not even asked about.
    assert_eq!(world.send("POST", "/now", "{}").await.unwrap().0, 200);
    assert_eq!(world.send("POST", "/again", "{}").await.unwrap().0, 200);
    let calls = calls.lock().unwrap().clone();
    let paths: Vec<&str> = calls.iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/later", "/deny", "/now"]);
    assert_eq!(calls[0]["secret"], "prod");
    assert_eq!(calls[0]["method"], "POST");
    assert_eq!(calls[0]["body_bytes"], 2);
    assert!(calls[0]["id"].as_u64().is_some());
    assert!(!serde_json::to_string(&calls).unwrap().contains(VALUE));
    let audit = world.audit();
    let channels: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"approve\""))
        .map(|l| {
            if l.contains("\"channel\":\"webhook\"") {
                "webhook"
            } else {
                "admin-api"
            }
        })
        .collect();
    assert_eq!(channels, ["admin-api", "webhook", "webhook"], "{audit}");
}

/// `egress.ask`: a CONNECT to a host nobody allowed waits, nothing dialled, until a person
/// decides; allowed once it is intercepted (placeholders refused in it: no secret is granted
/// there), the next CONNECT waits again; for the run, every later one goes through; denied,
/// `403`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_to_an_asked_host_waits_for_a_decision() {
    let yaml = YAML.replace(
        "egress:\n  allow_ips:",
        "egress:\n  ask: [ask.test]\n  allow_ips:",
    );
    let world = World::with(&yaml, "30s", &[]).await;
    let port = world.upstream.port();
    let authority = format!("ask.test:{port}");
    let get = |path: &'static str| {
        let (proxy, authority) = (world.proxy.clone(), authority.clone());
        tokio::spawn(async move {
            let mut tunnel = proxy.open(&authority, "ask.test", &[b"http/1.1"]).await?;
            let request = Request::get(format!("https://{authority}{path}"))
                .header("host", authority.as_str())
                .body(Full::new(Bytes::new()))
                .unwrap();
            tunnel.send(request).await.map(|r| r.status().as_u16())
        })
    };
    let held = get("/first");
    let pending = world.await_pending(1).await;
    assert_eq!(pending[0]["kind"], "host");
    assert_eq!(pending[0]["host"], authority);
    assert_eq!(pending[0]["method"], "CONNECT");
    assert!(pending[0].get("secret").is_none(), "{:?}", pending[0]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(world.upstream.connections(), 0, "dialled before a decision");
    world.decide(&pending[0]["id"], r#"{"decision": "allow"}"#);
    assert_eq!(held.await.unwrap(), Ok(200));
    // Once: the next CONNECT waits again, and is denied.
    let held = get("/second");
    let pending = world.await_pending(1).await;
    world.decide(&pending[0]["id"], r#"{"decision": "deny"}"#);
    let denied = held.await.unwrap();
    assert!(
        denied.as_ref().is_err_and(|e| e.contains("403")),
        "{denied:?}"
    );
    // For the run: the host goes through without asking from now on.
    let held = get("/third");
    let pending = world.await_pending(1).await;
    world.decide(
        &pending[0]["id"],
        r#"{"decision": "allow", "scope": "run"}"#,
    );
    assert_eq!(held.await.unwrap(), Ok(200));
    assert_eq!(get("/fourth").await.unwrap(), Ok(200));
    assert!(world.pending().is_empty());
    let paths: Vec<String> = world
        .upstream
        .records()
        .iter()
        .map(|r| r.uri.path().to_owned())
        .collect();
    assert_eq!(paths, ["/first", "/third", "/fourth"]);
    let audit = world.audit();
    let approves: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"approve\""))
        .collect();
    assert_eq!(approves.len(), 3, "{audit}");
    assert!(approves.iter().all(|l| l.contains("\"method\":\"CONNECT\"")
        && l.contains("\"host\":\"ask.test:")
        && !l.contains("\"secret\"")));
    assert!(audit.contains("\"reason\":\"approval-denied\""), "{audit}");
}

/// What a request says its method is, whatever the method on its line: a method in any
/// letter case, and the override headers and `_method` parameter servers read, are weighed
/// against `approve:`. Requests that differ in a query value are two uses, not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overridden_or_lower_case_method_waits_and_each_target_is_its_own_use() {
    let world = World::new("30s").await;
    let overridden = world.send_with(
        "PUT",
        "/items/1",
        "",
        &[("x-http-method-override", "DELETE")],
    );
    let by_query = world.send("PATCH", "/items/2?_method=delete", "");
    let lower = world.send("delete", "/items/3", "");
    let pending = world.await_pending(3).await;
    let methods: Vec<&str> = pending
        .iter()
        .map(|p| p["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods.len(), 3, "{pending:?}");
    for p in &pending {
        world.decide(&p["id"], r#"{"decision": "deny"}"#);
    }
    for held in [overridden, by_query, lower] {
        assert_eq!(held.await.unwrap().1, "approval-denied");
    }
    assert!(world.upstream.records().is_empty());
    // Two targets that differ in a query value only: two uses, each decided on its own.
    let to_a = world.send("POST", "/transfer?to=a&amount=1", "");
    let to_b = world.send("POST", "/transfer?to=b&amount=9999", "");
    let pending = world.await_pending(2).await;
    assert_eq!(
        pending[0]["path"], pending[1]["path"],
        "the listing elides both alike"
    );
    world.decide(&pending[0]["id"], r#"{"decision": "allow"}"#);
    world.decide(&pending[1]["id"], r#"{"decision": "deny"}"#);
    let statuses = [to_a.await.unwrap().0, to_b.await.unwrap().0];
    assert!(
        statuses.contains(&200) && statuses.contains(&403),
        "{statuses:?}"
    );
    assert_eq!(world.upstream.records().len(), 1);
    drop(world);
}

/// A WebSocket's messages are no requests of their own: a handshake whose messages may swap
/// an approving secret waits, whatever its method, and nothing of it leaves before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_whose_messages_may_swap_an_approving_secret_waits_at_its_handshake() {
    let yaml = YAML.replace("    in: [header]\n", "    in: [header, body]\n");
    let world = World::with(&yaml, "30s", &[]).await;
    let port = world.upstream.port();
    let proxy = world.proxy.clone();
    let handshake = tokio::spawn(async move {
        let tls = proxy
            .tunnel_to("api.test", port, &[b"http/1.1"])
            .await
            .expect("a tunnel");
        let url = format!("wss://api.test:{port}/socket");
        tokio_tungstenite::client_async(url.as_str(), tls)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let pending = world.await_pending(1).await;
    assert_eq!(pending[0]["secret"], "prod");
    assert_eq!(pending[0]["method"], "GET");
    assert!(
        world.upstream.records().is_empty(),
        "the handshake left before a decision"
    );
    world.decide(&pending[0]["id"], r#"{"decision": "deny"}"#);
    let refused = handshake.await.unwrap();
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("403")),
        "{refused:?}"
    );
    assert!(world.upstream.records().is_empty());
}

/// Outside the jail the command could read the admin credentials and decide its own uses:
/// `sluice run --no-jail` refuses a declaration that waits for decisions.
#[test]
fn run_without_the_jail_refuses_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, YAML).unwrap();
    let out = Command::new(sluice_bin())
        .args(["run", "--no-jail", "--policy"])
        .arg(&policy)
        .args(["--", "true"])
        .current_dir(dir.path())
        .output()
        .expect("sluice runs");
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("approvals-need-the-jail"), "{stderr}");
}

/// Decisions are made on the admin endpoint: `serve` without `--admin` refuses to start
/// with a declaration whose uses would only ever time out.
#[test]
fn serve_refuses_approvals_with_no_admin_endpoint_to_decide_on() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, YAML).unwrap();
    let out = Command::new(sluice_bin())
        .arg("serve")
        .arg("--policy")
        .arg(&policy)
        .args(["--listen", "127.0.0.1:0", "--no-watch", "--run-dir"])
        .arg(dir.path().join("run"))
        .output()
        .expect("sluice serve runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("approve:") && stderr.contains("--admin ADDR"),
        "{stderr}"
    );
    assert!(!dir.path().join("run/proxy-url").exists());
}

fn hex(bytes: impl AsRef<[u8]>) -> String {
    bytes.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
