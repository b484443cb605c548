//! `sluice audit verify` and `sluice audit summary`: the reviewer's two commands over an
//! audit log. They read the log and never write it.

use std::process::ExitCode;

use sluice_proxy::audit;

/// `sluice audit verify FILE`: one verdict line; exit 0 when the chain holds, 1 naming
/// the first broken line and why (or when the file cannot be read).
pub(crate) fn verify(args: &super::AuditFileArgs) -> ExitCode {
    match audit::verify(&args.file) {
        Ok(verified) => {
            let tail = if verified.complete {
                ""
            } else {
                ", but no stop record: the run is still going, ended abruptly, or the log's tail was cut"
            };
            println!(
                "ok: {} events, run {}, chain intact, head sha256:{}{tail}",
                verified.lines, verified.run_id, verified.head
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("broken: {}: {err}", args.file.display());
            ExitCode::FAILURE
        }
    }
}

/// `sluice audit summary FILE [--json]`: the per-secret, per-host table (or JSON) of a
/// log whose chain holds; exit 1 without a table when it does not.
pub(crate) fn summary(args: &super::AuditSummaryArgs) -> ExitCode {
    let summary = match audit::summarize(&args.file) {
        Ok(summary) => summary,
        Err(err) => {
            eprintln!(
                "sluice audit summary: {}: {err}; not summarised (run `sluice audit verify`)",
                args.file.display()
            );
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&summary) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("sluice audit summary: cannot write JSON: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", summary.to_table());
    }
    ExitCode::SUCCESS
}
