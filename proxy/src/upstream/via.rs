//! The organisation's egress proxy (`--upstream-proxy`, or sluice's own `HTTPS_PROXY`): every
//! upstream connection to a host outside `NO_PROXY` is a `CONNECT` through it, then TLS to
//! the origin end to end, verified (and pinned) as always.
//!
//! Only the route changes. The name decisions (egress, grants) are the origin's, made before
//! anything is dialled; the address policy (`allow_ips`, sluice's own listeners) applies to
//! the address dialled, which is the proxy's; the origin's address is the proxy's to
//! resolve. A `NO_PROXY` host is dialled directly under the usual address policy.
//!
//! It must never put the proxy's credentials anywhere but its `Proxy-Authorization`: they
//! are held zeroized, `Debug` and [`UpstreamProxy::describe`] elide them, and no error
//! carries them (an error names the proxy by host and port, and its status).

use std::fmt;
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zeroize::Zeroizing;

use super::UpstreamError;

/// The largest `CONNECT` answer head read from the proxy.
const MAX_HEAD: usize = 16 * 1024;

/// The egress proxy every upstream connection goes through, and the hosts that do not.
pub struct UpstreamProxy {
    host: String,
    port: u16,
    /// `Basic base64(user:password)`, from the URL.
    authorization: Option<Zeroizing<String>>,
    no_proxy: Vec<NoProxy>,
}

impl fmt::Debug for UpstreamProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// One `NO_PROXY` entry, as curl reads them: `*` (every host), a name (itself and its
/// subdomains; a leading `.` is the same), an IP address, each with an optional `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxy {
    All,
    Host { name: String, port: Option<u16> },
}

/// Why an upstream proxy URL cannot be used (never quoting its credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the upstream proxy URL {url}: {why}")]
pub struct UpstreamProxyError {
    url: String,
    why: &'static str,
}

impl UpstreamProxy {
    /// Parses `http://[USER:PASS@]HOST[:PORT]` (port 80 by default, as curl) and `no_proxy`
    /// (comma- or space-separated, as curl reads `NO_PROXY`).
    ///
    /// # Errors
    ///
    /// [`UpstreamProxyError`] naming the URL with its credentials elided.
    pub fn parse(url: &str, no_proxy: &str) -> Result<UpstreamProxy, UpstreamProxyError> {
        let rest = url.trim();
        let elided = elide(rest);
        let error = |why| UpstreamProxyError {
            url: elided.clone(),
            why,
        };
        let rest = match rest.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some(_) => {
                return Err(error(
                    "only http:// proxies are supported (CONNECT in the clear, then TLS to the origin)",
                ));
            }
            None => rest,
        };
        let rest = rest.trim_end_matches('/');
        let (userinfo, authority) = match rest.rsplit_once('@') {
            Some((userinfo, authority)) => (Some(userinfo), authority),
            None => (None, rest),
        };
        if authority.contains('/') {
            return Err(error("a proxy URL has no path"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| error("the port is not a number"))?;
                (host, port)
            }
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || port == 0 {
            return Err(error("no host or port"));
        }
        let authorization = userinfo.map(|userinfo| {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            let decode = |s: &str| {
                Zeroizing::new(
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned(),
                )
            };
            let (user, password) = (decode(user), decode(password));
            let pair = Zeroizing::new(format!("{}:{}", user.as_str(), password.as_str()));
            // Sized once: no reallocation leaves an unwiped copy of the encoded password.
            let mut value = Zeroizing::new(String::with_capacity(6 + pair.len() * 4 / 3 + 4));
            value.push_str("Basic ");
            base64::engine::general_purpose::STANDARD.encode_string(pair.as_bytes(), &mut value);
            value
        });
        Ok(UpstreamProxy {
            host: host.to_ascii_lowercase(),
            port,
            authorization,
            no_proxy: no_proxy_list(no_proxy),
        })
    }

    /// The proxy as it may be said: `http://HOST:PORT`, with `(credentials elided)` when it
    /// has them, and the `NO_PROXY` hosts.
    pub fn describe(&self) -> String {
        let mut text = format!("http://{}:{}", bracketed(&self.host), self.port);
        if self.authorization.is_some() {
            text.push_str(" (credentials elided)");
        }
        if !self.no_proxy.is_empty() {
            let hosts: Vec<String> = self
                .no_proxy
                .iter()
                .map(|entry| match entry {
                    NoProxy::All => "*".to_owned(),
                    NoProxy::Host { name, port: None } => name.clone(),
                    NoProxy::Host {
                        name,
                        port: Some(port),
                    } => format!("{}:{port}", bracketed(name)),
                })
                .collect();
            text.push_str(&format!("; not for {}", hosts.join(", ")));
        }
        text
    }

    /// The proxy's host and port, dialled (and checked by the address policy) instead of
    /// the origin's.
    pub(crate) fn address(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    /// `Proxy-Authorization` for a request in absolute form, when the URL had credentials.
    pub(crate) fn authorization(&self) -> Option<http::HeaderValue> {
        let value = self.authorization.as_deref()?;
        let mut header = http::HeaderValue::from_str(value).ok()?;
        header.set_sensitive(true);
        Some(header)
    }

    /// The proxy's `host:port`, as errors name it.
    pub(crate) fn name(&self) -> String {
        format!("{}:{}", bracketed(&self.host), self.port)
    }

    /// Whether `host:port` is dialled directly (`NO_PROXY`).
    pub(crate) fn bypasses(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.no_proxy.iter().any(|entry| match entry {
            NoProxy::All => true,
            NoProxy::Host { name, port: want } => {
                want.is_none_or(|want| want == port)
                    && (host == *name
                        || host
                            .strip_suffix(name.as_str())
                            .is_some_and(|head| head.ends_with('.')))
            }
        })
    }

    /// Asks the proxy, over `stream`, for a tunnel to `host:port`; the stream is the tunnel
    /// once it answers `2xx`.
    pub(crate) async fn tunnel(
        &self,
        mut stream: TcpStream,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<TcpStream, UpstreamError> {
        let proxy = format!("{}:{}", bracketed(&self.host), self.port);
        let target = format!("{}:{port}", bracketed(host));
        let mut head = Zeroizing::new(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"));
        if let Some(authorization) = &self.authorization {
            head.push_str("Proxy-Authorization: ");
            head.push_str(authorization);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let exchange = async {
            stream.write_all(head.as_bytes()).await?;
            read_head(&mut stream).await
        };
        let answer = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| UpstreamError::ProxyUnreachable {
                proxy: proxy.clone(),
                why: "no answer to CONNECT in time".into(),
            })?
            .map_err(|error| UpstreamError::ProxyUnreachable {
                proxy: proxy.clone(),
                why: error.to_string(),
            })?;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        let status = match response.parse(&answer) {
            Ok(httparse::Status::Complete(_)) => response.code.unwrap_or(0),
            _ => {
                return Err(UpstreamError::ProxyUnreachable {
                    proxy,
                    why: "its answer to CONNECT is not HTTP".into(),
                });
            }
        };
        match status {
            200..=299 => Ok(stream),
            407 => Err(UpstreamError::ProxyAuth { proxy }),
            status => Err(UpstreamError::ProxyRefused {
                proxy,
                target,
                status,
            }),
        }
    }
}

/// Reads a response head (up to the blank line), bounded, leaving nothing of the tunnel
/// behind: byte by byte, since the tunnel's first bytes follow at once.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err(std::io::Error::other(
                "its answer to CONNECT is over 16 KiB",
            ));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other("it closed the connection"));
        }
        head.push(byte[0]);
    }
    Ok(head)
}

fn no_proxy_list(list: &str) -> Vec<NoProxy> {
    list.split([',', ' '])
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            if entry == "*" {
                return NoProxy::All;
            }
            let entry = entry.trim_start_matches("*.").trim_start_matches('.');
            let (name, port) = match entry.rsplit_once(':') {
                Some((name, port))
                    if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') =>
                {
                    (name, port.parse().ok())
                }
                _ => (entry, None),
            };
            NoProxy::Host {
                name: name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .trim_end_matches('.')
                    .to_ascii_lowercase(),
                port,
            }
        })
        .collect()
}

/// The URL with anything before `@` in its authority replaced: what may be said of it.
fn elide(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    match rest.rsplit_once('@') {
        Some((_, authority)) => format!("{scheme}://***@{authority}"),
        None => format!("{scheme}://{rest}"),
    }
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_url_is_read_as_curl_reads_it_and_said_without_its_credentials() {
        let proxy = UpstreamProxy::parse("http://alice:s%3Acret@Proxy.Corp:3128/", "").unwrap();
        assert_eq!(proxy.address(), ("proxy.corp", 3128));
        assert_eq!(
            proxy.authorization.as_deref().map(String::as_str),
            Some("Basic YWxpY2U6czpjcmV0")
        );
        let said = format!("{} {proxy:?}", proxy.describe());
        assert!(!said.contains("s%3Acret") && !said.contains("s:cret") && !said.contains("alice"));
        assert!(said.contains("credentials elided"), "{said}");
        assert_eq!(
            UpstreamProxy::parse("proxy.corp", "").unwrap().address(),
            ("proxy.corp", 80)
        );
        for bad in [
            "https://p:3128",
            "socks5://p:1080",
            "http://p:port",
            "http://p:3128/path",
            "http://",
        ] {
            let error = UpstreamProxy::parse(bad, "").unwrap_err().to_string();
            assert!(!error.is_empty(), "{bad}");
        }
        let error = UpstreamProxy::parse("http://bob:hunter2@p:x", "")
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains("hunter2") && !error.contains("bob"),
            "{error}"
        );
    }

    #[test]
    fn no_proxy_matches_names_subdomains_ports_and_everything() {
        let proxy = UpstreamProxy::parse(
            "http://p:3128",
            "localhost, .internal.corp,10.0.0.7 api.test:8443",
        )
        .unwrap();
        assert!(proxy.bypasses("localhost", 443));
        assert!(proxy.bypasses("a.internal.corp", 443));
        assert!(proxy.bypasses("internal.corp", 443));
        assert!(!proxy.bypasses("xinternal.corp", 443));
        assert!(proxy.bypasses("10.0.0.7", 80));
        assert!(proxy.bypasses("api.test", 8443));
        assert!(!proxy.bypasses("api.test", 443));
        assert!(!proxy.bypasses("github.com", 443));
        assert!(
            UpstreamProxy::parse("http://p:3128", "*")
                .unwrap()
                .bypasses("anything", 1)
        );
    }
}
