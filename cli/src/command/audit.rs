//! `sluice audit verify`, `sluice audit summary` and `sluice audit report`: the reviewer's
//! commands over audit logs. They read the logs and never write them.

use std::io::Write as _;
use std::process::ExitCode;

use sluice_audit as audit;

/// `sluice audit verify LOG...`: one verdict line per run and per log; exit 0 when every
/// chain holds, 1 naming the first broken line (or the missing segment) of each broken
/// log, or when a file cannot be read.
pub(crate) fn verify(args: &super::AuditFileArgs) -> ExitCode {
    let logs = match audit::verify_logs(&args.logs) {
        Ok(logs) => logs,
        Err(err) => {
            eprintln!("broken: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut intact = true;
    for log in &logs {
        if let Some(broken) = &log.broken {
            // No `ok:` for a log that does not verify, not even for its runs before the break.
            intact = false;
            eprintln!("broken: {broken}");
            continue;
        }
        for run in &log.runs {
            let tail = if run.complete {
                ""
            } else {
                ", but no stop record: the run is still going, ended abruptly, or the log's tail was cut"
            };
            let segments = if run.segments > 1 {
                format!(" in {} segments", run.segments)
            } else {
                String::new()
            };
            println!(
                "ok: {} events{segments}, run {}, chain intact, head sha256:{}{tail}",
                run.lines, run.run_id, run.head
            );
        }
    }
    if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `sluice audit summary LOG... [--json]`: the per-secret, per-host table (or JSON) of logs
/// whose chains hold; exit 1 without a table when one does not.
pub(crate) fn summary(args: &super::AuditSummaryArgs) -> ExitCode {
    let summary = match audit::summarize(&args.logs) {
        Ok(summary) => summary,
        Err(err) => {
            eprintln!(
                "sluice audit summary: {err}; not summarised (run `sluice audit verify`, or `sluice audit report` for what the log holds up to the break)"
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

/// `sluice audit report LOG... [-o FILE] [--json]`: the reviewers' page (or its
/// aggregates as JSON). A broken chain is reported on the page, not refused: exit 0 when
/// the page was written and every chain holds, 1 otherwise (the page is still written).
pub(crate) fn report(args: &super::AuditReportArgs) -> ExitCode {
    let report = match audit::report::build(&args.logs) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("sluice audit report: {err}");
            return ExitCode::FAILURE;
        }
    };
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(err) => {
                eprintln!("sluice audit report: cannot write JSON: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match report.to_html() {
            Ok(html) => html,
            Err(err) => {
                eprintln!("sluice audit report: cannot render the page: {err}");
                return ExitCode::FAILURE;
            }
        }
    };
    let written = match &args.output {
        Some(path) => std::fs::write(path, text.as_bytes()),
        None => std::io::stdout().lock().write_all(text.as_bytes()),
    };
    if let Err(err) = written {
        let target = args
            .output
            .as_ref()
            .map_or_else(|| "stdout".to_owned(), |p| p.display().to_string());
        eprintln!("sluice audit report: cannot write {target}: {err}");
        return ExitCode::FAILURE;
    }
    if report.intact() {
        ExitCode::SUCCESS
    } else {
        eprintln!("sluice audit report: a chain is broken; the page says where");
        ExitCode::FAILURE
    }
}
