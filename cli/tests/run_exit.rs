//! `sluice run`'s exit status: the command's own when it ran, 125 with a stable
//! `error[CODE]` on stderr when sluice refused to launch it (a declaration that fails
//! `check`, one that cannot be read), so that a wrapper never mistakes one for the other.

use std::process::{Command, Output};

fn run(dir: &std::path::Path, policy: &str, command: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--no-jail", "--policy", policy, "--audit-log"])
        .arg(dir.join("audit.jsonl"))
        .arg("--")
        .args(command)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_refused_launch_exits_125_with_its_code_and_the_commands_status_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("typo.yaml"),
        "version: 1\nsecrets:\n  x:\n    frm: { env: X }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("good.yaml"),
        "version: 1\negress:\n  allow: [example.test]\n",
    )
    .unwrap();

    let typo = run(d, "typo.yaml", &["touch", "started"]);
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("typo.yaml:4:5: error"), "{stderr}");
    assert!(
        stderr.contains("sluice run: error[declaration]"),
        "{stderr}"
    );

    let missing = run(d, "/nonexistent/policy.yaml", &["touch", "started"]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("error[declaration]"), "{stderr}");
    assert!(
        !d.join("started").exists(),
        "a refused launch started the command"
    );
    assert!(
        !d.join("audit.jsonl").exists(),
        "a refused launch wrote an audit log"
    );

    let no_program = run(d, "good.yaml", &["/nonexistent/program"]);
    let stderr = String::from_utf8_lossy(&no_program.stderr);
    assert_eq!(no_program.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("error[command-not-started]"), "{stderr}");

    for status in [0, 1, 3] {
        let ran = run(d, "good.yaml", &["sh", "-c", &format!("exit {status}")]);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(status), "{stderr}");
        assert!(!stderr.contains("error["), "{stderr}");
    }
}

/// A credential-like variable of the operator's shell that no declaration names is withheld
/// from the command's environment; expanded into argv by the shell, it is refused there too.
#[test]
fn a_withheld_credential_expanded_into_argv_refuses_the_launch_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("good.yaml"),
        "version: 1\negress:\n  allow: [example.test]\n",
    )
    .unwrap();
    let values = [
        ("OPENAI_API_KEY", "sk-proj-withheldVALUE0123456789abcdef"),
        ("GITHUB_TOKEN", "ghp_withheldVALUE0123456789abcdefABCDEF"),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYwithheld00",
        ),
    ];
    for (name, value) in values {
        let launch = |pass: bool| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
            command.args(["run", "--no-jail", "--policy", "good.yaml", "--audit-log"]);
            command.arg(d.join("audit.jsonl"));
            if pass {
                command.args(["--pass-env", name]);
            }
            command
                .args(["--", "sh", "-c", &format!("touch started; echo {value}")])
                .current_dir(d)
                .env(name, value)
                .output()
                .unwrap()
        };
        let out = launch(false);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(125), "{name}: {stderr}");
        assert!(
            stderr.contains("error[withheld-value-in-argv]") && stderr.contains(name),
            "{stderr}"
        );
        assert!(stderr.contains("argument 2"), "{stderr}");
        assert!(
            !stdout.contains(value) && !stderr.contains(value),
            "{stdout}{stderr}"
        );
        assert!(!d.join("started").exists(), "{name}: the command ran");
        assert!(!d.join("audit.jsonl").exists(), "{name}: the proxy started");

        // Passed on purpose, it goes through.
        let out = launch(true);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::remove_file(d.join("started")).unwrap();
        let _ = std::fs::remove_file(d.join("audit.jsonl"));
    }
}

/// Under `--watch`, a reload that grants the command what it could only get at start (a
/// new `command` or `file` grant), or a sink the launcher never serves, is refused and
/// audited like any bad reload; the run goes on under the declaration in force.
#[test]
fn a_reload_asking_for_what_the_running_command_cannot_get_is_refused_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let start = "version: 1\negress:\n  allow: [example.test]\n";
    std::fs::write(d.join("p.yaml"), start).unwrap();
    std::fs::write(d.join("v"), "a-value-for-the-command-0001").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "--no-jail",
            "--watch",
            "--policy",
            "p.yaml",
            "--audit-log",
            "audit.jsonl",
        ])
        .args(["--", "sh", "-c", "sleep 4; echo $LATE"])
        .current_dir(d)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let late = format!("{start}secrets:\n  late:\n    from: {{ file: v }}\n    sinks: [command]\n");
    std::fs::write(d.join("p.yaml"), late).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("a-value-for-the-command"), "{stdout}");
    let audit = std::fs::read_to_string(d.join("audit.jsonl")).unwrap();
    let reload = audit
        .lines()
        .find(|l| l.contains("\"event\":\"reload\""))
        .unwrap_or_else(|| panic!("no reload event: {audit}"));
    assert!(
        reload.contains("secret late is newly granted command"),
        "{reload}"
    );
    assert!(!audit.contains("a-value-for-the-command"), "{audit}");
}
