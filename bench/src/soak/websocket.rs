//! The soak's long-lived WebSockets: a few clients, each holding a WebSocket to the granted
//! host open for as long as it may, asking on it every 100 ms for every value sluice has
//! (the upstream's `/ws` answers with them all, current and retired), each answer of which
//! must come back with every value turned into the placeholder.
//!
//! A reload that changes the declaration or a value closes an open WebSocket with `1012`
//! (sluice will not go on scanning it with a guard that may not know a new value): the
//! client counts it and reconnects, under the generation in force. Anything else that ends
//! a WebSocket (another code, an error, an answer that never came) is unexpected; a value in
//! an answer is a leak.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::body;
use super::load::Client;
use super::tunnel::open_tls;
use super::upstream::{GRANTED_HOST, WS_PATH};
use crate::pki::Proto;

/// Between two questions on one WebSocket.
const EVERY: Duration = Duration::from_millis(100);
/// How long an answer may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);
/// The most reasons kept (all are counted).
const KEPT_REASONS: usize = 3;

/// What the WebSockets saw.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct WsTally {
    /// WebSockets opened.
    pub(crate) opened: u64,
    /// Answers that came back redacted.
    pub(crate) answers: u64,
    /// WebSockets sluice closed with `1012` on a reload (each reconnected).
    pub(crate) restarts: u64,
    /// Anything else that ended one, or an answer that did not come.
    pub(crate) unexpected: u64,
    /// The first few, described.
    pub(crate) reasons: Vec<String>,
    /// Answers holding a value.
    pub(crate) leaks: u64,
}

impl WsTally {
    fn unexpected(&mut self, why: String) {
        self.unexpected += 1;
        if self.reasons.len() < KEPT_REASONS {
            self.reasons.push(why);
        }
    }

    fn merge(&mut self, other: WsTally) {
        self.opened += other.opened;
        self.answers += other.answers;
        self.restarts += other.restarts;
        self.leaks += other.leaks;
        self.unexpected += other.unexpected;
        for why in other.reasons {
            if self.reasons.len() < KEPT_REASONS {
                self.reasons.push(why);
            }
        }
    }
}

/// Runs `clients` WebSocket clients until `deadline` (or `stop`).
pub(crate) async fn run(
    client: Arc<Client>,
    clients: usize,
    deadline: Instant,
    stop: Arc<AtomicBool>,
) -> WsTally {
    let tasks: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(one_client(client.clone(), deadline, stop.clone())))
        .collect();
    let mut tally = WsTally::default();
    for task in tasks {
        if let Ok(theirs) = task.await {
            tally.merge(theirs);
        }
    }
    tally
}

/// How one WebSocket ended.
enum Ended {
    /// The run is over.
    Done,
    /// sluice closed it with `1012`: open another.
    Restarted,
    /// Anything else.
    Broke(String),
}

async fn one_client(client: Arc<Client>, deadline: Instant, stop: Arc<AtomicBool>) -> WsTally {
    let mut tally = WsTally::default();
    let over = || Instant::now() >= deadline || stop.load(Ordering::Relaxed);
    while !over() {
        match socket(&client, &mut tally, &over).await {
            Ended::Done => break,
            Ended::Restarted => tally.restarts += 1,
            Ended::Broke(why) => {
                tally.unexpected(why);
                tokio::time::sleep(EVERY).await;
            }
        }
    }
    tally
}

/// One WebSocket, from its handshake until it ends.
async fn socket(client: &Client, tally: &mut WsTally, over: &(dyn Fn() -> bool + Sync)) -> Ended {
    let tls = match open_tls(client, GRANTED_HOST, client.good_port, Proto::H1).await {
        Ok(tls) => tls,
        Err(why) => return Ended::Broke(format!("tunnel: {why}")),
    };
    let url = format!("wss://{GRANTED_HOST}:{}{WS_PATH}", client.good_port);
    let Ok(mut request) = url.into_client_request() else {
        return Ended::Broke("the WebSocket URL".to_owned());
    };
    if let Ok(bearer) = format!("Bearer {}", client.placeholder).parse() {
        request.headers_mut().insert("authorization", bearer);
    }
    let mut ws = match tokio_tungstenite::client_async(request, tls).await {
        Ok((ws, _)) => ws,
        Err(e) => return Ended::Broke(format!("handshake: {e}")),
    };
    tally.opened += 1;
    loop {
        if over() {
            let _ = ws.close(None).await;
            return Ended::Done;
        }
        if let Err(e) = ws.send(Message::text("values?")).await {
            return Ended::Broke(format!("send: {e}"));
        }
        let answer = loop {
            match tokio::time::timeout(PATIENCE, ws.next()).await {
                Err(_) => return Ended::Broke("no answer within 30 s".to_owned()),
                Ok(None) => return Ended::Broke("closed without a close frame".to_owned()),
                Ok(Some(Err(e))) => return Ended::Broke(format!("read: {e}")),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    return match frame {
                        Some(frame) if frame.code == CloseCode::Restart => Ended::Restarted,
                        other => Ended::Broke(format!("closed: {other:?}")),
                    };
                }
                Ok(Some(Ok(Message::Text(text)))) => break text.to_string(),
                Ok(Some(Ok(_))) => continue,
            }
        };
        let snapshot = client.values.snapshot();
        if snapshot
            .all
            .iter()
            .any(|v| body::contains(answer.as_bytes(), v))
        {
            tally.leaks += 1;
        } else if answer.starts_with("values: ") && answer.contains(&client.placeholder) {
            tally.answers += 1;
        } else {
            tally.unexpected("an answer without the placeholder".to_owned());
        }
        tokio::time::sleep(EVERY).await;
    }
}
