//! A client of a running proxy's admin endpoint, for the commands that talk to it (`sluice
//! redact --run-dir`, `sluice approve`): the URL read from the run directory's `admin-url`
//! (or the file `sluice run --admin-url-file` wrote), its credentials sent as Basic.
//!
//! It never prints the URL: the token in it is the admin credential.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::BodyExt;

/// Where the admin endpoint listens, and its credentials.
pub(crate) struct Admin {
    /// `HOST:PORT`.
    pub(crate) addr: String,
    /// `Basic BASE64(USER:TOKEN)`.
    pub(crate) authorization: String,
}

/// The file holding the admin URL: `DIR/admin-url`, or the file named.
pub(crate) fn url_file(run_dir: Option<&Path>, file: Option<&Path>) -> Option<PathBuf> {
    match (run_dir, file) {
        (Some(dir), _) => Some(dir.join("admin-url")),
        (None, Some(file)) => Some(file.to_owned()),
        (None, None) => None,
    }
}

impl Admin {
    /// Reads `http://USER:TOKEN@HOST:PORT` from `file`.
    pub(crate) fn from_file(file: &Path) -> io::Result<Self> {
        use base64::Engine;
        let url = std::fs::read_to_string(file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
        let rest = url.trim().trim_start_matches("http://");
        let Some((userinfo, addr)) = rest.rsplit_once('@') else {
            return Err(io::Error::other(format!(
                "{}: not an admin URL (http://USER:TOKEN@HOST:PORT)",
                file.display()
            )));
        };
        Ok(Self {
            addr: addr.to_owned(),
            authorization: format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(userinfo)
            ),
        })
    }

    /// One request on a connection of its own: the status and the whole answer.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Bytes,
    ) -> io::Result<(http::StatusCode, Bytes)> {
        let tcp = tokio::net::TcpStream::connect(&self.addr)
            .await
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("the admin endpoint at {}: {e}", self.addr),
                )
            })?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(io::Error::other)?;
        tokio::spawn(conn);
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, self.addr.as_str())
            .header(http::header::AUTHORIZATION, self.authorization.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(body))
            .map_err(io::Error::other)?;
        let response = send.send_request(request).await.map_err(io::Error::other)?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(io::Error::other)?
            .to_bytes();
        Ok((status, body))
    }
}
