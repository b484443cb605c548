//! Launches `sluice run` refuses before anything starts: a secret whose sinks the launcher
//! cannot serve, and a real value the operator's shell expanded into CMD's argv. Both exit
//! 125, start no proxy (no audit log) and no command, and never print the value.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use sluice_integration_tests::sluice_bin;

const TOKEN: &str = "tok-REAL/argv+0123456789abc";
const PROVIDER_KEY: &str = "provider-REAL-argv-55555555";
const CMD_KEY: &str = "cmd-REAL-argv-4444444444";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A declaration of `secrets` (YAML under `secrets:`), written beside its value files.
fn declaration(dir: &Path, secrets: &str) -> PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(dir.join("cmd_key"), CMD_KEY).unwrap();
    std::fs::write(dir.join("provider_key"), PROVIDER_KEY).unwrap();
    let path = dir.join("policy.yaml");
    let yaml =
        format!("version: 1\nsecrets:\n{secrets}").replace("DIR", &dir.display().to_string());
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `sluice run` of `command`, with a marker file that only a started command would make.
fn run(dir: &Path, policy: &Path, command: &[&str]) -> (Output, PathBuf) {
    let marker = dir.join("started");
    let out = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(policy)
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .arg("--")
        .args(["sh", "-c", "touch \"$0\"; exit 0"])
        .arg(&marker)
        .args(command)
        .current_dir(dir)
        .output()
        .expect("sluice runs");
    (out, marker)
}

fn assert_refused_before_anything(dir: &Path, out: &Output, marker: &Path) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(!marker.exists(), "the command ran: {stderr}");
    assert!(
        !dir.join("audit.jsonl").exists(),
        "the proxy started: {stderr}"
    );
    stderr
}

const HOST_ENGINE_ONLY: &str = "  chat_key:
    from: { file: DIR/token }
    sinks: [prompt, agent]
  tool_key:
    from: { file: DIR/cmd_key }
    sinks: [params]
  provider_key:
    from: { file: DIR/provider_key }
    sinks: []
";

#[test]
fn a_secret_only_a_host_engine_serves_refuses_the_launch_naming_each_and_what_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path(), HOST_ENGINE_ONLY);
    let (out, marker) = run(dir.path(), &policy, &[]);
    let stderr = assert_refused_before_anything(dir.path(), &out, &marker);
    for said in [
        "secret chat_key asks for prompt, agent",
        "secret tool_key asks for params",
        "serves egress, command and file",
        "sinks: []",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    // The redact-only secret is served: redaction needs no sink.
    assert!(!stderr.contains("provider_key asks"), "{stderr}");
    assert!(!stderr.contains(TOKEN) && !stderr.contains(CMD_KEY));

    // The same declaration with its host-engine secrets made redact-only launches.
    let served = declaration(
        dir.path(),
        "  chat_key:\n    from: { file: DIR/token }\n    sinks: []\n",
    );
    let (out, marker) = run(dir.path(), &served, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(marker.exists());
}

#[test]
fn check_warns_of_a_secret_only_a_host_engine_serves_and_still_passes() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path(), HOST_ENGINE_ONLY);
    let out = Command::new(sluice_bin())
        .arg("check")
        .arg(&policy)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Compiler style: file:line:col, the secret, and the fix.
    assert!(
        stderr.contains(
            "policy.yaml:5:12: warning: secrets.chat_key.sinks: secret chat_key is granted only prompt, agent"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("secret tool_key is granted only params"),
        "{stderr}"
    );
    assert!(
        stderr.contains("help: serve it from a host engine"),
        "{stderr}"
    );
    assert!(!stderr.contains("provider_key is granted only"), "{stderr}");
}

#[test]
fn serve_refuses_a_secret_nothing_would_serve_and_names_the_admin_endpoint_that_would() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path(), HOST_ENGINE_ONLY);
    // Without an admin endpoint nothing would serve them: refused, nothing started.
    let out = Command::new(sluice_bin())
        .args(["serve", "--policy"])
        .arg(&policy)
        .args(["--listen", "127.0.0.1:0", "--run-dir"])
        .arg(dir.path().join("refused"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for said in [
        "error: secret chat_key asks for prompt, agent; secret tool_key asks for params",
        "no admin endpoint",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    assert!(!dir.path().join("refused/proxy-url").exists());
    // With one, each is named with the endpoint a host engine serves it from.
    let mut serve = Command::new(sluice_bin())
        .args(["serve", "--policy"])
        .arg(&policy)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--run-dir",
        ])
        .arg(dir.path().join("run"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The proxy URL on stdout means it started; then stop it and read what it said.
    let mut stdout = serve.stdout.take().unwrap();
    let mut first = [0u8; 8];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("serve prints its URL");
    nix_kill_term(serve.id());
    let out = serve.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for said in [
        "warning: secret chat_key asks for prompt, agent",
        "warning: secret tool_key asks for params",
        "from the admin endpoint at 127.0.0.1:",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    assert!(!stderr.contains("provider_key asks"), "{stderr}");
}

fn nix_kill_term(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

const GRANTS: &str = "  api_token:
    from: { file: DIR/token }
    hosts: [api.test]
    sinks: [egress]
  cmd_key:
    from: { file: DIR/cmd_key }
    sinks: [command]
";

#[test]
fn a_value_the_shell_expanded_into_argv_refuses_the_launch_in_every_form_the_guard_knows() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path(), GRANTS);
    let b64 = base64::engine::general_purpose::STANDARD.encode(TOKEN);
    let forms = [
        TOKEN.to_owned(),
        format!("--header=Authorization: Bearer {TOKEN}"),
        TOKEN.to_ascii_uppercase(),
        b64.clone(),
        format!("x{}", &b64),
        TOKEN.replace('/', "%2F").replace('+', "%2B"),
        TOKEN.replace('/', "\\/"),
    ];
    for form in &forms {
        // The marker and `sh -c` script are argv 0..3; the form is argument 4.
        let (out, marker) = run(dir.path(), &policy, &["extra", form]);
        let stderr = assert_refused_before_anything(dir.path(), &out, &marker);
        assert!(
            stderr.contains(
                "argument 5 of the command (the program is 0) holds the value of secret api_token"
            ),
            "{form}: {stderr}"
        );
        assert!(stderr.contains("single quotes"), "{stderr}");
        assert!(!stderr.contains(TOKEN), "the value was printed: {stderr}");
        assert!(!stderr.contains(&b64), "the value was printed: {stderr}");
    }
}

#[test]
fn argv_may_hold_a_placeholder_or_a_value_granted_to_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path(), GRANTS);
    let out = dir.path().join("argv");
    // The command expands its own placeholder; a value granted `command` may be passed.
    let status = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .arg("--")
        .args(["sh", "-c", "printf '%s\\n' \"$API_TOKEN\" \"$1\" > \"$0\""])
        .arg(&out)
        .arg(CMD_KEY)
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let seen = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert!(lines[0].starts_with("SLUICE_API_TOKEN_"), "{seen}");
    assert_eq!(lines[1], CMD_KEY);
}

#[test]
fn hosts_on_a_secret_not_granted_egress_refuse_the_declaration_so_no_hole_opens() {
    let dir = tempfile::tempdir().unwrap();
    // `hosts:` on a command-only secret used to make evil.example.com reachable.
    let policy = declaration(
        dir.path(),
        "  cmd_key:\n    from: { file: DIR/cmd_key }\n    sinks: [command]\n    hosts: [evil.example.com]\n",
    );
    let (out, marker) = run(dir.path(), &policy, &[]);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(!marker.exists(), "the command ran: {stderr}");
    assert!(
        !dir.path().join("audit.jsonl").exists(),
        "the proxy started: {stderr}"
    );
    assert!(
        stderr.contains(
            "policy.yaml:6:12: error: secrets.cmd_key.hosts: secret cmd_key is not granted egress"
        ),
        "{stderr}"
    );
    // serve refuses it the same way: no listener, no run directory files.
    let out = Command::new(sluice_bin())
        .args(["serve", "--policy"])
        .arg(&policy)
        .args(["--listen", "127.0.0.1:0", "--run-dir"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!dir.path().join("run/proxy-url").exists());
}
