//! The soak's mixed load: `concurrency` workers, each sending one request at a time until
//! the deadline, drawn from a fixed mix of kinds (normal, streamed both ways, echoes of the
//! secret, upstream resets and stalls, refusals, a failing upstream handshake), over
//! HTTP/1.1 and HTTP/2, on kept-alive connections and on new tunnels.
//!
//! Each answer is judged against what its kind must get, and every header and body the
//! client receives is searched for the real value. Only loopback addresses are dialled.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::BodyExt;

use super::answer::{Seen, check_leaks, describe, judge};
use super::body::{self, SoakBody};
use super::minted::MINTED_PATH;
use super::tunnel::{Conn, Opened, open};
use super::upstream::{BAD_TLS_HOST, GRANTED_HOST, REFUSED_PATH, TUNNEL_HEADER, UNGRANTED_HOST};
use super::values::Values;
use crate::pki::{ClientTls, Proto};

/// How long opening a connection or completing a request may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a client waits on a long stall before it gives up and drops the connection.
const ABANDON_AFTER: Duration = Duration::from_secs(1);
/// How long the upstream stalls for the requests the client waits out.
const SHORT_STALL_MS: u64 = 300;
/// How long it stalls for those the client abandons (far beyond [`ABANDON_AFTER`]).
const LONG_STALL_MS: u64 = 20_000;
/// Requests on one kept-alive connection before it is replaced by a new tunnel.
const REQUESTS_PER_CONNECTION: u32 = 32;
/// Upload size.
pub(super) const UPLOAD_BYTES: usize = 256 * 1024;
/// The most reasons kept per kind (all are counted).
const KEPT_REASONS: usize = 3;

/// What the client needs to reach the upstreams through sluice.
pub(crate) struct Client {
    /// sluice's listener.
    pub(crate) proxy: SocketAddr,
    /// `Proxy-Authorization` value.
    pub(crate) proxy_auth: String,
    /// Trust for the run CA.
    pub(crate) tls: ClientTls,
    /// The secret's placeholder.
    pub(crate) placeholder: String,
    /// The minted credential's placeholder, with `--mint-lifetime` (the mix then has
    /// [`Kind::Minted`] requests).
    pub(crate) minted_placeholder: Option<String>,
    /// The real values, every one the secret has had (searched for, never sent).
    pub(crate) values: Arc<Values>,
    /// Port of the normal upstream (granted and ungranted hosts).
    pub(crate) good_port: u16,
    /// Port of the bad-TLS upstream.
    pub(crate) bad_tls_port: u16,
}

/// The kinds of request in the mix, with their weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// `GET /ok` with the placeholder in `Authorization`: 200, swapped.
    Ok,
    /// `GET /stream`: 256 KiB streamed back whole.
    Stream,
    /// `POST /upload`: 256 KiB streamed up, its size answered.
    Upload,
    /// `GET /echo`: the value comes back in headers and body, redacted.
    Echo,
    /// `GET /reset`: the upstream breaks off mid-body; the client must see an error.
    Reset,
    /// `GET /stall-head`, short: answered after a pause.
    StallHead,
    /// `GET /stall-head`, long: the client gives up.
    StallHeadAbandoned,
    /// `GET /stall-body`, short: the body resumes after a pause.
    StallBody,
    /// `GET /stall-body`, long: the client gives up mid-body.
    StallBodyAbandoned,
    /// The placeholder in a header the secret does not grant, toward the granted host: 403.
    WrongHeader,
    /// The placeholder toward a host the secret does not grant: 403.
    Ungranted,
    /// A host whose upstream certificate names another host: 502.
    BadTls,
    /// `GET /minted` with the minted credential's placeholder: 200, a live token swapped
    /// in, and echoed back redacted.
    Minted,
}

const MIX: &[(Kind, u32)] = &[
    (Kind::Ok, 30),
    (Kind::Stream, 8),
    (Kind::Upload, 8),
    (Kind::Echo, 10),
    (Kind::Reset, 6),
    (Kind::StallHead, 3),
    (Kind::StallHeadAbandoned, 2),
    (Kind::StallBody, 3),
    (Kind::StallBodyAbandoned, 2),
    (Kind::WrongHeader, 6),
    (Kind::Ungranted, 8),
    (Kind::BadTls, 4),
    (Kind::Minted, 8),
];

/// The mix: every kind, less [`Kind::Minted`] when the soak mints no credential.
fn mix(minted: bool) -> impl Iterator<Item = &'static (Kind, u32)> {
    MIX.iter()
        .filter(move |(kind, _)| minted || *kind != Kind::Minted)
}

impl Kind {
    /// Every kind of the mix, for reports.
    pub(crate) fn all(minted: bool) -> impl Iterator<Item = Kind> {
        mix(minted).map(|(kind, _)| *kind)
    }

    /// Its name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Stream => "stream",
            Self::Upload => "upload",
            Self::Echo => "echo-secret",
            Self::Reset => "upstream-reset",
            Self::StallHead => "stall-head",
            Self::StallHeadAbandoned => "stall-head-abandoned",
            Self::StallBody => "stall-body",
            Self::StallBodyAbandoned => "stall-body-abandoned",
            Self::WrongHeader => "wrong-header-403",
            Self::Ungranted => "ungranted-host-403",
            Self::BadTls => "bad-upstream-tls-502",
            Self::Minted => "minted-token",
        }
    }

    /// Whether it needs a tunnel of its own (another host).
    fn own_tunnel(self) -> bool {
        matches!(self, Self::Ungranted | Self::BadTls)
    }

    fn abandoned(self) -> bool {
        matches!(self, Self::StallHeadAbandoned | Self::StallBodyAbandoned)
    }
}

/// How the requests of one kind went.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct KindTally {
    /// Answers as the kind requires.
    pub(crate) expected: u64,
    /// Anything else.
    pub(crate) unexpected: u64,
    /// The first few unexpected answers, described.
    pub(crate) reasons: Vec<String>,
}

/// What the load saw.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Per kind.
    pub(crate) kinds: BTreeMap<Kind, KindTally>,
    /// Requests sent over HTTP/1.1 and HTTP/2.
    pub(crate) h1: u64,
    /// Requests sent over HTTP/2.
    pub(crate) h2: u64,
    /// Tunnels opened.
    pub(crate) tunnels: u64,
    /// Requests never sent because sluice had closed their kept-alive connection (it ends
    /// the tunnels of a declaration a reload replaced, once their work is done), sent
    /// again on a new tunnel as a client's pool does.
    pub(crate) resent: u64,
    /// Times the client received the real value (described; never the value itself).
    pub(crate) leaks: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        for (kind, theirs) in other.kinds {
            let ours = self.kinds.entry(kind).or_default();
            ours.expected += theirs.expected;
            ours.unexpected += theirs.unexpected;
            for reason in theirs.reasons {
                if ours.reasons.len() < KEPT_REASONS {
                    ours.reasons.push(reason);
                }
            }
        }
        self.h1 += other.h1;
        self.h2 += other.h2;
        self.tunnels += other.tunnels;
        self.resent += other.resent;
        self.leaks.extend(other.leaks);
    }

    fn note(&mut self, kind: Kind, verdict: Result<(), String>) {
        let entry = self.kinds.entry(kind).or_default();
        match verdict {
            Ok(()) => entry.expected += 1,
            Err(reason) => {
                entry.unexpected += 1;
                if entry.reasons.len() < KEPT_REASONS {
                    entry.reasons.push(reason);
                }
            }
        }
    }

    /// All requests sent.
    pub(crate) fn total(&self) -> u64 {
        self.kinds.values().map(|k| k.expected + k.unexpected).sum()
    }

    /// All unexpected answers.
    pub(crate) fn unexpected(&self) -> u64 {
        self.kinds.values().map(|k| k.unexpected).sum()
    }
}

/// Runs `concurrency` workers until `deadline`, or until `stop` is set.
pub(crate) async fn run(
    client: Arc<Client>,
    concurrency: usize,
    deadline: Instant,
    stop: Arc<AtomicBool>,
) -> Tally {
    let workers: Vec<_> = (0..concurrency)
        .map(|id| tokio::spawn(worker(client.clone(), id as u64, deadline, stop.clone())))
        .collect();
    let mut tally = Tally::default();
    for worker in workers {
        if let Ok(theirs) = worker.await {
            tally.merge(theirs);
        }
    }
    tally
}

/// A small deterministic generator (xorshift): the mix is the same on every run.
struct Dice {
    state: u64,
    minted: bool,
}

impl Dice {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn kind(&mut self) -> Kind {
        let total: u32 = mix(self.minted).map(|(_, w)| w).sum();
        let mut roll = (self.next() % u64::from(total)) as u32;
        for (kind, weight) in mix(self.minted) {
            if roll < *weight {
                return *kind;
            }
            roll -= weight;
        }
        Kind::Ok
    }
}

async fn worker(client: Arc<Client>, id: u64, deadline: Instant, stop: Arc<AtomicBool>) -> Tally {
    let mut tally = Tally::default();
    let mut dice = Dice {
        state: 0x9e37_79b9_7f4a_7c15 ^ (id + 1).wrapping_mul(0xff51_afd7_ed55_8ccd),
        minted: client.minted_placeholder.is_some(),
    };
    // The kept-alive connection, its uses, and when it was opened (ms).
    let mut kept: Option<(Conn, u32, u64)> = None;
    let mut next_proto = if id.is_multiple_of(2) {
        Proto::H1
    } else {
        Proto::H2
    };
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let kind = dice.kind();
        // One request in four toward the granted host goes on a new tunnel; the others on
        // the worker's kept-alive connection.
        let fresh = kind.own_tunnel() || dice.next().is_multiple_of(4);
        let (conn, uses, opened) = match kept.take() {
            Some(kept) if !fresh => kept,
            _ => {
                let proto = next_proto;
                next_proto = match proto {
                    Proto::H1 => Proto::H2,
                    Proto::H2 => Proto::H1,
                };
                let (host, port) = match kind {
                    Kind::Ungranted => (UNGRANTED_HOST, client.good_port),
                    Kind::BadTls => (BAD_TLS_HOST, client.bad_tls_port),
                    _ => (GRANTED_HOST, client.good_port),
                };
                tally.tunnels += 1;
                // Taken before the CONNECT: a tunnel opened after a rotation was in force
                // must carry the new value.
                let opened_ms = client.values.now_ms();
                match tokio::time::timeout(PATIENCE, open(&client, host, port, proto)).await {
                    Ok(Ok(conn)) => (conn, 0, opened_ms),
                    Ok(Err(Opened::Refused(status))) if kind == Kind::BadTls && status == 502 => {
                        // sluice may check the upstream before it answers the CONNECT.
                        tally.note(kind, Ok(()));
                        continue;
                    }
                    Ok(Err(failure)) => {
                        tally.note(kind, Err(format!("opening a tunnel: {failure}")));
                        pause().await;
                        continue;
                    }
                    Err(_) => {
                        tally.note(kind, Err("opening a tunnel took over 30 s".to_owned()));
                        continue;
                    }
                }
            }
        };
        let mut conn = conn;
        match conn {
            Conn::H1(_) => tally.h1 += 1,
            Conn::H2(_) => tally.h2 += 1,
        }
        let (verdict, reusable) = one(&client, &mut conn, opened, kind, &mut tally.leaks).await;
        // A connection sluice closed before this request went out (a reload ends the
        // tunnels of the declaration it replaced once their work is done: a kept-alive one,
        // or one opened just before the reload), or a `421 tunnel-outdated`: not an answer
        // to it. A client's pool sends it again on a new connection (RFC 9110 §9.2.2);
        // so does this, when a reload was asked since the tunnel opened. Otherwise sluice
        // had no reason to: unexpected.
        if matches!(&verdict, Err(why) if why.starts_with(NOT_SENT))
            && client.values.reloaded_since(opened)
        {
            tally.resent += 1;
            continue;
        }
        let verdict = verdict.map_err(|why| {
            // Where and when, so that one unexpected failure in a long run can be explained.
            let since_reload = client
                .values
                .since_reload_ms()
                .map_or_else(|| "none".to_owned(), |ms| format!("{ms} ms"));
            format!(
                "{why} ({}, at {} ms, tunnel {} ms old, last reload asked {since_reload} ago)",
                match conn {
                    Conn::H1(_) => "HTTP/1.1",
                    Conn::H2(_) => "HTTP/2",
                },
                client.values.now_ms(),
                client.values.now_ms().saturating_sub(opened),
            )
        });
        if verdict.is_err() {
            pause().await;
        }
        tally.note(kind, verdict);
        if reusable && !fresh && uses + 1 < REQUESTS_PER_CONNECTION {
            kept = Some((conn, uses + 1, opened));
        }
    }
    tally
}

/// A short pause after a failure, so a broken proxy is not hammered in a tight loop.
async fn pause() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// Sends one request of `kind`, judges the answer; returns the verdict and whether the
/// connection may carry another request.
pub(super) async fn one(
    client: &Client,
    conn: &mut Conn,
    opened: u64,
    kind: Kind,
    leaks: &mut Vec<String>,
) -> (Result<(), String>, bool) {
    let request = request(client, conn, opened, kind);
    let exchange = exchange(conn, request);
    if kind.abandoned() {
        return match tokio::time::timeout(ABANDON_AFTER, exchange).await {
            // Dropping the exchange drops the stream; the connection goes with it.
            Err(_) => (Ok(()), false),
            // Never sent: judged as any request's (sent again on a new tunnel).
            Ok(Err(why)) if why.starts_with(NOT_SENT) => (Err(why), false),
            Ok(seen) => (
                Err(format!(
                    "answered before the stall ended: {}",
                    describe(&seen)
                )),
                false,
            ),
        };
    }
    let seen = match tokio::time::timeout(PATIENCE, exchange).await {
        Ok(seen) => seen,
        Err(_) => return (Err(format!("no answer within {PATIENCE:?}")), false),
    };
    let seen = match seen {
        Ok(seen) => seen,
        // Never sent: judged as any request's (sent again, when a reload explains it).
        Err(why) if why.starts_with(NOT_SENT) => return (Err(why), false),
        // The upstream broke off before sluice could answer: it may equally drop the
        // client's connection or stream.
        Err(_) if kind == Kind::Reset => return (Ok(()), false),
        Err(why) => return (Err(why), false),
    };
    check_leaks(client, kind, &seen, leaks);
    // A tunnel opened under a declaration since replaced, asked for a token minted since:
    // refused before anything was sent, so that the client opens a new tunnel (RFC 9110
    // §15.5.20 lets it retry on another connection). Sent again, as a request never sent.
    if seen.status == 421
        && seen.headers.get("sluice-error").map(HeaderValue::as_bytes) == Some(b"tunnel-outdated")
    {
        return (Err(format!("{NOT_SENT}: 421 tunnel-outdated")), false);
    }
    let verdict = judge(client, kind, &seen);
    let reusable = seen.body.is_ok() && kind != Kind::Reset;
    (verdict, reusable)
}

/// The request for `kind` on `conn`.
fn request(client: &Client, conn: &Conn, opened: u64, kind: Kind) -> Request<SoakBody> {
    let host = match kind {
        Kind::Ungranted => UNGRANTED_HOST,
        Kind::BadTls => BAD_TLS_HOST,
        _ => GRANTED_HOST,
    };
    let port = if kind == Kind::BadTls {
        client.bad_tls_port
    } else {
        client.good_port
    };
    let target = match kind {
        Kind::Ok | Kind::BadTls => "/ok".to_owned(),
        Kind::Stream => "/stream".to_owned(),
        Kind::Upload => "/upload".to_owned(),
        Kind::Echo => "/echo".to_owned(),
        Kind::Reset => "/reset".to_owned(),
        Kind::StallHead => format!("/stall-head?ms={SHORT_STALL_MS}"),
        Kind::StallHeadAbandoned => format!("/stall-head?ms={LONG_STALL_MS}"),
        Kind::StallBody => format!("/stall-body?ms={SHORT_STALL_MS}"),
        Kind::StallBodyAbandoned => format!("/stall-body?ms={LONG_STALL_MS}"),
        Kind::WrongHeader | Kind::Ungranted => REFUSED_PATH.to_owned(),
        Kind::Minted => MINTED_PATH.to_owned(),
    };
    let authority = format!("{host}:{port}");
    let builder = match conn {
        Conn::H1(_) => Request::builder()
            .uri(target)
            .header(http::header::HOST, authority),
        Conn::H2(_) => Request::builder().uri(format!("https://{authority}{target}")),
    };
    let builder = builder.header(TUNNEL_HEADER, opened);
    let bearer = format!("Bearer {}", client.placeholder);
    let builder = match kind {
        // The placeholder where the secret does not grant it: another header.
        Kind::WrongHeader => builder
            .header("x-api-key", client.placeholder.as_str())
            .header(http::header::AUTHORIZATION, "Bearer not-a-placeholder"),
        // No placeholder: the request must get as far as dialling the upstream.
        Kind::BadTls => builder,
        Kind::Minted => builder.header(
            http::header::AUTHORIZATION,
            format!(
                "Bearer {}",
                client.minted_placeholder.as_deref().unwrap_or_default()
            ),
        ),
        _ => builder.header(http::header::AUTHORIZATION, bearer),
    };
    let (builder, body) = if kind == Kind::Upload {
        let (feed, body) = body::channel(None);
        tokio::spawn(async move {
            let chunk = Bytes::from(vec![b'u'; 16 * 1024]);
            for _ in 0..UPLOAD_BYTES / chunk.len() {
                if feed.send(Ok(chunk.clone())).await.is_err() {
                    break;
                }
            }
        });
        (builder.method("POST"), body)
    } else {
        (builder.method("GET"), body::empty())
    };
    builder.body(body).unwrap_or_else(|_| {
        // Every part above is well-formed; an empty request would fail its check visibly.
        Request::new(body::empty())
    })
}

/// Whether `e` is a stream a server's graceful `GOAWAY` (`NO_ERROR`) left untaken.
fn untaken_by_goaway(e: &hyper::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|source| source.downcast_ref::<h2::Error>())
        .is_some_and(|h2| {
            h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR)
        })
}

/// `e` and its sources, `: `-separated (hyper's own message is only its kind).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How an exchange whose request never went out (its connection had closed, or closed as
/// it was about to be written) begins.
pub(super) const NOT_SENT: &str = "not ready";

async fn exchange(conn: &mut Conn, request: Request<SoakBody>) -> Result<Seen, String> {
    let response = match conn {
        Conn::H1(send) => {
            send.ready().await.map_err(|e| format!("{NOT_SENT}: {e}"))?;
            send.send_request(request).await
        }
        Conn::H2(send) => {
            send.ready().await.map_err(|e| format!("{NOT_SENT}: {e}"))?;
            send.send_request(request).await
        }
    }
    // Canceled: the connection closed before the request was written (hyper keeps it).
    // Or an HTTP/2 server's graceful GOAWAY that did not take the stream: it was never
    // processed, and a client sends it again on a new connection (RFC 9113 §6.8).
    .map_err(|e| {
        if e.is_canceled() || untaken_by_goaway(&e) {
            format!("{NOT_SENT}: {e}")
        } else {
            format!("request: {}", chain(&e))
        }
    })?;
    let status = response.status().as_u16();
    let (parts, mut incoming) = response.into_parts();
    let mut body = Vec::new();
    let mut broke = None;
    while let Some(frame) = incoming.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    body.extend_from_slice(&data);
                }
            }
            Err(e) => {
                broke = Some(format!(
                    "body broke off after {} bytes: {}",
                    body.len(),
                    chain(&e)
                ));
                break;
            }
        }
    }
    Ok(Seen {
        status,
        headers: parts.headers,
        body: broke.map_or(Ok(body), Err),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dice_draw_every_kind_of_the_mix() {
        for minted in [false, true] {
            let mut dice = Dice { state: 42, minted };
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..10_000 {
                seen.insert(dice.kind());
            }
            assert_eq!(seen, Kind::all(minted).collect());
            assert_eq!(seen.contains(&Kind::Minted), minted);
        }
    }
}
