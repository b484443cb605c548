//! The soak's long-lived HTTP/2 tunnels: a few clients, each holding one HTTP/2 tunnel to
//! the granted host for as long as sluice keeps it, asking `/echo` on it every 100 ms (the
//! value comes back in headers and body, which sluice must redact), judged as the load's
//! echoes are.
//!
//! A reload that changes the declaration sends such a tunnel `GOAWAY`: the streams it took
//! finish, and a request it did not take fails before it is written (hyper says so); the
//! client counts that and opens a new tunnel, under the generation in force. A request that
//! was taken and then failed, or an answer that is wrong, is unexpected; a value in an
//! answer is a leak.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::load::{Client, Kind, NOT_SENT, one};
use super::tunnel::open;
use super::upstream::GRANTED_HOST;
use crate::pki::Proto;

/// Between two requests on one tunnel.
const EVERY: Duration = Duration::from_millis(100);
/// The most reasons kept (all are counted).
const KEPT_REASONS: usize = 3;

/// What the held tunnels saw.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct HeldTally {
    /// Tunnels opened.
    pub(crate) opened: u64,
    /// Echoes answered as they must be (redacted).
    pub(crate) answers: u64,
    /// Tunnels sluice ended (`GOAWAY`) under a request that was then not taken.
    pub(crate) goaways: u64,
    /// Anything else: a failed request that was taken, a wrong answer, no tunnel.
    pub(crate) unexpected: u64,
    /// The first few, described.
    pub(crate) reasons: Vec<String>,
    /// Answers that held a value (described without it).
    pub(crate) leaks: Vec<String>,
}

impl HeldTally {
    fn unexpected(&mut self, why: String) {
        self.unexpected += 1;
        if self.reasons.len() < KEPT_REASONS {
            self.reasons.push(why);
        }
    }

    fn merge(&mut self, other: HeldTally) {
        self.opened += other.opened;
        self.answers += other.answers;
        self.goaways += other.goaways;
        self.unexpected += other.unexpected;
        self.leaks.extend(other.leaks);
        for why in other.reasons {
            if self.reasons.len() < KEPT_REASONS {
                self.reasons.push(why);
            }
        }
    }
}

/// Runs `tunnels` clients until `deadline` (or `stop`).
pub(crate) async fn run(
    client: Arc<Client>,
    tunnels: usize,
    deadline: Instant,
    stop: Arc<AtomicBool>,
) -> HeldTally {
    let tasks: Vec<_> = (0..tunnels)
        .map(|_| tokio::spawn(one_client(client.clone(), deadline, stop.clone())))
        .collect();
    let mut tally = HeldTally::default();
    for task in tasks {
        if let Ok(theirs) = task.await {
            tally.merge(theirs);
        }
    }
    tally
}

async fn one_client(client: Arc<Client>, deadline: Instant, stop: Arc<AtomicBool>) -> HeldTally {
    let mut tally = HeldTally::default();
    let over = || Instant::now() >= deadline || stop.load(Ordering::Relaxed);
    while !over() {
        let opened = client.values.now_ms();
        let mut conn = match open(&client, GRANTED_HOST, client.good_port, Proto::H2).await {
            Ok(conn) => conn,
            Err(why) => {
                tally.unexpected(format!("tunnel: {why}"));
                tokio::time::sleep(EVERY).await;
                continue;
            }
        };
        tally.opened += 1;
        while !over() {
            let (verdict, reusable) =
                one(&client, &mut conn, opened, Kind::Echo, &mut tally.leaks).await;
            match verdict {
                Ok(()) => tally.answers += 1,
                // Not taken: the tunnel was told to go away (by a reload since it opened: for
                // nothing else may sluice do so); a new one takes the next.
                Err(why) if why.starts_with(NOT_SENT) && client.values.reloaded_since(opened) => {
                    tally.goaways += 1;
                    break;
                }
                Err(why) => tally.unexpected(why),
            }
            if !reusable {
                break;
            }
            tokio::time::sleep(EVERY).await;
        }
    }
    tally
}
