//! The launcher: `sluice run -- CMD`. Starts the proxy on an ephemeral loopback port, runs
//! CMD with the proxy and CA-trust variables set and its secrets as placeholders, redacts
//! CMD's stdout and stderr through the same guard the proxy uses, and exits with CMD's
//! status.
//!
//! What it must never do: hand CMD a real value it was not granted (`command` puts a value
//! in CMD's environment, `file` in a 0600 file; everything else gets the placeholder, and
//! every inherited variable holding a known value is redacted), expand or re-quote CMD's
//! argv, or leave the run directory behind.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use sluice_guard::{Guard, Rewriter};
use sluice_policies::{Policy, Sink, credentials, placeholder_name};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;

use sluice_proxy::{Proxy, ProxyConfig, StartError, start};

/// Where the system's CA bundle may live, first found wins; the sandbox's bundle is the run
/// CA plus these roots, so hosts sluice does not intercept (passthrough) still verify.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// Variables that point a client at a CA bundle, one per client family.
const CA_VARIABLES: [&str; 9] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "AWS_CA_BUNDLE",
    // npm's `cafile` replaces Node's store (so NODE_EXTRA_CA_CERTS is ignored) when a global
    // npmrc sets one, as Debian's does; the variable overrides every npmrc.
    "npm_config_cafile",
];

/// Variables that point a client at a proxy.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
];

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
    /// The compiled declaration.
    pub policy: Policy,
    /// CMD and its arguments, passed as given.
    pub command: Vec<OsString>,
    /// Where the audit log goes.
    pub audit_log: PathBuf,
    /// Extra upstream roots (`--upstream-ca`).
    pub upstream_ca: Vec<PathBuf>,
    /// Host pins (`--resolve`).
    pub resolve: Vec<(String, std::net::IpAddr)>,
    /// Variables passed unchanged on purpose, though they look like credentials
    /// (`--pass-env`).
    pub pass_env: Vec<OsString>,
    /// Pass only [`CLEAR_ENV_ALLOWLIST`] (and `--pass-env`) of the inherited environment
    /// (`--clear-env`).
    pub clear_env: bool,
}

/// What `--clear-env` keeps of the inherited environment, besides what sluice sets and what
/// `--pass-env` names: what a shell and its tools need to run at all.
pub(crate) const CLEAR_ENV_ALLOWLIST: [&str; 8] = [
    "PATH", "HOME", "USER", "LANG", "TERM", "TZ", "TMPDIR", "SHELL",
];

/// Whether `--clear-env` keeps `name`: the allowlist, and every `LC_*` locale variable.
fn kept_by_clear_env(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    CLEAR_ENV_ALLOWLIST.contains(&name.as_ref()) || name.starts_with("LC_")
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

/// Runs CMD under sluice and returns the exit code sluice should exit with: CMD's own, or
/// 128 + the signal that ended it.
pub(crate) async fn run(config: LaunchConfig) -> Result<u8, LaunchError> {
    let Some((program, args)) = config.command.split_first() else {
        return Err(LaunchError::NoCommand);
    };
    close_own_memory();
    let run_dir = tempfile::Builder::new()
        .prefix("sluice-run-")
        .tempdir()
        .map_err(LaunchError::RunDir)?;
    // What the command will not get, decided before the proxy starts so that its `start`
    // event can list it; on the secrets' values, without the run's placeholders.
    let probe = config
        .policy
        .build_guard(&config.policy.mint_placeholders())
        .map_err(StartError::from)?;
    let (_, withheld) = environment(&config.policy, &probe, &config.pass_env, config.clear_env);
    drop(probe);
    let listen: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut proxy_config = ProxyConfig::new(config.policy, listen, config.audit_log);
    proxy_config.withheld_env = withheld
        .iter()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    proxy_config.upstream_ca = config.upstream_ca;
    proxy_config.workers = sluice_proxy::default_workers();
    proxy_config.resolve = config.resolve;
    let proxy = start(proxy_config).await?;
    let guard = proxy.guard();
    let env = match child_env(
        &proxy,
        proxy.policy(),
        &guard,
        run_dir.path(),
        &config.pass_env,
        config.clear_env,
    ) {
        Ok(env) => env,
        Err(error) => {
            let _ = proxy.shutdown().await;
            return Err(error);
        }
    };
    let mut child = match Command::new(program)
        .args(args)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(source) => {
            let _ = proxy.shutdown().await;
            return Err(LaunchError::Spawn {
                program: program.to_string_lossy().into_owned(),
                source,
            });
        }
    };
    // Output is redacted as it streams; each read is written and flushed at once.
    let stdout = child
        .stdout
        .take()
        .map(|out| tokio::spawn(pump(out, tokio::io::stdout(), guard.clone())));
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(pump(err, tokio::io::stderr(), guard.clone())));
    let forwarding = forward_signals(child.id());
    let status = child.wait().await.map_err(LaunchError::Wait);
    for task in forwarding {
        task.abort();
    }
    for pump in [stdout, stderr].into_iter().flatten() {
        let _ = pump.await;
    }
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

/// Makes sluice non-dumpable: the command runs as sluice's own user, and could otherwise read
/// sluice's initial environment block and memory (`/proc/PPID/environ`, `/proc/PPID/mem`,
/// ptrace, a core dump), and the real values in them. A command running as root keeps that
/// power, which is said at start.
fn close_own_memory() {
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("sluice: cannot make sluice's memory unreadable to the command: {error}");
    }
    if nix::unistd::geteuid().is_root() {
        eprintln!(
            "sluice: running as root: a command that also runs as root can still read sluice's memory, and the secrets in it; run sluice as an unprivileged user"
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
        env.insert(name.into(), proxy_url.clone());
    }
    env.insert("NO_PROXY".into(), OsString::new());
    env.insert("no_proxy".into(), OsString::new());
    let bundle = write_bundle(run_dir, &proxy.ca_pem()).map_err(LaunchError::RunDir)?;
    for name in CA_VARIABLES {
        env.insert(name.into(), bundle.clone().into_os_string());
    }
    for decl in policy.secrets() {
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
            OsString::from_vec(bytes.to_vec())
        } else if policy.may_sink(name, Sink::File).is_ok() {
            write_secret_file(run_dir, name, guard.value(id).expose())
                .map_err(LaunchError::RunDir)?
                .into_os_string()
        } else {
            OsString::from(guard.placeholder(id).as_str())
        };
        env.insert(variable, value);
    }
    say_withheld(&withheld, pass_env);
    Ok(env)
}

/// What the command inherits of sluice's environment (`--clear-env` applied) and what it
/// is denied; a variable that sluice sets itself (a declared secret's, the proxy's) is not
/// counted as withheld, since the command gets sluice's own value for it.
fn environment(
    policy: &Policy,
    guard: &Guard,
    pass_env: &[OsString],
    clear_env: bool,
) -> (
    BTreeMap<OsString, OsString>,
    Vec<(OsString, credentials::Suspicion)>,
) {
    let vars = std::env::vars_os()
        .filter(|(key, _)| !clear_env || kept_by_clear_env(key) || pass_env.contains(key));
    let (env, mut withheld) = inherited(vars, guard, pass_env);
    withheld.retain(|(key, _)| !sets_itself(key, policy));
    (env, withheld)
}

/// Whether sluice sets `name` in the command's environment itself.
fn sets_itself(name: &OsStr, policy: &Policy) -> bool {
    let name = name.to_string_lossy();
    PROXY_VARIABLES.contains(&name.as_ref())
        || CA_VARIABLES.contains(&name.as_ref())
        || name == "NO_PROXY"
        || name == "no_proxy"
        || policy
            .secrets()
            .iter()
            .any(|decl| placeholder_name(decl.name()) == name)
}

/// What the command inherits of `vars`: each value holding a known secret redacted (a
/// declared secret's source variable, or a copy, gets its placeholder), `pass_env` passed
/// as it is, every other variable that looks like a credential withheld (returned beside,
/// with why).
fn inherited(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    guard: &Guard,
    pass_env: &[OsString],
) -> (
    BTreeMap<OsString, OsString>,
    Vec<(OsString, credentials::Suspicion)>,
) {
    let mut env = BTreeMap::new();
    let mut withheld = Vec::new();
    for (key, value) in vars {
        let redacted = guard.is_match(value.as_bytes());
        let value = if redacted {
            OsString::from_vec(guard.redact(value.as_bytes()).bytes().to_vec())
        } else {
            value
        };
        let why = credentials::judge(&key.to_string_lossy(), value.as_bytes());
        // A redacted variable holds placeholders now, whatever its name says (a declared
        // secret's source variable is how the command finds its placeholder); but another
        // credential's shape left beside them still withholds it.
        let withhold = match why {
            Some(credentials::Suspicion::Value(_)) => true,
            Some(_) => !redacted,
            None => false,
        };
        if withhold && !pass_env.contains(&key) {
            withheld.extend(why.map(|why| (key, why)));
        } else {
            env.insert(key, value);
        }
    }
    (env, withheld)
}

/// Names each withheld variable on stderr, and why, never its value; then the two fixes.
fn say_withheld(withheld: &[(OsString, credentials::Suspicion)], pass_env: &[OsString]) {
    for name in pass_env {
        eprintln!(
            "sluice: passing {} to the command unchanged (--pass-env)",
            name.to_string_lossy()
        );
    }
    if withheld.is_empty() {
        return;
    }
    for (name, why) in withheld {
        eprintln!(
            "sluice: withheld {} from the command: {why}",
            name.to_string_lossy()
        );
    }
    eprintln!(
        "sluice: to give the command such a variable, declare it as a secret (the command then gets its placeholder) or pass it on purpose with --pass-env NAME"
    );
}

/// The run CA followed by the system roots, as one PEM bundle in the run directory.
fn write_bundle(run_dir: &Path, ca_pem: &str) -> std::io::Result<PathBuf> {
    let mut bundle = ca_pem.to_owned();
    match SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    {
        Some(system) => {
            bundle.push('\n');
            bundle.push_str(&system);
        }
        None => tracing::warn!(
            "no system CA bundle found; the sandbox trusts only the run CA (passthrough hosts will not verify)"
        ),
    }
    let path = run_dir.join("ca-bundle.pem");
    crate::files::write_new(&path, bundle.as_bytes(), 0o644)?;
    Ok(path)
}

/// A `file`-granted value, in a 0600 file only the run can read.
fn write_secret_file(run_dir: &Path, secret: &str, value: &[u8]) -> std::io::Result<PathBuf> {
    let dir = run_dir.join("secrets");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(placeholder_name(secret).to_ascii_lowercase());
    crate::files::write_new(&path, value, 0o600)?;
    Ok(path)
}

/// Copies a child's output stream to ours through the guard's redactor, flushing after
/// every read so interactive output is not delayed (only a possible partial match is held).
async fn pump<R, W>(mut from: R, mut to: W, guard: Arc<Guard>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut redactor = Rewriter::redactor(guard);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(buf.len());
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.clear();
        // The redact plan never refuses: an error here is a bug; stop rather than pass
        // unredacted output.
        if redactor.push(&buf[..n], &mut out).is_err() {
            return;
        }
        if to.write_all(&out).await.is_err() || to.flush().await.is_err() {
            return;
        }
    }
    out.clear();
    if redactor.finish(&mut out).is_ok() {
        let _ = to.write_all(&out).await;
    }
    let _ = to.flush().await;
}

/// Passes SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to the child, and swallows
/// SIGINT, until the returned tasks are aborted.
fn forward_signals(child: Option<u32>) -> Vec<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut tasks = Vec::new();
    let Some(pid) = child.and_then(|id| i32::try_from(id).ok()) else {
        return tasks;
    };
    let pid = nix::unistd::Pid::from_raw(pid);
    // Ctrl-C is the child's to handle; sluice only must not die of it first.
    if let Ok(mut interrupt) = signal(SignalKind::interrupt()) {
        tasks.push(tokio::spawn(async move {
            while interrupt.recv().await.is_some() {}
        }));
    }
    for kind in FORWARDED {
        let (Ok(mut stream), Ok(sig)) = (
            signal(kind),
            nix::sys::signal::Signal::try_from(kind.as_raw_value()),
        ) else {
            continue;
        };
        tasks.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {
                let _ = nix::sys::signal::kill(pid, sig);
            }
        }));
    }
    tasks
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sluice_guard::{Placeholder, SecretValue};

    use super::*;

    const KNOWN: &str = "known-Value-0123456789";

    fn guard() -> Guard {
        let mut builder = Guard::builder();
        builder
            .add(
                "known",
                Placeholder::parse("SLUICE_KNOWN_0123456789abcdef").unwrap(),
                SecretValue::from(KNOWN),
            )
            .unwrap();
        builder.build().unwrap()
    }

    /// Variable names and values of every kind: credential-shaped, innocent, holding the
    /// known value, random.
    fn variable() -> impl Strategy<Value = (String, String)> {
        let names = prop::sample::select(vec![
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
            "STRIPE_KEY",
            "NOTES",
            "GIT_AUTHOR_NAME",
            "SSH_AUTH_SOCK",
            "PATH",
            "TOKEN_FILE",
        ]);
        let values = prop_oneof![
            Just("ghp_0123456789abcdefABCDEF0123456789abcd".to_owned()),
            Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
            Just("sk-ant-api03-abcdefghijklmnopqrstuvwxyz".to_owned()),
            Just(format!("prefix {KNOWN} suffix")),
            "[a-zA-Z0-9/+_-]{0,40}",
        ];
        (names, "[A-Z]{0,3}", values)
            .prop_map(|(name, suffix, value)| (format!("{name}{suffix}"), value))
    }

    proptest! {
        #[test]
        fn nothing_known_or_flagged_is_inherited_unless_passed_on_purpose(
            vars in prop::collection::vec(variable(), 0..12),
            pass in prop::collection::vec(0usize..12, 0..3),
        ) {
            let guard = guard();
            let vars: Vec<(OsString, OsString)> =
                vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
            let pass_env: Vec<OsString> =
                pass.iter().filter_map(|&i| vars.get(i).map(|(k, _)| k.clone())).collect();
            let (env, withheld) = inherited(vars.clone(), &guard, &pass_env);
            for (key, value) in &env {
                let text = value.to_string_lossy();
                prop_assert!(!text.contains(KNOWN), "a known value in {key:?}");
                if pass_env.contains(key) {
                    continue;
                }
                // No credential's shape, ever; a credential's name only where the value
                // held a declared secret, now its placeholder.
                prop_assert!(
                    credentials::credential_shape(value.as_bytes()).is_none(),
                    "{key:?} holds a credential's shape yet is inherited"
                );
                let held_known = vars
                    .iter()
                    .any(|(k, v)| k == key && v.to_string_lossy().contains(KNOWN));
                let flagged = credentials::judge(&key.to_string_lossy(), value.as_bytes());
                prop_assert!(
                    flagged.is_none() || held_known,
                    "{key:?} is flagged ({flagged:?}) yet inherited"
                );
            }
            // Every variable is accounted for: inherited, or withheld and named.
            for (key, _) in &vars {
                prop_assert!(
                    env.contains_key(key) || withheld.iter().any(|(name, _)| name == key),
                    "{key:?} vanished without a word"
                );
            }
        }
    }
}
