//! Assembling a running proxy from a declaration: secrets resolved into the guard, the run
//! CA minted, the audit log opened, the listener bound; and stopping it cleanly.
//!
//! `sluice serve`, the launcher and the tests all start the proxy through [`start`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_ca::{CaConfig, RunCa};
use sluice_guard::Guard;
use sluice_policies::{Placeholders, Policy, normalize_host};

use crate::generation::reload::Live;
pub use crate::generation::reload::{GuardInForce, ReloadError};
use crate::metrics::Metrics;
use crate::ops::control::Control;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::approval::Approvals;
use crate::auth::Credentials;
use crate::config::ProxyConfig;
use crate::generation::shared::{Shared, until_stopped};
use crate::tls::terminate::Terminator;
use crate::upstream::{Upstream, UpstreamConfig};
use sluice_audit::{AuditLog, StartInfo};

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
    Audit(#[from] sluice_audit::AuditError),
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
    /// The placeholders could not be minted.
    #[error("{0}")]
    Placeholders(#[from] sluice_policies::MintError),
    /// The declaration could not be put in force.
    #[error("{0}")]
    Declaration(String),
    /// No randomness for the run id or credentials.
    #[error("no system randomness: {0}")]
    Random(getrandom::Error),
    /// A worker thread or its runtime could not be started.
    #[error("cannot start a worker thread: {0}")]
    Worker(std::io::Error),
}

impl From<ReloadError> for StartError {
    fn from(error: ReloadError) -> Self {
        match error {
            ReloadError::Secret(error) => StartError::Secret(error),
            ReloadError::Random(error) => StartError::Placeholders(error),
            other => StartError::Declaration(other.to_string()),
        }
    }
}

/// A running proxy.
pub struct Proxy {
    addr: SocketAddr,
    transparent: Option<SocketAddr>,
    /// The admin endpoint's address and credentials, when `--admin` asked for one.
    admin: Option<(SocketAddr, Arc<Credentials>)>,
    run_id: String,
    ca: Arc<RunCa>,
    control: Arc<Control>,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accepting: Accepting,
    /// The jail's resolver, awaited at shutdown: it records the refusals it held back.
    resolver: Option<tokio::task::JoinHandle<()>>,
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
pub async fn start(mut config: ProxyConfig) -> Result<Proxy, StartError> {
    let run_id = random_hex(8)?;
    // Each source is read once: the guard takes every value, the signers their parts.
    let mut live = Live::start(config.policy, config.policy_path.clone())?;
    live.gate = config.reload_gate.take();
    let live = Arc::new(live);
    let declared = live.current();
    let permitted = crate::generation::reload::ca_patterns(&declared.policy);
    let ca = Arc::new(RunCa::mint(CaConfig::new(run_id.clone(), permitted))?);
    let listen_error = |source| StartError::Listen {
        addr: config.listen,
        source,
    };
    let listener = match config.listener {
        Some(listener) => {
            listener.set_nonblocking(true).map_err(listen_error)?;
            TcpListener::from_std(listener).map_err(listen_error)?
        }
        None => TcpListener::bind(config.listen)
            .await
            .map_err(listen_error)?,
    };
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let transparent = config
        .transparent
        .as_ref()
        .map(std::net::TcpListener::local_addr)
        .transpose()
        .map_err(StartError::Worker)?;
    let admin = match config.admin {
        Some(admin) => {
            let error = |source| StartError::Listen {
                addr: admin,
                source,
            };
            if !admin.ip().is_loopback() {
                tracing::warn!(%admin, "the admin endpoint is plain HTTP: its credentials cross the network in the clear off loopback");
            }
            let listener = TcpListener::bind(admin).await.map_err(error)?;
            let addr = listener.local_addr().map_err(error)?;
            let credentials = Arc::new(
                Credentials::mint_for(crate::ops::admin::USER).map_err(StartError::Random)?,
            );
            Some((listener, addr, credentials))
        }
        None => None,
    };
    // Every free-text field of every event goes through the guard in force (which knows
    // every value the run has known), so a value in a host label or a path segment is
    // written as its placeholder.
    let redactor = {
        let live = live.clone();
        Arc::new(move |text: String| live.peek(|declared| declared.guard.redact_string(text)))
            as sluice_audit::Redactor
    };
    let audit = AuditLog::open_with(
        &config.audit_log,
        &run_id,
        StartInfo {
            policy_sha256: declared.policy.sha256_hex().to_owned(),
            ca_sha256: ca.fingerprint_sha256(),
            withheld: config.withheld_env,
            settings: config.start_settings,
            grants: start_grants(&declared.policy),
            // Which form each secret's placeholder took (words, never a placeholder).
            placeholders: declared
                .policy
                .secrets()
                .iter()
                .map(|secret| {
                    let placeholder = declared.placeholders.get(secret.name()).unwrap_or_default();
                    (
                        secret.name().to_owned(),
                        sluice_policies::shape::form_of(secret, placeholder),
                    )
                })
                .collect(),
        },
        Some(redactor),
        config.audit_rotation,
    )?;
    let mut pins = HashMap::new();
    for (host, ip) in config.resolve {
        let name = normalize_host(&host).map_err(|e| StartError::Resolve {
            host: host.clone(),
            why: e.to_string(),
        })?;
        pins.insert(name, ip);
    }
    let metrics = Arc::new(Metrics::default());
    // The first generation's address policy; each later one gets its own leg
    // (`Shared::current`).
    let upstream = Upstream::new(UpstreamConfig {
        pins,
        allow_ips: crate::generation::shared::allow_ips(&declared.policy, &live),
        own_listeners: std::iter::once(addr)
            .chain(transparent)
            .chain(admin.as_ref().map(|(_, addr, _)| *addr))
            .collect(),
        extra_roots: config.upstream_ca,
        timeouts: config.timeouts,
        via: config.upstream_proxy.map(Arc::new),
    })?;
    let credentials = Credentials::mint().map_err(StartError::Random)?;
    let (stop, shutdown) = watch::channel(false);
    let shared = Arc::new(Shared {
        generation: declared.generation,
        policy: declared.policy.clone(),
        guard: declared.guard.clone(),
        signers: declared.signers.clone(),
        live,
        counters: metrics.worker(),
        budgets: sluice_policies::BudgetLedger::new(),
        mints: Arc::default(),
        approvals: Arc::new(Approvals::new(
            config.limits.approval_timeout,
            config.limits.max_pending_approvals,
        )),
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
    drop(declared);
    tracing::info!(%addr, run_id, "sluice listening; fail-closed: unknown hosts and blocked addresses are refused");
    let control = Arc::new(Control::new(shared.clone(), ca.clone(), metrics.clone()));
    if let Some(webhook) = config.approval_webhook {
        crate::ops::webhook::start(&control, webhook);
    }
    let admin = admin.map(|(listener, addr, credentials)| {
        tokio::spawn(crate::ops::admin::serve(
            listener,
            control.clone(),
            credentials.clone(),
            shutdown.clone(),
        ));
        tracing::info!(%addr, "admin endpoint listening (credentials in admin-url)");
        (addr, credentials)
    });
    if let (true, Some(declaration)) = (config.watch_files, config.policy_path) {
        tokio::spawn(crate::ops::poll::serve(
            declaration,
            control.clone(),
            shutdown.clone(),
        ));
    }
    let names = Arc::new(crate::edge::capture::names::Names::default());
    let resolver = match config.dns {
        Some(socket) => Some(start_resolver(socket, names.clone(), &shared, &shutdown)?),
        None => None,
    };
    let capture = config.transparent.map(|listener| (listener, names));
    let accepting = if config.workers == 0 {
        if let Some((listener, names)) = capture {
            listener.set_nonblocking(true).map_err(StartError::Worker)?;
            let listener = TcpListener::from_std(listener).map_err(StartError::Worker)?;
            tokio::spawn(crate::edge::capture::serve(
                listener,
                names,
                shared.clone(),
                shutdown.clone(),
            ));
        }
        Accepting::Task(tokio::spawn(crate::edge::listen::serve(
            listener,
            shared.clone(),
            shutdown,
        )))
    } else {
        let workers = Workers {
            count: config.workers,
            metrics: &metrics,
        };
        start_workers(workers, listener, capture, &shared, &shutdown)?
    };
    Ok(Proxy {
        addr,
        transparent,
        admin,
        run_id,
        ca,
        control,
        shared,
        stop,
        accepting,
        resolver,
    })
}

/// The jail's resolver, on the runtime that calls [`start`], sharing the name map with the
/// capture listener.
fn start_resolver(
    socket: std::net::UdpSocket,
    names: Arc<crate::edge::capture::names::Names>,
    shared: &Arc<Shared>,
    shutdown: &watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    socket.set_nonblocking(true).map_err(StartError::Worker)?;
    let socket = tokio::net::UdpSocket::from_std(socket).map_err(StartError::Worker)?;
    Ok(tokio::spawn(crate::edge::capture::dns::serve(
        socket,
        names,
        shared.clone(),
        shutdown.clone(),
    )))
}

/// How many workers to start, and where their counters are summed.
struct Workers<'a> {
    count: usize,
    metrics: &'a Arc<Metrics>,
}

/// How long a worker's runtime waits for its blocking tasks once released.
const WORKER_SHUTDOWN: Duration = Duration::from_secs(1);

/// Starts `count` threads, each accepting from `listener` on a single-threaded runtime of
/// its own and serving what it accepted there, until `shutdown`; each then keeps its
/// runtime (and the connections still draining on it) until released.
fn start_workers(
    workers: Workers<'_>,
    listener: TcpListener,
    capture: Option<(
        std::net::TcpListener,
        Arc<crate::edge::capture::names::Names>,
    )>,
    shared: &Shared,
    shutdown: &watch::Receiver<bool>,
) -> Result<Accepting, StartError> {
    let listener = listener.into_std().map_err(StartError::Worker)?;
    if let Some((capture, _)) = &capture {
        capture.set_nonblocking(true).map_err(StartError::Worker)?;
    }
    let (release, released) = watch::channel(false);
    let mut threads = Vec::with_capacity(workers.count);
    for index in 0..workers.count {
        let listener = listener.try_clone().map_err(StartError::Worker)?;
        let capture = match &capture {
            Some((capture, names)) => Some((
                capture.try_clone().map_err(StartError::Worker)?,
                names.clone(),
            )),
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Worker)?;
        let shared = Arc::new(shared.for_worker(workers.metrics.worker()));
        let shutdown = shutdown.clone();
        let mut released = released.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sluice-worker-{index}"))
            .spawn(move || {
                runtime.block_on(async move {
                    // The capture listener too, on the same worker and its upstream pools:
                    // a captured connection costs what a CONNECT does.
                    let captured =
                        capture.and_then(|(capture, names)| match TcpListener::from_std(capture) {
                            Ok(capture) => Some(tokio::spawn(crate::edge::capture::serve(
                                capture,
                                names,
                                shared.clone(),
                                shutdown.clone(),
                            ))),
                            Err(error) => {
                                tracing::error!(%error, "worker cannot accept (transparent)");
                                None
                            }
                        });
                    match TcpListener::from_std(listener) {
                        Ok(listener) => {
                            crate::edge::listen::serve(listener, shared, shutdown).await
                        }
                        Err(error) => tracing::error!(%error, "worker cannot accept"),
                    }
                    if let Some(captured) = captured {
                        let _ = captured.await;
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

    /// The capture listener's address (`serve --transparent`, the jail's), if there is one.
    pub fn transparent_addr(&self) -> Option<SocketAddr> {
        self.transparent
    }

    /// The proxy URL with `host` in place of the listener's address (its port kept): for a
    /// listener on an unspecified address, the address a client should dial.
    pub fn proxy_url_for(&self, host: &str) -> String {
        let c = &self.shared.credentials;
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        format!(
            "http://{}:{}@{host}:{}",
            c.user(),
            c.token(),
            self.addr.port()
        )
    }

    /// The proxy URL without the token, safe to print.
    pub fn proxy_url_without_token(&self) -> String {
        format!("http://{}@{}", self.shared.credentials.user(), self.addr)
    }

    /// The run CA's certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.cert_pem()
    }

    /// OpenSSL's hash of the run CA's subject: its file name (`<hash>.0`) in a hashed
    /// certificate directory.
    pub fn ca_subject_hash(&self) -> String {
        self.ca.subject_hash().to_owned()
    }

    /// Records an event the proxy did not see itself: the launcher's `materialize`, and
    /// its `redact` of the command's output. The log's redactor runs over it as over every
    /// event.
    pub fn record(&self, event: sluice_audit::Event) -> Result<(), sluice_audit::AuditError> {
        self.shared.audit.record(event)
    }

    /// The run's audit log, for a task that records what the proxy does not see while it
    /// runs (the launcher's redactions of the command's output, as they accrue).
    pub fn audit_log(&self) -> sluice_audit::AuditLog {
        self.shared.audit.clone()
    }

    /// The placeholders of the declaration in force (a reload keeps every one a secret
    /// still declared had, and mints those of new secrets).
    pub fn placeholders(&self) -> Placeholders {
        self.shared.live.current().placeholders.clone()
    }

    /// The declaration in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.shared.live.current().policy.clone()
    }

    /// The declaration and the guard in force, of one generation: what must be read
    /// together (a guard's ids and a declaration's grants are one generation's).
    pub fn policy_and_guard(&self) -> (Arc<Policy>, Arc<Guard>) {
        let declared = self.shared.live.current();
        (declared.policy.clone(), declared.guard.clone())
    }

    /// The guard in force (it knows every value the run has known).
    pub fn guard(&self) -> Arc<Guard> {
        self.shared.live.current().guard.clone()
    }

    /// The guard in force, followed across reloads: for redacting the launched command's
    /// output with the same patterns as the proxy, whatever reloads bring.
    pub fn guard_in_force(&self) -> GuardInForce {
        GuardInForce::new(self.shared.live.clone())
    }

    /// Reads the declaration file again and puts it in force for new connections (what
    /// `SIGHUP` and `POST /reload` do): the new generation's number, or why it was refused
    /// (the declaration in force then stays). Audited as `reload` either way.
    pub async fn reload(&self) -> Result<u64, ReloadError> {
        self.control
            .reload()
            .await
            .map(|declared| declared.generation)
    }

    /// Changes to the generation of the declaration in force: 0 at start, one more at each
    /// reload put in force (`sluice serve` rewrites `placeholders.env` on each).
    pub fn generations(&self) -> watch::Receiver<u64> {
        self.shared.live.follow()
    }

    /// The admin endpoint's address, when it was asked for.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|(addr, _)| *addr)
    }

    /// The admin URL with its credentials, for the run directory's `admin-url` only (never
    /// the launched command's environment).
    pub fn admin_url(&self) -> Option<String> {
        self.admin.as_ref().map(|(addr, credentials)| {
            format!(
                "http://{}:{}@{addr}",
                credentials.user(),
                credentials.token()
            )
        })
    }

    /// The metrics page as a scrape would get it now.
    pub fn metrics(&self) -> String {
        self.control.scrape()
    }

    /// Stops accepting, lets in-flight requests finish within the drain timeout, then
    /// writes the audit log's `stop` record and flushes it.
    pub async fn shutdown(self) -> Result<(), sluice_audit::AuditError> {
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
        // Tokens the run minted that outlive it unless revoked (a GitHub App's), revoked
        // within the drain timeout; a failure is audited, never fatal.
        let revoked = tokio::time::timeout(
            limits.drain_timeout,
            crate::generation::minted::revoke_all(&self.shared),
        )
        .await;
        if revoked.is_err() {
            tracing::warn!("drain timeout: minted tokens left to expire on their own");
        }
        // Its last `deny` events (the refusals it held back) go in before `stop`.
        if let Some(resolver) = self.resolver {
            let _ = resolver.await;
        }
        self.shared.audit.clone().close()
    }
}

/// What the declaration grants each secret toward the network, for the `start` event:
/// `HOST PLACE` for each host pattern and place a swap may happen in, under the name its
/// `swap` events carry (a signing secret's own name, its place the signature). A minted
/// secret's parts are never swapped, so they have none.
fn start_grants(
    policy: &sluice_policies::Policy,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let pairs = |hosts: &[sluice_policies::HostPattern], places: &[&str]| -> Vec<String> {
        hosts
            .iter()
            .flat_map(|host| places.iter().map(move |place| format!("{host} {place}")))
            .collect()
    };
    let swapped = policy
        .secrets()
        .iter()
        .filter(|decl| decl.grants(sluice_policies::Sink::Egress) && decl.signs().is_none())
        .filter(|decl| {
            decl.mints()
                .is_none_or(|(_, part)| part == sluice_policies::MintPart::AccessToken)
        })
        .map(|decl| {
            let places: Vec<&str> = decl.locations().iter().map(|p| p.as_str()).collect();
            (decl.name().to_owned(), pairs(decl.hosts(), &places))
        });
    let signed = policy.signers().iter().map(|signer| {
        let grants = pairs(signer.hosts(), &[sluice_audit::SIGNATURE_LOCATION]);
        (signer.name().to_owned(), grants)
    });
    swapped.chain(signed).collect()
}

fn random_hex(bytes: usize) -> Result<String, StartError> {
    let mut raw = vec![0u8; bytes];
    getrandom::fill(&mut raw).map_err(StartError::Random)?;
    Ok(hex::encode(raw))
}
