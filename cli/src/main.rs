//! The `sluice` command: `run` (the launcher and its jail), `serve`, `check`, `redact`,
//! `audit` and `demo`, each a thin layer over the libraries' public APIs (`sluice_proxy`,
//! `sluice_audit`, `sluice_policies`, `sluice_guard`).
//!
//! `command` parses the arguments and dispatches, one module per subcommand; `admin` is
//! the client of a running proxy's admin endpoint (`redact --run-dir`, `approve`); `launcher`
//! is `sluice run` (environment, jail, terminal, output redaction); `demo` the offline
//! story; `files` the run files, created with their mode from the start.
#![forbid(unsafe_code)]

mod admin;
mod command;
mod demo;
mod files;
mod launcher;

fn main() -> std::process::ExitCode {
    command::main()
}
