//! What a proxy is started with: the declaration, where it listens and logs, and the limits
//! it holds clients and upstreams to.
//!
//! Plain data, read once at start: nothing here opens a socket or reads a secret.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use sluice_policies::Policy;

use crate::upstream::Timeouts;

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
    /// How long a use that needs approval (`approve:`) waits for a decision (`403
    /// approval-timeout` after).
    pub approval_timeout: Duration,
    /// Uses waiting for approval at once (`503 approvals-full` beyond).
    pub max_pending_approvals: usize,
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
            approval_timeout: Duration::from_secs(60),
            max_pending_approvals: 64,
        }
    }
}

/// Everything needed to start a proxy.
pub struct ProxyConfig {
    /// The compiled declaration.
    pub policy: Policy,
    /// The file it was read from, which a reload (`SIGHUP`, `POST /reload`) reads again;
    /// without one the proxy cannot reload.
    pub policy_path: Option<PathBuf>,
    /// Where the admin endpoint listens (`--admin`), if anywhere.
    pub admin: Option<SocketAddr>,
    /// Reload when the declaration file or a `file` source changes (looked at once a
    /// second); needs [`ProxyConfig::policy_path`]. On by default.
    pub watch_files: bool,
    /// Where to listen (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Where the audit log goes (appended to when it exists).
    pub audit_log: PathBuf,
    /// When the audit log rotates into numbered segments (never, by default).
    pub audit_rotation: sluice_audit::Rotation,
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
    /// proxy serves on the runtime that calls [`start`](crate::start) (tests, embedding).
    ///
    /// Why threads of their own: a connection, its tunnel and its upstream connection then
    /// stay on one thread, so handing a request from the client's task to the upstream's
    /// never wakes another core (measured in docs/benchmarks.md).
    pub workers: usize,
    /// The inherited variables the launcher withholds from its command, for the `start`
    /// audit event (names only).
    pub withheld_env: Vec<String>,
    /// The organisation's egress proxy: every upstream connection to a host outside its
    /// `NO_PROXY` goes through it (`CONNECT`, then TLS to the origin end to end).
    pub upstream_proxy: Option<crate::upstream::via::UpstreamProxy>,
    /// Where each use that starts waiting for approval is POSTed (`--approval-webhook`).
    pub approval_webhook: Option<Webhook>,
    /// What a reloaded declaration may not ask for, given how the proxy was started (a
    /// launcher's command already holds its environment): `Err` refuses the reload with its
    /// words. None: every declaration `check` passes is put in force.
    pub reload_gate: Option<ReloadGate>,
    /// How the run was started, for the `start` audit event: setting → what it was (the
    /// launcher's jail, `--pass-env`, `--clear-env`, ...). Never a value.
    pub start_settings: std::collections::BTreeMap<String, String>,
    /// A listener made elsewhere (the jail's, inside its network namespace) to serve the
    /// proxy on instead of binding [`ProxyConfig::listen`].
    pub listener: Option<std::net::TcpListener>,
    /// Where connections captured without a CONNECT arrive (the jail's redirect target):
    /// each is taken back to the name the resolver gave its address, then served as a
    /// CONNECT to it.
    pub transparent: Option<std::net::TcpListener>,
    /// The jail's resolver socket: reachable names get an address of the jail, every other
    /// NXDOMAIN and a `deny` event.
    pub dns: Option<std::net::UdpSocket>,
}

impl ProxyConfig {
    /// A configuration with default limits and timeouts.
    pub fn new(policy: Policy, listen: SocketAddr, audit_log: PathBuf) -> Self {
        Self {
            policy,
            policy_path: None,
            admin: None,
            watch_files: true,
            listen,
            audit_log,
            audit_rotation: sluice_audit::Rotation::default(),
            upstream_ca: Vec::new(),
            resolve: Vec::new(),
            limits: Limits::default(),
            timeouts: Timeouts::default(),
            workers: 0,
            withheld_env: Vec::new(),
            start_settings: std::collections::BTreeMap::new(),
            reload_gate: None,
            upstream_proxy: None,
            approval_webhook: None,
            listener: None,
            transparent: None,
            dns: None,
        }
    }
}

/// One worker per core the process may use: what `sluice serve` and `sluice run` start.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// A check of a reloaded declaration before it is built ([`ProxyConfig::reload_gate`]).
pub type ReloadGate =
    std::sync::Arc<dyn Fn(&sluice_policies::Policy) -> Result<(), String> + Send + Sync>;

/// Where the approval webhook is (`--approval-webhook`): `http://HOST:PORT/PATH`; what it is
/// sent and what it may answer is `ops::webhook`'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// `HOST:PORT`, as dialled and sent in `Host`.
    pub(crate) authority: String,
    /// The path (and query) POSTed to.
    pub(crate) path: String,
}

impl Webhook {
    /// Parses `http://HOST[:PORT][/PATH]`.
    ///
    /// # Errors
    ///
    /// A URL that is not `http://` with a host (`https://` is not taken yet: put the
    /// webhook, or a relay to it, on loopback).
    ///
    /// ```
    /// use sluice_proxy::Webhook;
    /// assert!(Webhook::parse("http://127.0.0.1:9000/decide").is_ok());
    /// assert!(Webhook::parse("https://approvals.example/decide").is_err());
    /// ```
    pub fn parse(url: &str) -> Result<Webhook, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("--approval-webhook {url:?}: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "--approval-webhook {url:?}: write an http:// URL (https:// is not taken yet; put the webhook, or a relay to it, on loopback)"
            ));
        }
        let authority = uri
            .authority()
            .filter(|a| !a.host().is_empty() && !a.as_str().contains('@'))
            .ok_or_else(|| format!("--approval-webhook {url:?}: no host, or credentials in it"))?;
        let authority = match authority.port_u16() {
            Some(_) => authority.to_string(),
            None => format!("{}:80", authority.host()),
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Webhook { authority, path })
    }
}
