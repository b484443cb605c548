//! `sluice run` in a terminal: CMD gets a pseudo-terminal of its own, its output still
//! redacted, the window size followed, keys passed on, and the operator's terminal restored
//! however CMD ends. The operator's terminal is a real pty pair made by
//! `integration-tests/python/pty_driver.py` (Python's `pty` and `termios`).

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use sluice_integration_tests::launch::workspace_root;
use sluice_integration_tests::sluice_bin;

const TOKEN: &str = "tok-REAL/terminal+0123456789";

/// What the driver saw.
struct Seen {
    output: String,
    exit: i64,
    raw_during_run: Option<bool>,
    restored: bool,
    audit: String,
}

/// `sluice run -- sh -c SCRIPT` under a terminal, typing `keys` when the command prints
/// READY.
fn in_terminal(script: &str, keys: &str) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path());
    let report = dir.path().join("seen.json");
    let audit = dir.path().join("audit.jsonl");
    let status = Command::new("python3")
        .arg(driver())
        .arg(&report)
        .arg(sluice_bin())
        .args(["run", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(&audit)
        .args(["--", "sh", "-c", script])
        .env("PTY_DRIVER_KEYS", keys)
        .current_dir(dir.path())
        .status()
        .expect("python3 runs (.ci/run installs it)");
    assert!(status.success(), "the pty driver failed");
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    Seen {
        output: seen["output"].as_str().unwrap().to_owned(),
        exit: seen["exit"].as_i64().unwrap(),
        raw_during_run: seen["raw_during_run"].as_bool(),
        restored: seen["restored"].as_bool().unwrap(),
        audit: std::fs::read_to_string(&audit).unwrap_or_default(),
    }
}

/// A declaration of one secret, `TOKEN`, and a file `leak` that prints it.
fn declaration(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(dir.join("leak"), format!("the token is {TOKEN}!\n")).unwrap();
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [api.test]\n    sinks: [egress]\n",
            dir.display()
        ),
    )
    .unwrap();
    policy
}

fn driver() -> PathBuf {
    workspace_root().join("integration-tests/python/pty_driver.py")
}

fn assert_no_value(seen: &Seen) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(TOKEN);
    for text in [&seen.output, &seen.audit] {
        assert!(!text.contains(TOKEN) && !text.contains(&b64), "{text}");
    }
}

#[test]
fn the_command_gets_a_terminal_with_its_size_and_keys_and_its_output_redacted() {
    let seen = in_terminal(
        "test -t 0 && test -t 1 && test -t 2 && echo IS-A-TTY; stty size; cat leak; \
         echo READY; read line; echo \"typed: $line\"; stty size; exit 3",
        "go\r",
    );
    let lines: Vec<&str> = seen
        .output
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .collect();
    assert!(lines.contains(&"IS-A-TTY"), "{}", seen.output);
    // The window size at start, then after the operator's terminal was resized.
    assert!(lines.contains(&"40 100"), "{}", seen.output);
    assert!(lines.contains(&"50 120"), "{}", seen.output);
    assert!(lines.contains(&"typed: go"), "{}", seen.output);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("the token is SLUICE_API_TOKEN_") && l.ends_with('!')),
        "{}",
        seen.output
    );
    assert_no_value(&seen);
    assert_eq!(seen.exit, 3);
    assert_eq!(
        seen.raw_during_run,
        Some(true),
        "the outer terminal was not raw"
    );
    assert!(seen.restored, "the operator's terminal was left changed");
    // The terminal's redaction is audited like any output's.
    assert!(
        seen.audit.contains("\"event\":\"redact\"")
            && seen.audit.contains("\"location\":\"stdout\""),
        "{}",
        seen.audit
    );
}

#[test]
fn ctrl_c_is_the_commands_interrupt_and_the_terminal_is_restored() {
    // In raw mode the key reaches the command's terminal, which interrupts the command.
    let seen = in_terminal("echo READY; exec sleep 30", "\x03");
    assert_eq!(seen.exit, 130, "{}", seen.output);
    assert_eq!(seen.raw_during_run, Some(true));
    assert!(seen.restored);
}

#[test]
fn a_command_killed_outright_still_gets_the_terminal_restored() {
    let seen = in_terminal("cat leak; kill -KILL $$", "");
    assert_eq!(seen.exit, 137, "{}", seen.output);
    assert!(seen.output.contains("SLUICE_API_TOKEN_"), "{}", seen.output);
    assert_no_value(&seen);
    assert!(seen.restored);
}

#[test]
fn a_program_that_does_not_exist_is_said_and_the_terminal_is_restored() {
    let seen = in_terminal("exec /nonexistent/agent", "");
    assert_eq!(seen.exit, 127, "{}", seen.output);
    assert!(
        seen.output.contains("/nonexistent/agent"),
        "{}",
        seen.output
    );
    assert!(seen.restored);
}

#[test]
fn without_a_terminal_the_command_gets_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(declaration(dir.path()))
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--", "sh", "-c", "test -t 1 || echo PIPE; cat leak"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("PIPE\nthe token is SLUICE_API_TOKEN_"),
        "{stdout}"
    );
}
