//! The audit log's disk filling up mid-run, and space coming back (issue #42), with the
//! real `sluice serve` on a small tmpfs of its own (a mount namespace made for the test, so
//! nothing outside it is mounted): sluice fails closed while the disk is full (requests
//! refused with `503`, nothing reaching the upstream, `/readyz` not ready, the failure
//! counted once), then, once space returns, writes what it had accepted and serves again,
//! its chain unbroken.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_integration_tests::{Curl, RecordingUpstream, TestPki, sluice_bin};

const TOKEN: &str = "full-disk-REAL-token-0123456789abcdef";

const YAML: &str = r#"version: 1
secrets:
  api:
    value: "full-disk-REAL-token-0123456789abcdef"
    hosts: [api.test]
    sinks: [egress]
    in: [header]
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

/// `curl -sS -u AUTH http://ADDR/PATH` on the admin endpoint: its status and body.
fn admin(run: &Path, path: &str) -> (u16, String) {
    let url = std::fs::read_to_string(run.join("admin-url")).expect("admin-url");
    let (auth, addr) = url
        .trim()
        .trim_start_matches("http://")
        .rsplit_once('@')
        .expect("user:token@host:port");
    let out = Command::new("curl")
        .args(["-sS", "-u", auth, "-w", "\n%{http_code}"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// Refused by sluice with `503`: at the `CONNECT` (a new tunnel) or inside the tunnel.
fn unavailable(out: &sluice_integration_tests::CurlOutput) -> bool {
    out.status == 503 || out.stderr.contains("CONNECT tunnel failed, response 503")
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_audit_disk_refuses_every_request_then_sluice_serves_again_when_space_returns() {
    if !sluice_integration_tests::is_root() {
        eprintln!(
            "skipped: needs root to mount a tmpfs in a namespace of its own (CI runs as root)"
        );
        return;
    }
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (disk, run, kept) = (d.join("disk"), d.join("run"), d.join("audit.jsonl"));
    std::fs::create_dir(&disk).unwrap();
    std::fs::write(d.join("policy.yaml"), YAML).unwrap();
    // A 256 KiB tmpfs, 200 KiB of it taken by a filler: the log has some 56 KiB. sluice runs
    // in the background of a shell in the namespace, which copies the log out when sluice
    // has stopped (the tmpfs goes with the namespace).
    let script = r#"set -e
mount -t tmpfs -o size=256k sluice-test "$DISK"
dd if=/dev/zero of="$DISK/filler" bs=1k count=200 2>/dev/null
"$SLUICE" serve --policy "$POLICY" --audit-log "$DISK/audit.jsonl" --run-dir "$RUN" \
  --listen 127.0.0.1:0 --admin 127.0.0.1:0 --no-watch --upstream-ca "$CA" \
  --resolve api.test=127.0.0.1 &
echo $! > "$PIDFILE"
wait $! || true
cp "$DISK/audit.jsonl" "$KEPT"
"#;
    let mut shell = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .env("DISK", &disk)
        .env("SLUICE", sluice_bin())
        .env("POLICY", d.join("policy.yaml"))
        .env("RUN", &run)
        .env("CA", pki.ca_path())
        .env("PIDFILE", d.join("pid"))
        .env("KEPT", &kept)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("serve.err")).unwrap())
        .spawn()
        .expect("unshare runs");
    wait_for("sluice to write proxy-url", || {
        run.join("proxy-url").exists()
    });
    let pid: u32 = std::fs::read_to_string(d.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let url = std::fs::read_to_string(run.join("proxy-url")).unwrap();
    let placeholders = std::fs::read_to_string(run.join("placeholders.env")).unwrap();
    let placeholder = placeholders
        .lines()
        .find_map(|l| l.strip_prefix("API="))
        .expect("the placeholder")
        .to_owned();
    let ca = run.join("ca.pem");
    let port = upstream.port();
    let call = move |path: &str| {
        Curl::new(url.trim(), &ca)
            .args([
                "-H".to_owned(),
                format!("Authorization: Bearer {placeholder}"),
            ])
            .get(&format!("https://api.test:{port}{path}"))
    };
    assert_eq!(admin(&run, "/readyz").0, 200);

    // Requests until the log's disk is full: each one's events fill it.
    let mut served = 0;
    let refused = tokio::task::block_in_place(|| {
        for _ in 0..3000 {
            let out = call("/fill");
            match out.status {
                200 => served += 1,
                _ if unavailable(&out) => return Some(out),
                other => panic!("neither served nor refused: {other} {out:?}"),
            }
        }
        None
    })
    .expect("the log's disk never filled");
    assert!(
        served > 0,
        "nothing was served before the disk filled: {refused:?}"
    );
    let reached = upstream.records().len();
    // Full: not ready, every request refused, nothing reaching the upstream, one failure.
    let (ready, why) = admin(&run, "/readyz");
    assert_eq!(ready, 503, "{why}");
    for _ in 0..5 {
        let out = tokio::task::block_in_place(|| call("/while-full"));
        assert!(unavailable(&out), "{out:?}");
    }
    assert_eq!(
        upstream.records().len(),
        reached,
        "a request went on while the log was full"
    );
    // The failed write, and each event refused while the log was failed.
    let (_, metrics) = admin(&run, "/metrics");
    let metric = |series: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    };
    let unavailable_refusals = metric("sluice_refusals_total{reason=\"sluice-unavailable\"} ");
    assert!(unavailable_refusals >= 6, "{metrics}");
    assert_eq!(
        metric("sluice_audit_write_failures_total "),
        1 + unavailable_refusals,
        "{metrics}"
    );
    assert_eq!(metric("sluice_audit_healthy "), 0, "{metrics}");

    // Space returns: the log writes what it had accepted, and sluice serves again.
    std::fs::remove_file(format!("/proc/{pid}/root{}/filler", disk.display())).unwrap();
    wait_for("/readyz to be ready again", || {
        admin(&run, "/readyz").0 == 200
    });
    let out = tokio::task::block_in_place(|| call("/after"));
    assert_eq!(out.status, 200, "{out:?}");
    assert_eq!(upstream.records().len(), reached + 1);

    // Stopped cleanly; the log (copied out of the namespace) verifies, with every request
    // that was served in it and a `stop`.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = shell.wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(d.join("serve.err")).unwrap()
    );
    let verify = Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(&kept)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&verify.stdout).into_owned()
        + &String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "{text}");
    assert!(
        text.starts_with("ok:") && !text.contains("no stop record"),
        "{text}"
    );
    let log = std::fs::read_to_string(&kept).unwrap();
    let swaps = log
        .lines()
        .filter(|l| l.contains("\"event\":\"swap\""))
        .count();
    assert_eq!(
        swaps,
        served + 1,
        "every served request's swap is in the log"
    );
    assert!(!log.contains(TOKEN));
}
