//! sluice as a benchmark peer: `sluice-bench sluice` starts the proxy from the library
//! ([`sluice_proxy::start`]) in its own process, so its memory and CPU are its own, exactly
//! as `sluice serve` would (same runtime, same defaults), minus the log subscriber.
//!
//! Three declarations ([`Mode`]): the measured one swaps one header (`Authorization`, toward
//! the upstream only) and redacts every response; `bare` declares no secret, to tell the
//! cost of the swap and the redaction from the cost of the proxying; `passthrough` tunnels
//! the upstream uninspected, the floor of any proxy hop on this machine.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use sluice_policies::Policy;
use sluice_proxy::ProxyConfig;

use crate::error::BenchError;
use crate::pki::UPSTREAM_HOST;
use crate::upstream::TOKEN_VAR;

/// The secret the measured declaration names.
pub(crate) const SECRET: &str = "api_token";

/// The declaration sluice is measured with: one header swapped toward the upstream, every
/// response redacted.
pub(crate) fn declaration() -> String {
    format!(
        "version: 1\n\
         secrets:\n  \
           {SECRET}:\n    \
             from: {{ env: {TOKEN_VAR} }}\n    \
             hosts: [\"{UPSTREAM_HOST}\"]\n    \
             sinks: [egress]\n    \
             in: [header]\n    \
             header: [Authorization]\n\
         egress:\n  \
           allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

/// The declaration without secrets: nothing to swap, nothing to redact.
pub(crate) fn bare_declaration() -> String {
    format!(
        "version: 1\n\
         egress:\n  \
           allow: [\"{UPSTREAM_HOST}\"]\n  \
           allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

/// The declaration that tunnels the upstream without terminating its TLS.
pub(crate) fn passthrough_declaration() -> String {
    format!(
        "version: 1\n\
         egress:\n  \
           passthrough: [\"{UPSTREAM_HOST}\"]\n  \
           allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

/// Which declaration sluice runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// One header swapped, every response redacted: the measured configuration.
    Full,
    /// No secret: TLS terminated and re-originated, nothing swapped or redacted.
    Bare,
    /// The upstream tunnelled uninspected (CONNECT and bytes relayed).
    Passthrough,
}

impl Mode {
    /// The declaration for this mode.
    pub(crate) fn declaration(self) -> String {
        match self {
            Self::Full => declaration(),
            Self::Bare => bare_declaration(),
            Self::Passthrough => passthrough_declaration(),
        }
    }
}

/// What `sluice-bench sluice` takes.
#[derive(Debug, clap::Args)]
pub(crate) struct SluiceArgs {
    /// Where to write `ca.pem`, `proxy-url`, `placeholder`, `placeholders` and `audit.jsonl`.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The upstream's CA (PEM).
    #[arg(long)]
    pub(crate) upstream_ca: PathBuf,
    /// Which declaration to run with.
    #[arg(long, value_enum, default_value = "full")]
    pub(crate) mode: Mode,
    /// A declaration file to run with instead of the mode's (the soak's).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Another host to pin to 127.0.0.1, besides the upstream's name.
    #[arg(long = "pin", value_name = "HOST")]
    pub(crate) pins: Vec<String>,
    /// Log to stderr through this filter (`info` is what `sluice serve` logs), so that a
    /// soak can watch what sluice says.
    #[arg(long, value_name = "FILTER")]
    pub(crate) log: Option<String>,
    /// Also take redirected connections here, as `sluice serve --transparent` does (the
    /// jail benchmark).
    #[arg(long, value_name = "ADDR")]
    pub(crate) transparent: Option<SocketAddr>,
    /// Serve the admin endpoint on a free loopback port, its URL written to `admin-url`
    /// (the operations benchmark scrapes it).
    #[arg(long)]
    pub(crate) admin: bool,
    /// Dial every upstream through this egress proxy (`http://HOST:PORT`), as
    /// `sluice serve --upstream-proxy` does (the upstream-proxy benchmark).
    #[arg(long, value_name = "URL")]
    pub(crate) upstream_proxy: Option<String>,
    /// Rotate the audit log into numbered segments once it holds this many bytes, as
    /// `sluice serve --audit-max-bytes` does (the soak's `--audit-max-bytes`).
    #[arg(long, value_name = "BYTES")]
    pub(crate) audit_max_bytes: Option<u64>,
}

/// Starts `exe sluice` (this benchmark's sluice peer) writing into `dir`, trusting the
/// upstream's CA there, with the bench token's `value` in its environment; `configure` adds
/// what one benchmark needs (a declaration, an admin endpoint, a capture listener).
pub(crate) async fn spawn(
    exe: &Path,
    dir: &Path,
    value: &str,
    configure: impl FnOnce(&mut tokio::process::Command),
) -> Result<crate::child::Spawned, BenchError> {
    let mut sluice = tokio::process::Command::new(exe);
    sluice
        .arg("sluice")
        .arg("--dir")
        .arg(dir)
        .arg("--upstream-ca")
        .arg(dir.join("upstream-ca.pem"))
        .env(TOKEN_VAR, value);
    configure(&mut sluice);
    crate::child::Spawned::start(
        "sluice",
        sluice,
        &dir.join("sluice.stderr"),
        crate::child::Ready::Line,
    )
    .await
}

/// Runs sluice until stdin closes, then shuts it down (drain, audit log flushed).
pub(crate) fn run(args: &SluiceArgs) -> Result<(), BenchError> {
    let yaml = match &args.policy {
        Some(path) => std::fs::read_to_string(path).map_err(BenchError::file(path))?,
        None => args.mode.declaration(),
    };
    if let Some(filter) = &args.log {
        let filter = tracing_subscriber::EnvFilter::try_new(filter)
            .map_err(|e| BenchError::peer("sluice", format!("--log {filter:?}: {e}")))?;
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
    let loaded = Policy::parse(&yaml, "bench.yaml").map_err(|diagnostics| {
        BenchError::Declaration(
            diagnostics
                .0
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let mut config = ProxyConfig::new(loaded.policy, listen, args.dir.join("audit.jsonl"));
    // A declaration from a file can be reloaded (`SIGHUP`, as `sluice serve` does; the soak
    // sends it); never on its own, so that the soak counts every reload it asked for.
    config.policy_path.clone_from(&args.policy);
    config.watch_files = false;
    config.upstream_ca = vec![args.upstream_ca.clone()];
    // `SLUICE_BENCH_WORKERS` overrides the worker count (a diagnostic, named in the report).
    config.workers = match std::env::var("SLUICE_BENCH_WORKERS") {
        Ok(n) => n.parse().map_err(|_| {
            BenchError::peer(
                "sluice",
                format!("SLUICE_BENCH_WORKERS={n:?} is not a number of threads"),
            )
        })?,
        Err(_) => sluice_proxy::default_workers(),
    };
    config.resolve = std::iter::once(UPSTREAM_HOST)
        .chain(args.pins.iter().map(String::as_str))
        .map(|host| (host.to_owned(), IpAddr::V4(Ipv4Addr::LOCALHOST)))
        .collect();
    if args.admin {
        config.admin = Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    }
    config.audit_rotation.max_bytes = args.audit_max_bytes;
    if let Some(url) = &args.upstream_proxy {
        config.upstream_proxy = Some(
            sluice_proxy::UpstreamProxy::parse(url, "")
                .map_err(|e| BenchError::peer("sluice", e))?,
        );
    }
    if let Some(address) = args.transparent {
        let listener = std::net::TcpListener::bind(address)
            .map_err(|e| BenchError::peer("sluice", format!("--transparent {address}: {e}")))?;
        config.transparent = Some(listener);
    }
    // The runtime `sluice serve` builds: multi-threaded, one worker per core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::peer("sluice", e))?;
    runtime.block_on(async {
        let proxy = sluice_proxy::start(config)
            .await
            .map_err(|e| BenchError::peer("sluice", e))?;
        write(&args.dir.join("ca.pem"), &proxy.ca_pem())?;
        write(&args.dir.join("proxy-url"), &proxy.proxy_url())?;
        if let Some(url) = proxy.admin_url() {
            write(&args.dir.join("admin-url"), &url)?;
        }
        let placeholders = proxy.placeholders();
        write(
            &args.dir.join("placeholder"),
            placeholders.get(SECRET).unwrap_or_default(),
        )?;
        // Every secret's, as `placeholders.env` has them (a signing secret's parts too).
        let all: String = placeholders
            .iter()
            .map(|(name, placeholder)| format!("{name}={placeholder}\n"))
            .collect();
        write(&args.dir.join("placeholders"), &all)?;
        crate::child::announce_ready(proxy.local_addr())?;
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| BenchError::peer("sluice", format!("SIGHUP: {e}")))?;
        let closed = crate::child::stdin_closed();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                () = &mut closed => break,
                Some(()) = hangups.recv() => {
                    // The outcome is in the audit log (`reload`), which the soak reads.
                    let _ = proxy.reload().await;
                }
            }
        }
        proxy
            .shutdown()
            .await
            .map_err(|e| BenchError::peer("sluice", format!("shutdown: {e}")))
    })
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(BenchError::file(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_declarations_load_cleanly() {
        for mode in [Mode::Full, Mode::Bare, Mode::Passthrough] {
            let yaml = mode.declaration();
            match Policy::parse(&yaml, "bench.yaml") {
                Ok(loaded) => assert!(
                    loaded.warnings.is_empty(),
                    "{yaml}\nwarnings: {:?}",
                    loaded
                        .warnings
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                ),
                Err(d) => panic!(
                    "{yaml}\n{:?}",
                    d.0.iter().map(ToString::to_string).collect::<Vec<_>>()
                ),
            }
        }
    }
}
