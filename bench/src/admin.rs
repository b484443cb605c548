//! sluice's admin endpoint as a scraper reaches it (`/metrics`, once or every interval),
//! and as an approver does (`/v1/approvals`).

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::BenchError;

/// The admin endpoint, as a scraper reaches it.
#[derive(Clone)]
pub(crate) struct Admin {
    addr: SocketAddr,
    authorization: HeaderValue,
}

/// A scraper running until stopped.
pub(crate) struct Scraper {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<usize, BenchError>>,
}

impl Scraper {
    /// Stops it; how many pages it fetched.
    pub(crate) async fn stop(self) -> Result<usize, BenchError> {
        let _ = self.stop.send(true);
        self.task
            .await
            .map_err(|e| BenchError::peer("scraper", e))?
    }
}

impl Admin {
    /// From `admin-url` (`http://user:token@host:port`).
    pub(crate) fn from_url(url: &str) -> Result<Self, BenchError> {
        let rest = url.trim_start_matches("http://");
        let (userinfo, addr) = rest
            .rsplit_once('@')
            .ok_or_else(|| BenchError::peer("sluice", "admin-url has no credentials"))?;
        let addr = addr
            .parse()
            .map_err(|e| BenchError::peer("sluice", format!("admin-url: {e}")))?;
        let token = base64::engine::general_purpose::STANDARD.encode(userinfo);
        let authorization = HeaderValue::from_str(&format!("Basic {token}"))
            .map_err(|e| BenchError::peer("sluice", e))?;
        Ok(Self {
            addr,
            authorization,
        })
    }

    /// Fetches `/metrics` every `interval` (the first at once) until stopped. Between
    /// scrapes it sleeps, and wakes for nothing else: the load beside it keeps the client's
    /// threads.
    pub(crate) fn scrape_every(&self, interval: Duration) -> Scraper {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let admin = self.clone();
        let task = tokio::spawn(async move {
            let mut scrapes = 0;
            loop {
                admin.scrape().await?;
                scrapes += 1;
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    _ = stopped.changed() => return Ok(scrapes),
                }
            }
        });
        Scraper { stop, task }
    }

    /// One scrape, on a connection of its own, as Prometheus makes them: the page.
    pub(crate) async fn scrape(&self) -> Result<String, BenchError> {
        let (status, page) = self.request(http::Method::GET, "/metrics", "").await?;
        if !status.is_success() || !page.starts_with("# HELP") {
            return Err(BenchError::peer(
                "scraper",
                format!("/metrics answered {status}"),
            ));
        }
        Ok(page)
    }

    /// One request on a connection of its own: the status and the answer as text.
    pub(crate) async fn request(
        &self,
        method: http::Method,
        path: &str,
        body: &str,
    ) -> Result<(http::StatusCode, String), BenchError> {
        let failed = |e: String| BenchError::peer("admin endpoint", e);
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (mut send, conn) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| failed(e.to_string()))?;
        tokio::spawn(conn);
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header("authorization", self.authorization.clone())
            .body(Full::new(Bytes::copy_from_slice(body.as_bytes())))
            .map_err(|e| failed(e.to_string()))?;
        let response = send
            .send_request(request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let text = response
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&text).into_owned()))
    }
}
