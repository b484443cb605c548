//! `sluice audit verify` and `sluice audit summary`.

use std::process::ExitCode;

pub(crate) fn verify(_args: &super::AuditFileArgs) -> ExitCode {
    eprintln!("sluice audit verify: not built yet");
    ExitCode::FAILURE
}

pub(crate) fn summary(_args: &super::AuditSummaryArgs) -> ExitCode {
    eprintln!("sluice audit summary: not built yet");
    ExitCode::FAILURE
}
