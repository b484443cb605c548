//! `sluice serve`: the proxy alone, for sandboxes on a network.
//!
//! Writes what a sandbox needs into the run directory (created 0700): `ca.pem`, `proxy-url`
//! (0600: it holds the run's proxy token), `placeholders.env`, and `audit.jsonl` unless
//! `--audit-log` says elsewhere. Prints the proxy URL without its token (and, with
//! `--transparent`, the capture address). Runs until SIGTERM or SIGINT, then drains, flushes
//! the audit log and exits 0.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::process::ExitCode;

use sluice_proxy::{ProxyConfig, default_workers, start};

use super::{ServeArgs, load_policy};

pub(crate) fn run(args: &ServeArgs) -> ExitCode {
    super::init_tracing_as(args.proxy.log_format);
    // Before anything can fail: a sandbox waiting for `proxy-url` must never find the one
    // a previous run left (see `write_run_files`), nor `sluice approve` the previous run's
    // admin URL (its credentials would go to whatever listens on that port now).
    for stale in ["proxy-url", "admin-url"] {
        let _ = fs::remove_file(args.run_dir.join(stale));
    }
    let Some(policy) = load_policy(&args.proxy.policy) else {
        return ExitCode::FAILURE;
    };
    if !unserved_said(&policy, args.proxy.admin) {
        return ExitCode::FAILURE;
    }
    if args.proxy.admin.is_none() && policy.needs_decisions() {
        eprintln!("sluice serve: error: {NO_APPROVER}");
        return ExitCode::FAILURE;
    }
    if let Err(error) = prepare_run_dir(&args.run_dir) {
        eprintln!(
            "sluice serve: run directory {}: {error}",
            args.run_dir.display()
        );
        return ExitCode::FAILURE;
    }
    let audit_log = args
        .audit_log
        .clone()
        .unwrap_or_else(|| args.run_dir.join("audit.jsonl"));
    let mut config = ProxyConfig::new(policy, args.listen, audit_log);
    config.audit_rotation = args.rotation.rotation();
    config.upstream_ca = args.proxy.upstream_ca.clone();
    config.workers = default_workers();
    config.resolve = args.proxy.pins();
    config.policy_path = Some(args.proxy.policy.clone());
    config.admin = args.proxy.admin;
    config
        .approval_webhook
        .clone_from(&args.proxy.approval_webhook);
    config.upstream_proxy = match args.proxy.upstream_proxy("sluice serve") {
        Ok(proxy) => proxy,
        Err(why) => {
            eprintln!("sluice serve: error: {why}");
            return ExitCode::FAILURE;
        }
    };
    // A reload may not bring a secret nothing would serve, as the start may not.
    if args.proxy.admin.is_none() {
        config.reload_gate = Some(std::sync::Arc::new(|next: &sluice_policies::Policy| {
            let unserved = next.unserved(&[sluice_policies::Sink::Egress]);
            if !unserved.is_empty() {
                Err(unserved_refusal(&unserved))
            } else if next.needs_decisions() {
                Err(NO_APPROVER.to_owned())
            } else {
                Ok(())
            }
        }));
    }
    config.limits = args.limits.limits();
    config.watch_files = !args.no_watch;
    if let Some(address) = args.transparent {
        match std::net::TcpListener::bind(address) {
            Ok(listener) => config.transparent = Some(listener),
            Err(error) => {
                eprintln!("sluice serve: --transparent {address}: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    let Some(runtime) = super::runtime("serve") else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(async {
        let proxy = match start(config).await {
            Ok(proxy) => proxy,
            Err(error) => {
                eprintln!("sluice serve: {error}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(error) = write_run_files(&args.run_dir, &proxy, args.advertise.as_deref()) {
            eprintln!("sluice serve: writing {}: {error}", args.run_dir.display());
            let _ = proxy.shutdown().await;
            return ExitCode::FAILURE;
        }
        println!("{}", proxy.proxy_url_without_token());
        if let Some(address) = proxy.transparent_addr() {
            println!("transparent capture on {address}");
        }
        if let Some(address) = proxy.admin_addr() {
            println!(
                "admin endpoint on http://{}@{address} (credentials in admin-url)",
                sluice_proxy::ADMIN_USER
            );
        }
        serve_until_signalled(&proxy, &args.run_dir).await;
        tracing::info!("signal received: draining");
        match proxy.shutdown().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("sluice serve: closing the audit log: {error}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Why a declaration with `approve:` needs `--admin`: decisions are made there, and
/// without it every such use would wait until it timed out.
const NO_APPROVER: &str = "a secret has approve: (or egress.ask lists a host), and what waits is decided on the admin endpoint; start with --admin ADDR (then `sluice approve --run-dir DIR` decides)";

/// Secrets granted only sinks this proxy does not serve (it swaps `egress`; `command` and
/// `file` are a launcher's, `prompt`, `agent` and `params` a host engine's): with an admin
/// endpoint, a host engine reads their placeholders there (`GET /v1/secrets`) and redacts
/// with the guard (`POST /v1/redact`), so each is named with the endpoint (a warning);
/// without one nothing would ever serve them, so the start is refused, naming each. `false`
/// when refused.
fn unserved_said(policy: &sluice_policies::Policy, admin: Option<std::net::SocketAddr>) -> bool {
    let unserved = policy.unserved(&[sluice_policies::Sink::Egress]);
    match admin {
        _ if unserved.is_empty() => true,
        Some(addr) => {
            for secret in &unserved {
                eprintln!(
                    "sluice serve: warning: {secret}, which this proxy does not serve (it swaps egress only); a host engine serves it from the admin endpoint at {addr} (GET /v1/secrets, POST /v1/redact)"
                );
            }
            true
        }
        None => {
            eprintln!("sluice serve: error: {}", unserved_refusal(&unserved));
            false
        }
    }
}

fn prepare_run_dir(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // An existing directory keeps its mode on create; make it private either way.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// The run files, `proxy-url` last and renamed into place: a sandbox (or a restarted
/// one) that waits for `proxy-url` then finds this run's CA and placeholders beside it,
/// never the previous run's.
fn write_run_files(
    dir: &Path,
    proxy: &sluice_proxy::Proxy,
    advertise: Option<&str>,
) -> std::io::Result<()> {
    let _ = fs::remove_file(dir.join("proxy-url"));
    write_file(&dir.join("ca.pem"), proxy.ca_pem().as_bytes(), 0o644)?;
    if let Some(url) = proxy.admin_url() {
        crate::files::replace(&dir.join("admin-url"), format!("{url}\n").as_bytes(), 0o600)?;
    }
    write_placeholders(dir, proxy)?;
    // A listener on 0.0.0.0 or :: cannot be dialled as written: the address a sandbox
    // should dial instead.
    let listening = proxy.local_addr().ip();
    let mut url = match advertise {
        Some(host) => proxy.proxy_url_for(host),
        None if listening.is_unspecified() && listening.is_ipv6() => proxy.proxy_url_for("::1"),
        None if listening.is_unspecified() => proxy.proxy_url_for("127.0.0.1"),
        None => proxy.proxy_url(),
    };
    url.push('\n');
    crate::files::replace(&dir.join("proxy-url"), url.as_bytes(), 0o600)
}

/// `placeholders.env`, afresh: at start, and after each reload (new secrets' placeholders).
/// Written beside and renamed into place, so that a sandbox reading it never sees it
/// missing or half written.
fn write_placeholders(dir: &Path, proxy: &sluice_proxy::Proxy) -> std::io::Result<()> {
    let path = dir.join("placeholders.env");
    crate::files::replace(&path, placeholders_env(proxy).as_bytes(), 0o644)
}

/// `NAME=PLACEHOLDER` lines, NAME being the secret's name uppercased with any character
/// outside `[A-Za-z0-9_]` turned into `_`: the variable the launcher sets (none for a key
/// only sluice uses, as the launcher sets none).
fn placeholders_env(proxy: &sluice_proxy::Proxy) -> String {
    let policy = proxy.policy();
    let in_sandbox = |secret: &str| policy.secret(secret).is_none_or(|decl| decl.in_sandbox());
    proxy
        .placeholders()
        .iter()
        .filter(|(secret, _)| in_sandbox(secret))
        .map(|(secret, placeholder)| {
            format!(
                "{}={placeholder}\n",
                sluice_policies::placeholder_name(secret)
            )
        })
        .collect()
}

/// Writes a file of the run directory afresh (a file left by an earlier run is replaced),
/// created with `mode` from the start.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let _ = fs::remove_file(path);
    crate::files::write_new(path, contents, mode)
}

/// Serves until SIGTERM or SIGINT; each SIGHUP reloads the declaration (the run
/// directory's `placeholders.env` then follows it).
async fn serve_until_signalled(proxy: &sluice_proxy::Proxy, run_dir: &Path) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        // Without signal handlers the only stop is Ctrl-C's default: wait forever.
        std::future::pending::<()>().await;
        return;
    };
    let mut generations = proxy.generations();
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => {
                // The outcome is audited and logged by the reload itself.
                let _ = proxy.reload().await;
            }
            changed = generations.changed() => {
                if changed.is_err() {
                    return;
                }
                // A new secret's placeholder, whichever way the reload was asked for.
                if let Err(error) = write_placeholders(run_dir, proxy) {
                    tracing::error!(%error, "rewriting placeholders.env after a reload failed");
                }
            }
        }
    }
}

/// Why a declaration with secrets only a launcher or a host engine serves is refused here
/// (at start, or at a reload), naming each.
fn unserved_refusal(unserved: &[String]) -> String {
    format!(
        "{}: this proxy swaps egress only, and no admin endpoint is on for a host engine to serve them; grant egress, write `sinks: []` for redact-only, run the command under `sluice run` (command, file), or start with --admin ADDR for a host engine",
        unserved.join("; ")
    )
}
