//! `sluice demo`: the whole story of sluice, offline, on 127.0.0.1, in a few seconds.
//!
//! It sets a stage — a stand-in TLS API (`api.demo.test`, with its own test CA), a random
//! token in a 0600 file, a declaration granting that token to that host only, and a real
//! sluice started in-process — then a scripted sandbox client that holds only the
//! placeholder walks through four steps, each checked and told in plain words:
//!
//! 1. **swap**: the placeholder sent to `api.demo.test` arrives there as the real token;
//! 2. **redact**: the API echoes the real token back, and the sandbox gets the placeholder;
//! 3. **refuse**: the placeholder sent to `other.demo.test` is refused with `403` and a
//!    one-line reason, and nothing reaches the API;
//! 4. **audit**: the audit log, line by line, its hash chain verified, and its summary.
//!
//! A step that does not behave is reported by name ([`StepFailure`]); the story goes on so
//! that every broken promise shows, and [`run`] fails at the end.
//!
//! # What it must never do
//!
//! - Show the real value, or any part of it: only its length. Every line it writes goes
//!   through one narrator that withholds the value should it ever appear.
//! - Reach beyond 127.0.0.1: the demo's hosts are pinned to loopback, DNS is never asked.
//! - Leave the token on disk: the run directory is removed at the end unless asked to keep it.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_policies::Policy;
use zeroize::Zeroizing;

use sluice_audit as audit;
use sluice_proxy::{Proxy, ProxyConfig, start};

mod api;
mod client;
mod narrate;
mod stage;
mod steps;

#[cfg(test)]
mod tests;

use api::{Api, ApiPki, Received};
use client::Sandbox;
use narrate::Narrator;
use stage::Stage;

/// The host the demo's secret is granted to.
pub(crate) const API_HOST: &str = "api.demo.test";
/// A reachable host the secret is not granted to.
pub(crate) const OTHER_HOST: &str = "other.demo.test";
/// The demo secret's name in the declaration.
pub(crate) const SECRET: &str = "demo_token";
/// The file in the run directory that holds the real token (0600).
pub(crate) const TOKEN_FILE: &str = "demo_token";
/// The line that names the run directory, so a reader (or a test) can find it.
pub(crate) const RUN_DIR_LINE: &str = "Run directory: ";

/// Random bytes in the demo token (hex: twice as many characters).
const TOKEN_BYTES: usize = 18;

/// How to run the demo.
///
/// # Defaults
/// - `keep`: false — the run directory is removed at the end.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Leave the run directory (token file, CAs, declaration, audit log) for inspection.
    pub keep: bool,
}

/// A step of the story.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A placeholder swapped for the real value toward the granted host.
    Swap,
    /// A value echoed back by the API, redacted into its placeholder.
    Redact,
    /// A placeholder toward a host it is not granted to, refused.
    Refuse,
    /// The audit log: every event on record, chain intact.
    Audit,
}

impl Step {
    /// Every step, in the order told.
    pub(crate) const ALL: [Step; 4] = [Step::Swap, Step::Redact, Step::Refuse, Step::Audit];

    /// Its number in the story, from 1.
    pub(crate) fn number(self) -> u8 {
        match self {
            Step::Swap => 1,
            Step::Redact => 2,
            Step::Refuse => 3,
            Step::Audit => 4,
        }
    }

    /// Its title, as printed.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Step::Swap => "a placeholder swapped toward the granted host",
            Step::Redact => "a secret echoed back, redacted",
            Step::Refuse => "the placeholder toward another host, refused",
            Step::Audit => "the audit log",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}, {}", self.number(), self.title())
    }
}

/// A step that did not behave as sluice promises: which, and what happened instead. Never
/// holds the real value (it is withheld before the failure is built).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StepFailure {
    /// The step.
    pub step: Step,
    /// Each broken expectation: what was expected and what happened instead.
    pub problems: Vec<String>,
}

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.problems.join("; "))
    }
}

/// Why the demo failed. Never holds the real value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// The stage could not be set: the run directory, the token, the API's test CA or
    /// listener, the declaration, or sluice itself. A bug or a broken machine, not sluice
    /// misbehaving.
    #[error("setting the stage: {what}: {why}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// What went wrong.
        why: String,
    },
    /// One or more steps did not behave as sluice promises.
    #[error("{} of {} steps did not behave as expected: {}", .0.len(), Step::ALL.len(), list(.0))]
    Steps(Vec<StepFailure>),
    /// The story could not be written (stdout closed).
    #[error("cannot write the demo's output: {0}")]
    Output(#[from] io::Error),
}

fn list(failures: &[StepFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn setup(what: &'static str) -> impl FnOnce(String) -> DemoError {
    move |why| DemoError::Setup { what, why }
}

/// Runs the demo, writing the story to `out`.
///
/// # Errors
///
/// [`DemoError::Steps`] naming every step that did not behave; [`DemoError::Setup`] when
/// the stage could not be set; [`DemoError::Output`] when `out` fails.
pub(crate) async fn run(options: Options, out: &mut dyn Write) -> Result<(), DemoError> {
    let run_dir = RunDir::create(options.keep)?;
    let token = Arc::new(mint_token()?);
    let mut say = Narrator::new(out, token.clone());
    say.line("sluice demo: the whole story, offline, on 127.0.0.1.")?;
    say.line(format!("{RUN_DIR_LINE}{}", run_dir.path().display()))?;
    let stage = Stage::set(run_dir.path(), token, &mut say).await?;

    let mut failures = Vec::new();
    let mut conclude = |say: &mut Narrator<'_>, step: Step, problems: Vec<String>, ok: &str| {
        if problems.is_empty() {
            return say.wrapped("ok: ", ok);
        }
        let mut shown = Vec::with_capacity(problems.len());
        for problem in problems {
            let what = say.shown(&problem);
            say.wrapped("NOT AS EXPECTED: ", &what)?;
            shown.push(what);
        }
        failures.push(StepFailure {
            step,
            problems: shown,
        });
        Ok(())
    };

    let problems = stage.swap(&mut say).await?;
    conclude(
        &mut say,
        Step::Swap,
        problems,
        &format!(
            "the API got the real token although the sandbox only ever held the placeholder: \
             sluice swapped it in the Authorization header, because {SECRET} grants {API_HOST}, \
             in: [header]."
        ),
    )?;

    let problems = stage.redact(&mut say).await?;
    conclude(
        &mut say,
        Step::Redact,
        problems,
        "sluice turned the real value back into its placeholder on the way in: the sandbox \
         cannot learn the secret, not even from an API that leaks it.",
    )?;

    let problems = stage.refuse(&mut say).await?;
    conclude(
        &mut say,
        Step::Refuse,
        problems,
        &format!(
            "{SECRET} is granted to {API_HOST} only, so sluice refused to send it to \
             {OTHER_HOST} and forwarded nothing. The reason names the secret, the host and \
             the missing grant, so an agent reading it knows what to ask for."
        ),
    )?;

    let audit_path = stage.audit_path.clone();
    let problems = stage.finish(&audit_path, &mut say).await?;
    conclude(
        &mut say,
        Step::Audit,
        problems,
        "every swap, redaction and refusal is on record, without a secret value, and an \
         edited, dropped or reordered line would break the chain.",
    )?;

    say.heading("The end")?;
    if failures.is_empty() {
        say.wrapped(
            "",
            "All four steps behaved as sluice promises: the sandbox used a secret it never \
             held, only where the declaration grants it, could not read it back, and every \
             step is on a record a reviewer can verify.",
        )?;
    } else {
        let names: Vec<String> = failures.iter().map(|f| f.step.to_string()).collect();
        say.wrapped(
            "",
            &format!(
                "{} of {} steps did not behave as sluice promises: {} (see NOT AS EXPECTED above).",
                failures.len(),
                Step::ALL.len(),
                names.join("; ")
            ),
        )?;
    }
    run_dir.close(&mut say)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DemoError::Steps(failures))
    }
}

/// The run directory: a private temporary directory, removed at the end unless kept.
struct RunDir {
    temp: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl RunDir {
    fn create(keep: bool) -> Result<RunDir, DemoError> {
        // Private from its creation; removed on drop, even when the demo fails midway.
        let temp = tempfile::Builder::new()
            .prefix("sluice-demo-")
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| setup("run directory")(e.to_string()))?;
        if keep {
            let path = temp.keep();
            Ok(RunDir { temp: None, path })
        } else {
            let path = temp.path().to_owned();
            Ok(RunDir {
                temp: Some(temp),
                path,
            })
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn close(self, say: &mut Narrator<'_>) -> Result<(), DemoError> {
        match self.temp {
            None => {
                say.line(format!(
                    "The run directory stays for you to look at: {}",
                    self.path.display()
                ))?;
                say.line(format!(
                    "  (it holds the real token in {TOKEN_FILE}: remove the directory when done)"
                ))?;
                say.line(format!(
                    "  try: sluice check {0}/demo.yaml; sluice audit verify {0}/audit.jsonl",
                    self.path.display()
                ))?;
            }
            Some(temp) => {
                temp.close()
                    .map_err(|e| setup("removing the run directory")(e.to_string()))?;
                say.line(
                    "The run directory, token file included, is removed (`--keep` leaves it).",
                )?;
            }
        }
        Ok(())
    }
}

/// A random token, hex, in memory that is wiped when dropped.
fn mint_token() -> Result<Zeroizing<String>, DemoError> {
    let mut raw = Zeroizing::new([0u8; TOKEN_BYTES]);
    getrandom::fill(raw.as_mut()).map_err(|e| setup("token")(e.to_string()))?;
    Ok(Zeroizing::new(hex::encode(raw.as_ref())))
}

/// Writes a new file created with `mode` from the start (never readable more widely); the
/// error names the file.
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), String> {
    crate::files::write_new(path, contents, mode).map_err(|e| format!("{}: {e}", path.display()))
}

/// The declaration the demo loads, reading the token from `token_file`.
pub(crate) fn declaration(token_file: &Path) -> String {
    // A JSON string is a valid YAML double-quoted scalar, whatever the path holds.
    let file = serde_json::Value::from(token_file.to_string_lossy()).to_string();
    format!(
        "version: 1\n\
         secrets:\n\
         \x20 {SECRET}:\n\
         \x20   from: {{ file: {file} }}\n\
         \x20   hosts: [{API_HOST}]\n\
         \x20   sinks: [egress]\n\
         \x20   in: [header]\n\
         egress:\n\
         \x20 allow: [{OTHER_HOST}]\n\
         \x20 allow_ips: [127.0.0.1/32]   # the demo's hosts live on loopback\n"
    )
}
