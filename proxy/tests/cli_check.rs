//! End-to-end tests of `sluice check` and `sluice redact`: the built binary, run on the
//! example declarations and on broken ones, with exit codes and stderr checked.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const VALUE: &str = "ghp_Zq8r2LmXv9TpW4nKc7HsBd3Fy6Qa1";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/examples")
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-cli-check-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_accepts_every_example() {
    for name in ["github.yaml", "model-api.yaml", "redact-only.yaml"] {
        let out = Command::new(SLUICE)
            .arg("check")
            .arg(examples().join(name))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok: "));
        assert!(!stderr.contains("error:"), "{name}: {stderr}");
    }
}

#[test]
fn check_prints_compiler_style_errors_and_exits_1() {
    let path = temp_file(
        "bad.yaml",
        "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    hosts: [\"*.com\"]\n    sinks: [egress, network]\n",
    );
    let out = Command::new(SLUICE)
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    assert!(
        stderr.contains(&format!("{file}:5:13: error: secrets.gh.hosts[0]:")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{file}:6:21: error: secrets.gh.sinks[1]: unknown sink `network`"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("  help: "), "{stderr}");
}

#[test]
fn check_prints_warnings_and_exits_0_without_printing_the_value() {
    let path = temp_file(
        "lint.yaml",
        &format!("version: 1\nsecrets:\n  k:\n    value: {VALUE}\n    sinks: []\n"),
    );
    let out = Command::new(SLUICE)
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(":4:12: warning: secrets.k.value:"),
        "{stderr}"
    );
    assert!(!stderr.contains(VALUE) && !String::from_utf8_lossy(&out.stdout).contains(VALUE));
}

#[test]
fn check_refuses_a_missing_file() {
    let out = Command::new(SLUICE)
        .args(["check", "/nonexistent/sluice.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/sluice.yaml:1:1: error:"));
}

#[test]
fn redact_streams_stdin_to_stdout_with_values_replaced() {
    let path = temp_file(
        "redact.yaml",
        &format!("version: 1\nsecrets:\n  k:\n    value: {VALUE}\n    sinks: []\n"),
    );
    let mut child = Command::new(SLUICE)
        .args(["redact", "--policy"])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // The first line comes back before stdin is closed: the copy streams.
    stdin
        .write_all(format!("first {VALUE} line\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"line\n") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "stdout closed early");
        got.extend_from_slice(&buf[..n]);
    }
    let first = String::from_utf8(got).unwrap();
    assert!(
        first.starts_with("first SLUICE_K_") && !first.contains(VALUE),
        "{first}"
    );
    // A value split across two writes is still redacted.
    stdin.write_all(&VALUE.as_bytes()[..10]).unwrap();
    stdin.flush().unwrap();
    stdin.write_all(&VALUE.as_bytes()[10..]).unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        rest.starts_with("SLUICE_K_") && !rest.contains(VALUE),
        "{rest}"
    );
}

#[test]
fn redact_refuses_an_invalid_declaration_or_a_missing_source() {
    let path = temp_file(
        "missing-env.yaml",
        "version: 1\nsecrets:\n  k:\n    from: { env: SLUICE_CLI_TEST_UNSET }\n    sinks: []\n",
    );
    let out = Command::new(SLUICE)
        .args(["redact", "--policy"])
        .arg(&path)
        .env_remove("SLUICE_CLI_TEST_UNSET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SLUICE_CLI_TEST_UNSET is not set"));
    let bad = temp_file("bad-redact.yaml", "version: 2\n");
    let out = Command::new(SLUICE)
        .args(["redact", "--policy"])
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":1:10: error:"));
}
