//! The HTTP/1.1 keep-alive pool of one worker: idle upstream connections per origin
//! (scheme, host and port), reused by later requests to the same origin.
//!
//! This module owns reuse and nothing else: which address is dialled and how its TLS is
//! verified belong to the dialler (`connector.rs`), which every new connection passes
//! through. A connection is only ever reused for the origin it was dialled for, and
//! only once hyper says it is ready for a new request (the last response read to its end);
//! a closed one, or one idle longer than the idle timeout, is dropped, never used.
//!
//! Why not hyper-util's pooled client, which the HTTP/2 leg still uses: for HTTP/1.1 it
//! races every checkout against a lazily built dial, and spawns a task per response to hand
//! the connection back once the body is read. Here a connection goes back to its list as
//! soon as the response head arrives, and a checkout passes over those still busy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http::uri::{Authority, PathAndQuery};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use tokio::time::Instant;

use super::{Dialer, SendError, UpstreamError};
use crate::body::Body;

/// The most idle connections kept per origin; past it the oldest idle one is let go.
/// Busy ones (a response still being read) are bounded by the connection limit instead.
const MAX_IDLE_PER_ORIGIN: usize = 64;
/// How long a superseded generation's pool keeps an idle connection: long enough for the
/// next request of a tunnel still open under that generation, not the idle timeout, which
/// would keep every recent reload's connections (and their TLS buffers) open at once.
const RETIRED_IDLE: Duration = Duration::from_secs(2);

/// Idle HTTP/1.1 connections by origin.
pub(super) struct Http1Pool {
    dialer: Arc<Dialer>,
    /// Offers `http/1.1` alone in ALPN.
    tls: Arc<rustls::ClientConfig>,
    idle_timeout: Duration,
    idle: Mutex<HashMap<Origin, Vec<Idle>>>,
    /// Set once a newer generation's pool serves new connections ([`Http1Pool::retire`]).
    retired: AtomicBool,
    /// Whether the sweeper that closes expired connections runs (started on first use, on
    /// the worker's runtime).
    sweeping: AtomicBool,
}

/// Where a pooled connection goes: it is reused for exactly this.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    https: bool,
    authority: Authority,
}

struct Idle {
    sender: SendRequest<Body>,
    /// When it was last seen busy or handed back: its idle time starts once its response
    /// has been read, not when the response began.
    since: Instant,
}

impl Idle {
    /// Whether to let it go: closed, or idle for the idle timeout. A busy one never is.
    fn expired(&mut self, now: Instant, idle_timeout: Duration) -> bool {
        if self.sender.is_closed() {
            return true;
        }
        if !self.sender.is_ready() {
            self.since = now;
            return false;
        }
        now.duration_since(self.since) >= idle_timeout
    }
}

impl Http1Pool {
    pub(super) fn new(
        dialer: Arc<Dialer>,
        tls: Arc<rustls::ClientConfig>,
        idle_timeout: Duration,
    ) -> Arc<Self> {
        let pool = Arc::new(Self {
            dialer,
            tls,
            idle_timeout,
            idle: Mutex::new(HashMap::new()),
            retired: AtomicBool::new(false),
            sweeping: AtomicBool::new(false),
        });
        let mut pools = pool
            .dialer
            .common
            .http1_pools
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        pools.retain(|pool| pool.strong_count() > 0);
        pools.push(Arc::downgrade(&pool));
        drop(pools);
        pool
    }

    /// Marks this pool as a superseded generation's: from now on only the tunnels opened
    /// under that generation use it, so its idle connections are kept for
    /// [`RETIRED_IDLE`] instead of the idle timeout, and the longer-idle ones go now.
    pub(super) fn retire(&self) {
        if !self.retired.swap(true, Ordering::Relaxed) {
            self.sweep();
        }
    }

    /// How long an idle connection is kept here now.
    fn keep_idle(&self) -> Duration {
        if self.retired.load(Ordering::Relaxed) {
            RETIRED_IDLE.min(self.idle_timeout)
        } else {
            self.idle_timeout
        }
    }

    /// Connections held here ready for a request now (busy ones, whose response is still
    /// being read, are not idle).
    pub(super) fn idle_count(&self) -> u64 {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.values()
            .flatten()
            .filter(|entry| !entry.sender.is_closed() && entry.sender.is_ready())
            .count() as u64
    }

    /// Sends `request` (absolute URI, `https` or `http`) over an idle connection to its
    /// origin, or a new one, and returns the response head. The connection goes back
    /// to the pool at once; it is reused after its response has been read.
    pub(super) async fn send(
        self: &Arc<Self>,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, SendError> {
        let origin = Origin::of(request.uri()).map_err(SendError::Dial)?;
        let uri = request.uri().clone();
        let (mut sender, reused) = match self.checkout(&origin) {
            Some(sender) => (sender, true),
            None => (self.dial(&uri).await.map_err(SendError::Dial)?, false),
        };
        // Plain HTTP through the egress proxy: the request line keeps the absolute URI, and
        // the proxy's credentials ride along; to an origin server, the path alone.
        let via = (!origin.https)
            .then(|| {
                let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
                self.dialer
                    .proxy_for_plain(host, uri.port_u16().unwrap_or(80))
            })
            .flatten();
        match via {
            Some(via) => {
                if let Some(authorization) = via.authorization() {
                    request
                        .headers_mut()
                        .insert(http::header::PROXY_AUTHORIZATION, authorization);
                }
            }
            None => {
                let path = uri
                    .path_and_query()
                    .cloned()
                    .unwrap_or_else(|| PathAndQuery::from_static("/"));
                *request.uri_mut() = Uri::from(path);
            }
        }
        let proxy_name = via.map(super::via::UpstreamProxy::name);
        let response = match sender.try_send_request(request).await {
            Ok(response) => response,
            Err(mut error) => match error.take_message() {
                // A reused connection the server closed as the request went out, with
                // nothing of it written: once more on a new connection is safe.
                Some(request) if reused => {
                    sender = self.dial(&uri).await.map_err(SendError::Dial)?;
                    sender
                        .send_request(request)
                        .await
                        .map_err(|e| SendError::Http(Box::new(e)))?
                }
                _ => return Err(SendError::Http(Box::new(error.into_error()))),
            },
        };
        self.checkin(origin, sender);
        // The proxy's own refusal of its credentials is sluice's failure, not the origin's
        // answer: never passed on as a 407 the sandbox would take for sluice's.
        if let Some(proxy) = proxy_name
            && response.status() == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED
        {
            return Err(SendError::Dial(UpstreamError::ProxyAuth { proxy }));
        }
        Ok(response)
    }

    /// A ready connection to `origin`, most recently used first; drops the expired
    /// ones it passes and leaves the busy ones.
    fn checkout(&self, origin: &Origin) -> Option<SendRequest<Body>> {
        let (now, keep) = (Instant::now(), self.keep_idle());
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(origin)?;
        let mut i = list.len();
        while i > 0 {
            i -= 1;
            if list[i].expired(now, keep) {
                list.remove(i);
            } else if list[i].sender.is_ready() {
                return Some(list.remove(i).sender);
            }
        }
        None
    }

    fn checkin(self: &Arc<Self>, origin: Origin, sender: SendRequest<Body>) {
        if sender.is_closed() {
            return;
        }
        {
            let (now, keep) = (Instant::now(), self.keep_idle());
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            let list = idle.entry(origin).or_default();
            list.retain_mut(|entry| !entry.expired(now, keep));
            let ready = list.iter().filter(|e| e.sender.is_ready()).count();
            if ready >= MAX_IDLE_PER_ORIGIN
                && let Some(oldest) = list.iter().position(|e| e.sender.is_ready())
            {
                list.remove(oldest);
            }
            list.push(Idle { sender, since: now });
        }
        if !self.sweeping.swap(true, Ordering::Relaxed) {
            start_sweeper(Arc::downgrade(self));
        }
    }

    /// A new connection, through the dialler (resolve, address policy, verified TLS).
    async fn dial(&self, uri: &Uri) -> Result<SendRequest<Body>, UpstreamError> {
        let conn = self.dialer.connect_uri(uri, self.tls.clone()).await?;
        super::http1_over(conn, uri.host().unwrap_or_default(), false).await
    }

    /// Makes every idle connection here `by` older, for tests of what expires when.
    #[cfg(test)]
    pub(super) fn age(&self, by: Duration) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        for entry in idle.values_mut().flatten() {
            entry.since = entry.since.checked_sub(by).unwrap_or(entry.since);
        }
    }

    /// Drops every expired connection, so that an origin no request comes back to
    /// does not keep its connections open.
    pub(super) fn sweep(&self) {
        let (now, keep) = (Instant::now(), self.keep_idle());
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|_, list| {
            list.retain_mut(|entry| !entry.expired(now, keep));
            !list.is_empty()
        });
    }
}

/// Sweeps `pool` every half of its idle time (shorter once it is retired) for as long as
/// it exists.
fn start_sweeper(pool: Weak<Http1Pool>) {
    tokio::spawn(async move {
        loop {
            let period = match pool.upgrade() {
                Some(pool) => (pool.keep_idle() / 2).max(Duration::from_millis(100)),
                None => return,
            };
            tokio::time::sleep(period).await;
            match pool.upgrade() {
                Some(pool) => pool.sweep(),
                None => return,
            }
        }
    });
}

impl Origin {
    fn of(uri: &Uri) -> Result<Self, UpstreamError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(UpstreamError::BadTarget(uri.to_string())),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| UpstreamError::BadTarget(uri.to_string()))?;
        Ok(Self { https, authority })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_differ_by_scheme_host_and_port() {
        let of = |uri: &str| Origin::of(&uri.parse().unwrap()).unwrap();
        assert_eq!(
            of("https://api.test:8443/a"),
            of("https://api.test:8443/b?q")
        );
        assert_ne!(of("https://api.test:8443/"), of("http://api.test:8443/"));
        assert_ne!(of("https://api.test:8443/"), of("https://api.test:8444/"));
        assert_ne!(of("https://api.test:8443/"), of("https://other.test:8443/"));
        assert!(Origin::of(&"/relative".parse().unwrap()).is_err());
        assert!(Origin::of(&"ftp://api.test/".parse().unwrap()).is_err());
    }
}
