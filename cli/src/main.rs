//! The `sluice` command: `run` (the launcher), `serve`, `check`, `redact`, `audit` and
//! `demo`, each a thin layer over the `sluice_proxy` library.
#![forbid(unsafe_code)]

mod command;
mod demo;
mod files;
mod launcher;

fn main() -> std::process::ExitCode {
    command::main()
}
