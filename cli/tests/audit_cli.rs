//! End-to-end tests of `sluice audit verify` and `sluice audit summary`: the real binary
//! over logs written by the real writer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_audit::{AuditLog, Event, EventKind, StartInfo};

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-audit-cli-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A run of 2 swaps, 1 refusal, 1 redaction of 5 values and 1 denial: 7 lines.
fn write_run(path: &Path) {
    let start = StartInfo {
        policy_sha256: "0f".repeat(32),
        ca_sha256: "e1".repeat(32),
        withheld: Vec::new(),
        placeholders: Default::default(),
        settings: Default::default(),
        grants: Default::default(),
    };
    let log = AuditLog::open(path, "cli-run", start).unwrap();
    for _ in 0..2 {
        log.record(
            Event::new(EventKind::Swap)
                .secret("github_token")
                .host("api.github.com")
                .method("GET")
                .path("/user?token=ghp_NotForTheLog123456")
                .location("header:authorization"),
        )
        .unwrap();
    }
    log.record(
        Event::new(EventKind::Refuse)
            .secret("github_token")
            .host("paste.example")
            .method("POST")
            .location("body")
            .reason("host not granted"),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Redact)
            .secret("github_token")
            .host("api.github.com")
            .count(5),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Deny)
            .host("metadata.internal")
            .reason("blocked address"),
    )
    .unwrap();
    log.close().unwrap();
}

#[test]
fn verify_accepts_an_intact_log() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    assert!(!std::fs::read_to_string(&log).unwrap().contains("ghp_"));
    let out = sluice(&["audit", "verify", log.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("ok: 7 events, run cli-run, chain intact, head sha256:"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1, "one-line verdict: {stdout}");
}

#[test]
fn verify_names_the_first_broken_line() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.swap(3, 4);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let out = sluice(&["audit", "verify", log.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("broken: "), "{stderr}");
    assert!(stderr.contains("line 4: seq is 5: expected 4"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn verify_reports_an_edit_and_an_unreadable_file() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let edited = std::fs::read_to_string(&log)
        .unwrap()
        .replace("paste.example", "fine.example");
    std::fs::write(&log, edited).unwrap();
    let out = sluice(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("line 5: prev does not match the SHA-256 of line 4"),
        "{}",
        text(&out.stderr)
    );

    let missing = dir.0.join("missing.jsonl");
    let out = sluice(&["audit", "verify", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read audit log"));
}

#[test]
fn verify_flags_a_log_without_stop_but_accepts_its_chain() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let full = std::fs::read_to_string(&log).unwrap();
    let without_stop = &full[..=full[..full.len() - 1].rfind('\n').unwrap()];
    std::fs::write(&log, without_stop).unwrap();
    let out = sluice(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("6 events") && text(&out.stdout).contains("no stop record"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn summary_tables_a_known_run() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let out = sluice(&["audit", "summary", log.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("run cli-run: 7 events, chain intact\n"),
        "{stdout}"
    );
    let row = |host: &str| -> Vec<String> {
        stdout
            .lines()
            .find(|l| l.contains(host) && !l.contains("reason"))
            .unwrap_or_else(|| panic!("no row for {host}: {stdout}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // SECRET HOST SWAPS VERBATIM REFUSED REDACTED TUNNELS DENIED AUTH_FAIL MATERIALIZED MINTS
    assert_eq!(
        row("api.github.com"),
        [
            "github_token",
            "api.github.com",
            "2",
            "0",
            "0",
            "5",
            "0",
            "0",
            "0",
            "0",
            "0"
        ]
    );
    assert_eq!(
        row("metadata.internal"),
        [
            "-",
            "metadata.internal",
            "0",
            "0",
            "0",
            "0",
            "0",
            "1",
            "0",
            "0",
            "0"
        ]
    );
    assert!(stdout.contains("refusals by reason:"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("paste.example") && l.trim_end().ends_with("host not granted")),
        "{stdout}"
    );
}

#[test]
fn summary_json_is_for_machines() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let out = sluice(&["audit", "summary", "--json", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["runs"][0]["run_id"], "cli-run");
    assert_eq!(json["events"], 7);
    assert_eq!(json["runs"][0]["complete"], true);
    let rows = json["rows"].as_array().unwrap();
    let paste = rows.iter().find(|r| r["host"] == "paste.example").unwrap();
    assert_eq!(paste["secret"], "github_token");
    assert_eq!(paste["refusals"]["host not granted"], 1);
    let github = rows.iter().find(|r| r["host"] == "api.github.com").unwrap();
    assert_eq!(
        (github["swaps"].as_u64(), github["redactions"].as_u64()),
        (Some(2), Some(5))
    );
}

#[test]
fn summary_refuses_a_broken_log() {
    let dir = TempDir::new();
    let log = dir.0.join("audit.jsonl");
    write_run(&log);
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.remove(2);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let out = sluice(&["audit", "summary", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no table for a broken log");
    assert!(
        text(&out.stderr).contains("line 3"),
        "{}",
        text(&out.stderr)
    );
}

/// `audit suggest`: a patch from each kind of refusal and an unused grant, every entry with
/// its count; merged onto `version: 1` it reads as a declaration (only the secret's missing
/// source is wrong: the patch names no values).
#[test]
fn suggest_prints_a_patch_from_what_was_refused_and_what_was_never_used() {
    let dir = TempDir::new();
    let log_path = dir.0.join("audit.jsonl");
    let start = StartInfo {
        policy_sha256: "0f".repeat(32),
        ca_sha256: "e1".repeat(32),
        withheld: Vec::new(),
        placeholders: Default::default(),
        settings: Default::default(),
        grants: [(
            "gh".to_owned(),
            vec![
                "api.github.com header".to_owned(),
                "api.github.com body".to_owned(),
            ],
        )]
        .into_iter()
        .collect(),
    };
    let log = AuditLog::open(&log_path, "suggest-run", start).unwrap();
    let record = |event: Event| log.record(event).unwrap();
    for _ in 0..3 {
        record(
            Event::new(EventKind::Deny)
                .host("pypi.org:443")
                .reason("host-not-allowed"),
        );
    }
    for _ in 0..2 {
        record(
            Event::new(EventKind::Refuse)
                .secret("gh")
                .host("uploads.github.com:443")
                .location("header:authorization")
                .reason("placeholder-not-granted"),
        );
    }
    record(
        Event::new(EventKind::Refuse)
            .secret("gh")
            .host("api.github.com:443")
            .location("query")
            .reason("placeholder-not-granted"),
    );
    record(
        Event::new(EventKind::Swap)
            .secret("gh")
            .host("api.github.com:443")
            .location("header:authorization"),
    );
    log.close().unwrap();
    let out = sluice(&["audit", "suggest", log_path.to_str().unwrap()]);
    let patch = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in [
        "egress:\n  allow:\n    - \"pypi.org\"  # 3 refusals",
        "  \"gh\":\n    hosts:\n      - \"uploads.github.com\"  # 2 refusals, toward a host no grant names",
        "    in:\n      - \"query\"  # 1 refusal, in a place the grant lacks",
        "#   \"gh\": \"api.github.com body\"",
    ] {
        assert!(patch.contains(line), "{line:?} not in:\n{patch}");
    }
    assert!(
        !patch.contains("api.github.com header"),
        "a used grant: {patch}"
    );
    // Merged onto a bare declaration it parses: the one error is the secret's missing source.
    let merged = dir.0.join("merged.yaml");
    std::fs::write(&merged, format!("version: 1\n{patch}")).unwrap();
    let check = sluice(&["check", "--json", merged.to_str().unwrap()]);
    let verdict: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let codes: Vec<&str> = verdict["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["no-source"], "{verdict}");
}
