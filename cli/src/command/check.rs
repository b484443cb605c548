//! `sluice check FILE`: validates a declaration and prints every diagnostic, compiler
//! style (`file:line:col: error: ...` and a `help:` line), on stderr; then, for a valid
//! declaration, a truthful preview on stdout: each secret's effective grants in one line,
//! the hosts reachable without any secret, and what is decided only at launch. `--json`
//! prints all of it as one object, for tools.
//!
//! It reads only the declaration: no secret source is read, nothing is dialled, and no
//! value is ever printed. So the verdict does not follow this machine: whether an `env`
//! variable is set or a `file` readable here is not judged, and the preview says so.

use std::process::ExitCode;

use serde_json::{Value, json};
use sluice_policies::{Diagnostic, Diagnostics, Policy, Sink, Source};

/// Exit 0 when the declaration is valid (warnings and notes printed), 1 with errors.
pub(crate) fn run(args: &super::CheckArgs) -> ExitCode {
    let file = args.file.display().to_string();
    let loaded = Policy::load(&args.file);
    let (diagnostics, policy) = match &loaded {
        Ok(loaded) => (Diagnostics(loaded.warnings.clone()), Some(&loaded.policy)),
        Err(diagnostics) => (diagnostics.clone(), None),
    };
    if args.json {
        println!("{}", as_json(&file, &diagnostics, policy));
    } else {
        eprint!("{diagnostics}");
        match policy {
            Some(policy) => print!("{}", preview(&file, &diagnostics, policy)),
            None => eprintln!(
                "{file}: {} error(s), {} warning(s), {} note(s); the declaration was refused",
                diagnostics.errors().count(),
                diagnostics.warnings().count(),
                diagnostics.notes().count(),
            ),
        }
    }
    if policy.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The verdict line and the preview of a valid declaration, for a person.
fn preview(file: &str, diagnostics: &Diagnostics, policy: &Policy) -> String {
    let secrets = policy.secrets();
    let egress = secrets
        .iter()
        .filter(|s| s.grants(Sink::Egress) && s.signs().is_none())
        .count();
    let redact_only = secrets.iter().filter(|s| s.is_redact_only()).count();
    // A signing secret counts once, its parts (each a secret of its own) not at all.
    let signing = policy.signers().len();
    let parts = secrets.iter().filter(|s| s.signs().is_some()).count();
    let signing = if signing > 0 {
        format!(", {signing} that signs requests")
    } else {
        String::new()
    };
    let mut out = format!(
        "{file}: ok: {} secret(s) ({egress} swapped by the proxy, {redact_only} redact-only{signing}), {} intercepted host pattern(s), {} warning(s), {} note(s)\n",
        secrets.len() - parts + policy.signers().len(),
        policy.intercepted_hosts().len(),
        diagnostics.warnings().count(),
        diagnostics.notes().count(),
    );
    if !secrets.is_empty() {
        out.push_str("grants:\n");
        for decl in secrets {
            out.push_str(&format!("  {}: {}\n", decl.name(), decl.grant_line()));
        }
    }
    out.push_str(&format!(
        "reachable without a secret: {}\n",
        or_none(&unsecreted_hosts(policy).join("; "))
    ));
    let deferred: Vec<String> = secrets
        .iter()
        .filter_map(|decl| deferred(policy, decl).map(|what| format!("  {}: {what}", decl.name())))
        .collect();
    if !deferred.is_empty() {
        out.push_str(
            "decided at launch, not here (whether each source is set or readable on this machine is not judged):\n",
        );
        for line in deferred {
            out.push_str(&line);
            out.push('\n');
        }
    }
    // The reviewer's link from an audit log's `start` record back to this file.
    out.push_str(&format!(
        "policy_sha256 (as the audit log records it, literals masked): {}\n",
        policy.sha256_hex()
    ));
    out
}

/// The hosts reachable without any secret, by the list that makes them so.
fn unsecreted_hosts(policy: &Policy) -> Vec<String> {
    let list = |patterns: &[sluice_policies::HostPattern], why: &str| {
        (!patterns.is_empty()).then(|| {
            let names: Vec<String> = patterns.iter().map(ToString::to_string).collect();
            format!("{} ({why})", names.join(", "))
        })
    };
    [
        list(policy.allow(), "egress.allow"),
        list(
            policy.verbatim(),
            "egress.verbatim: placeholders pass unchanged",
        ),
        list(policy.passthrough(), "egress.passthrough: not inspected"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What a source leaves to launch, or `None` for a literal (decided here).
fn deferred(policy: &Policy, decl: &sluice_policies::SecretDecl) -> Option<String> {
    match decl.source() {
        Source::Minted => {
            let (index, _) = decl.mints()?;
            let minter = &policy.minters()[index];
            let mut line = format!(
                "minted at first use from {} ({} grant)",
                minter.token_url().host(),
                minter.grant()
            );
            if let Some(app) = minter.github() {
                let repositories = app.repositories();
                let (count, plural) = (
                    repositories.len(),
                    if repositories.len() == 1 { "y" } else { "ies" },
                );
                let permissions: Vec<String> = app
                    .permissions()
                    .iter()
                    .map(|(name, level)| format!("{name}: {level}"))
                    .collect();
                line.push_str(&format!(
                    ", narrowed to {count} repositor{plural} ({}) and {}",
                    repositories.join(", "),
                    permissions.join(", ")
                ));
            }
            Some(line)
        }
        Source::Env(variable) => Some(format!("read from the environment variable {variable}")),
        Source::File(path) => Some(format!("read from the file {}", path.display())),
        Source::Command(argv) => Some(format!(
            "printed by the command {} (run at start and at each reload)",
            argv.first().map_or("", String::as_str)
        )),
        Source::Literal(_) => None,
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "none" } else { text }
}

/// Everything, as one JSON object: `file`, `ok`, `diagnostics` (each with `severity`,
/// `code`, `line`, `column`, `path`, `message`, `help`), and for a valid declaration `secrets`
/// (each with `name`, `grants`, `sinks`, `hosts`, `in`, `header`, `source`) and
/// `reachable` (`allow`, `verbatim`, `passthrough`) and `policy_sha256` (the fingerprint the
/// audit log records).
fn as_json(file: &str, diagnostics: &Diagnostics, policy: Option<&Policy>) -> Value {
    let diagnostic = |d: &Diagnostic| {
        json!({
            "severity": d.severity().to_string(),
            "code": d.problem.code(),
            "line": d.line,
            "column": d.column,
            "path": d.path,
            "message": d.problem.to_string(),
            "help": d.problem.help(),
        })
    };
    let mut out = json!({
        "file": file,
        "ok": policy.is_some(),
        "diagnostics": diagnostics.0.iter().map(diagnostic).collect::<Vec<_>>(),
    });
    let Some(policy) = policy else {
        return out;
    };
    let names = |patterns: &[sluice_policies::HostPattern]| {
        patterns.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    let secrets: Vec<Value> = policy
        .secrets()
        .iter()
        .map(|decl| {
            let source = match decl.source() {
                Source::Env(variable) => json!({ "env": variable }),
                Source::File(path) => json!({ "file": path.display().to_string() }),
                Source::Command(argv) => json!({ "command": argv }),
                Source::Literal(_) => json!({ "literal": true }),
                Source::Minted => json!({ "minted": true }),
            };
            json!({
                "name": decl.name(),
                "grants": decl.grant_line(),
                "sinks": decl.sinks().iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                "hosts": names(decl.hosts()),
                "in": decl.locations().iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                "header": decl.header_names(),
                "source": source,
            })
        })
        .collect();
    out["secrets"] = Value::Array(secrets);
    out["policy_sha256"] = json!(policy.sha256_hex());
    out["reachable"] = json!({
        "allow": names(policy.allow()),
        "verbatim": names(policy.verbatim()),
        "passthrough": names(policy.passthrough()),
    });
    out
}
