//! `sluice approve`: a terminal for the person deciding what waits for approval
//! (`approve:` on a secret, docs/approvals.md). It follows a running proxy's admin
//! endpoint, shows each waiting use as it arrives, and takes one key per decision:
//!
//! ```text
//! use 3 waits for a decision (2.1 s so far)
//!   secret   prod_api
//!   toward   api.prod.example.com
//!   request  DELETE /v1/items/7?force=…
//!   body     16 bytes, sha256 0b6f…
//! [a] allow once  [r] allow for the run  [d] deny  [D] deny for the run  [s] skip  [q] quit
//! ```
//!
//! On a terminal a key is read as it is typed (no Enter); from a pipe, one key per line.
//! Decisions go through `POST /v1/approvals/{id}` with the channel `terminal`, so each is
//! an `approve` event like any other. What it prints comes from the sandbox's requests
//! (a host, a path): control characters are shown as `�`, so a request cannot drive the
//! approver's terminal.

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use rustix::termios::{LocalModes, OptionalActions, Termios};
use serde::Deserialize;

use crate::admin::{self, Admin};

/// How often the list of waiting uses is read.
const POLL: Duration = Duration::from_millis(250);

/// One waiting use, as `GET /v1/approvals` lists it.
#[derive(Deserialize)]
struct Waiting {
    id: u64,
    /// `use` (a secret's, `approve:`) or `host` (`egress.ask`).
    kind: String,
    #[serde(default)]
    secret: String,
    host: String,
    method: String,
    #[serde(default)]
    path: String,
    body_bytes: Option<u64>,
    body_sha256: Option<String>,
    waited_secs: f64,
}

#[derive(Deserialize)]
struct Listing {
    pending: Vec<Waiting>,
}

/// Exit 0 when quit (or stdin ended); 1 when the admin endpoint cannot be reached.
pub(crate) fn run(args: &super::ApproveArgs) -> ExitCode {
    let Some(file) = admin::url_file(args.run_dir.as_deref(), args.admin_url_file.as_deref())
    else {
        eprintln!("sluice approve: give --run-dir DIR or --admin-url-file FILE");
        return ExitCode::FAILURE;
    };
    match approve(&file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice approve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn approve(file: &std::path::Path) -> io::Result<()> {
    let admin = Admin::from_file(file)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let keys = Keys::open()?;
    let mut out = io::stdout().lock();
    // Uses shown and skipped: not shown again.
    let mut skipped = BTreeSet::new();
    writeln!(
        out,
        "sluice approve: waiting for uses that need a decision (q to quit)"
    )?;
    out.flush()?;
    loop {
        let listing = runtime.block_on(admin.send(Method::GET, "/v1/approvals", Bytes::new()))?;
        let listing = match listing {
            (StatusCode::OK, body) => serde_json::from_slice::<Listing>(&body)
                .map_err(|e| io::Error::other(format!("the admin endpoint's listing: {e}")))?,
            (status, _) => {
                return Err(io::Error::other(format!(
                    "the admin endpoint answered {status}"
                )));
            }
        };
        let Some(next) = listing.pending.iter().find(|w| !skipped.contains(&w.id)) else {
            // Nothing to decide: only `q` (or the end of input) means something now.
            match keys.within(POLL) {
                Ok('q') | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                _ => continue,
            }
        };
        // Only a key typed once the use is on the screen decides it: one typed ahead (a
        // double tap, a paste) would decide a use nobody saw.
        keys.forget_typed_ahead();
        show(&mut out, next)?;
        let Some(key) = keys.next() else {
            return Ok(());
        };
        let (decision, scope) = match key {
            'a' => ("allow", "once"),
            'r' => ("allow", "run"),
            'd' => ("deny", "once"),
            'D' => ("deny", "run"),
            's' => {
                skipped.insert(next.id);
                writeln!(out, "skipped use {}\n", next.id)?;
                continue;
            }
            'q' => return Ok(()),
            _ => {
                writeln!(out, "({key:?} is not a choice)\n")?;
                continue;
            }
        };
        let body =
            serde_json::json!({ "decision": decision, "scope": scope, "channel": "terminal" });
        let path = format!("/v1/approvals/{}", next.id);
        let answer = runtime.block_on(admin.send(Method::POST, &path, body.to_string().into()))?;
        match answer.0 {
            StatusCode::OK => writeln!(
                out,
                "use {}: {decision}, for {}\n",
                next.id,
                scope_words(scope)
            )?,
            StatusCode::NOT_FOUND => writeln!(
                out,
                "use {} no longer waits (timed out, decided elsewhere, or its client went away)\n",
                next.id
            )?,
            status => writeln!(out, "the admin endpoint answered {status}\n")?,
        }
        out.flush()?;
    }
}

fn scope_words(scope: &str) -> &'static str {
    if scope == "run" {
        "the rest of the run (this secret, host and method)"
    } else {
        "this request"
    }
}

fn show(out: &mut impl Write, w: &Waiting) -> io::Result<()> {
    let (id, waited) = (w.id, w.waited_secs);
    if w.kind == "host" {
        writeln!(out, "host {id} waits for a decision ({waited:.1} s so far)")?;
        let host = printable(&w.host);
        writeln!(
            out,
            "  connect  {host} (egress.ask: not allowed, asked about)"
        )?;
    } else {
        writeln!(out, "use {id} waits for a decision ({waited:.1} s so far)")?;
        writeln!(out, "  secret   {}", printable(&w.secret))?;
        writeln!(out, "  toward   {}", printable(&w.host))?;
        let (method, path) = (printable(&w.method), printable(&w.path));
        writeln!(out, "  request  {method} {path}")?;
        match (w.body_bytes, &w.body_sha256) {
            (Some(size), Some(sha)) => {
                writeln!(out, "  body     {size} bytes, sha256 {}", printable(sha))?;
            }
            _ => writeln!(out, "  body     streamed (not read before the decision)")?,
        }
    }
    writeln!(
        out,
        "[a] allow once  [r] allow for the run  [d] deny  [D] deny for the run  [s] skip  [q] quit"
    )?;
    out.flush()
}

/// Control characters (a terminal's escape sequences among them) shown as `�`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// Keys as they are typed on a terminal (its line editing and echo off until dropped), or
/// one per line from a pipe; read on a thread of their own, so that `q` is heard while
/// nothing waits.
struct Keys {
    saved: Option<Termios>,
    typed: std::sync::mpsc::Receiver<char>,
}

impl Keys {
    fn open() -> io::Result<Self> {
        let stdin = io::stdin();
        let saved = match rustix::termios::isatty(&stdin) {
            true => {
                let saved = rustix::termios::tcgetattr(&stdin)?;
                let mut keys = saved.clone();
                keys.local_modes -= LocalModes::ICANON | LocalModes::ECHO;
                rustix::termios::tcsetattr(&stdin, OptionalActions::Now, &keys)?;
                Some(saved)
            }
            false => None,
        };
        let (sent, typed) = std::sync::mpsc::channel();
        // Ends with stdin (the channel then says so), or with the process.
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            while let Ok(1) = io::stdin().lock().read(&mut byte) {
                if !byte[0].is_ascii_whitespace() && sent.send(char::from(byte[0])).is_err() {
                    return;
                }
            }
        });
        Ok(Self { saved, typed })
    }

    /// On a terminal, drops the keys typed and not yet taken: those it holds, and those
    /// read. (From a pipe every line is meant, in order.)
    fn forget_typed_ahead(&self) {
        if self.saved.is_some() {
            let _ = rustix::termios::tcflush(io::stdin(), rustix::termios::QueueSelector::IFlush);
            while self.typed.try_recv().is_ok() {}
        }
    }

    /// The next key that is not white space; `None` at the end of input.
    fn next(&self) -> Option<char> {
        self.typed.recv().ok()
    }

    /// A key typed within `wait`.
    fn within(&self, wait: Duration) -> Result<char, std::sync::mpsc::RecvTimeoutError> {
        self.typed.recv_timeout(wait)
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = rustix::termios::tcsetattr(io::stdin(), OptionalActions::Now, saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_use_is_shown_without_control_characters() {
        let w = Waiting {
            id: 7,
            kind: "use".into(),
            secret: "prod".into(),
            host: "api.test:8443".into(),
            method: "DELETE".into(),
            path: "/x\u{1b}[2J?q=…".into(),
            body_bytes: Some(16),
            body_sha256: Some("ab".repeat(32)),
            waited_secs: 2.25,
        };
        let mut out = Vec::new();
        show(&mut out, &w).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("use 7 waits for a decision (2.2 s so far)\n"),
            "{text}"
        );
        assert!(
            text.contains("  request  DELETE /x\u{fffd}[2J?q=…\n"),
            "{text}"
        );
        assert!(text.contains(&format!("16 bytes, sha256 {}", "ab".repeat(32))));
        assert!(!text.contains('\u{1b}'));
    }
}
