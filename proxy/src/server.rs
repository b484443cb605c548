//! Assembling a running proxy from a declaration: secrets resolved into the guard, the run
//! CA minted, the audit log opened, the listener bound; and stopping it cleanly.
//!
//! `sluice serve`, the launcher and the tests all start the proxy through [`start`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_ca::{CaConfig, RunCa};
use sluice_guard::Guard;
use sluice_policies::{Placeholders, Policy, normalize_host};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::audit::{AuditLog, Event, StartInfo};
use crate::auth::Credentials;
use crate::tls::Terminator;
use crate::upstream::{Timeouts, Upstream, UpstreamConfig};

/// Limits on what clients may make the proxy hold.
///
/// # Defaults
/// - `max_connections`: 1024 client connections (tunnels count against their connection)
/// - `max_header_bytes`: 64 KiB of request head (`431` beyond)
/// - `header_read_timeout`: 30 s to send a request head (slow clients are cut off)
/// - `h2_max_streams`: 100 concurrent streams per HTTP/2 connection
/// - `tls_handshake_timeout`: 10 s for the client's TLS handshake
/// - `drain_timeout`: 10 s for in-flight requests at shutdown
/// - `max_buffered_body`: 8 MiB of request body buffered to recompute `Content-Length`
/// - `max_decoded_body`: 1 GiB decoded from one compressed body
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Concurrent client connections.
    pub max_connections: usize,
    /// Bytes of request head.
    pub max_header_bytes: usize,
    /// Time to receive a request head.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub h2_max_streams: u32,
    /// Time for the client's TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time allowed for in-flight requests at shutdown.
    pub drain_timeout: Duration,
    /// The largest request body buffered to recompute its `Content-Length` after a swap
    /// (`413` beyond).
    pub max_buffered_body: usize,
    /// The most bytes a compressed body may decode to (`502` for responses beyond: a
    /// decompression bomb).
    pub max_decoded_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_header_bytes: 64 * 1024,
            header_read_timeout: Duration::from_secs(30),
            h2_max_streams: 100,
            tls_handshake_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
            max_buffered_body: 8 * 1024 * 1024,
            max_decoded_body: 1024 * 1024 * 1024,
        }
    }
}

/// Everything needed to start a proxy.
pub struct ProxyConfig {
    /// The compiled declaration.
    pub policy: Policy,
    /// Where to listen (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Where the audit log goes.
    pub audit_log: PathBuf,
    /// Extra roots for verifying upstreams (`--upstream-ca`).
    pub upstream_ca: Vec<PathBuf>,
    /// Host pins (`--resolve HOST=IP`).
    pub resolve: Vec<(String, IpAddr)>,
    /// Client-side limits.
    pub limits: Limits,
    /// Upstream timeouts.
    pub timeouts: Timeouts,
}

impl ProxyConfig {
    /// A configuration with default limits and timeouts.
    pub fn new(policy: Policy, listen: SocketAddr, audit_log: PathBuf) -> Self {
        Self {
            policy,
            listen,
            audit_log,
            upstream_ca: Vec::new(),
            resolve: Vec::new(),
            limits: Limits::default(),
            timeouts: Timeouts::default(),
        }
    }
}

/// Why the proxy could not start. Names the failing part; never a secret value.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A secret could not be resolved (missing variable, unreadable file, bad value).
    #[error("{0}")]
    Secret(#[from] sluice_policies::SourceError),
    /// The run CA could not be minted.
    #[error("run CA: {0}")]
    Ca(#[from] sluice_ca::CaError),
    /// The audit log could not be opened.
    #[error("audit log: {0}")]
    Audit(#[from] crate::audit::AuditError),
    /// The upstream leg could not be configured.
    #[error("{0}")]
    Upstream(#[from] crate::upstream::UpstreamSetupError),
    /// A `--resolve` host is not a valid name.
    #[error("--resolve {host}: {why}")]
    Resolve {
        /// The host as given.
        host: String,
        /// Why it is invalid.
        why: String,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// No randomness for the run id or credentials.
    #[error("no system randomness: {0}")]
    Random(getrandom::Error),
}

/// What every task of a running proxy shares.
pub struct Shared {
    pub(crate) policy: Arc<Policy>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) credentials: Credentials,
    pub(crate) terminator: Terminator,
    pub(crate) upstream: Upstream,
    pub(crate) audit: AuditLog,
    pub(crate) limits: Limits,
    pub(crate) connections: Arc<Semaphore>,
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// Records an audit event. A failed log is noticed by `AuditLog::is_healthy`, which every
    /// request checks first (fail closed), so the error needs no handling here.
    pub(crate) fn record(&self, event: Event) {
        if let Err(error) = self.audit.record(event) {
            tracing::error!(%error, "audit log write failed; sluice now refuses to proxy");
        }
    }
}

/// A running proxy.
pub struct Proxy {
    addr: SocketAddr,
    run_id: String,
    ca: Arc<RunCa>,
    placeholders: Placeholders,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
}

/// Starts a proxy: resolves secrets, mints the CA, opens the audit log, binds, accepts.
pub async fn start(config: ProxyConfig) -> Result<Proxy, StartError> {
    let run_id = random_hex(8)?;
    let placeholders = config.policy.mint_placeholders();
    let guard = Arc::new(config.policy.build_guard(&placeholders)?);
    let permitted: Vec<String> = config
        .policy
        .intercepted_hosts()
        .iter()
        .map(|pattern| {
            if pattern.is_wildcard() {
                format!("*.{}", pattern.name())
            } else {
                pattern.name().to_owned()
            }
        })
        .collect();
    let ca = Arc::new(RunCa::mint(CaConfig::new(run_id.clone(), permitted))?);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    // Every free-text field of every event goes through the guard, so a value in a host
    // label or a path segment is written as its placeholder.
    let redactor = {
        let guard = guard.clone();
        Arc::new(move |text: &str| guard.redact_str(text)) as crate::audit::Redactor
    };
    let audit = AuditLog::open_with_redactor(
        &config.audit_log,
        &run_id,
        StartInfo {
            policy_sha256: config.policy.sha256_hex().to_owned(),
            ca_sha256: ca.fingerprint_sha256(),
        },
        redactor,
    )?;
    let mut pins = HashMap::new();
    for (host, ip) in config.resolve {
        let name = normalize_host(&host).map_err(|e| StartError::Resolve {
            host: host.clone(),
            why: e.to_string(),
        })?;
        pins.insert(name, ip);
    }
    let policy = Arc::new(config.policy);
    let allow_policy = policy.clone();
    let upstream = Upstream::new(UpstreamConfig {
        pins,
        allow_ips: Arc::new(move |ip| allow_policy.ip_allowed(ip)),
        own_listeners: vec![addr],
        extra_roots: config.upstream_ca,
        timeouts: config.timeouts,
    })?;
    let credentials = Credentials::mint().map_err(StartError::Random)?;
    let (stop, shutdown) = watch::channel(false);
    let shared = Arc::new(Shared {
        policy,
        guard,
        credentials,
        terminator: Terminator::new(ca.clone(), config.limits.tls_handshake_timeout),
        upstream,
        audit,
        limits: config.limits,
        connections: Arc::new(Semaphore::new(config.limits.max_connections)),
        shutdown: shutdown.clone(),
    });
    tracing::info!(%addr, run_id, "sluice listening; fail-closed: unknown hosts and blocked addresses are refused");
    let accept_task = tokio::spawn(crate::listen::serve(listener, shared.clone(), shutdown));
    Ok(Proxy {
        addr,
        run_id,
        ca,
        placeholders,
        shared,
        stop,
        accept_task,
    })
}

impl Proxy {
    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// This run's id (also in every audit event).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The proxy URL with the run's credentials: for `proxy-url` and the launcher only.
    pub fn proxy_url(&self) -> String {
        let c = &self.shared.credentials;
        format!("http://{}:{}@{}", c.user(), c.token(), self.addr)
    }

    /// The proxy URL without the token, safe to print.
    pub fn proxy_url_without_token(&self) -> String {
        format!("http://{}@{}", self.shared.credentials.user(), self.addr)
    }

    /// The run CA's certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.cert_pem()
    }

    /// The run's placeholders.
    pub fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }

    /// The declaration this proxy enforces.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// The guard, for redacting the launched command's output with the same patterns.
    pub fn guard(&self) -> Arc<Guard> {
        self.shared.guard.clone()
    }

    /// Stops accepting, lets in-flight requests finish within the drain timeout, then
    /// writes the audit log's `stop` record and flushes it.
    pub async fn shutdown(self) -> Result<(), crate::audit::AuditError> {
        let _ = self.stop.send(true);
        let _ = self.accept_task.await;
        let limits = self.shared.limits;
        // Every connection and tunnel holds a slot; all slots back means all drained.
        let drained = tokio::time::timeout(
            limits.drain_timeout,
            self.shared
                .connections
                .acquire_many(limits.max_connections as u32),
        )
        .await;
        if drained.is_err() {
            tracing::warn!("drain timeout: closing remaining connections");
        }
        self.shared.audit.clone().close()
    }
}

fn random_hex(bytes: usize) -> Result<String, StartError> {
    let mut raw = vec![0u8; bytes];
    getrandom::fill(&mut raw).map_err(StartError::Random)?;
    Ok(hex::encode(raw))
}

/// Resolves once the proxy is told to stop (at once if it already was).
pub(crate) async fn until_stopped(shutdown: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send; drop it here, not across an await.
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}
