//! sluice killed outright (`kill -9`) under load, and started again on the same audit log
//! (issue #42): each new run follows the last whole line of the one before, a line the
//! kill cut short is kept and named (never silently dropped), and `sluice audit verify` and
//! `sluice audit report` read every run and say how each ended.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sluice_integration_tests::{Curl, RecordingUpstream, ServeBinary, TestPki, sluice_bin};

const TOKEN: &str = "killed-REAL-token-0123456789abcdef";

const YAML: &str = r#"version: 1
secrets:
  api:
    value: "killed-REAL-token-0123456789abcdef"
    hosts: [api.test]
    sinks: [egress]
    in: [header]
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

/// curl through `serve` to the upstream with the placeholder, from two threads, until
/// `done`; how many answers came back 200.
fn load(
    serve: &ServeBinary,
    port: u16,
    done: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..2)
        .map(|_| {
            let proxy = serve.proxy();
            let auth = format!("Authorization: Bearer {}", serve.placeholder("API"));
            let done = done.clone();
            std::thread::spawn(move || {
                let ok = AtomicU64::new(0);
                while !done.load(Ordering::SeqCst) {
                    let out = Curl::new(&proxy.url, &proxy.ca)
                        .args([
                            "-H".to_owned(),
                            auth.clone(),
                            "--max-time".into(),
                            "5".into(),
                        ])
                        .get(&format!("https://api.test:{port}/load"));
                    if out.status == 200 {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                }
                ok.load(Ordering::SeqCst)
            })
        })
        .collect()
}

/// A `sluice serve` on `log` under load for a moment, then killed: how many requests it
/// answered before.
fn serve_and_kill(pki: &TestPki, upstream: &RecordingUpstream, log: &Path) -> u64 {
    let log = log.display().to_string();
    let serve = ServeBinary::start(YAML, pki, &["api.test"], &["--audit-log", &log]);
    let done = Arc::new(AtomicBool::new(false));
    let clients = load(&serve, upstream.port(), done.clone());
    std::thread::sleep(Duration::from_millis(1500));
    serve.kill();
    done.store(true, Ordering::SeqCst);
    clients.into_iter().map(|c| c.join().unwrap()).sum()
}

fn sluice(args: &[&str]) -> (bool, String) {
    let out = Command::new(sluice_bin())
        .args(args)
        .output()
        .expect("sluice runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_killed_under_load_are_followed_on_the_same_log_and_every_run_verifies() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.jsonl");
    let log_arg = log.display().to_string();

    // Killed under load: whatever was flushed stays, the run has no `stop`.
    let answered = tokio::task::block_in_place(|| serve_and_kill(&pki, &upstream, &log));
    assert!(answered > 0, "the first run answered nothing under load");
    // Killed again, and this time in the middle of a write: part of a line, no newline
    // (a kill between a record's bytes leaves this; the writer's whole-line writes make it
    // rare, so it is made here).
    let again = tokio::task::block_in_place(|| serve_and_kill(&pki, &upstream, &log));
    assert!(again > 0, "the second run answered nothing under load");
    let cut = r#"{"seq":999999,"ts":"2026-12-05T00:00:00.000Z","run_id":"cut","event":"sw"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all_at_end(cut.as_bytes());
    // Until a run follows it, the cut is where the chain breaks, and verify says so.
    let (ok, text) = sluice(&["audit", "verify", &log_arg]);
    assert!(
        !ok && text.contains("does not end with a newline"),
        "{text}"
    );

    // The third run starts on the same log, serves, and stops cleanly.
    let third = tokio::task::block_in_place(|| {
        ServeBinary::start(YAML, &pki, &["api.test"], &["--audit-log", &log_arg])
    });
    let proxy = third.proxy();
    let auth = format!("Authorization: Bearer {}", third.placeholder("API"));
    let port = upstream.port();
    let out = tokio::task::spawn_blocking(move || {
        Curl::new(&proxy.url, &proxy.ca)
            .args(["-H".to_owned(), auth])
            .get(&format!("https://api.test:{port}/after"))
    })
    .await
    .unwrap();
    assert_eq!(out.status, 200, "{out:?}");
    tokio::task::block_in_place(|| third.stop());
    let audit = std::fs::read_to_string(&log).unwrap();
    assert!(
        audit.lines().any(|l| l == cut),
        "the cut line is kept as it was"
    );

    // Every run verifies; the first ended without `stop`, the second was cut mid-write.
    let (ok, text) = sluice(&["audit", "verify", &log_arg]);
    assert!(ok, "{text}");
    let runs: Vec<&str> = text.lines().filter(|l| l.starts_with("ok:")).collect();
    assert_eq!(runs.len(), 3, "{text}");
    assert!(
        runs[0].contains("no stop record") && !runs[0].contains("cut short"),
        "{text}"
    );
    assert!(
        runs[1].contains(&format!("cut short: {} bytes", cut.len())),
        "{text}"
    );
    assert!(!runs[2].contains("no stop record"), "{text}");
    // The reviewers' report reads all three and shows the unclean stops.
    let page = logs.path().join("report.html");
    let (ok, text) = sluice(&[
        "audit",
        "report",
        &log_arg,
        "-o",
        &page.display().to_string(),
    ]);
    assert!(ok, "{text}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("killed in the middle of a write"),
        "no unclean stop shown"
    );
    assert!(
        html.contains("no stop record"),
        "the first run's end not shown"
    );
    // The value never reached the log, the cut line included.
    assert!(!audit.contains(TOKEN));
    // And the upstream saw the value only through sluice (every request swapped).
    let seen = upstream.records();
    assert!(!seen.is_empty());
    for request in &seen {
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(authorization, format!("Bearer {TOKEN}"), "{}", request.uri);
    }
}

/// `write_all` for a file opened to append, failing the test loudly.
trait AppendAll {
    fn write_all_at_end(self, bytes: &[u8]);
}

impl AppendAll for std::fs::File {
    fn write_all_at_end(mut self, bytes: &[u8]) {
        use std::io::Write;
        self.write_all(bytes).expect("append to the log");
    }
}
