//! `sluice run --dry-run`: what `run` would give the command, for a declaration with every
//! kind of secret, printed without starting anything; never a value; a launch `run` would
//! refuse exits 125 with the same code.

use std::process::{Command, Output};

const VALUES: [(&str, &str); 7] = [
    ("gh", "ghp_REALrealREALrealREALrealREALreal1234"),
    ("db", "db-password-REAL-value-0001"),
    ("kf", "key-file-REAL-value-0002"),
    ("ro", "redact-only-REAL-value-0003"),
    ("rt", "1//refresh-token-REAL-0004"),
    ("ak", "AKIAREALREALREAL2345"),
    ("sk", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYREALREAL00"),
];

const POLICY: &str = "version: 1
secrets:
  github_token:
    from: { file: gh }
    hosts: [api.github.com]
    in: [header]
    sinks: [egress]
  db_password:
    from: { file: db }
    sinks: [command]
  key:
    from: { file: kf }
    sinks: [file]
  old_token:
    from: { file: ro }
    sinks: []
  google:
    oauth2:
      token_url: https://oauth2.googleapis.com/token
      grant: refresh_token
      client_id: abc
      refresh_token: { file: rt }
    hosts: [\"*.googleapis.com\"]
    sinks: [egress]
  app:
    github_app:
      app_id: 1
      installation_id: 2
      private_key: { file: app.pem }
      repositories: [website]
      permissions: { contents: read }
    hosts: [api.github.com]
    sinks: [egress]
  aws:
    sign: aws-sigv4
    from:
      access_key_id: { file: ak }
      secret_access_key: { file: sk }
    hosts: [s3.eu-west-1.amazonaws.com]
";

fn dry_run(dir: &std::path::Path, command: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "--dry-run",
            "--policy",
            "p.yaml",
            "--audit-log",
            "audit.jsonl",
            "--",
        ])
        .args(command)
        .current_dir(dir)
        .env("OPENAI_API_KEY", "sk-proj-withheldVALUE0123456789abcdef")
        .output()
        .unwrap()
}

#[test]
fn a_dry_run_describes_every_variable_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (file, value) in VALUES {
        std::fs::write(d.join(file), value).unwrap();
    }
    let key = include_str!("../../sign/tests/fixtures/rsa-2048.pem");
    std::fs::write(d.join("app.pem"), key).unwrap();
    std::fs::write(d.join("p.yaml"), POLICY).unwrap();

    let out = dry_run(d, &["sh", "-c", "touch started"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for line in [
        "nothing was started",
        "jail: on",
        "HTTPS_PROXY, HTTP_PROXY",
        "NO_PROXY, no_proxy: empty",
        "SSL_CERT_FILE",
        "GITHUB_TOKEN: a placeholder (shaped ghp_), minted for the run; egress → api.github.com; header",
        "DB_PASSWORD: the value itself (sink command",
        "KEY: the path of a 0600 file",
        "OLD_TOKEN: a placeholder (plain), minted for the run; redact-only",
        "GOOGLE: a placeholder (plain)",
        "GOOGLE_REFRESH_TOKEN: a placeholder (plain), minted for the run; held by sluice",
        "APP: a placeholder (shaped ghs_)",
        "app.private_key: no variable",
        "AWS_ACCESS_KEY_ID: the placeholder of aws.access_key_id",
        "withheld: OPENAI_API_KEY (",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    // No value, no line of the key, nothing started, no log.
    for (_, value) in VALUES {
        assert!(
            !stdout.contains(value) && !stderr.contains(value),
            "{stdout}{stderr}"
        );
    }
    assert!(!stdout.contains("sk-proj-withheld"));
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!stdout.contains(line));
    }
    assert!(!d.join("started").exists(), "the command ran");
    assert!(!d.join("audit.jsonl").exists(), "the proxy started");

    // A launch `run` would refuse is refused the same way.
    let refused = dry_run(d, &["echo", VALUES[0].1]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("error[value-in-argv]"), "{stderr}");
    assert!(!stderr.contains(VALUES[0].1));
}
