//! `sluice audit verify`, `sluice audit summary`, `sluice audit report` and `sluice audit
//! suggest`: the reviewer's commands over audit logs. They read the logs and never write
//! them.

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
            let tail = match (run.complete, run.torn) {
                (true, _) => String::new(),
                (false, Some(torn)) => format!(
                    ", but no stop record: it was killed in the middle of a write (its last line is cut short: {torn} bytes, kept in the log and named by the next run)"
                ),
                (false, None) => ", but no stop record: the run is still going, ended abruptly, or the log's tail was cut".to_owned(),
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

/// `sluice audit suggest LOG...`: a declaration patch, as YAML a person reviews before
/// merging it into the declaration: `egress.allow` entries for hosts refused as not allowed,
/// `hosts` and `in` entries for placeholders refused for a missing grant, and, as comments,
/// the grants no run used. Each entry says how many events are behind it. Every scalar is
/// written as a quoted string, so that no host or name can change the YAML's shape.
pub(crate) fn suggest(args: &super::AuditFileArgs) -> ExitCode {
    let report = match audit::report::build(&args.logs) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("sluice audit suggest: {err}");
            return ExitCode::FAILURE;
        }
    };
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let times = |count: u64| {
        if count == 1 {
            "1 refusal".to_owned()
        } else {
            format!("{count} refusals")
        }
    };
    let s = &report.suggestions;
    let mut out = format!(
        "# sluice audit suggest: from {} run(s); review each entry before merging it into the declaration.\n",
        report.totals.runs
    );
    if !s.allow.is_empty() {
        out.push_str("# Hosts refused as not allowed: reachable without a secret here, or add them to the\n# hosts of the secret they were meant for instead.\negress:\n  allow:\n");
        for host in &s.allow {
            out.push_str(&format!(
                "    - {}  # {}\n",
                quoted(&host.name),
                times(host.count)
            ));
        }
    }
    let mut secrets: std::collections::BTreeMap<&str, (Vec<String>, Vec<String>)> =
        std::collections::BTreeMap::new();
    for row in &s.hosts {
        let line = format!(
            "      - {}  # {}, toward a host no grant names",
            quoted(&row.detail),
            times(row.count)
        );
        secrets.entry(&row.name).or_default().0.push(line);
    }
    for row in &s.places {
        let line = format!(
            "      - {}  # {}, in a place the grant lacks",
            quoted(&row.detail),
            times(row.count)
        );
        secrets.entry(&row.name).or_default().1.push(line);
    }
    if !secrets.is_empty() {
        out.push_str(
            "# Placeholders refused for a missing grant: add to each secret's lists.\nsecrets:\n",
        );
        for (secret, (hosts, places)) in secrets {
            out.push_str(&format!("  {}:\n", quoted(secret)));
            if !hosts.is_empty() {
                out.push_str("    hosts:\n");
                hosts
                    .iter()
                    .for_each(|line| out.push_str(&format!("{line}\n")));
            }
            if !places.is_empty() {
                out.push_str("    in:\n");
                places
                    .iter()
                    .for_each(|line| out.push_str(&format!("{line}\n")));
            }
        }
    }
    if !s.unused.is_empty() {
        out.push_str("# Grants no run used: candidates to remove (secret: host place).\n");
        for row in &s.unused {
            out.push_str(&format!(
                "#   {}: {}\n",
                quoted(&row.name),
                quoted(&row.detail)
            ));
        }
    }
    if s.allow.is_empty() && secrets_empty(s) && s.unused.is_empty() {
        out.push_str(
            "# Nothing to suggest: no refusal for want of a grant, and every grant was used.\n",
        );
    }
    if let Err(err) = std::io::stdout().lock().write_all(out.as_bytes()) {
        eprintln!("sluice audit suggest: {err}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn secrets_empty(s: &audit::report::Suggestions) -> bool {
    s.hosts.is_empty() && s.places.is_empty()
}
