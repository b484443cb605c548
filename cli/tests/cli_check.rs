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

/// A declaration written to a file of its own, removed with its directory when dropped.
struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempFile {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

fn temp_file(name: &str, text: &str) -> TempFile {
    let dir = tempfile::Builder::new()
        .prefix("sluice-cli-check-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    TempFile { _dir: dir, path }
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
fn check_notes_a_literal_refuses_a_credential_shaped_one_and_never_prints_either() {
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
    assert!(stderr.contains(":4:12: note: secrets.k.value:"), "{stderr}");
    assert!(!stderr.contains(VALUE) && !String::from_utf8_lossy(&out.stdout).contains(VALUE));

    let shaped = "ghp_Zq8r2LmXv9TpW4nKc7HsBd3Fy6Qa1b2c3d4e";
    let path = temp_file(
        "shaped.yaml",
        &format!("version: 1\nsecrets:\n  k:\n    value: {shaped}\n    sinks: []\n"),
    );
    let out = Command::new(SLUICE)
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(":4:12: error: secrets.k.value: secret k has a literal value with the shape of a GitHub token"),
        "{stderr}"
    );
    assert!(stderr.contains("from: { env: VAR }"), "{stderr}");
    assert!(!stderr.contains(shaped) && !String::from_utf8_lossy(&out.stdout).contains(shaped));
}

#[test]
fn check_previews_each_example_exactly() {
    let expected = [
        (
            "github.yaml",
            "ok: 1 secret(s) (1 swapped by the proxy, 0 redact-only), 4 intercepted host pattern(s), 0 warning(s), 0 note(s)
grants:
  github_token: egress → api.github.com, *.githubusercontent.com; header Authorization
reachable without a secret: pypi.org, files.pythonhosted.org (egress.allow)
decided at launch, not here (whether each source is set or readable on this machine is not judged):
  github_token: read from the environment variable GITHUB_TOKEN
",
        ),
        (
            "model-api.yaml",
            "ok: 2 secret(s) (2 swapped by the proxy, 0 redact-only), 5 intercepted host pattern(s), 0 warning(s), 0 note(s)
grants:
  anthropic_key: egress → api.anthropic.com:443; header X-Api-Key
  github_token: egress → api.github.com; header Authorization
reachable without a secret: pypi.org, files.pythonhosted.org (egress.allow); api.anthropic.com (egress.verbatim: placeholders pass unchanged)
decided at launch, not here (whether each source is set or readable on this machine is not judged):
  anthropic_key: read from the environment variable ANTHROPIC_API_KEY
  github_token: read from the file /run/secrets/github_token
",
        ),
        (
            "aws-signing.yaml",
            "ok: 1 secret(s) (0 swapped by the proxy, 0 redact-only, 1 that signs requests), 3 intercepted host pattern(s), 0 warning(s), 0 note(s)
grants:
  aws_prod.access_key_id: signs → s3.eu-west-1.amazonaws.com, *.s3.eu-west-1.amazonaws.com, bedrock-runtime.eu-west-1.amazonaws.com; the access_key_id part
  aws_prod.secret_access_key: signs → s3.eu-west-1.amazonaws.com, *.s3.eu-west-1.amazonaws.com, bedrock-runtime.eu-west-1.amazonaws.com; the secret_access_key part
reachable without a secret: none
decided at launch, not here (whether each source is set or readable on this machine is not judged):
  aws_prod.access_key_id: read from the environment variable AWS_ACCESS_KEY_ID
  aws_prod.secret_access_key: read from the environment variable AWS_SECRET_ACCESS_KEY
",
        ),
    ];
    for (name, preview) in expected {
        let path = examples().join(name);
        let out = Command::new(SLUICE)
            .arg("check")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        // Last, the fingerprint the audit log records for this file (literals masked).
        let fingerprint =
            sluice_policies::fingerprint(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!(
                "{}: {preview}policy_sha256 (as the audit log records it, literals masked): {fingerprint}\n",
                path.display()
            ),
            "{name}"
        );
    }
}

#[test]
fn check_json_carries_the_verdict_the_diagnostics_and_the_grants() {
    let out = Command::new(SLUICE)
        .args(["check", "--json"])
        .arg(examples().join("github.yaml"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    let secret = &json["secrets"][0];
    assert_eq!(secret["name"], "github_token");
    assert_eq!(secret["sinks"], serde_json::json!(["egress"]));
    assert_eq!(secret["header"], serde_json::json!(["authorization"]));
    assert_eq!(secret["source"]["env"], "GITHUB_TOKEN");
    assert_eq!(
        json["reachable"]["allow"],
        serde_json::json!(["pypi.org", "files.pythonhosted.org"])
    );

    let bad = temp_file(
        "hole.yaml",
        "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [command]\n    hosts: [evil.example.com]\n",
    );
    let out = Command::new(SLUICE)
        .args(["check", "--json"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    let d = &json["diagnostics"][0];
    assert_eq!(
        (
            d["severity"].as_str(),
            d["line"].as_u64(),
            d["column"].as_u64()
        ),
        (Some("error"), Some(6), Some(12))
    );
    assert_eq!(d["path"], "secrets.k.hosts");
    assert!(json.get("secrets").is_none());
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
    // The value is a GitHub token's shape, so its placeholder is too (as a run mints it).
    assert!(
        first.starts_with("first ghp_") && !first.contains(VALUE),
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
    assert!(rest.starts_with("ghp_") && !rest.contains(VALUE), "{rest}");
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

#[test]
fn redact_mints_placeholders_in_the_form_a_run_gives_them() {
    const TOKEN: &str = "ghp_REDACTrealREDACTrealREDACTreal123456";
    let path = temp_file(
        "redact-shaped.yaml",
        "version: 1\nsecrets:\n  gh:\n    from: { env: SLUICE_CLI_TEST_GH }\n    sinks: []\n  plain:\n    from: { env: SLUICE_CLI_TEST_PLAIN }\n    sinks: []\n    placeholder: plain\n",
    );
    let mut child = Command::new(SLUICE)
        .args(["redact", "--policy"])
        .arg(&path)
        .env("SLUICE_CLI_TEST_GH", TOKEN)
        .env(
            "SLUICE_CLI_TEST_PLAIN",
            "ghp_PLAINrealPLAINrealPLAINreal12345678",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{TOKEN} ghp_PLAINrealPLAINrealPLAINreal12345678\n").as_bytes())
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut words = text.split_whitespace();
    let (shaped, plain) = (words.next().unwrap(), words.next().unwrap());
    assert!(
        shaped.starts_with("ghp_") && shaped.len() == 40 && shaped != TOKEN,
        "{text}"
    );
    assert!(plain.starts_with("SLUICE_PLAIN_"), "{text}");
}
