//! `sluice serve` as a binary: the run directory it writes, the URL it prints, and a clean
//! exit on SIGTERM with the audit log closed.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POLICY: &str = "version: 1
secrets:
  api_token:
    from: { file: token }
    hosts: [api.test]
    sinks: [egress]
egress:
  allow: [pypi.org]
";

#[test]
fn serve_writes_the_run_directory_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "serve-REAL-value-1234567890\n").unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let run_dir = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .arg("--run-dir")
        .arg(&run_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut printed = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut printed)
        .unwrap();
    let printed = printed.trim();
    // The printed URL has the user, never the token.
    assert!(printed.starts_with("http://sluice@127.0.0.1:"), "{printed}");

    let mode = |p: &str| {
        std::fs::metadata(run_dir.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(
        std::fs::metadata(&run_dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(mode("proxy-url"), 0o600);
    assert_eq!(mode("audit.jsonl"), 0o600);
    let url = std::fs::read_to_string(run_dir.join("proxy-url")).unwrap();
    let (userinfo, hostport) = url
        .trim()
        .trim_start_matches("http://")
        .split_once('@')
        .unwrap();
    assert!(userinfo.starts_with("sluice:") && userinfo.len() > "sluice:".len() + 16);
    assert_eq!(format!("http://sluice@{hostport}"), printed);
    assert!(!printed.contains(&userinfo["sluice:".len()..]));
    let ca = std::fs::read_to_string(run_dir.join("ca.pem")).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(
        !ca.contains("PRIVATE KEY"),
        "only the certificate is exported"
    );
    let env = std::fs::read_to_string(run_dir.join("placeholders.env")).unwrap();
    assert!(env.starts_with("API_TOKEN=SLUICE_API_TOKEN_"), "{env}");

    // No credentials: 407 (plain proxied request to an allowed host, nothing dialled).
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--proxy"])
        .arg(format!("http://{hostport}"))
        .arg("http://pypi.org/simple/")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "407");

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "sluice did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let audit = std::fs::read_to_string(run_dir.join("audit.jsonl")).unwrap();
    let last = audit.lines().last().unwrap();
    assert!(last.contains("\"event\":\"stop\""), "{last}");
    assert!(audit.contains("\"event\":\"auth_fail\""));
    let verify = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "verify"])
        .arg(run_dir.join("audit.jsonl"))
        .output()
        .unwrap();
    assert!(verify.status.success());
}

#[test]
fn serve_refuses_a_bad_declaration_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "version: 1\nsecrets:\n  x:\n    hostz: [a.test]\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--run-dir"])
        .arg(dir.path().join("run"))
        .arg("--policy")
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("policy.yaml:4:"), "{stderr}");
    assert!(stderr.contains("hostz"), "{stderr}");
}

/// A listener on an unspecified address cannot be dialled as written: `proxy-url` names
/// the loopback a sidecar's neighbours dial, or the host `--advertise` gives.
#[test]
fn proxy_url_names_an_address_a_client_can_dial() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "serve-REAL-value-1234567890\n").unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    for (advertise, host) in [
        (None, "127.0.0.1"),
        (Some("sluice.pod.test"), "sluice.pod.test"),
    ] {
        let run_dir = dir.path().join(format!("run-{host}"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .args(["serve", "--listen", "0.0.0.0:0", "--policy"])
            .arg(&policy)
            .arg("--run-dir")
            .arg(&run_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(advertise) = advertise {
            command.args(["--advertise", advertise]);
        }
        let mut child = command.spawn().unwrap();
        let mut printed = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut printed)
            .unwrap();
        let url = std::fs::read_to_string(run_dir.join("proxy-url")).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let hostport = url.trim().rsplit_once('@').unwrap().1;
        let (got, port) = hostport.rsplit_once(':').unwrap();
        assert_eq!(got, host, "{url}");
        assert!(port.parse::<u16>().unwrap() > 0);
        assert!(printed.trim().ends_with(&format!(":{port}")), "{printed}");
    }
}
