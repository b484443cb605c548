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
/// - `body_read_timeout`: 30 s to send a request body that is buffered whole (`408` beyond)
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
    /// Time to receive a request body that is buffered whole (see `max_buffered_body`):
    /// a client trickling it would otherwise hold its buffer and connection for ever.
    pub body_read_timeout: Duration,
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
            body_read_timeout: Duration::from_secs(30),
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
    /// Worker threads serving connections, each running its own single-threaded runtime
    /// with its own upstream pools, all accepting from the one listener. With `0` the
    /// proxy serves on the runtime that calls [`start`] (tests, embedding).
    ///
    /// Why threads of their own: a connection, its tunnel and its upstream connection then
    /// stay on one thread, so handing a request from the client's task to the upstream's
    /// never wakes another core (measured in docs/benchmarks.md).
    pub workers: usize,
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
            workers: 0,
        }
    }
}

/// One worker per core the process may use: what `sluice serve` and `sluice run` start.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
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
    /// A worker thread or its runtime could not be started.
    #[error("cannot start a worker thread: {0}")]
    Worker(std::io::Error),
}

/// What every task of a running proxy shares.
pub struct Shared {
    pub(crate) policy: Arc<Policy>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) credentials: Arc<Credentials>,
    pub(crate) terminator: Arc<Terminator>,
    pub(crate) upstream: Upstream,
    pub(crate) audit: AuditLog,
    pub(crate) limits: Limits,
    pub(crate) connections: Arc<Semaphore>,
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// The same, with upstream pools of its own, for one worker thread.
    fn for_worker(&self) -> Shared {
        Shared {
            policy: self.policy.clone(),
            guard: self.guard.clone(),
            credentials: self.credentials.clone(),
            terminator: self.terminator.clone(),
            upstream: self.upstream.with_own_pools(),
            audit: self.audit.clone(),
            limits: self.limits,
            connections: self.connections.clone(),
            shutdown: self.shutdown.clone(),
        }
    }

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
    accepting: Accepting,
}

/// What accepts connections: a task on the caller's runtime, or worker threads.
enum Accepting {
    Task(JoinHandle<()>),
    Workers {
        threads: Vec<std::thread::JoinHandle<()>>,
        /// Lets the workers' runtimes end once the drain is over; dropping a runtime
        /// cancels what it still runs.
        release: watch::Sender<bool>,
    },
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
        Arc::new(move |text: String| guard.redact_string(text)) as crate::audit::Redactor
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
        credentials: Arc::new(credentials),
        terminator: Arc::new(Terminator::new(
            ca.clone(),
            config.limits.tls_handshake_timeout,
        )),
        upstream,
        audit,
        limits: config.limits,
        connections: Arc::new(Semaphore::new(config.limits.max_connections)),
        shutdown: shutdown.clone(),
    });
    tracing::info!(%addr, run_id, "sluice listening; fail-closed: unknown hosts and blocked addresses are refused");
    let accepting = if config.workers == 0 {
        Accepting::Task(tokio::spawn(crate::listen::serve(
            listener,
            shared.clone(),
            shutdown,
        )))
    } else {
        start_workers(config.workers, listener, &shared, &shutdown)?
    };
    Ok(Proxy {
        addr,
        run_id,
        ca,
        placeholders,
        shared,
        stop,
        accepting,
    })
}

/// How long a worker's runtime waits for its blocking tasks once released.
const WORKER_SHUTDOWN: Duration = Duration::from_secs(1);

/// Starts `count` threads, each accepting from `listener` on a single-threaded runtime of
/// its own and serving what it accepted there, until `shutdown`; each then keeps its
/// runtime (and the connections still draining on it) until released.
fn start_workers(
    count: usize,
    listener: TcpListener,
    shared: &Shared,
    shutdown: &watch::Receiver<bool>,
) -> Result<Accepting, StartError> {
    let listener = listener.into_std().map_err(StartError::Worker)?;
    let (release, released) = watch::channel(false);
    let mut threads = Vec::with_capacity(count);
    for index in 0..count {
        let listener = listener.try_clone().map_err(StartError::Worker)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Worker)?;
        let shared = Arc::new(shared.for_worker());
        let shutdown = shutdown.clone();
        let mut released = released.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sluice-worker-{index}"))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => crate::listen::serve(listener, shared, shutdown).await,
                        Err(error) => tracing::error!(%error, "worker cannot accept"),
                    }
                    until_stopped(&mut released).await;
                });
                // Cancels what still runs; a blocking task (a name lookup) is not waited for
                // past this, so that `stop` is written promptly.
                runtime.shutdown_timeout(WORKER_SHUTDOWN);
            })
            .map_err(StartError::Worker)?;
        threads.push(thread);
    }
    Ok(Accepting::Workers { threads, release })
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
        let workers = match self.accepting {
            Accepting::Task(task) => {
                let _ = task.await;
                None
            }
            Accepting::Workers { threads, release } => Some((threads, release)),
        };
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
        if let Some((threads, release)) = workers {
            let _ = release.send(true);
            let joined = tokio::task::spawn_blocking(move || {
                threads.into_iter().all(|thread| thread.join().is_ok())
            })
            .await;
            if !matches!(joined, Ok(true)) {
                tracing::error!("a worker thread panicked");
            }
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
