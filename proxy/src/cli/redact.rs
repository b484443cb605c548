//! `sluice redact`.

use std::process::ExitCode;

pub(crate) fn run(_args: &super::RedactArgs) -> ExitCode {
    eprintln!("sluice redact: not built yet");
    ExitCode::FAILURE
}
