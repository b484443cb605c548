//! `sluice demo` end to end: the built binary, run as a user would run it, with no network
//! and no arguments (or `--keep`), must tell all four steps, exit 0, and never print the
//! real value — read back from the kept run directory to compare.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The line that names the run directory (the demo's `RUN_DIR_LINE`, in the binary; its
/// own unit tests check that the demo prints it).
const RUN_DIR_LINE: &str = "Run directory: ";

fn demo(args: &[&str]) -> (Output, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("demo")
        .args(args)
        // The demo pins its hosts; no proxy of the environment may get in the way.
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("RUST_LOG")
        .output()
        .expect("the sluice binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

fn run_dir(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(RUN_DIR_LINE))
        .unwrap_or_else(|| panic!("the demo names its run directory:\n{stdout}"));
    PathBuf::from(line.trim())
}

/// Removes the kept run directory even when an assertion fails.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn demo_tells_every_step_exits_0_and_never_prints_the_value() {
    let (output, stdout, stderr) = demo(&["--keep"]);
    let dir = run_dir(&stdout);
    let _cleanup = Cleanup(dir.clone());
    let token = std::fs::read_to_string(dir.join("demo_token")).expect("kept token file");
    assert!(token.len() >= 24, "the demo token is long enough to redact");
    assert!(
        !stdout.contains(&token) && !stderr.contains(&token),
        "the real value was printed"
    );
    // Not even a part of it.
    assert!(!stdout.contains(&token[..12]) && !stderr.contains(&token[..12]));

    assert!(
        output.status.success(),
        "sluice demo failed ({:?}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    for heading in [
        "== Step 1: a placeholder swapped toward the granted host ==",
        "== Step 2: a secret echoed back, redacted ==",
        "== Step 3: the placeholder toward another host, refused ==",
        "== Step 4: the audit log ==",
    ] {
        assert!(stdout.contains(heading), "missing {heading:?}:\n{stdout}");
    }
    assert_eq!(
        stdout.matches("\nok: ").count(),
        4,
        "each step ends with ok:\n{stdout}"
    );
    assert!(!stdout.contains("NOT AS EXPECTED"), "{stdout}");
    assert!(stdout.contains("All four steps behaved"), "{stdout}");
    assert!(stdout.contains("The sandbox got 200"), "{stdout}");
    assert!(stdout.contains("403"), "{stdout}");
    assert!(stdout.contains("chain intact"), "{stdout}");
    assert!(
        stdout.contains("SLUICE_DEMO_TOKEN_"),
        "the placeholder is shown"
    );

    // What the demo left for inspection is what it claims.
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).expect("audit log");
    assert!(!audit.contains(&token));
    for event in ["\"swap\"", "\"redact\"", "\"refuse\""] {
        assert!(
            audit.contains(event),
            "no {event} in the audit log:\n{audit}"
        );
    }
    for file in ["demo.yaml", "ca.pem", "api-ca.pem"] {
        assert!(dir.join(file).is_file(), "{file} is kept");
    }
}

#[test]
fn demo_without_keep_removes_its_run_directory() {
    let (output, stdout, stderr) = demo(&[]);
    let dir = run_dir(&stdout);
    let _cleanup = Cleanup(dir.clone());
    assert!(
        !dir.exists(),
        "{} should be removed, token file included",
        dir.display()
    );
    assert!(
        output.status.success(),
        "sluice demo failed ({:?}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
}

#[test]
fn demo_rejects_unknown_arguments() {
    let (output, _, stderr) = demo(&["--nope"]);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--nope"), "{stderr}");
}
