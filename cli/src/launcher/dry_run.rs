//! `sluice run --dry-run`: everything `run` decides before it starts the command, printed
//! without starting anything (no proxy, no jail, no audit log, no command).
//!
//! The same decisions `run` makes, made by the same functions in the same order: the
//! launch refusals (a sink the launcher cannot serve, a value in argv, a withheld
//! variable's value in argv), the sources read (a source that fails fails here too), the
//! inherited environment judged. Then each variable the command would get is described:
//! sluice's own (the proxy, the CA bundle), one per secret (a placeholder and its form, a
//! value handed over, or a file), the inherited ones passed and withheld (names and why);
//! the grants by sink; the jail.
//!
//! What it must never print: a value, or a placeholder (a run mints its own; the form is
//! given instead, which is all a reader can rely on).

use sluice_policies::launcher_env::{CA_BUNDLE_VARIABLES, CA_DIRECTORY_VARIABLES, PROXY_VARIABLES};
use sluice_policies::{Placeholders, Sink, placeholder_name, shape};
use sluice_proxy::StartError;

use super::environment::{environment, standard_aws_variables};
use super::refuse::{refuse_unserved, refuse_values_in_argv, refuse_withheld_in_argv};
use super::{LaunchConfig, LaunchError};

/// What `run` would do with `config`, as text for stdout; or the refusal `run` would exit
/// 125 with.
pub(crate) fn describe(config: &LaunchConfig) -> Result<String, LaunchError> {
    let Some(program) = config.command.first() else {
        return Err(LaunchError::NoCommand);
    };
    let policy = &config.policy;
    refuse_unserved(policy)?;
    // Minted as the proxy mints them at start (shaped by each value where they may be), so
    // that each form printed is the one the run's placeholder will have.
    let (placeholders, _) = policy
        .resolve_minting(&Placeholders::from_iter([]))
        .map_err(StartError::from)?;
    let guard = policy
        .build_guard(&placeholders)
        .map_err(StartError::from)?;
    refuse_values_in_argv(policy, &guard, &config.command)?;
    let (inherited, withheld) = environment(policy, &guard, &config.pass_env, config.clear_env);
    refuse_withheld_in_argv(&withheld, &config.command)?;

    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line("sluice run --dry-run: nothing was started; `sluice run` would:".into());
    line(format!(
        "  run {} with {} argument(s), argv as given",
        program.to_string_lossy(),
        config.command.len() - 1
    ));
    line(if config.jail {
        "  jail: on. The command gets a network namespace of its own where sluice is the only way out: every TCP connection is taken by sluice, DNS is answered by sluice (names no grant reaches get NXDOMAIN), the system trust store is the run bundle".into()
    } else {
        "  jail: off (--no-jail). The command runs in this machine's network with the proxy variables only; the egress policy is advisory".into()
    });
    line(format!(
        "  audit log: {}{}",
        config.audit_log.display(),
        if config.watch_files {
            "; the declaration and file sources are watched (--watch) and reloaded on change"
        } else {
            ""
        }
    ));

    line("variables sluice sets:".into());
    line(format!(
        "  {}: the proxy's URL, with credentials made at start",
        PROXY_VARIABLES
            .iter()
            .filter(|v| !v.eq_ignore_ascii_case("NO_PROXY"))
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    ));
    line("  NO_PROXY, no_proxy: empty (everything goes through sluice)".into());
    line(format!(
        "  {}: the run bundle (the run CA, then the system roots)",
        CA_BUNDLE_VARIABLES.join(", ")
    ));
    line(format!(
        "  {}: the run's hashed certificate directory",
        CA_DIRECTORY_VARIABLES.join(", ")
    ));

    line("secrets:".into());
    for decl in policy.secrets() {
        let name = decl.name();
        let variable = placeholder_name(name);
        let Some(id) = guard.id(name) else { continue };
        if !decl.in_sandbox() {
            line(format!(
                "  {name}: no variable; held by sluice for its token requests only"
            ));
            continue;
        }
        let described = if policy.may_sink(name, Sink::Command).is_ok() {
            format!("{variable}: the value itself (sink command; audited as `materialize`)")
        } else if policy.may_sink(name, Sink::File).is_ok() {
            format!(
                "{variable}: the path of a 0600 file in the run directory holding the value (sink file; audited as `materialize`)"
            )
        } else {
            let form = shape::form_of(decl, guard.placeholder(id).as_str());
            format!("{variable}: a placeholder ({form}), minted for the run")
        };
        line(format!("  {described}; {}", decl.grant_line()));
    }
    for (variable, secret) in standard_aws_variables(policy) {
        line(format!(
            "  {variable}: the placeholder of {secret}, for AWS SDKs configured by the environment"
        ));
    }

    line(format!(
        "inherited{}:",
        if config.clear_env {
            " (--clear-env: PATH, HOME, USER, LANG, LC_*, TERM, TZ, TMPDIR, SHELL and --pass-env only)"
        } else {
            ""
        }
    ));
    let mut passed: Vec<String> = inherited
        .keys()
        .filter(|key| {
            let key = key.to_string_lossy();
            !PROXY_VARIABLES.contains(&key.as_ref())
                && !CA_BUNDLE_VARIABLES.contains(&key.as_ref())
                && !CA_DIRECTORY_VARIABLES.contains(&key.as_ref())
        })
        .map(|key| key.to_string_lossy().into_owned())
        .collect();
    passed.sort();
    line(format!(
        "  passed as they are ({}): {}",
        passed.len(),
        passed.join(", ")
    ));
    for name in &config.pass_env {
        line(format!(
            "  passed on purpose (--pass-env): {}",
            name.to_string_lossy()
        ));
    }
    if withheld.is_empty() {
        line("  withheld: none".into());
    }
    for (name, why) in &withheld {
        line(format!("  withheld: {} ({why})", name.to_string_lossy()));
    }
    Ok(out)
}
