//! The `start` event says how the run was started, where it matters to a reviewer: the
//! jail, `--pass-env`, `--clear-env`, `--resolve`, `--upstream-ca`, `--watch` and the
//! command's argv; and the report shows them beside the run.

use std::process::Command;

#[test]
fn the_start_event_and_the_report_name_every_escape_hatch_the_run_was_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.yaml"),
        "version: 1\nsecrets:\n  gh:\n    from: { env: GH_TEST }\n    hosts: [api.example.test]\n    in: [header, query]\n    sinks: [egress]\negress:\n  allow: [example.test]\n",
    )
    .unwrap();
    // Any certificate will do: the system bundle's.
    std::fs::copy("/etc/ssl/certs/ca-certificates.crt", d.join("extra-ca.pem")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "--no-jail",
            "--policy",
            "p.yaml",
            "--audit-log",
            "audit.jsonl",
        ])
        .args(["--pass-env", "MY_TOKEN", "--clear-env", "--watch"])
        .args([
            "--resolve",
            "example.test=127.0.0.1",
            "--upstream-ca",
            "extra-ca.pem",
        ])
        .args([
            "--",
            "sh",
            "-c",
            "echo started with a quoted argument",
            "ghp_TypedByHandTypedByHandTypedByHand1234",
        ])
        .current_dir(d)
        .env("MY_TOKEN", "passed-on-purpose-0123456789")
        .env("GH_TEST", "gh-test-value-0123456789")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let audit = std::fs::read_to_string(d.join("audit.jsonl")).unwrap();
    let start: serde_json::Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    let settings = &start["settings"];
    assert_eq!(
        settings["jail"],
        "off (--no-jail): the egress policy was advisory"
    );
    assert_eq!(settings["pass_env"], "MY_TOKEN");
    assert_eq!(settings["clear_env"], "on");
    assert_eq!(settings["watch"], "on");
    assert_eq!(settings["resolve"], "example.test=127.0.0.1");
    assert_eq!(settings["upstream_ca"], "extra-ca.pem");
    assert_eq!(
        settings["argv"],
        "sh -c 'echo started with a quoted argument' <elided: looks like a credential>"
    );
    // A credential typed as it is, which no declaration names, never reaches the log.
    assert!(!audit.contains("TypedByHand"), "{audit}");
    assert!(!audit.contains("passed-on-purpose"), "{audit}");
    // What the declaration granted, for the report's "never used" list.
    assert_eq!(
        start["grants"]["gh"],
        serde_json::json!(["api.example.test header", "api.example.test query"])
    );

    let report = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "report", "audit.jsonl"])
        .current_dir(d)
        .output()
        .unwrap();
    let html = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success());
    assert!(html.contains("started with"), "{html}");
    assert!(
        html.contains("--no-jail") && html.contains("MY_TOKEN"),
        "{html}"
    );
    assert!(html.contains("api.example.test query"), "{html}");
}
