//! `from: { command: [PROGRAM, ARGS...] }`: a secret read from a program's standard output
//! (Vault, 1Password's `op read`, `aws secretsmanager get-secret-value`, `gcloud secrets
//! versions access`).
//!
//! The program runs without a shell (its arguments are passed as written, never
//! expanded), with no standard input, within [`COMMAND_TIMEOUT`]; its stdout less one
//! trailing newline is the value. It must never put the program's output into an error:
//! a failure names the secret, the program and the exit status only, since what a failing
//! secret manager prints may be the secret.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use crate::SourceError;

/// How long a source command may run before it is killed and the source fails.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a source command may print: more is no credential.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// Runs `argv` for the secret named `secret` and returns its output, trimmed of one
/// trailing newline.
pub(crate) fn run(
    secret: &str,
    argv: &[String],
    timeout: Duration,
) -> Result<Zeroizing<Vec<u8>>, SourceError> {
    let program = argv.first().cloned().unwrap_or_default();
    let failed = |why: String| SourceError::CommandFailed {
        secret: secret.to_owned(),
        program: program.clone(),
        why,
    };
    // A process group of its own, so that the deadline ends whatever it started too (a
    // helper still holding its output would otherwise keep the read going).
    let mut child = Command::new(&program)
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Its complaints may quote what it was asked for: not ours to show.
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| failed(format!("cannot start it ({})", e.kind())))?;
    let group = rustix::process::Pid::from_child(&child);
    let kill_all = |child: &mut std::process::Child| {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = child.kill();
        let _ = child.wait();
    };
    // Read on a thread of its own, so that a program that never closes its output is
    // still stopped at the deadline; the thread is waited for until the deadline only.
    let stdout = child.stdout.take();
    let (sent, output) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        // Room for the most it may read, up front: a buffer grown by reallocation would
        // leave earlier copies of the value in freed memory, which nothing zeroizes.
        let mut out = Zeroizing::new(Vec::with_capacity(MAX_OUTPUT as usize + 1));
        let read = stdout.map(|pipe| pipe.take(MAX_OUTPUT + 1).read_to_end(&mut out));
        let _ = sent.send((out, read.is_some_and(|r| r.is_ok())));
    });
    let deadline = Instant::now() + timeout;
    let timed_out = || {
        failed(format!(
            "it did not finish within {} s and was killed",
            timeout.as_secs()
        ))
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill_all(&mut child);
                return Err(timed_out());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                kill_all(&mut child);
                return Err(failed(format!("cannot wait for it ({})", e.kind())));
            }
        }
    };
    // It exited; what it started may still hold the output open: bounded by the deadline.
    let left = deadline.saturating_duration_since(Instant::now());
    let Ok((mut out, read)) = output.recv_timeout(left) else {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        return Err(timed_out());
    };
    if !status.success() {
        return Err(failed(format!("it exited with {status}")));
    }
    if !read {
        return Err(failed("reading its output failed".to_owned()));
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(failed(format!(
            "it printed more than {MAX_OUTPUT} bytes, which is no credential"
        )));
    }
    if out.last() == Some(&b'\n') {
        out.pop();
        if out.last() == Some(&b'\r') {
            out.pop();
        }
    }
    if out.is_empty() {
        return Err(failed("it printed nothing".to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn the_value_is_stdout_less_one_trailing_newline_and_arguments_are_not_expanded() {
        let value = run(
            "s",
            &sh("printf 'value-from-a-command\\n\\n'"),
            COMMAND_TIMEOUT,
        )
        .unwrap();
        assert_eq!(&**value, b"value-from-a-command\n");
        let argv = vec!["echo".to_owned(), "$HOME".to_owned()];
        assert_eq!(&**run("s", &argv, COMMAND_TIMEOUT).unwrap(), b"$HOME");
    }

    #[test]
    fn failures_name_the_secret_program_and_status_never_the_output() {
        let cases = [
            (
                sh("echo leaked-output-1; echo leaked-output-2 >&2; exit 3"),
                "exited with exit status: 3",
            ),
            (sh("printf ''"), "printed nothing"),
            (sh("printf '\\n'"), "printed nothing"),
            (
                vec!["/nonexistent/program".to_owned()],
                "cannot start it (entity not found)",
            ),
        ];
        for (argv, why) in cases {
            let error = run("api_token", &argv, COMMAND_TIMEOUT)
                .unwrap_err()
                .to_string();
            assert!(error.contains("secret api_token"), "{error}");
            assert!(error.contains(why), "{why:?} not in {error}");
            assert!(!error.contains("leaked-output"), "{error}");
        }
    }

    #[test]
    fn what_a_command_started_is_killed_at_the_deadline_too() {
        // The shell exits at once; its background child holds the output open.
        let started = Instant::now();
        let error = run(
            "s",
            &sh("(sleep 30; echo late) & echo early"),
            Duration::from_millis(400),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("did not finish within"), "{error}");
        assert!(!error.contains("early"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_command_that_does_not_finish_in_time_is_killed() {
        let started = Instant::now();
        let error = run(
            "s",
            &sh("echo partial; exec sleep 30"),
            Duration::from_millis(300),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("did not finish within"), "{error}");
        assert!(!error.contains("partial"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
