//! The audit log's disk filling up mid-run, and space coming back (issue #42), with the
//! real `sluice serve` on a small tmpfs of its own (a mount namespace made for the test, so
//! nothing outside it is mounted): sluice fails closed while the disk is full (requests
//! refused with `503`, nothing reaching the upstream, `/readyz` not ready, the failure
//! counted once), then, once space returns, writes what it had accepted and serves again,
//! its chain unbroken. The same when the disk has no inode left for the next segment of a
//! rotating log.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_integration_tests::{Curl, CurlOutput, RecordingUpstream, TestPki, sluice_bin};

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
fn unavailable(out: &CurlOutput) -> bool {
    out.status == 503 || out.stderr.contains("CONNECT tunnel failed, response 503")
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sluice serve` with its audit log on a tmpfs of its own (mounted with `mount_options`,
/// then a file `filler` of `filler_kib` KiB made on it), in the background of a shell in a
/// mount namespace, which copies the log's files out when sluice has stopped (the tmpfs
/// goes with the namespace). None when not root.
struct OnSmallDisk {
    dir: tempfile::TempDir,
    shell: Child,
    pid: u32,
    run: PathBuf,
    url: String,
    placeholder: String,
}

impl OnSmallDisk {
    fn start(pki: &TestPki, mount_options: &str, filler_kib: u32, extra: &str) -> Option<Self> {
        if !sluice_integration_tests::is_root() {
            eprintln!(
                "skipped: needs root to mount a tmpfs in a namespace of its own (CI runs as root)"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (disk, run, kept) = (d.join("disk"), d.join("run"), d.join("kept"));
        std::fs::create_dir(&disk).unwrap();
        std::fs::create_dir(&kept).unwrap();
        std::fs::write(d.join("policy.yaml"), YAML).unwrap();
        let script = format!(
            r#"set -e
mount -t tmpfs -o {mount_options} sluice-test "$DISK"
dd if=/dev/zero of="$DISK/filler" bs=1k count={filler_kib} 2>/dev/null
"$SLUICE" serve --policy "$POLICY" --audit-log "$DISK/audit.jsonl" --run-dir "$RUN" \
  --listen 127.0.0.1:0 --admin 127.0.0.1:0 --no-watch --upstream-ca "$CA" \
  --resolve api.test=127.0.0.1 {extra} &
echo $! > "$PIDFILE"
wait $! || true
cp "$DISK"/audit.jsonl* "$KEPT"/
"#
        );
        let shell = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
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
        let pid = std::fs::read_to_string(d.join("pid"))
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
        Some(OnSmallDisk {
            url: url.trim().to_owned(),
            dir,
            shell,
            pid,
            run,
            placeholder,
        })
    }

    /// A GET with the placeholder to `path` on the upstream at `port`.
    fn call(&self, port: u16, path: &str) -> CurlOutput {
        Curl::new(&self.url, &self.run.join("ca.pem"))
            .args([
                "-H".to_owned(),
                format!("Authorization: Bearer {}", self.placeholder),
            ])
            .get(&format!("https://api.test:{port}{path}"))
    }

    /// Requests until the log's disk refuses: how many were served before, and the first
    /// refused.
    fn fill(&self, port: u16) -> (usize, CurlOutput) {
        let mut served = 0;
        for _ in 0..3000 {
            let out = self.call(port, "/fill");
            match out.status {
                200 => served += 1,
                _ if unavailable(&out) => return (served, out),
                other => panic!("neither served nor refused: {other} {out:?}"),
            }
        }
        panic!("the log's disk never filled");
    }

    /// Gives the disk its room back: the filler goes.
    fn free(&self) {
        let disk = self.dir.path().join("disk");
        std::fs::remove_file(format!("/proc/{}/root{}/filler", self.pid, disk.display())).unwrap();
    }

    /// The admin endpoint's `/metrics`, one series' value (0 when absent).
    fn metric(&self, series: &str) -> u64 {
        let (_, metrics) = admin(&self.run, "/metrics");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Once the disk has room again: sluice is ready and serves (one request, reaching the
    /// upstream), then stops cleanly, every request it served (`served` before the
    /// outage, and this one) swapped in the log; what [`OnSmallDisk::stop`] returns.
    fn serves_again_then_stops(
        self,
        port: u16,
        upstream: &RecordingUpstream,
        served: usize,
    ) -> String {
        let reached = upstream.records().len();
        wait_for("/readyz to be ready again", || {
            admin(&self.run, "/readyz").0 == 200
        });
        let out = tokio::task::block_in_place(|| self.call(port, "/after"));
        assert_eq!(out.status, 200, "{out:?}");
        assert_eq!(upstream.records().len(), reached + 1);
        let log = self.stop();
        let swaps = log
            .lines()
            .filter(|l| l.contains("\"event\":\"swap\""))
            .count();
        assert_eq!(
            swaps,
            served + 1,
            "every served request's swap is in the log"
        );
        log
    }

    /// Stops sluice cleanly and checks that the log (copied out of the namespace, every
    /// segment) verifies, with a `stop`, and holds no value: what `sluice audit verify`
    /// said, then the text of every file of the log.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let status = self.shell.wait().unwrap();
        let d = self.dir.path();
        assert!(
            status.success(),
            "{}",
            std::fs::read_to_string(d.join("serve.err")).unwrap()
        );
        let kept = d.join("kept");
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
        let mut files: Vec<_> = std::fs::read_dir(&kept)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let log: String = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        assert!(!log.contains(TOKEN));
        text + "\n" + &log
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_audit_disk_refuses_every_request_then_sluice_serves_again_when_space_returns() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let port = upstream.port();
    // A 256 KiB tmpfs, 200 KiB of it taken by the filler: the log has some 56 KiB.
    let Some(disk) = OnSmallDisk::start(&pki, "size=256k", 200, "") else {
        return;
    };
    let run = disk.run.clone();
    assert_eq!(admin(&run, "/readyz").0, 200);

    // Requests until the log's disk is full: each one's events fill it.
    let (served, refused) = tokio::task::block_in_place(|| disk.fill(port));
    assert!(
        served > 0,
        "nothing was served before the disk filled: {refused:?}"
    );
    let reached = upstream.records().len();
    // Full: not ready, every request refused, nothing reaching the upstream, one failure.
    let (ready, why) = admin(&run, "/readyz");
    assert_eq!(ready, 503, "{why}");
    for _ in 0..5 {
        let out = tokio::task::block_in_place(|| disk.call(port, "/while-full"));
        assert!(unavailable(&out), "{out:?}");
    }
    assert_eq!(
        upstream.records().len(),
        reached,
        "a request went on while the log was full"
    );
    // The failed write, and each event refused while the log was failed.
    let unavailable_refusals = disk.metric("sluice_refusals_total{reason=\"sluice-unavailable\"} ");
    assert!(unavailable_refusals >= 6);
    assert_eq!(
        disk.metric("sluice_audit_write_failures_total "),
        1 + unavailable_refusals
    );
    assert_eq!(disk.metric("sluice_audit_healthy "), 0);

    // Space returns: the log writes what it had accepted, and sluice serves again.
    disk.free();
    disk.serves_again_then_stops(port, &upstream, served);
}

/// A rotating log whose disk has no inode left for the next segment: the rotation fails
/// after its rename, sluice refuses until the disk has room again, then finishes the
/// rotation and serves, the chain unbroken across the segments (a failed rotation used to
/// stop the log for the rest of the run).
#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_the_disk_refuses_is_finished_when_room_returns() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let port = upstream.port();
    // Three inodes: the root, the filler and the log; room for bytes, none for a new file.
    let Some(disk) = OnSmallDisk::start(&pki, "size=1m,nr_inodes=3", 1, "--audit-max-bytes 4096")
    else {
        return;
    };
    let run = disk.run.clone();
    let (served, refused) = tokio::task::block_in_place(|| disk.fill(port));
    assert!(
        served > 0,
        "nothing was served before the rotation: {refused:?}"
    );
    let reached = upstream.records().len();
    assert_eq!(admin(&run, "/readyz").0, 503);
    let out = tokio::task::block_in_place(|| disk.call(port, "/while-stuck"));
    assert!(unavailable(&out), "{out:?}");
    assert_eq!(upstream.records().len(), reached);

    disk.free();
    let log = disk.serves_again_then_stops(port, &upstream, served);
    assert!(log.contains("\"segment\":2"), "{log}");
}
