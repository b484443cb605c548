//! Placeholders shaped like the credential (#36), end to end: the real `sluice run`, a child
//! that checks each token's shape the way its client does (GitHub's checksum computed
//! independently, in Python), curl sending them, and a real TLS upstream that must receive
//! the real values.

use std::process::Command;

use sluice_integration_tests::{RecordingUpstream, TestPki, sluice_bin};

/// A GitHub token's shape: `ghp_` and 36 base62 characters (the checksum is not checked by
/// sluice on values, only made on placeholders).
const GITHUB: &str = "ghp_REALrealREALrealREALrealREALreal1234";
const ANTHROPIC: &str = "sk-ant-api03-REALrealREALrealREALrealREALrealREALrealREALrealREALrealREALrealREALreal_-REALreal-AA";
const SLACK: &str = "xoxb-123456789012-1234567890123-REALrealREALrealREALreal";
const AWS_KEY_ID: &str = "AKIAREALREALREAL2345";
/// Shaped like GitHub's, but declared `placeholder: plain`.
const PLAIN: &str = "ghp_PLAINplainPLAINplainPLAINplain123456";

/// The child's checks, as the clients make them: the gh CLI's (prefix, length, base62 and the
/// CRC32 checksum, decoded as the published rule says), Anthropic's and Slack's prefixes and
/// fields, an AWS key id's pattern. Each prints one line.
const CHECKS: &str = r#"import os, re, zlib
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
def checksum_ok(token):
    n = 0
    for c in token[-6:]:
        n = n * 62 + B62.index(c)
    return zlib.crc32(token[4:-6].encode()) == n
gh = os.environ["GITHUB_TOKEN"]
print("github", bool(re.fullmatch(r"ghp_[A-Za-z0-9]{36}", gh)) and checksum_ok(gh))
ant = os.environ["ANTHROPIC_KEY"]
print("anthropic", ant.startswith("sk-ant-api03-") and len(ant) == int(os.environ["ANT_LEN"]))
slack = os.environ["SLACK_BOT"]
print("slack", bool(re.fullmatch(r"xoxb-\d{12}-\d{13}-[A-Za-z0-9]+", slack)))
aws = os.environ["AWS_KEY"]
print("aws", bool(re.fullmatch(r"AKIA[A-Z2-7]{16}", aws)))
print("plain", os.environ["PLAIN_TOKEN"].startswith("SLUICE_PLAIN_TOKEN_"))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shaped_placeholders_pass_their_clients_checks_and_reach_the_upstream_as_values() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut yaml = String::from("version: 1\nsecrets:\n");
    for (name, value, extra) in [
        ("github_token", GITHUB, ""),
        ("anthropic_key", ANTHROPIC, ""),
        ("slack_bot", SLACK, ""),
        ("aws_key", AWS_KEY_ID, ""),
        ("plain_token", PLAIN, "    placeholder: plain\n"),
    ] {
        std::fs::write(d.join(name), value).unwrap();
        yaml.push_str(&format!(
            "  {name}:\n    from: {{ file: {} }}\n    hosts: [api.test]\n    sinks: [egress]\n    in: [header, body]\n{extra}",
            d.join(name).display()
        ));
    }
    yaml.push_str("egress:\n  allow_ips: [\"127.0.0.1/32\"]\n");
    std::fs::write(d.join("policy.yaml"), yaml).unwrap();
    std::fs::write(d.join("checks.py"), CHECKS).unwrap();
    // The upstream echoes the body: it holds the real GitHub value, read from a file.
    std::fs::write(d.join("body"), format!("echo {GITHUB}")).unwrap();
    let url = format!("https://api.test:{}/echo", upstream.port());
    let script = format!(
        "python3 checks.py && curl -sS --fail-with-body -H \"Authorization: Bearer $GITHUB_TOKEN\" \
         -H \"X-Api-Key: $ANTHROPIC_KEY\" -H \"X-Slack: $SLACK_BOT\" -H \"X-Aws: $AWS_KEY\" \
         --data-binary @body {url} && echo && env | grep -E '^(GITHUB_TOKEN|PLAIN_TOKEN)='"
    );
    let (policy, ca, audit) = (d.join("policy.yaml"), pki.ca_path(), d.join("audit.jsonl"));
    let cwd = d.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(sluice_bin())
            .arg("run")
            .arg("--policy")
            .arg(&policy)
            .arg("--audit-log")
            .arg(&audit)
            .arg("--upstream-ca")
            .arg(&ca)
            .args(["--resolve", "api.test=127.0.0.1"])
            .args(["--", "sh", "-c", &script])
            .env("ANT_LEN", ANTHROPIC.len().to_string())
            .current_dir(cwd)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for line in [
        "github True",
        "anthropic True",
        "slack True",
        "aws True",
        "plain True",
    ] {
        assert!(stdout.contains(line), "{line:?} not in {stdout}");
    }
    // The upstream received the real values, swapped in for the shaped placeholders.
    let records = upstream.records();
    assert_eq!(records.len(), 1, "{stdout}");
    let headers = &records[0].headers;
    assert_eq!(
        headers["authorization"],
        format!("Bearer {GITHUB}").as_str()
    );
    assert_eq!(headers["x-api-key"], ANTHROPIC);
    assert_eq!(headers["x-slack"], SLACK);
    assert_eq!(headers["x-aws"], AWS_KEY_ID);
    // The value echoed back came back as the child's own (shaped) placeholder.
    let placeholder = stdout
        .lines()
        .find_map(|l| l.strip_prefix("GITHUB_TOKEN="))
        .expect("the child's GITHUB_TOKEN")
        .to_owned();
    assert!(placeholder.starts_with("ghp_") && placeholder != GITHUB);
    assert!(stdout.contains(&format!("echo {placeholder}")), "{stdout}");
    for value in [GITHUB, ANTHROPIC, SLACK, AWS_KEY_ID, PLAIN] {
        assert!(!stdout.contains(value), "a value in the child's output");
        assert!(!stderr.contains(value), "a value on sluice's stderr");
    }
    let audit = std::fs::read_to_string(d.join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"swap\""), "{audit}");
    // The start event says which form each secret got: words and public prefixes only.
    let start_line = audit.lines().next().unwrap();
    let start: serde_json::Value = serde_json::from_str(start_line).unwrap();
    let forms = &start["placeholders"];
    for (secret, form) in [
        ("github_token", "shaped ghp_"),
        ("anthropic_key", "shaped sk-ant-api03-"),
        ("slack_bot", "shaped xoxb-"),
        ("aws_key", "shaped AKIA"),
        ("plain_token", "plain"),
    ] {
        assert_eq!(forms[secret], form, "{start_line}");
    }
    assert!(!start_line.contains(&placeholder), "{start_line}");
    for value in [GITHUB, ANTHROPIC, SLACK, AWS_KEY_ID, PLAIN] {
        assert!(!audit.contains(value), "a value in the audit log");
    }
}
