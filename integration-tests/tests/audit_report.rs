//! What a security reviewer opens (docs/audit-log.md): logs written by the real `sluice
//! serve` (restarted, so that one file holds two runs; rotated under load and stopped with
//! SIGTERM), checked by `sluice audit verify`, and the report rendered in real headless
//! Chromium, asserting on what a reviewer sees.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sluice_integration_tests::client::ProxyAt;
use sluice_integration_tests::launch::require_program;
use sluice_integration_tests::served::respond;
use sluice_integration_tests::{Recorded, ServedUpstream, TestPki, sluice_bin};

const CI_CHROMIUM: &str = ".ci/run installs Debian's chromium package";
const VALUE: &str = "report-REAL-value-0123456789abcdef";

const POLICY: &str = "version: 1
secrets:
  api_token:
    from: { file: token }
    hosts: [api.test]
    sinks: [egress]
    in: [header]
egress:
  allow: [other.test]
  allow_ips: [\"127.0.0.1/32\"]
";

/// A run directory and declaration that `sluice serve` is started on, again and again.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), VALUE).unwrap();
        std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
        Site { dir }
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `sluice serve` on this site with `extra` flags, not yet started.
    fn command(&self, pki: &TestPki, extra: &[&str]) -> Command {
        let mut command = Command::new(sluice_bin());
        command
            .current_dir(self.dir.path())
            .args([
                "serve",
                "--policy",
                "policy.yaml",
                "--listen",
                "127.0.0.1:0",
            ])
            .arg("--run-dir")
            .arg(self.run_dir())
            .arg("--upstream-ca")
            .arg(pki.ca_path())
            .args([
                "--resolve",
                "api.test=127.0.0.1",
                "--resolve",
                "other.test=127.0.0.1",
            ])
            .args(["--resolve", "evil.test=127.0.0.1", "--no-watch"])
            .args(extra)
            .stdin(Stdio::null());
        command
    }

    /// `sluice serve` on this site with `extra` flags, once it has written its run files.
    fn serve(&self, pki: &TestPki, extra: &[&str]) -> (Child, ProxyAt, String) {
        let run_dir = self.run_dir();
        let _ = std::fs::remove_file(run_dir.join("proxy-url"));
        let child = self
            .command(pki, extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sluice serve starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        // `proxy-url` is written last (docs/serve.md): the other run files are there then.
        while !run_dir.join("proxy-url").exists() {
            assert!(Instant::now() < deadline, "sluice serve wrote no proxy-url");
            std::thread::sleep(Duration::from_millis(50));
        }
        let url = std::fs::read_to_string(run_dir.join("proxy-url"))
            .unwrap()
            .trim()
            .to_owned();
        let proxy = ProxyAt {
            addr: url.rsplit('@').next().unwrap().parse().unwrap(),
            url,
            ca: run_dir.join("ca.pem"),
        };
        let placeholder = std::fs::read_to_string(run_dir.join("placeholders.env"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("API_TOKEN=").map(str::to_owned))
            .unwrap();
        (child, proxy, placeholder)
    }
}

/// SIGTERM, as an operator (or a container runtime) stops sluice; waits for a clean exit.
fn stop(mut child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "sluice serve exited {status}");
}

/// An upstream that echoes the `Authorization` it got, so every swap comes back redacted.
async fn echoing_upstream(pki: &TestPki) -> ServedUpstream {
    ServedUpstream::start(pki, &["api.test", "other.test"], |record: &Recorded| {
        let auth = record
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        respond(200, "text/plain", format!("got {auth}\n"))
    })
    .await
}

/// One GET with the placeholder in `Authorization`, on a tunnel of its own: the status,
/// or 0 when there was no answer (a host refused at CONNECT, a proxy gone).
async fn get(proxy: &ProxyAt, host: &str, port: u16, path: &str, placeholder: &str) -> u16 {
    proxy
        .bearer_get(host, port, path, placeholder)
        .await
        .map_or(0, |(status, _)| status)
}

fn sluice(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(sluice_bin())
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

/// Chromium, headless, offline, in a profile of its own: `--dump-dom` or `--screenshot`.
fn chromium(page: &Path, mode: &[&str]) -> Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1100,2600",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(mode)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_sees_the_verdict_the_flows_and_the_refusals_of_two_runs_in_chromium() {
    require_program("chromium", CI_CHROMIUM);
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let port = upstream.port();
    let site = Site::new();

    // Run 1: three swaps (each answer redacted back), two placeholders toward a host the
    // secret is not granted, one host the declaration does not reach.
    let (child, proxy, placeholder) = site.serve(&pki, &[]);
    for i in 0..3 {
        assert_eq!(
            get(
                &proxy,
                "api.test",
                port,
                &format!("/items/{i}?page=2"),
                &placeholder
            )
            .await,
            200
        );
    }
    for _ in 0..2 {
        assert_eq!(
            get(&proxy, "other.test", port, "/paste", &placeholder).await,
            403
        );
    }
    assert_eq!(get(&proxy, "evil.test", port, "/", &placeholder).await, 0);
    stop(child);
    // Run 2, the container restarted: its chain is appended after run 1's.
    let (child, proxy, placeholder) = site.serve(&pki, &[]);
    assert_eq!(
        get(&proxy, "api.test", port, "/items/9", &placeholder).await,
        200
    );
    stop(child);

    let run_dir = site.run_dir();
    let verify = sluice(&["audit", "verify"], &[&run_dir]);
    let said = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert_eq!(said.lines().count(), 2, "two runs: {said}");

    let summary = sluice(&["audit", "summary", "--json"], &[&run_dir]);
    assert!(summary.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    let row = |host: &str| {
        summary["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["secret"] == "api_token" && r["host"] == format!("{host}:{port}"))
            .unwrap_or_else(|| panic!("no row for {host}: {summary}"))
            .clone()
    };
    let swaps = row("api.test")["swaps"].as_u64().unwrap();
    assert_eq!(swaps, 4);

    let page = site.dir.path().join("report.html");
    let report = sluice(&["audit", "report", "-o"], &[&page, &run_dir]);
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(VALUE) && !html.contains(&placeholder[placeholder.len() - 8..]));

    let dom = chromium(&page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(
        dom.contains("Every chain verified: 1 log(s), 2 run(s)"),
        "{dom}"
    );
    for name in [
        "api_token",
        "api.test",
        "other.test",
        "evil.test",
        "placeholder-not-granted",
    ] {
        assert!(dom.contains(name), "the page lacks {name}");
    }
    // The flow table agrees with `audit summary --json`, pair by pair.
    for host in ["api.test", "other.test"] {
        let row = row(host);
        let cells = format!(
            "<td class=\"mono\">api_token</td><td class=\"mono\">{host}:{port}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            row["swaps"],
            row["verbatim"],
            row["refusals"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>(),
            row["redactions"],
        );
        assert!(dom.contains(&cells), "no row {cells}");
    }
    // The fix the refusal names, and the path the refusals went to.
    assert!(dom.contains("list other.test in secrets.api_token.hosts"));
    assert!(dom.contains("/paste</span> (2)"), "{dom}");

    let shot = site.dir.path().join("report.png");
    let out = chromium(&page, &[&format!("--screenshot={}", shot.display())]);
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    if let Ok(keep) = std::env::var("SLUICE_KEEP_REPORT") {
        std::fs::copy(&page, Path::new(&keep).join("report.html")).unwrap();
        std::fs::copy(&shot, Path::new(&keep).join("report.png")).unwrap();
    }

    // Tampered: one host edited in run 1. The page says so first, naming the line.
    let log = run_dir.join("audit.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let edited_line = text.lines().position(|l| l.contains("other.test")).unwrap() + 1;
    std::fs::write(&log, text.replacen("other.test", "else.test", 1)).unwrap();
    let report = sluice(&["audit", "report", "-o"], &[&page, &run_dir]);
    assert_eq!(report.status.code(), Some(1));
    let dom = chromium(&page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    let verdict = &dom[dom.find("id=\"verdict\"").unwrap()..dom.find("id=\"runs\"").unwrap()];
    assert!(verdict.contains("BROKEN"), "{verdict}");
    assert!(
        verdict.contains(&format!("line {}:", edited_line + 1)),
        "the line after the edited one breaks the chain: {verdict}"
    );
}

/// `proxy-url` is the run file a sandbox waits for, so it is written last (docs/serve.md): a
/// restart that cannot write its placeholders must not leave a `proxy-url` that a waiting
/// sandbox would pair with the previous run's `placeholders.env`.
#[test]
fn a_restart_that_cannot_write_its_run_files_leaves_no_proxy_url() {
    let pki = TestPki::new();
    let site = Site::new();
    let run_dir = site.run_dir();
    std::fs::create_dir_all(run_dir.join("placeholders.env")).unwrap();
    std::fs::write(run_dir.join("placeholders.env").join("keep"), "").unwrap();
    std::fs::write(
        run_dir.join("proxy-url"),
        "http://sluice:stale@127.0.0.1:1\n",
    )
    .unwrap();
    let out = site.command(&pki, &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("sluice serve: writing"), "{stderr}");
    assert!(
        !run_dir.join("proxy-url").exists(),
        "a proxy-url was left beside placeholders the run could not write"
    );
    // A start that fails before the proxy runs (its audit log cannot be opened) leaves
    // none either, not even the previous run's.
    std::fs::remove_dir_all(run_dir.join("placeholders.env")).unwrap();
    std::fs::write(
        run_dir.join("proxy-url"),
        "http://sluice:stale@127.0.0.1:1\n",
    )
    .unwrap();
    let no_log = site.dir.path().join("no-such-dir").join("audit.jsonl");
    let out = site
        .command(&pki, &["--audit-log", no_log.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        !run_dir.join("proxy-url").exists(),
        "the previous run's proxy-url survived a failed start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_under_load_then_sigterm_loses_and_duplicates_nothing() {
    let pki = TestPki::new();
    let upstream = echoing_upstream(&pki).await;
    let port = upstream.port();
    let site = Site::new();
    let (child, proxy, placeholder) = site.serve(&pki, &["--audit-max-bytes", "131072"]);
    // Eight clients in a loop; SIGTERM while they run.
    let mut clients = Vec::new();
    for c in 0..8 {
        let proxy = proxy.clone();
        let placeholder = placeholder.clone();
        clients.push(tokio::spawn(async move {
            let mut ok = 0u64;
            for i in 0.. {
                match get(
                    &proxy,
                    "api.test",
                    port,
                    &format!("/c{c}/{i}"),
                    &placeholder,
                )
                .await
                {
                    200 => ok += 1,
                    _ => break,
                }
            }
            ok
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while upstream.records().len() < 1500 {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(child);
    let mut answered = 0;
    for client in clients {
        answered += client.await.unwrap();
    }

    let run_dir = site.run_dir();
    let segments: Vec<PathBuf> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("audit.jsonl")
        })
        .collect();
    assert!(segments.len() >= 4, "{segments:?}");
    let verify = sluice(&["audit", "verify"], &[&run_dir]);
    let said = String::from_utf8_lossy(&verify.stdout).into_owned();
    assert!(
        verify.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        said.contains(&format!("in {} segments", segments.len())),
        "{said}"
    );

    // Every request the upstream received is one swap on record, once; the clients got
    // no more answers than that.
    let summary = sluice(&["audit", "summary", "--json"], &[&run_dir]);
    let summary: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    let swaps: u64 = summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["swaps"].as_u64().unwrap())
        .sum();
    assert_eq!(swaps, upstream.records().len() as u64);
    assert!(answered <= swaps);
    assert_eq!(summary["runs"][0]["complete"], true);

    // A middle segment deleted: `verify` names it.
    std::fs::remove_file(run_dir.join("audit.jsonl.2")).unwrap();
    let verify = sluice(&["audit", "verify"], &[&run_dir]);
    assert_eq!(verify.status.code(), Some(1));
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(said.contains("segment 2 of run"), "{said}");
    assert!(said.contains("is missing"), "{said}");
}
