//! The launcher: `sluice run -- CMD`. Starts the proxy on an ephemeral loopback port, runs
//! CMD with the proxy and CA-trust variables set and its secrets as placeholders, redacts
//! CMD's stdout and stderr through the same guard the proxy uses, and exits with CMD's
//! status.
//!
//! What it must never do: hand CMD a real value it was not granted (`command` puts a value
//! in CMD's environment, `file` in a 0600 file; everything else gets the placeholder, and
//! every inherited variable holding a known value is redacted), expand or re-quote CMD's
//! argv, or leave the run directory behind.

mod child;
mod dry_run;
mod environment;
pub(crate) mod jail;
mod output;
mod recorded;
mod refuse;
pub(crate) mod terminal;
mod trust;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use sluice_guard::Guard;
use sluice_policies::launcher_env::PROXY_VARIABLES;
use sluice_policies::{Policy, Sink, placeholder_name};

use sluice_proxy::{Proxy, ProxyConfig, StartError, start};

use child::{Launched, Spawned, What};
pub(crate) use dry_run::describe as dry_run;
use environment::{environment, say_withheld};
use jail::{Inside, Jail, Launch, Line};
use recorded::{reload_gate, start_settings};
use refuse::{refuse_unserved, refuse_values_in_argv, refuse_withheld_in_argv};
use trust::Trust;

/// Signals passed on to the child. SIGINT is not among them: from a terminal it already
/// reaches the child, which shares sluice's process group, and a second copy would make
/// many programs abandon their clean-up.
const FORWARDED: [tokio::signal::unix::SignalKind; 5] = [
    tokio::signal::unix::SignalKind::terminate(),
    tokio::signal::unix::SignalKind::hangup(),
    tokio::signal::unix::SignalKind::quit(),
    tokio::signal::unix::SignalKind::user_defined1(),
    tokio::signal::unix::SignalKind::user_defined2(),
];

/// What to launch, and how.
pub(crate) struct LaunchConfig {
    /// The organisation's egress proxy, read from sluice's own environment or
    /// `--upstream-proxy` before the command's is set.
    pub upstream_proxy: Option<sluice_proxy::UpstreamProxy>,
    /// The compiled declaration.
    pub policy: Policy,
    /// CMD and its arguments, passed as given.
    pub command: Vec<OsString>,
    /// Where the audit log goes.
    pub audit_log: PathBuf,
    /// When it rotates (`--audit-max-bytes`, `--audit-max-age`).
    pub audit_rotation: sluice_audit::Rotation,
    /// Extra upstream roots (`--upstream-ca`).
    pub upstream_ca: Vec<PathBuf>,
    /// Host pins (`--resolve`).
    pub resolve: Vec<(String, std::net::IpAddr)>,
    /// Variables passed unchanged on purpose, though they look like credentials
    /// (`--pass-env`).
    pub pass_env: Vec<OsString>,
    /// Run CMD in the jail (network, mount and user namespaces of its own, sluice the only
    /// way out); `--no-jail` turns it off.
    pub jail: bool,
    /// Pass only [`environment::CLEAR_ENV_ALLOWLIST`] (and `--pass-env`) of the inherited environment
    /// (`--clear-env`).
    pub clear_env: bool,
    /// The declaration's file, which `POST /reload` reads again.
    pub policy_path: PathBuf,
    /// The proxy's limits (`--max-connections` and the rest).
    pub limits: sluice_proxy::Limits,
    /// Reload when the declaration or a `file` source changes (`--watch`; off by default).
    pub watch_files: bool,
    /// The admin endpoint's address, and the file its URL and credentials go to (`--admin`,
    /// `--admin-url-file`): outside the run's directory, which the command reads.
    pub admin: Option<(SocketAddr, PathBuf)>,
    /// Where waiting uses are POSTed (`--approval-webhook`).
    pub approval_webhook: Option<sluice_proxy::Webhook>,
}

/// Why a launch failed before or around CMD. Names the part; never a value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    /// No command was given.
    #[error("no command to run: give one after `--`, e.g. sluice run --policy p.yaml -- my-agent")]
    NoCommand,
    /// The proxy did not start.
    #[error("{0}")]
    Start(#[from] StartError),
    /// The private run directory could not be made or written.
    #[error("run directory: {0}")]
    RunDir(std::io::Error),
    /// A granted value cannot be put in an environment variable.
    #[error(
        "secret {secret} is granted the command sink but its value holds a NUL byte, which no environment variable can carry; grant it `file` instead"
    )]
    NulInValue {
        /// The secret.
        secret: String,
    },
    /// Secrets whose sinks this launcher cannot serve: their placeholders would resolve
    /// nowhere.
    #[error(
        "{secrets}: `sluice run` serves egress, command and file only; grant one of them, write `sinks: []` for redact-only, or serve the secret from a host engine (sluice serve with an admin endpoint)"
    )]
    Unserved {
        /// Each such secret and the sinks it asked for, as a sentence.
        secrets: String,
    },
    /// An argument of CMD holds a real value: the operator's shell expanded it before
    /// sluice saw it, and CMD could print it past the output redaction.
    #[error(
        "{arguments}: the shell expanded the variable before sluice saw it; quote it in single quotes (e.g. '$GITHUB_TOKEN') so the command expands its own placeholder, or grant the secret the command sink; argv is passed verbatim, never rewritten"
    )]
    ValueInArgv {
        /// Each such argument's index (the program is 0) and secret, as a sentence.
        arguments: String,
    },
    /// An argument of CMD holds the value of a variable withheld from CMD's environment: the
    /// operator's shell expanded it, and CMD would get in argv what its environment lacks.
    #[error(
        "{arguments}: the shell expanded the variable before sluice saw it; quote it in single quotes (e.g. '$OPENAI_API_KEY'), declare it as a secret so the command gets a placeholder, or pass it on purpose with --pass-env NAME"
    )]
    WithheldInArgv {
        /// Each such argument's index (the program is 0) and variable, as a sentence.
        arguments: String,
    },
    /// The jail could not be made: the command does not run outside it unasked.
    #[error(
        "cannot make the jail: {why}; run with --no-jail to run the command in this machine's network instead (the egress policy is then advisory)"
    )]
    Jail {
        /// What failed (no value is ever in it).
        why: String,
    },
    /// CMD could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program, as given.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for CMD failed.
    #[error("waiting for the command: {0}")]
    Wait(std::io::Error),
}

impl LaunchError {
    /// The stable code its stderr line carries (`sluice run: error[CODE]: ...`), so that a
    /// wrapper tells a refused launch from CMD's own failure (docs/launcher.md lists them).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            LaunchError::NoCommand => "no-command",
            LaunchError::Start(_) => "proxy-not-started",
            LaunchError::RunDir(_) => "run-dir",
            LaunchError::NulInValue { .. } => "value-not-in-env",
            LaunchError::Unserved { .. } => "sink-not-served",
            LaunchError::ValueInArgv { .. } => "value-in-argv",
            LaunchError::WithheldInArgv { .. } => "withheld-value-in-argv",
            LaunchError::Jail { .. } => "jail-unavailable",
            LaunchError::Spawn { .. } => "command-not-started",
            LaunchError::Wait(_) => "command-lost",
        }
    }
}

/// Runs CMD under sluice and returns the exit code sluice should exit with: CMD's own, or
/// 128 + the signal that ended it.
pub(crate) async fn run(config: LaunchConfig) -> Result<u8, LaunchError> {
    let Some((program, args)) = config.command.split_first() else {
        return Err(LaunchError::NoCommand);
    };
    refuse_unserved(&config.policy)?;
    // What the command will not get, decided before the proxy starts so that its `start`
    // event can list it; on the secrets' values, without the run's placeholders.
    let probe = config
        .policy
        .build_guard(&config.policy.mint_placeholders())
        .map_err(StartError::from)?;
    refuse_values_in_argv(&config.policy, &probe, &config.command)?;
    let (_, withheld) = environment(&config.policy, &probe, &config.pass_env, config.clear_env);
    drop(probe);
    refuse_withheld_in_argv(&withheld, &config.command)?;
    close_own_memory(config.jail);
    let run_dir = tempfile::Builder::new()
        .prefix("sluice-run-")
        .tempdir()
        .map_err(LaunchError::RunDir)?;
    // A previous run's admin URL goes before anything can fail: `sluice approve` started
    // now must not send its credentials to whatever listens on that port.
    if let Some((_, file)) = &config.admin {
        let _ = std::fs::remove_file(file);
    }
    let listen: SocketAddr = ([127, 0, 0, 1], 0).into();
    let settings = start_settings(&config);
    let gate = reload_gate(&config.policy, config.admin.is_some());
    let approvals = config.policy.needs_decisions();
    let mut proxy_config = ProxyConfig::new(config.policy, listen, config.audit_log);
    proxy_config.start_settings = settings;
    proxy_config.reload_gate = Some(gate);
    proxy_config.upstream_proxy = config.upstream_proxy;
    proxy_config.withheld_env = withheld
        .iter()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    proxy_config.audit_rotation = config.audit_rotation;
    proxy_config.upstream_ca = config.upstream_ca;
    proxy_config.workers = sluice_proxy::default_workers();
    proxy_config.resolve = config.resolve;
    proxy_config.policy_path = Some(config.policy_path);
    proxy_config.limits = config.limits;
    proxy_config.watch_files = config.watch_files;
    proxy_config.admin = config.admin.as_ref().map(|(addr, _)| *addr);
    proxy_config
        .approval_webhook
        .clone_from(&config.approval_webhook);
    // In the jail the helper starts first, with CMD's streams: it makes the sockets the
    // proxy serves inside, then waits for what to run.
    let jailed = if config.jail {
        let (helper, line, inside) = enter_jail(run_dir.path()).await?;
        proxy_config.listener = Some(inside.proxy);
        proxy_config.transparent = Some(inside.capture);
        proxy_config.dns = Some(inside.dns);
        Some((helper, line))
    } else {
        eprintln!(
            "sluice: --no-jail: the command runs in this machine's network; the egress policy is advisory (a client that ignores the proxy variables goes around sluice)"
        );
        None
    };
    let proxy = match start(proxy_config).await {
        Ok(proxy) => proxy,
        Err(error) => {
            if let Some((helper, _)) = jailed {
                helper.abandon().await;
            }
            return Err(error.into());
        }
    };
    if let Err(error) = write_admin_url(&proxy, config.admin.as_ref(), approvals) {
        if let Some((helper, _)) = jailed {
            helper.abandon().await;
        }
        let _ = proxy.shutdown().await;
        return Err(error);
    }
    // Caught before the command exists: a signal that arrives as soon as it runs (it may
    // print "ready" first) is held and passed on, never sluice's death by default action.
    let caught = CaughtSignals::now();
    // One generation's declaration and guard: the environment is built from both.
    let (policy, guard) = proxy.policy_and_guard();
    let started = match child_env(
        &proxy,
        &policy,
        &guard,
        run_dir.path(),
        &config.pass_env,
        config.clear_env,
    ) {
        Ok(env) => start_command(program, args, &env, jailed, run_dir.path()).await,
        Err(error) => {
            if let Some((helper, _)) = jailed {
                helper.abandon().await;
            }
            Err(error)
        }
    };
    let launched = started.and_then(|spawned| {
        spawned
            .pump(&proxy.guard_in_force(), &proxy.audit_log())
            .map_err(|source| LaunchError::Spawn {
                program: program.to_string_lossy().into_owned(),
                source,
            })
    });
    let Launched {
        mut child,
        outputs,
        tasks,
        raw,
    } = match launched {
        Ok(launched) => launched,
        Err(error) => {
            let _ = proxy.shutdown().await;
            return Err(error);
        }
    };
    let forwarding = forward_signals(caught, child.id(), raw.is_some());
    let status = child.wait().await.map_err(LaunchError::Wait);
    for task in forwarding.into_iter().chain(tasks) {
        task.abort();
    }
    // Each stream audits its redactions as they accrue, the last of them once it ends.
    for (_, pump) in outputs {
        let _ = pump.await;
    }
    // The operator's terminal is theirs again once the last output is written.
    drop(raw);
    if let Err(error) = proxy.shutdown().await {
        tracing::error!(%error, "closing the audit log failed");
    }
    drop(run_dir);
    let status = status?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(0)),
        (None, None) => 1,
    })
}

/// Starts the jail's helper and waits for the jail: its sockets, or the typed refusal.
async fn enter_jail(run_dir: &Path) -> Result<(Spawned, Line, Inside), LaunchError> {
    let jail = Jail::prepare(run_dir).map_err(LaunchError::RunDir)?;
    let helper = child::spawn(What::JailHelper {
        args: jail.helper_args(),
    })
    .map_err(|source| LaunchError::Spawn {
        program: "the jail helper".into(),
        source,
    })?;
    match tokio::task::spawn_blocking(move || jail.inside()).await {
        Ok(Ok((line, inside))) => Ok((helper, line, inside)),
        Ok(Err(why)) => {
            helper.abandon().await;
            Err(LaunchError::Jail { why })
        }
        Err(error) => {
            helper.abandon().await;
            Err(LaunchError::Jail {
                why: error.to_string(),
            })
        }
    }
}

/// Starts CMD: told to the jail's helper (with the trust store and resolver to bind inside),
/// or spawned directly.
async fn start_command(
    program: &OsString,
    args: &[OsString],
    env: &BTreeMap<OsString, OsString>,
    jailed: Option<(Spawned, Line)>,
    run_dir: &Path,
) -> Result<Spawned, LaunchError> {
    let spawn_error = |source| LaunchError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    };
    let Some((helper, line)) = jailed else {
        return child::spawn(What::Command { program, args, env }).map_err(spawn_error);
    };
    let resolv = run_dir.join("resolv.conf");
    if let Err(error) = crate::files::write_new(&resolv, b"nameserver 127.0.0.1\n", 0o644) {
        helper.abandon().await;
        return Err(LaunchError::RunDir(error));
    }
    let mut binds: Vec<(PathBuf, PathBuf)> = trust::SYSTEM_BUNDLES
        .iter()
        .map(|system| (trust::bundle_path(run_dir), PathBuf::from(system)))
        .collect();
    binds.push((resolv, PathBuf::from("/etc/resolv.conf")));
    // Mono's TLS looks its roots up in a hashed directory of its own: the run's.
    binds.extend(
        trust::mono_hashed_stores()
            .into_iter()
            .map(|target| (trust::directory_path(run_dir), target)),
    );
    // The JDK reads neither the CA variables nor PEM: its `cacerts` becomes the run's.
    let jvm_stores = trust::jvm_stores();
    if !jvm_stores.is_empty() {
        match trust::write_jvm_store(run_dir) {
            Ok(store) => binds.extend(jvm_stores.into_iter().map(|target| (store.clone(), target))),
            Err(error) => {
                helper.abandon().await;
                return Err(LaunchError::RunDir(error));
            }
        }
    }
    let launch = Launch {
        argv: std::iter::once(program)
            .chain(args)
            .map(|arg| arg.as_bytes().to_vec())
            .collect(),
        env: env
            .iter()
            .map(|(key, value)| (key.as_bytes().to_vec(), value.as_bytes().to_vec()))
            .collect(),
        binds,
        terminal: child::in_terminal(),
    };
    let outcome = tokio::task::spawn_blocking(move || line.launch(&launch))
        .await
        .unwrap_or_else(|error| Err(error.to_string()));
    match outcome {
        Ok(()) => Ok(helper),
        Err(why) => {
            helper.abandon().await;
            Err(spawn_error(std::io::Error::other(why)))
        }
    }
}

/// Makes sluice non-dumpable: the command runs as sluice's own user, and could otherwise read
/// sluice's initial environment block and memory (`/proc/PPID/environ`, `/proc/PPID/mem`,
/// ptrace, a core dump), and the real values in them. In the jail sluice's processes are not
/// in the command's PID namespace at all, and its user namespace has no power over sluice's;
/// outside it, a command running as root keeps that power, which is said at start.
fn close_own_memory(jail: bool) {
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("sluice: cannot make sluice's memory unreadable to the command: {error}");
    }
    if !jail && nix::unistd::geteuid().is_root() {
        eprintln!(
            "sluice: --no-jail as root: the command also runs as root, in sluice's namespaces, and can read sluice's memory and the secrets in it; run it in the jail, or sluice as an unprivileged user"
        );
    }
}

/// The child's environment: the parent's, each value that holds a known secret redacted and
/// each undeclared credential-shaped variable withheld (named on stderr); then the proxy,
/// the CA bundle, and one variable per secret.
fn child_env(
    proxy: &Proxy,
    policy: &Policy,
    guard: &Guard,
    run_dir: &Path,
    pass_env: &[OsString],
    clear_env: bool,
) -> Result<BTreeMap<OsString, OsString>, LaunchError> {
    let (mut env, withheld) = environment(policy, guard, pass_env, clear_env);
    let proxy_url = OsString::from(proxy.proxy_url());
    for name in PROXY_VARIABLES {
        let value = if name.eq_ignore_ascii_case("NO_PROXY") {
            OsString::new()
        } else {
            proxy_url.clone()
        };
        env.insert(name.into(), value);
    }
    let trust = Trust::write(run_dir, &proxy.ca_pem(), &proxy.ca_subject_hash())
        .map_err(LaunchError::RunDir)?;
    for (name, path) in trust.variables() {
        env.insert(name.into(), path.as_os_str().to_owned());
    }
    for decl in policy.secrets().iter().filter(|decl| decl.in_sandbox()) {
        let name = decl.name();
        let Some(id) = guard.id(name) else {
            continue;
        };
        let variable = OsString::from(placeholder_name(name));
        let value = if policy.may_sink(name, Sink::Command).is_ok() {
            let bytes = guard.value(id).expose();
            if bytes.contains(&0) {
                return Err(LaunchError::NulInValue {
                    secret: name.to_owned(),
                });
            }
            materialized(proxy, name, &format!("env:{}", variable.to_string_lossy()))?;
            OsString::from_vec(bytes.to_vec())
        } else if policy.may_sink(name, Sink::File).is_ok() {
            let path = write_secret_file(run_dir, name, guard.value(id).expose())
                .map_err(LaunchError::RunDir)?;
            materialized(proxy, name, "file")?;
            path.into_os_string()
        } else {
            OsString::from(guard.placeholder(id).as_str())
        };
        env.insert(variable, value);
    }
    for (variable, secret) in environment::standard_aws_variables(policy) {
        if let Some(id) = guard.id(secret) {
            env.insert(variable.into(), guard.placeholder(id).as_str().into());
        }
    }
    say_withheld(&withheld, pass_env);
    Ok(env)
}

/// Audits a value handed to the command (`materialize`, the secret's name and where),
/// before the command can see it: a value whose handing cannot be audited is not handed.
fn materialized(proxy: &Proxy, secret: &str, location: &str) -> Result<(), LaunchError> {
    let event = sluice_audit::Event::new(sluice_audit::EventKind::Materialize)
        .secret(secret)
        .location(location);
    proxy
        .record(event)
        .map_err(|error| LaunchError::Start(StartError::Audit(error)))
}

/// Writes the admin endpoint's URL (its credentials in it) to its file, 0600, and says on
/// stderr where the endpoint is, without the token.
fn write_admin_url(
    proxy: &sluice_proxy::Proxy,
    admin: Option<&(SocketAddr, PathBuf)>,
    approvals: bool,
) -> Result<(), LaunchError> {
    let (Some((_, file)), Some(url), Some(addr)) = (admin, proxy.admin_url(), proxy.admin_addr())
    else {
        return Ok(());
    };
    // Renamed into place: `sluice approve` started at once finds it whole.
    crate::files::replace(file, format!("{url}\n").as_bytes(), 0o600)
        .map_err(LaunchError::RunDir)?;
    eprintln!(
        "sluice: admin endpoint on http://{}@{addr}, credentials in {}",
        sluice_proxy::ADMIN_USER,
        file.display()
    );
    if approvals {
        eprintln!(
            "sluice: some uses or hosts wait for approval (approve:, egress.ask); decide them with: sluice approve --admin-url-file {}",
            file.display()
        );
    }
    Ok(())
}

/// A `file`-granted value, in a 0600 file only the run can read.
fn write_secret_file(run_dir: &Path, secret: &str, value: &[u8]) -> std::io::Result<PathBuf> {
    let dir = run_dir.join("secrets");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(placeholder_name(secret).to_ascii_lowercase());
    crate::files::write_new(&path, value, 0o600)?;
    Ok(path)
}

/// Passes SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to the child, and swallows
/// SIGINT (passes it on too when the child is `in_terminal` of its own), until the returned
/// tasks are aborted.
fn forward_signals(
    caught: CaughtSignals,
    child: Option<u32>,
    in_terminal: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let Some(pid) = child.and_then(|id| i32::try_from(id).ok()) else {
        return tasks;
    };
    let pid = nix::unistd::Pid::from_raw(pid);
    // Ctrl-C is the child's to handle; sluice only must not die of it first. In a
    // terminal of its own the child is in another session, where a SIGINT sent to sluice
    // would not reach it: pass it on there.
    if let Some(mut interrupt) = caught.interrupt {
        tasks.push(tokio::spawn(async move {
            while interrupt.recv().await.is_some() {
                if in_terminal {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                }
            }
        }));
    }
    for (mut stream, sig) in caught.forwarded {
        tasks.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {
                let _ = nix::sys::signal::kill(pid, sig);
            }
        }));
    }
    tasks
}

/// The signals sluice passes on to the command (and SIGINT), caught from before the
/// command starts until it ends.
struct CaughtSignals {
    interrupt: Option<tokio::signal::unix::Signal>,
    forwarded: Vec<(tokio::signal::unix::Signal, nix::sys::signal::Signal)>,
}

impl CaughtSignals {
    fn now() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let forwarded = FORWARDED
            .into_iter()
            .filter_map(|kind| {
                Some((
                    signal(kind).ok()?,
                    nix::sys::signal::Signal::try_from(kind.as_raw_value()).ok()?,
                ))
            })
            .collect();
        CaughtSignals {
            interrupt: signal(SignalKind::interrupt()).ok(),
            forwarded,
        }
    }
}
