//! `sluice check FILE`: validates a declaration and prints every diagnostic, compiler
//! style (`file:line:col: error: ...` and a `help:` line), on stderr.
//!
//! It reads only the declaration: no secret source is read, nothing is dialled, and no
//! value is ever printed.

use std::process::ExitCode;

use sluice_policies::{Diagnostics, Policy, Sink};

/// Exit 0 when the declaration is valid (warnings printed), 1 with errors.
pub(crate) fn run(args: &super::CheckArgs) -> ExitCode {
    let file = args.file.display();
    match Policy::load(&args.file) {
        Ok(loaded) => {
            eprint!("{}", Diagnostics(loaded.warnings.clone()));
            let policy = &loaded.policy;
            let egress = policy
                .secrets()
                .iter()
                .filter(|s| s.grants(Sink::Egress))
                .count();
            let redact_only = policy
                .secrets()
                .iter()
                .filter(|s| s.is_redact_only())
                .count();
            println!(
                "{file}: ok: {} secret(s) ({egress} swapped by the proxy, {redact_only} redact-only), {} intercepted host pattern(s), {} warning(s)",
                policy.secrets().len(),
                policy.intercepted_hosts().len(),
                loaded.warnings.len(),
            );
            ExitCode::SUCCESS
        }
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            eprintln!(
                "{file}: {} error(s), {} warning(s); the declaration was refused",
                diagnostics.errors().count(),
                diagnostics.warnings().count(),
            );
            ExitCode::FAILURE
        }
    }
}
