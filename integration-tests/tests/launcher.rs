//! `sluice run -- CMD` end to end: the real binary, a real child (sh, curl, env), a real
//! TLS upstream on 127.0.0.1.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sluice_integration_tests::{RecordingUpstream, TestPki, sluice_bin};

const TOKEN: &str = "tok-REAL-launcher-0123456789";
const CMD_KEY: &str = "cmd-REAL-value-4444444444";
const FILE_KEY: &str = "file-REAL-value-7777777777";

fn policy(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("policy.yaml");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.join("cmd_key"), CMD_KEY).unwrap();
    std::fs::write(dir.join("file_key"), FILE_KEY).unwrap();
    let yaml = format!(
        r#"version: 1
secrets:
  api_token:
    from: {{ file: {dir}/token }}
    hosts: [api.test]
    sinks: [egress]
    in: [header]
  cmd_key:
    from: {{ file: {dir}/cmd_key }}
    sinks: [command]
  file_key:
    from: {{ file: {dir}/file_key }}
    sinks: [file]
egress:
  allow_ips: ["127.0.0.1/32"]
"#,
        dir = dir.display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn sluice_run(dir: &std::path::Path, extra: &[&str], command: &[&str]) -> Output {
    let policy = policy(dir);
    Command::new(sluice_bin())
        .arg("run")
        .arg("--policy")
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .args(extra)
        .arg("--")
        .args(command)
        .current_dir(dir)
        .output()
        .expect("sluice runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_child_gets_placeholders_proxy_and_ca_variables_and_granted_values() {
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("child.env");
    let script = format!(
        "env > {env}; cat \"$FILE_KEY\" > {file_copy}; ls -l \"$FILE_KEY\" > {mode}; echo \"$FILE_KEY\" > {path}",
        env = env_file.display(),
        file_copy = dir.path().join("file_copy").display(),
        mode = dir.path().join("mode").display(),
        path = dir.path().join("path").display(),
    );
    let out = sluice_run(dir.path(), &[], &["sh", "-c", &script]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env = std::fs::read_to_string(&env_file).unwrap();
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} missing from the child's environment"))
            .to_owned()
    };
    assert!(var("API_TOKEN").starts_with("SLUICE_API_TOKEN_"));
    assert!(
        !env.contains(TOKEN),
        "the egress-only value reached the child"
    );
    assert_eq!(var("CMD_KEY"), CMD_KEY, "command grants the value itself");
    assert!(!env.contains(FILE_KEY));
    for name in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ] {
        assert!(var(name).starts_with("http://sluice:"), "{name}");
    }
    assert_eq!(var("NO_PROXY"), "");
    let bundle = var("SSL_CERT_FILE");
    for name in [
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "PIP_CERT",
        "CARGO_HTTP_CAINFO",
        "AWS_CA_BUNDLE",
        "npm_config_cafile",
    ] {
        assert_eq!(var(name), bundle, "{name}");
    }
    // The file grant: the value in a 0600 file, gone once the run ends.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("file_copy")).unwrap(),
        FILE_KEY
    );
    assert!(
        std::fs::read_to_string(dir.path().join("mode"))
            .unwrap()
            .starts_with("-rw-------")
    );
    let secret_path = std::fs::read_to_string(dir.path().join("path")).unwrap();
    assert!(
        !std::path::Path::new(secret_path.trim()).exists(),
        "the run directory outlived the run"
    );
    assert!(!std::path::Path::new(&bundle).exists());
    // Each value handed to the command is audited, by name and place, never the value.
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let events = audit_events(&audit, "materialize");
    assert_eq!(events.len(), 2, "{audit}");
    let handed = |secret: &str| {
        events
            .iter()
            .find(|e| e["secret"] == secret)
            .unwrap_or_else(|| panic!("no materialize for {secret}: {audit}"))["location"]
            .clone()
    };
    assert_eq!(handed("cmd_key"), "env:CMD_KEY");
    assert_eq!(handed("file_key"), "file");
    assert!(!audit.contains(CMD_KEY) && !audit.contains(FILE_KEY) && !audit.contains(TOKEN));
}

/// The audit log's events of `kind`, parsed.
/// The events of `kind` in the log's last run (each `sluice run` appends a run).
fn audit_events(audit: &str, kind: &str) -> Vec<serde_json::Value> {
    let last_run = audit
        .rfind("\"event\":\"start\"")
        .and_then(|at| audit[..at].rfind('\n').map(|nl| nl + 1))
        .unwrap_or(0);
    audit[last_run..]
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["event"] == kind)
        .collect()
}

/// The command's redactions reach the audit log while it runs, within about a second of
/// the value going by, not only when it exits: a run killed outright keeps them.
#[test]
fn output_redactions_are_audited_while_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let value_file = dir.path().join("leak");
    std::fs::write(&value_file, format!("the token is {TOKEN}!\n")).unwrap();
    let audit_log = dir.path().join("audit.jsonl");
    let script = format!("cat {}; exec sleep 8", value_file.display());
    let mut sluice = Command::new(sluice_bin())
        .arg("run")
        .arg("--policy")
        .arg(policy(dir.path()))
        .arg("--audit-log")
        .arg(&audit_log)
        .args(["--", "sh", "-c", &script])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("sluice runs");
    let deadline = Instant::now() + Duration::from_secs(6);
    let events = loop {
        let audit = std::fs::read_to_string(&audit_log).unwrap_or_default();
        let events = audit_events(&audit, "redact");
        if !events.is_empty() {
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "no redact event while the command ran: {audit}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let still_running = sluice.try_wait().unwrap().is_none();
    sluice.kill().unwrap();
    sluice.wait().unwrap();
    assert!(
        still_running,
        "the command ended before its redaction was audited"
    );
    assert_eq!(
        (
            &events[0]["secret"],
            &events[0]["location"],
            &events[0]["count"]
        ),
        (&"api_token".into(), &"stdout".into(), &1.into())
    );
    let audit = std::fs::read_to_string(&audit_log).unwrap();
    assert_eq!(audit_events(&audit, "redact").len(), 1, "{audit}");
    assert!(!audit.contains(TOKEN), "{audit}");
}

#[test]
fn output_is_redacted_and_exit_status_and_argv_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let value_file = dir.path().join("leak");
    std::fs::write(&value_file, format!("the token is {TOKEN}!\n")).unwrap();
    let out = sluice_run(dir.path(), &[], &["cat", value_file.to_str().unwrap()]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(!stdout.contains(TOKEN), "{stdout}");
    assert!(
        stdout.starts_with("the token is SLUICE_API_TOKEN_") && stdout.ends_with("!\n"),
        "{stdout}"
    );
    // The command's redactions are audited, per stream, with their count.
    let redactions = || {
        let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
        assert!(!audit.contains(TOKEN), "{audit}");
        audit_events(&audit, "redact")
    };
    let events = redactions();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (
            &events[0]["secret"],
            &events[0]["location"],
            &events[0]["count"]
        ),
        (&"api_token".into(), &"stdout".into(), &1.into())
    );
    // stderr too, and the exit code is the child's.
    let script = format!("cat {0} >&2; cat {0} {0} >&2; exit 7", value_file.display());
    let out = sluice_run(dir.path(), &[], &["sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(7));
    assert!(!text(&out.stderr).contains(TOKEN));
    assert!(text(&out.stderr).contains("SLUICE_API_TOKEN_"));
    let events = redactions();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (&events[0]["location"], &events[0]["count"]),
        (&"stderr".into(), &3.into())
    );
    // A child killed by a signal: 128 + N.
    let out = sluice_run(dir.path(), &[], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(143));
    // argv is passed verbatim: no expansion, no splitting.
    let out = sluice_run(
        dir.path(),
        &[],
        &["printf", "%s|", "$HOME", "${HOME}", "a b", "*"],
    );
    assert_eq!(text(&out.stdout), "$HOME|${HOME}|a b|*|");
    // A command that does not exist: sluice says so, with 125.
    let out = sluice_run(dir.path(), &[], &["/nonexistent/agent"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("cannot start /nonexistent/agent"));
}

#[tokio::test]
async fn curl_in_the_child_reaches_the_upstream_with_the_value_swapped_in() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.ca_path();
    let url = format!("https://api.test:{}/echo", upstream.port());
    // The body holds the real value, read by curl from a file: a value in argv itself
    // would refuse the launch.
    let body = dir.path().join("body");
    std::fs::write(&body, format!("echo {TOKEN}")).unwrap();
    let script = format!(
        "curl -sS --fail-with-body -H \"Authorization: Bearer $API_TOKEN\" --data-binary @{} {url}",
        body.display()
    );
    let dir_path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        sluice_run(
            &dir_path,
            &[
                "--upstream-ca",
                ca.to_str().unwrap(),
                "--resolve",
                "api.test=127.0.0.1",
            ],
            &["sh", "-c", &script],
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "stdout: {} stderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let records = upstream.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
    // The echoed value came back as the placeholder.
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("echo SLUICE_API_TOKEN_"), "{stdout}");
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"swap\""));
    assert!(!audit.contains(TOKEN));
    let verify = Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(dir.path().join("audit.jsonl"))
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", text(&verify.stderr));
    let mode = std::fs::metadata(dir.path().join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_refused_launch_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), TOKEN).unwrap();
    // An egress grant whose only host is passthrough cannot be served.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [pinned.test]\n    sinks: [egress]\negress:\n  passthrough: [pinned.test]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let marker = dir.path().join("started");
    let out = Command::new(sluice_bin())
        .arg("run")
        .arg("--policy")
        .arg(&bad)
        .args(["--", "touch"])
        .arg(&marker)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("api_token") && stderr.contains("passthrough"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
    assert!(
        !marker.exists(),
        "the command ran although the launch was refused"
    );
    // A secret that cannot be read stops the launch too.
    std::fs::remove_file(dir.path().join("token")).unwrap();
    let good = policy(dir.path());
    std::fs::remove_file(dir.path().join("token")).unwrap();
    let out = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(&good)
        .args(["--", "touch"])
        .arg(&marker)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("api_token"),
        "{}",
        text(&out.stderr)
    );
    assert!(!marker.exists());
}

#[test]
fn undeclared_credentials_are_withheld_from_the_command_and_named_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let seen = dir.path().join("env.txt");
    // Credentials nobody declared, by name and by value; and their near misses, which pass.
    let withheld = [
        ("GITHUB_TOKEN", "ghp_0123456789abcdefABCDEF0123456789abcd"),
        ("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuvwxyz0123"),
        ("MY_DB_PASSWORD", "correct-horse-battery-staple"),
        ("NOTES_TOO", "AKIAIOSFODNN7EXAMPLE"),
    ];
    let passed = [
        ("GIT_AUTHOR_NAME", "Ada Lovelace"),
        ("GIT_AUTHOR_EMAIL", "ada@example.test"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-test/agent.1"),
        ("GITHUB_TOKEN_FILE", "/run/secrets/gh"),
        ("BUILD_COMMIT", "9f3c2a71d0e4b6a58f3524a37e13ee6622520d89"),
    ];
    let on_purpose = ("LEGACY_TOKEN", "passed-on-purpose-0123456789");
    let mut command = Command::new(sluice_bin());
    command
        .arg("run")
        .arg("--policy")
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--pass-env", on_purpose.0])
        .arg("--")
        .args(["sh", "-c", "env > \"$0\""])
        .arg(&seen)
        .current_dir(dir.path());
    for (name, value) in withheld.iter().chain(&passed).chain([&on_purpose]) {
        command.env(name, value);
    }
    let out = command.output().expect("sluice runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // What CMD itself saw, read from the file it wrote (not through the redacted output).
    let env = std::fs::read_to_string(&seen).unwrap();
    for (name, value) in withheld {
        assert!(
            !env.contains(&format!("{name}=")),
            "{name} reached the command"
        );
        assert!(!env.contains(value), "{name}'s value reached the command");
    }
    for (name, value) in passed.iter().chain([&on_purpose]) {
        assert!(
            env.contains(&format!("{name}={value}\n")),
            "{name} was not passed: {env}"
        );
    }
    // stderr names each withheld variable and why, then the two fixes; never a value, in
    // any form the guard knows.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "withheld GITHUB_TOKEN from the command: its value looks like a GitHub token"
        ),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("withheld MY_DB_PASSWORD from the command: its name looks like a credential"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "withheld NOTES_TOO from the command: its value looks like an AWS access key id"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--pass-env NAME"), "{stderr}");
    assert!(
        stderr.contains("passing LEGACY_TOKEN to the command unchanged (--pass-env)"),
        "{stderr}"
    );
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    // The `start` event lists the withheld names, and only them.
    let start: serde_json::Value =
        serde_json::from_str(audit.lines().next().expect("a start line")).unwrap();
    assert_eq!(start["event"], "start");
    let mut listed: Vec<&str> = start["withheld"]
        .as_array()
        .expect("a withheld list")
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut names: Vec<&str> = withheld.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    assert_eq!(listed, names);
    let verified = Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(dir.path().join("audit.jsonl"))
        .output()
        .unwrap();
    assert!(verified.status.success(), "{}", text(&verified.stdout));
    for (name, value) in withheld {
        for encoding in sluice_guard::Encoding::ALL {
            let Some(form) = encoding.encode(&sluice_guard::SecretValue::from(value)) else {
                continue;
            };
            let form = String::from_utf8_lossy(&form).into_owned();
            assert!(!stderr.contains(&form), "{name} ({encoding}) on stderr");
            assert!(
                !audit.contains(&form),
                "{name} ({encoding}) in the audit log"
            );
        }
    }
}

#[test]
fn the_command_cannot_read_sluices_environment_or_memory() {
    // Run as an unprivileged user, as the command then is too: a root command keeps the
    // power to read any process's memory (sluice says so at start).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let policy = policy(dir.path());
    for file in ["policy.yaml", "token", "cmd_key", "file_key"] {
        let path = dir.path().join(file);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let seen = dir.path().join("seen.txt");
    let script =
        "cat /proc/$PPID/environ > \"$0\" 2>&1; head -c 64 /proc/$PPID/mem >> \"$0\" 2>&1; true";
    let root = sluice_integration_tests::is_root();
    // Outside the jail sluice's non-dumpable flag guards it; inside, the PID namespace as well
    // (`$PPID` is the jail's init there, which is non-dumpable too).
    for jail in [&[][..], &["--no-jail"][..]] {
        let mut command = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c.arg(sluice_bin());
            c
        } else {
            Command::new(sluice_bin())
        };
        let out = command
            .arg("run")
            .arg("--policy")
            .arg(&policy)
            .arg("--audit-log")
            .arg(dir.path().join("audit.jsonl"))
            .args(jail)
            .args(["--", "sh", "-c", script])
            .arg(&seen)
            .env("SLUICE_TEST_MARKER", "marker-in-sluices-environment")
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .output()
            .expect("sluice runs");
        assert!(out.status.success(), "{jail:?} {}", text(&out.stderr));
        let seen = std::fs::read_to_string(&seen).unwrap();
        assert!(!seen.contains("marker-in-sluices-environment"), "{seen}");
        assert!(!seen.contains(TOKEN), "{seen}");
        assert!(seen.contains("Permission denied"), "{seen}");
    }
}

#[test]
fn clear_env_passes_only_the_allowlist_what_sluice_sets_and_pass_env() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let seen = dir.path().join("env.txt");
    let out = Command::new(sluice_bin())
        .arg("run")
        .arg("--policy")
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--clear-env", "--pass-env", "KEEP_ME"])
        .args(["--", "sh", "-c", "env > \"$0\""])
        .arg(&seen)
        .env("INNOCENT_LOOKING", "hunter2")
        .env("GIT_AUTHOR_NAME", "Ada Lovelace")
        .env("KEEP_ME", "kept")
        .env("LC_ALL", "C.UTF-8")
        .env("TERM", "xterm")
        .current_dir(dir.path())
        .output()
        .expect("sluice runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env = std::fs::read_to_string(&seen).unwrap();
    // A credential with no shape under an innocent name is what the heuristics cannot see:
    // --clear-env does not pass it at all.
    assert!(!env.contains("INNOCENT_LOOKING"), "{env}");
    assert!(!env.contains("GIT_AUTHOR_NAME"), "{env}");
    for kept in [
        "KEEP_ME=kept\n",
        "LC_ALL=C.UTF-8\n",
        "TERM=xterm\n",
        "PATH=",
        "HOME=",
    ] {
        assert!(env.contains(kept), "{kept} missing: {env}");
    }
    // What sluice sets is there all the same: the proxy, the trust bundle, the placeholders.
    for set in [
        "HTTPS_PROXY=",
        "SSL_CERT_FILE=",
        "API_TOKEN=SLUICE_API_TOKEN_",
        "CMD_KEY=",
    ] {
        assert!(env.contains(set), "{set} missing: {env}");
    }
}

/// Every variable a client family reads to find a CA bundle file (docs/launcher.md).
const BUNDLE_VARIABLES: [&str; 20] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "AWS_CA_BUNDLE",
    "npm_config_cafile",
    "NPM_CONFIG_CAFILE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "HTTPLIB2_CA_CERTS",
    "NIX_SSL_CERT_FILE",
    "DENO_CERT",
    "BUNDLE_SSL_CA_CERT",
    "COMPOSER_CAFILE",
    "HEX_CACERTS_PATH",
    "WEBSOCKET_CLIENT_CA_BUNDLE",
    "YARN_CA_FILE_PATH",
];

/// Every variable a client reads to find a hashed certificate directory.
const DIRECTORY_VARIABLES: [&str; 2] = ["SSL_CERT_DIR", "GIT_SSL_CAPATH"];

#[test]
fn every_trust_variable_points_at_the_run_ca_over_an_inherited_one() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy(dir.path());
    let report = dir.path().join("trust");
    // For each variable, the subject of the first certificate of the bundle it names; for
    // each directory variable, the subject of the certificates OpenSSL finds there by hash.
    let script = r#"
        for name in "$@"; do
          eval "path=\$$name"
          if [ -d "$path" ]; then
            for cert in "$path"/*; do openssl x509 -noout -subject -in "$cert"; done \
              | grep -q 'sluice run CA' && echo "$name dir-has-run-ca $path"
          else
            echo "$name $(openssl x509 -noout -subject -in "$path" | tr -d '\n') $path"
          fi
        done > "$0"
    "#;
    let mut cmd = Command::new(sluice_bin());
    cmd.args(["run", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--", "sh", "-c", script])
        .arg(&report)
        .args(BUNDLE_VARIABLES)
        .args(DIRECTORY_VARIABLES)
        .current_dir(dir.path());
    // What an operator's environment (or a CI image) already says.
    for name in BUNDLE_VARIABLES {
        cmd.env(name, "/etc/ssl/certs/ca-certificates.crt");
    }
    for name in DIRECTORY_VARIABLES {
        cmd.env(name, "/etc/ssl/certs");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = std::fs::read_to_string(&report).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(
        lines.len(),
        BUNDLE_VARIABLES.len() + DIRECTORY_VARIABLES.len(),
        "{report}"
    );
    for line in lines {
        assert!(
            line.contains("sluice run CA") || line.contains("dir-has-run-ca"),
            "{line}"
        );
        assert!(!line.ends_with(" /etc/ssl/certs"), "{line}");
        assert!(!line.contains("ca-certificates.crt"), "{line}");
    }
    // Nothing was withheld or named: sluice sets them all itself.
    assert!(
        !text(&out.stderr).contains("withheld"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_only_the_hashed_directory_trusts_the_run_ca() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.ca_path();
    let url = format!("https://api.test:{}/echo", upstream.port());
    // curl on OpenSSL, with no bundle variable: what it trusts beyond its default bundle
    // (the system's, which lacks the run CA outside the jail) comes from the hashed
    // directory, named with `--capath` or found by OpenSSL itself in SSL_CERT_DIR. The
    // control: the system's own directory in both places is refused. Outside the jail
    // (inside it the system bundle is the run's, and the control would pass).
    let script = format!(
        "unset SSL_CERT_FILE CURL_CA_BUNDLE; \
         curl -sS -o /dev/null --capath \"$SSL_CERT_DIR\" {url} && echo capath-ok; \
         curl -sS -o /dev/null {url} && echo env-dir-ok; \
         SSL_CERT_DIR=/etc/ssl/certs curl -sS -o /dev/null --capath /etc/ssl/certs {url} \
           2>/dev/null || echo system-dir-refused"
    );
    let dir_path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        sluice_run(
            &dir_path,
            &[
                "--no-jail",
                "--upstream-ca",
                ca.to_str().unwrap(),
                "--resolve",
                "api.test=127.0.0.1",
            ],
            &["sh", "-c", &script],
        )
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("capath-ok")
            && stdout.contains("env-dir-ok")
            && stdout.contains("system-dir-refused"),
        "stdout: {stdout} stderr: {}",
        text(&out.stderr)
    );
    assert_eq!(upstream.records().len(), 2);
}
