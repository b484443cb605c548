//! `sluice run`: the launcher. See [`crate::launcher`].

use std::process::ExitCode;

use crate::launcher::{LaunchConfig, dry_run, run as launch};

use super::{RunArgs, load_policy};

/// sluice's own exit status when it cannot launch CMD, as `env` and container runtimes use
/// it: "the launcher failed, not the command".
const REFUSED: u8 = 125;

pub(crate) fn run(args: &RunArgs) -> ExitCode {
    super::init_tracing_quiet(args.proxy.log_format);
    let Some(policy) = load_policy(&args.proxy.policy) else {
        // The diagnostics are printed above it, each at its file:line:col.
        eprintln!(
            "sluice run: error[declaration]: {} does not pass `sluice check`; nothing was started",
            args.proxy.policy.display()
        );
        return ExitCode::from(REFUSED);
    };
    let upstream_proxy = match args.proxy.upstream_proxy("sluice") {
        Ok(proxy) => proxy,
        Err(why) => {
            eprintln!("sluice run: error[upstream-proxy]: {why}");
            return ExitCode::from(REFUSED);
        }
    };
    let policy_has_approvals = policy.needs_decisions();
    // Outside the jail the command runs as the same user on the same loopback: it could
    // read the admin credentials and decide its own uses.
    if args.no_jail && policy_has_approvals {
        eprintln!(
            "sluice run: error[approvals-need-the-jail]: the declaration has approve: or egress.ask, and under --no-jail the command could read the admin credentials and decide for itself; run it in the jail"
        );
        return ExitCode::from(REFUSED);
    }
    let config = LaunchConfig {
        upstream_proxy,
        policy,
        command: args.command.clone(),
        audit_log: args
            .audit_log
            .clone()
            .unwrap_or_else(|| "sluice-audit.jsonl".into()),
        audit_rotation: args.rotation.rotation(),
        upstream_ca: args.proxy.upstream_ca.clone(),
        resolve: args.proxy.pins(),
        pass_env: args.pass_env.clone(),
        clear_env: args.clear_env,
        jail: !args.no_jail,
        policy_path: args.proxy.policy.clone(),
        limits: args.limits.limits(),
        watch_files: args.watch,
        approval_webhook: args.proxy.approval_webhook.clone(),
        // Uses that wait for approval are decided on the admin endpoint: with `approve:` in
        // the declaration it is on (on loopback, a port of its own) even without --admin.
        admin: args
            .proxy
            .admin
            .or_else(|| policy_has_approvals.then(|| ([127, 0, 0, 1], 0).into()))
            .map(|addr| {
                let file = args
                    .admin_url_file
                    .clone()
                    .unwrap_or_else(|| "sluice-admin-url".into());
                (addr, file)
            }),
    };
    if args.dry_run {
        return match dry_run(&config) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("sluice run: error[{}]: {error}", error.code());
                ExitCode::from(REFUSED)
            }
        };
    }
    let Some(runtime) = super::runtime("run") else {
        return ExitCode::from(REFUSED);
    };
    match runtime.block_on(launch(config)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("sluice run: error[{}]: {error}", error.code());
            ExitCode::from(REFUSED)
        }
    }
}
