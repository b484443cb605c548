//! What the run says about itself to the proxy it starts: the `start` event's settings (how
//! the run was started, for a reviewer), and the gate a reloaded declaration must pass (what
//! the running command could never be given).

use std::collections::BTreeMap;

use std::os::unix::ffi::OsStrExt;

use sluice_policies::credentials::credential_shape;
use sluice_policies::{Policy, Sink};

use super::LaunchConfig;

/// What a reload under `sluice run --watch` (or `POST /reload`) may not ask for: a sink the
/// launcher never serves (`prompt`, `agent`, `params` alone), or a `command` or `file` grant
/// the command did not get at start (its environment and files were made then; a grant
/// added later would be a grant in the declaration that nothing serves), or an `approve:`
/// when the run has no admin endpoint to decide on (`admin`). Refused like any
/// bad reload: the generation in force stays, and the `reload` event says why.
pub(super) fn reload_gate(started: &Policy, admin: bool) -> sluice_proxy::ReloadGate {
    let handed: BTreeMap<String, (bool, bool)> = started
        .secrets()
        .iter()
        .map(|decl| {
            let name = decl.name();
            let command = started.may_sink(name, Sink::Command).is_ok();
            let file = started.may_sink(name, Sink::File).is_ok();
            (name.to_owned(), (command, file))
        })
        .collect();
    std::sync::Arc::new(move |next: &Policy| {
        let mut problems: Vec<String> = next
            .unserved(&Sink::LAUNCHER)
            .into_iter()
            .map(|secret| format!("{secret}, which `sluice run` never serves"))
            .collect();
        // (A secret the launcher never serves has neither `command` nor `file`.)
        for decl in next.secrets() {
            let name = decl.name();
            let (had_command, had_file) = handed.get(name).copied().unwrap_or_default();
            for (sink, had) in [(Sink::Command, had_command), (Sink::File, had_file)] {
                if !had && next.may_sink(name, sink).is_ok() {
                    problems.push(format!(
                        "secret {name} is newly granted {}, which the command could only get when it started",
                        sink.as_str()
                    ));
                }
            }
        }
        // Decisions are made on the admin endpoint: without one, a use would only time out.
        if !admin && next.needs_decisions() {
            problems.push(
                "a secret has approve: (or egress.ask lists a host), and this run has no admin endpoint to decide on".to_owned(),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: restart `sluice run` to give the command these",
                problems.join("; ")
            ))
        }
    })
}

/// How this run was started, for the `start` audit event: every setting that widens or
/// narrows what the command gets (the jail, `--pass-env`, `--clear-env`, `--resolve`,
/// `--upstream-ca`, `--watch`, `--admin`) and the command's argv (which held no known value
/// and no withheld one, or the launch was refused; an argument with a credential's shape is
/// elided). Only what was set is written; the jail
/// always.
pub(super) fn start_settings(config: &LaunchConfig) -> BTreeMap<String, String> {
    let mut settings = BTreeMap::new();
    let jail = if config.jail {
        "on"
    } else {
        "off (--no-jail): the egress policy was advisory"
    };
    settings.insert("jail".to_owned(), jail.to_owned());
    let joined = |items: Vec<String>| items.join(", ");
    if !config.pass_env.is_empty() {
        let names = config
            .pass_env
            .iter()
            .map(|n| n.to_string_lossy().into_owned());
        settings.insert("pass_env".to_owned(), joined(names.collect()));
    }
    if config.clear_env {
        settings.insert("clear_env".to_owned(), "on".to_owned());
    }
    if !config.resolve.is_empty() {
        let pins = config
            .resolve
            .iter()
            .map(|(host, ip)| format!("{host}={ip}"));
        settings.insert("resolve".to_owned(), joined(pins.collect()));
    }
    if !config.upstream_ca.is_empty() {
        let files = config.upstream_ca.iter().map(|p| p.display().to_string());
        settings.insert("upstream_ca".to_owned(), joined(files.collect()));
    }
    if config.watch_files {
        settings.insert("watch".to_owned(), "on".to_owned());
    }
    if let Some((addr, _)) = &config.admin {
        settings.insert("admin".to_owned(), addr.to_string());
    }
    if let Some(proxy) = &config.upstream_proxy {
        settings.insert("upstream_proxy".to_owned(), proxy.describe());
    }
    let argv: Vec<String> = config
        .command
        .iter()
        .map(|arg| {
            // A known or withheld value in argv refused the launch already; a credential the
            // operator typed as it is, which no declaration names, is elided here: the log
            // never holds a credential's shape either.
            if credential_shape(arg.as_bytes()).is_some() {
                return "<elided: looks like a credential>".to_owned();
            }
            let arg = arg.to_string_lossy();
            if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{}'", arg.replace('\'', "'\\''"))
            } else {
                arg.into_owned()
            }
        })
        .collect();
    settings.insert("argv".to_owned(), argv.join(" "));
    settings
}
