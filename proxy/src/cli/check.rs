//! `sluice check`.

use std::process::ExitCode;

pub(crate) fn run(_args: &super::CheckArgs) -> ExitCode {
    eprintln!("sluice check: not built yet");
    ExitCode::FAILURE
}
