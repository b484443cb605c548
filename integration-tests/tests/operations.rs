//! Running sluice for real (docs/operations.md): the admin endpoint behind credentials of
//! its own, the metrics a real Prometheus scrapes, and reloads under load, all through the
//! real `sluice serve` binary.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use sluice_integration_tests::client::ProxyAt;
use sluice_integration_tests::launch::require_program;
use sluice_integration_tests::served::respond;
use sluice_integration_tests::{Recorded, ServedUpstream, TestPki, sluice_bin};

const CI_PROMETHEUS: &str = ".ci/run installs Debian's prometheus package (prometheus, promtool)";
const CI_CURL: &str = "curl ships with the machine";

/// The value the upstream echoes back on every answer: the first one the secret had.
const FIRST_VALUE: &str = "rotated-value-0000-abcdefgh";

fn value(round: usize) -> String {
    format!("rotated-value-{round:04}-abcdefgh")
}

fn policy(secret: &Path, hosts: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {} }}\n    hosts: [{hosts}]\n    sinks: [egress]\n    in: [header]\negress:\n  allow: [\"127.0.0.1\", other.test]\n  allow_ips: [\"127.0.0.1/32\"]\n",
        secret.display()
    )
}

/// `sluice serve --admin` of `policy`, upstreams pinned to 127.0.0.1 and trusted from `pki`.
fn serve_command(pki: &TestPki, policy: &Path, run_dir: &Path, watch: bool) -> Command {
    let mut command = Command::new(sluice_bin());
    command
        .arg("serve")
        .arg("--policy")
        .arg(policy)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--run-dir",
        ])
        .arg(run_dir)
        .arg("--upstream-ca")
        .arg(pki.ca_path())
        .args(["--resolve", "api.test=127.0.0.1"])
        .args(["--resolve", "other.test=127.0.0.1"])
        .args(["--log-format", "json"]);
    if !watch {
        // Reloads only when the test asks, so that it can count them.
        command.arg("--no-watch");
    }
    command
}

/// A `sluice serve --admin` child, stopped (SIGTERM) when dropped.
struct Serve {
    child: Child,
    /// Holds the declaration, the secret file and the run directory.
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    policy: PathBuf,
    secret: PathBuf,
}

impl Serve {
    fn start(pki: &TestPki, hosts: &str) -> Self {
        Self::start_with(pki, false, |secret| policy(secret, hosts))
    }

    /// [`Serve::start`] with the declaration `yaml` writes for the secret file's path.
    fn start_with(pki: &TestPki, watch: bool, yaml: impl Fn(&Path) -> String) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("token");
        std::fs::write(&secret, value(0)).unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, yaml(&secret)).unwrap();
        let run_dir = dir.path().join("run");
        let child = serve_command(pki, &policy, &run_dir, watch)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("serve.err")).unwrap())
            .spawn()
            .expect("sluice serve starts");
        let serve = Self {
            child,
            _dir: dir,
            run_dir,
            policy,
            secret,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        // `proxy-url` is written last (docs/serve.md): the other run files are there then.
        while !serve.run_dir.join("proxy-url").exists() {
            assert!(Instant::now() < deadline, "sluice serve wrote no proxy-url");
            std::thread::sleep(Duration::from_millis(50));
        }
        serve
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.run_dir.join(file))
            .expect("run file")
            .trim()
            .to_owned()
    }

    /// `user:token@host:port` of the admin endpoint.
    fn admin(&self) -> String {
        self.read("admin-url")
            .trim_start_matches("http://")
            .to_owned()
    }

    fn admin_addr(&self) -> String {
        self.admin().rsplit('@').next().unwrap().to_owned()
    }

    fn proxy(&self) -> ProxyAt {
        let url = self.read("proxy-url");
        let addr = url.rsplit('@').next().unwrap().parse().unwrap();
        ProxyAt {
            addr,
            url,
            ca: self.run_dir.join("ca.pem"),
        }
    }

    fn placeholder(&self) -> String {
        self.read("placeholders.env")
            .lines()
            .find_map(|l| l.strip_prefix("API_TOKEN="))
            .expect("API_TOKEN in placeholders.env")
            .to_owned()
    }

    /// `curl` against the admin endpoint: the status and the body. `auth` is `user:token`.
    fn curl(&self, method: &str, path: &str, auth: Option<&str>) -> (u16, String) {
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "-X", method, "-w", "\n%{http_code}"]);
        if let Some(auth) = auth {
            cmd.args(["-u", auth]);
        }
        cmd.arg(format!("http://{}{path}", self.admin_addr()));
        let out = cmd.output().expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
        let body = body.strip_suffix('\n').unwrap_or(body);
        (status.parse().unwrap_or(0), body.to_owned())
    }

    fn admin_auth(&self) -> String {
        self.admin().rsplit_once('@').unwrap().0.to_owned()
    }

    fn metrics(&self) -> String {
        let (status, page) = self.curl("GET", "/metrics", Some(&self.admin_auth()));
        assert_eq!(status, 200, "{page}");
        // The page as served ends with a newline, which `curl` took off.
        page + "\n"
    }

    /// The value of one series on the metrics page (0 when absent).
    fn metric(&self, series: &str) -> u64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    fn audit(&self) -> PathBuf {
        self.run_dir.join("audit.jsonl")
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Sends SIGHUP and waits until the metrics count one more reload put in force.
    fn reload(&self) {
        let before = self.metric("sluice_reloads_total{result=\"ok\"}");
        self.signal("-HUP");
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.metric("sluice_reloads_total{result=\"ok\"}") != before + 1 {
            assert!(Instant::now() < deadline, "the reload never happened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops sluice as an operator does, waits for it to flush its log, and returns the log.
    fn stop(&mut self) -> PathBuf {
        self.signal("-TERM");
        let status = self.child.wait().expect("sluice exits");
        assert!(status.success(), "sluice serve exited {status}");
        self.audit()
    }

    /// sluice's own log lines (`--log-format json`), each parsed.
    fn log_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self._dir.path().join("serve.err"))
            .unwrap()
            .lines()
            .filter(|line| line.starts_with('{'))
            .map(|line| serde_json::from_str(line).expect("a JSON log line"))
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An upstream for api.test and other.test that answers with the `Authorization` it got and
/// the secret's first value, so that every answer carries values to redact.
async fn echoing_upstream(pki: &TestPki) -> ServedUpstream {
    ServedUpstream::start(pki, &["api.test", "other.test"], |record: &Recorded| {
        let auth = record
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        respond(
            200,
            "text/plain",
            format!("got {auth}; first {FIRST_VALUE}\n"),
        )
    })
    .await
}

/// One GET of `/x` with the placeholder, on a tunnel of its own.
async fn get(
    proxy: &ProxyAt,
    host: &str,
    port: u16,
    placeholder: &str,
) -> Result<(u16, String), String> {
    proxy.bearer_get(host, port, "/x", placeholder).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_answers_its_own_credentials_only_and_is_out_of_the_proxys_reach() {
    require_program("curl", CI_CURL);
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let mut serve = Serve::start(&pki, "api.test");
    let placeholder = serve.placeholder();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(serve.run_dir.join("admin-url"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "admin-url is private");
    }
    let proxy_userinfo = serve
        .proxy()
        .url
        .trim_start_matches("http://")
        .rsplit_once('@')
        .unwrap()
        .0
        .to_owned();
    let admin = serve.admin_auth();
    assert_ne!(
        proxy_userinfo, admin,
        "the admin credentials are the proxy's"
    );
    for (method, path) in [
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("POST", "/reload"),
        ("POST", "/v1/redact"),
        ("GET", "/v1/secrets"),
        ("GET", "/nowhere"),
    ] {
        for auth in [
            None,
            Some(proxy_userinfo.as_str()),
            Some("sluice-admin:wrong"),
        ] {
            let (status, body) = serve.curl(method, path, auth);
            assert_eq!(status, 401, "{method} {path} with {auth:?}: {body}");
        }
    }
    assert_eq!(
        serve.curl("GET", "/healthz", Some(&admin)),
        (200, "ok".into())
    );
    assert_eq!(
        serve.curl("GET", "/readyz", Some(&admin)),
        (200, "ready".into())
    );
    assert_eq!(serve.curl("GET", "/nowhere", Some(&admin)).0, 404);
    assert_eq!(serve.curl("GET", "/reload", Some(&admin)).0, 405);

    // Traffic, then what the operator sees: counts by secret, never a value or placeholder.
    let proxy = serve.proxy();
    for _ in 0..3 {
        let (status, body) = get(&proxy, "api.test", upstream.port(), &placeholder)
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(!body.contains("rotated-value"), "a value came back: {body}");
    }
    let refused = get(&proxy, "other.test", upstream.port(), &placeholder).await;
    assert!(
        refused.is_err() || refused.as_ref().unwrap().0 == 403,
        "{refused:?}"
    );
    let page = serve.metrics();
    assert!(
        page.contains("sluice_secret_events_total{secret=\"api_token\",event=\"swap\"} 3"),
        "{page}"
    );
    assert!(page.contains("sluice_secret_events_total{secret=\"api_token\",event=\"redact\"}"));
    // Three tunnels to api.test, one to other.test.
    assert!(page.contains("sluice_tls_handshakes_total 4"), "{page}");
    // The three answers' bodies went through the guard; the pools hold what they kept.
    let gauge = |name: &str| -> u64 {
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{page}"))
    };
    assert!(gauge("sluice_scanned_bytes_total ") > 0, "{page}");
    assert!(gauge("sluice_upstream_idle_connections ") <= 4, "{page}");
    for leak in [FIRST_VALUE, placeholder.as_str(), "other.test", "/x"] {
        assert!(!page.contains(leak), "{leak} on the metrics page:\n{page}");
    }

    // A host engine's routes: the guard in force, the placeholders, never a value.
    let body = format!("model said {FIRST_VALUE}");
    let out = Command::new("curl")
        .args(["-s", "-u", &admin, "--data-binary", &body])
        .arg(format!("http://{}/v1/redact", serve.admin_addr()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("model said {placeholder}")
    );
    // `sluice redact --run-dir`: the same guard and placeholders, streamed, for launchers
    // other than sluice's own.
    let mut redact = Command::new(sluice_bin())
        .args(["redact", "--run-dir"])
        .arg(&serve.run_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = redact.stdin.take().unwrap();
        // Split across writes: the value is found whatever the chunking.
        stdin.write_all(b"log: rotated-value-00").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        stdin.write_all(b"00-abcdefgh end\n").unwrap();
    }
    let redacted = redact.wait_with_output().unwrap();
    assert!(redacted.status.success(), "{redacted:?}");
    assert_eq!(
        String::from_utf8_lossy(&redacted.stdout),
        format!("log: {placeholder} end\n")
    );
    let (status, secrets) = serve.curl("GET", "/v1/secrets", Some(&admin));
    assert_eq!(status, 200);
    let secrets: serde_json::Value = serde_json::from_str(&secrets).unwrap();
    assert_eq!(secrets["secrets"][0]["name"], "api_token");
    assert_eq!(secrets["secrets"][0]["placeholder"], placeholder.as_str());
    assert!(!secrets.to_string().contains(FIRST_VALUE));

    // Through the proxy the admin endpoint is not there, though the declaration lets
    // 127.0.0.1 be reached: sluice never dials its own listeners.
    let admin_addr = serve.admin_addr();
    let mut tunnel = proxy
        .open(&admin_addr, "127.0.0.1", &[b"http/1.1"])
        .await
        .expect("a tunnel toward 127.0.0.1 (the upstream is dialled per request)");
    let request = Request::get(format!("https://{admin_addr}/metrics"))
        .header("host", admin_addr.as_str())
        .header(
            "authorization",
            format!("Basic {}", {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.encode(&admin)
            }),
        )
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tunnel.send(request).await.unwrap();
    assert_eq!(response.status(), 403, "{:?}", response.body());
    assert_eq!(response.headers()["sluice-error"], "address-blocked");
    let through = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--proxy",
            &proxy.url,
        ])
        .args(["-u", &admin])
        .arg(format!("http://{admin_addr}/metrics"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&through.stdout), "403");
    let audit = serve.stop();
    let verified = Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
    // The host engine's redactions are audited like the proxy's.
    let log = std::fs::read_to_string(&audit).unwrap();
    assert_eq!(
        log.matches("\"location\":\"v1/redact\"").count(),
        2,
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_the_swap_counters_the_requests_made() {
    require_program("prometheus", CI_PROMETHEUS);
    require_program("promtool", CI_PROMETHEUS);
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let serve = Serve::start(&pki, "api.test");
    let placeholder = serve.placeholder();
    let proxy = serve.proxy();
    for _ in 0..5 {
        let (status, body) = get(&proxy, "api.test", upstream.port(), &placeholder)
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
    }
    // The exposition as promtool reads it.
    let page = serve.metrics();
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        promtool
            .stdin
            .take()
            .unwrap()
            .write_all(page.as_bytes())
            .unwrap();
    }
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // A real Prometheus, scraping with the admin credentials every second.
    let (user, token) = serve
        .admin_auth()
        .split_once(':')
        .map(|(u, t)| (u.to_owned(), t.to_owned()))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let web_addr = web.local_addr().unwrap();
    drop(web);
    std::fs::write(
        work.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sluice\n    basic_auth:\n      username: {user}\n      password: {token}\n    static_configs:\n      - targets: ['{}']\n",
            serve.admin_addr()
        ),
    )
    .unwrap();
    let mut prometheus = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            work.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web_addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    let query = "sluice_secret_events_total{secret=\"api_token\",event=\"swap\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last;
    let found = loop {
        let out = Command::new("curl")
            .args(["-s", "-G", "--data-urlencode"])
            .arg(format!("query={query}"))
            .arg(format!("http://{web_addr}/api/v1/query"))
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Ok(answer) = serde_json::from_str::<serde_json::Value>(&last)
            && let Some(value) = answer["data"]["result"][0]["value"][1].as_str()
        {
            break Some(value.to_owned());
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let up = Command::new("curl")
        .args(["-s", "-G", "--data-urlencode", "query=up{job=\"sluice\"}"])
        .arg(format!("http://{web_addr}/api/v1/query"))
        .output()
        .unwrap();
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert_eq!(
        found.as_deref(),
        Some("5"),
        "Prometheus's answer: {last}; up: {}",
        String::from_utf8_lossy(&up.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_reloads_under_load_fail_no_request_and_forget_no_value() {
    require_program("curl", CI_CURL);
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let mut serve = Serve::start(&pki, "api.test");
    let placeholder = serve.placeholder();
    let proxy = serve.proxy();
    let port = upstream.port();

    // The load: small GETs, each on a tunnel of its own, for as long as the reloads go on.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (proxy, placeholder, stop) = (proxy.clone(), placeholder.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0usize, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match get(&proxy, "api.test", port, &placeholder).await {
                    Ok((200, body)) if !body.contains("rotated-value") => ok += 1,
                    other => failed.push(format!("{other:?}")),
                }
            }
            (ok, failed)
        })
    };

    let admin = serve.admin_auth();
    for round in 1..=20 {
        // Rotate the value, change the grant (other.test in even rounds), and reload: by
        // signal in odd rounds, by the endpoint in even ones.
        std::fs::write(&serve.secret, value(round)).unwrap();
        let hosts = if round % 2 == 0 {
            "api.test, other.test"
        } else {
            "api.test"
        };
        std::fs::write(&serve.policy, policy(&serve.secret, hosts)).unwrap();
        let before = serve.metric("sluice_reloads_total{result=\"ok\"}");
        if round % 2 == 1 {
            serve.signal("-HUP");
        } else {
            let (status, body) = serve.curl("POST", "/reload", Some(&admin));
            assert_eq!(status, 200, "round {round}: {body}");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while serve.metric("sluice_reloads_total{result=\"ok\"}") != before + 1 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the reload never happened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The rotated value is swapped from now on; every earlier one is still redacted.
        let (status, body) = get(&proxy, "api.test", port, &placeholder).await.unwrap();
        assert_eq!(status, 200, "round {round}: {body}");
        assert_eq!(
            body,
            format!("got Bearer {placeholder}; first {placeholder}\n"),
            "round {round}"
        );
        let seen = upstream.records().last().unwrap().headers["authorization"].clone();
        assert_eq!(
            seen,
            format!("Bearer {}", value(round)).as_str(),
            "round {round}"
        );
        // The new grant is in force.
        let other = get(&proxy, "other.test", port, &placeholder).await;
        if round % 2 == 0 {
            assert_eq!(
                other.as_ref().map(|r| r.0),
                Ok(200),
                "round {round}: {other:?}"
            );
        } else {
            assert!(
                other.is_err() || other.as_ref().unwrap().0 == 403,
                "round {round}: {other:?}"
            );
        }
        // A declaration that fails check is refused; the one in force stays.
        std::fs::write(
            &serve.policy,
            "version: 1\nsecrets:\n  api_token:\n    frm: {}\n",
        )
        .unwrap();
        let (status, body) = serve.curl("POST", "/reload", Some(&admin));
        assert_eq!(status, 422, "round {round}: {body}");
        assert!(body.contains("policy.yaml:4:5"), "round {round}: {body}");
        let (status, _) = get(&proxy, "api.test", port, &placeholder).await.unwrap();
        assert_eq!(status, 200, "round {round}: after a refused reload");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = load.await.unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {:?}",
        failed.len(),
        ok + failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(ok >= 20, "the load made only {ok} requests");
    assert_eq!(serve.metric("sluice_reloads_total{result=\"refused\"}"), 20);
    // Every value the run knew is still redacted, by the guard in force.
    let all: String = (0..=20).map(|r| format!("{} ", value(r))).collect();
    let out = Command::new("curl")
        .args(["-s", "-u", &admin, "--data-binary", &all])
        .arg(format!("http://{}/v1/redact", serve.admin_addr()))
        .output()
        .unwrap();
    let redacted = String::from_utf8_lossy(&out.stdout);
    assert!(!redacted.contains("rotated-value"), "{redacted}");

    let audit = serve.stop();
    let text = std::fs::read_to_string(&audit).unwrap();
    assert_eq!(text.matches("\"event\":\"reload\"").count(), 40);
    assert_eq!(text.matches("\"reason\":\"reloaded\"").count(), 20);
    assert!(!text.contains("rotated-value"), "a value in the audit log");
    // sluice's own log: a JSON object per line, each reload said, no value anywhere.
    let logged = serve.log_lines();
    let said = |needle: &str| {
        logged
            .iter()
            .filter(|line| {
                line["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(needle))
            })
            .count()
    };
    assert_eq!(said("declaration reloaded"), 20);
    assert_eq!(said("reload refused"), 20);
    let all_logs: String = logged.iter().map(ToString::to_string).collect();
    assert!(
        !all_logs.contains("rotated-value"),
        "a value in sluice's log"
    );
    let verified = Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
}

/// A declaration whose secret comes from `sh -c SCRIPT`.
/// A reload that changes the declaration and the value at once: a kept-alive tunnel opened
/// before it goes on under its own declaration, but what comes back on it is redacted with
/// the guard in force, so the value the reload brought in, which the upstream echoes in a
/// header and in the body, reaches the client as the placeholder. (Before the fix, the
/// tunnel's own guard knew only the values of its generation: the new one came back in
/// clear.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_opened_before_a_reload_never_shows_the_value_the_reload_brought_in() {
    require_program("curl", CI_CURL);
    let pki = TestPki::new();
    let mut serve = Serve::start(&pki, "api.test");
    let placeholder = serve.placeholder();
    let proxy = serve.proxy();
    // The upstream knows the value in force, as the real service would after a rotation.
    let source = serve.secret.clone();
    let upstream = ServedUpstream::start(&pki, &["api.test"], move |asked: &Recorded| {
        let current = std::fs::read_to_string(&source).unwrap();
        let mut answer = respond(200, "text/plain", format!("current {current}\n"));
        // `/coded` names it as the body's coding, which sluice cannot decode: its refusal
        // quotes the name.
        let header = match asked.uri.path() {
            "/coded" => "content-encoding",
            _ => "x-current",
        };
        answer
            .headers_mut()
            .insert(header, current.parse().unwrap());
        answer
    })
    .await;
    let port = upstream.port();
    let authority = format!("api.test:{port}");
    let mut tunnel = proxy
        .open(&authority, "api.test", &[b"http/1.1"])
        .await
        .expect("a tunnel");
    let request = || {
        Request::get(format!("https://{authority}/x"))
            .header("host", authority.as_str())
            .header("authorization", format!("Bearer {placeholder}"))
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let first = tunnel.send(request()).await.expect("answered");
    assert_eq!(first.body(), format!("current {placeholder}\n").as_bytes());

    // Rotated and regranted in one reload.
    std::fs::write(&serve.secret, value(1)).unwrap();
    std::fs::write(&serve.policy, policy(&serve.secret, "api.test, other.test")).unwrap();
    serve.reload();

    let second = tunnel
        .send(request())
        .await
        .expect("the old tunnel still answers");
    assert_eq!(second.status(), 200);
    assert_eq!(
        second.body(),
        format!("current {placeholder}\n").as_bytes(),
        "the value the reload brought in came back in clear"
    );
    assert_eq!(second.headers()["x-current"], placeholder.as_str());
    // The old tunnel swapped under its own generation: the value it knew.
    let seen = upstream.records().last().unwrap().headers["authorization"].clone();
    assert_eq!(seen, format!("Bearer {}", value(0)).as_str());
    // A refusal quoting the upstream is redacted with the guard in force too.
    let coded = Request::get(format!("https://{authority}/coded"))
        .header("host", authority.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    let refused = tunnel.send(coded).await.expect("answered");
    assert_eq!(refused.status(), 502);
    let text = String::from_utf8_lossy(refused.body());
    assert!(text.contains(&placeholder), "{text}");
    assert!(!text.contains(&value(1)), "{text}");

    let audit = std::fs::read_to_string(serve.stop()).unwrap();
    for value in [value(0), value(1)] {
        assert!(!audit.contains(&value), "a value in the audit log");
    }
    let redactions = audit
        .lines()
        .filter(|l| l.contains("\"event\":\"redact\"") && l.contains("\"api_token\""))
        .filter(|l| l.contains("response-headers") || l.contains("response-body"))
        .count();
    assert_eq!(
        redactions, 5,
        "two answers, each redacted in a header and the body, and the refused one's header"
    );
}

fn command_policy(script: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  api_token:\n    from: {{ command: [sh, -c, {script:?}] }}\n    hosts: [api.test]\n    sinks: [egress]\negress:\n  allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_source_that_fails_refuses_the_start_and_later_the_reload() {
    let pki = TestPki::new();
    // At start: each failure a typed error naming the secret, never the output.
    for (script, why) in [
        (
            "echo printed-by-the-command; exit 3",
            "exited with exit status: 3",
        ),
        ("printf ''", "printed nothing"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, command_policy(script)).unwrap();
        let out = serve_command(&pki, &policy, &dir.path().join("run"), false)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("secret api_token: the source command sh failed")
                && stderr.contains(why),
            "{why}: {stderr}"
        );
        assert!(!stderr.contains("printed-by-the-command"), "{stderr}");
    }
    // Later: a command that worked fails, prints nothing, or hangs; each reload is refused
    // and the value it had is still swapped.
    let upstream = echoing_upstream(&pki).await;
    let mut serve = Serve::start_with(&pki, false, |secret| {
        let dir = secret.parent().unwrap().display().to_string();
        command_policy(&format!(
            "cd {dir}; test -f fail && exit 5; test -f silent && exit 0; test -f hang && exec sleep 60; cat token"
        ))
    });
    let placeholder = serve.placeholder();
    let dir = serve.secret.parent().unwrap().to_owned();
    let admin = serve.admin_auth();
    for (marker, why) in [
        ("fail", "exited with exit status: 5"),
        ("silent", "printed nothing"),
        ("hang", "did not finish within 10 s"),
    ] {
        std::fs::write(dir.join(marker), "").unwrap();
        std::fs::write(&serve.secret, "a-value-never-read-abc").unwrap();
        let (status, body) = serve.curl("POST", "/reload", Some(&admin));
        assert_eq!(status, 422, "{marker}: {body}");
        assert!(body.contains(why), "{marker}: {body}");
        std::fs::remove_file(dir.join(marker)).unwrap();
        let (status, _) = get(&serve.proxy(), "api.test", upstream.port(), &placeholder)
            .await
            .unwrap();
        assert_eq!(status, 200);
        let seen = upstream.records().last().unwrap().headers["authorization"].clone();
        assert_eq!(seen, format!("Bearer {}", value(0)).as_str(), "{marker}");
    }
    let audit = std::fs::read_to_string(serve.stop()).unwrap();
    assert_eq!(
        audit
            .matches("\"reason\":\"refused: secret api_token: the source command sh failed")
            .count(),
        3,
        "{audit}"
    );
}

/// A Kubernetes Secret volume as the kubelet writes it: `token` a symlink through `..data`
/// to a timestamped directory, rotated by swapping `..data` in one rename.
fn mount_secret(mount: &Path, generation: usize, value: &str) {
    let dir = mount.join(format!("..2026_12_02_{generation:04}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), value).unwrap();
    let next = mount.join("..data_tmp");
    let _ = std::fs::remove_file(&next);
    std::os::unix::fs::symlink(dir.file_name().unwrap(), &next).unwrap();
    std::fs::rename(&next, mount.join("..data")).unwrap();
    if !mount.join("token").exists() {
        std::os::unix::fs::symlink("..data/token", mount.join("token")).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_mount_is_in_force_within_two_seconds_without_a_signal() {
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let mut serve = Serve::start_with(&pki, true, |secret| {
        let mount = secret.parent().unwrap().join("mount");
        mount_secret(&mount, 0, &value(0));
        policy(&mount.join("token"), "api.test")
    });
    let mount = serve.secret.parent().unwrap().join("mount");
    let placeholder = serve.placeholder();
    let proxy = serve.proxy();
    let port = upstream.port();
    let seen = |upstream: &ServedUpstream| {
        upstream.records().last().unwrap().headers["authorization"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    get(&proxy, "api.test", port, &placeholder).await.unwrap();
    assert_eq!(seen(&upstream), format!("Bearer {}", value(0)));
    for generation in 1..=3 {
        mount_secret(&mount, generation, &value(generation));
        let rotated = Instant::now();
        loop {
            let (status, body) = get(&proxy, "api.test", port, &placeholder).await.unwrap();
            assert_eq!(status, 200, "{body}");
            assert!(!body.contains("rotated-value"), "{body}");
            if seen(&upstream) == format!("Bearer {}", value(generation)) {
                break;
            }
            assert!(
                rotated.elapsed() < Duration::from_millis(2500),
                "rotation {generation} not in force after {:?}",
                rotated.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let audit = std::fs::read_to_string(serve.stop()).unwrap();
    assert_eq!(
        audit.matches("\"reason\":\"reloaded\"").count(),
        3,
        "{audit}"
    );
}

#[test]
fn the_launchers_output_redaction_follows_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("token");
    std::fs::write(&secret, value(0)).unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, self::policy(&secret, "api.test")).unwrap();
    let audit = dir.path().join("audit.jsonl");
    // The command waits, then prints what a leak would: the value the reload brought in.
    let script = "while [ ! -f go ]; do sleep 0.05; done; cat leaked; echo";
    let child = Command::new(sluice_bin())
        .args(["run", "--no-jail", "--watch", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(&audit)
        .args(["--", "sh", "-c", script])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Rotated while the command runs: the watched file reloads within two seconds.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&secret, value(1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .contains("\"reason\":\"reloaded\"")
    {
        assert!(Instant::now() < deadline, "no reload");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(
        dir.path().join("leaked"),
        format!("new {} old {}", value(1), value(0)),
    )
    .unwrap();
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("rotated-value"), "{stdout}");
    assert!(stdout.starts_with("new SLUICE_API_TOKEN_"), "{stdout}");
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines().any(|l| l.contains("\"event\":\"redact\"")
            && l.contains("\"secret\":\"api_token\"")
            && l.contains("\"location\":\"stdout\"")
            && l.contains("\"count\":2")),
        "{log}"
    );
}
