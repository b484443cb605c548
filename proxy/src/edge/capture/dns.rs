//! The jail's resolver: the only DNS the workload has. A name the declaration makes
//! reachable is answered with its jail address ([`super::names::Names`]); every other name
//! gets NXDOMAIN and a `deny` event, and nothing is ever asked of a real resolver, so no
//! query (and no secret spelled into a name) leaves the machine.
//!
//! Messages are parsed and written by hickory-proto. It must never forward a query.
//! Refusals of one name are gathered into one `deny` event per window, with the queries
//! counted ([`super::denials`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::denials::{Denials, WINDOW};
use super::names::Names;
use crate::generation::door::Exchange;
use crate::generation::shared::{Shared, until_stopped};
use crate::refusal::Refusal;

/// How long an answer may be cached: the addresses are the run's, stable for its length.
const TTL: u32 = 300;

/// Answers queries on `socket` until `shutdown`; then records what is held of the refusals.
pub(crate) async fn serve(
    socket: UdpSocket,
    names: Arc<Names>,
    mut shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 4096];
    let mut denials = Denials::default();
    let mut flush = tokio::time::interval(WINDOW);
    loop {
        let (len, peer) = tokio::select! {
            () = until_stopped(&mut shutdown) => break,
            _ = flush.tick() => {
                record_held(&shared, denials.due(Instant::now(), false));
                continue;
            }
            received = socket.recv_from(&mut buf) => match received {
                Ok(received) => received,
                Err(error) => {
                    tracing::debug!(%error, "resolver receive failed");
                    continue;
                }
            },
        };
        // Each query under the declaration in force.
        shared = shared.current();
        if let Some(answer) = answer(&buf[..len], &names, &shared, &mut denials) {
            send(&socket, &answer, peer).await;
        }
    }
    record_held(&shared, denials.due(Instant::now(), true));
}

/// `deny` events for the refusals held back, one per name with its count.
fn record_held(shared: &Arc<Shared>, held: Vec<(String, u64)>) {
    for (name, count) in held {
        record_denied(shared, name, count);
    }
}

/// `count` refused queries for `name` (already redacted; the audit log's redactor sees it
/// again before it is written), through the door: one `deny` event carrying `count`,
/// counted `count` times.
fn record_denied(shared: &Arc<Shared>, name: String, count: u64) {
    let refusal = Refusal::dns_name_not_allowed(&name);
    Exchange::lookup(shared, name).record_refusals(&refusal, Some(count));
}

async fn send(socket: &UdpSocket, answer: &[u8], peer: SocketAddr) {
    if let Err(error) = socket.send_to(answer, peer).await {
        tracing::debug!(%error, "resolver send failed");
    }
}

/// The answer to one query message, or `None` for bytes that are not a query.
fn answer(
    query: &[u8],
    names: &Names,
    shared: &Arc<Shared>,
    denials: &mut Denials,
) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    if query.message_type() != MessageType::Query {
        return None;
    }
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_authoritative(true);
    let Some(question) = query.queries().first() else {
        reply.set_response_code(ResponseCode::FormErr);
        return reply.to_vec().ok();
    };
    reply.add_query(question.clone());
    let asked = question.name().to_ascii();
    let name = asked.trim_end_matches('.').to_ascii_lowercase();
    if !shared.policy.resolvable(&name) {
        // Held for a while to count its repeats: as the audit log will show it, never
        // with a value spelled into it (DNS exfiltration) kept in memory meanwhile.
        let name = shared.guard.redact_string(name);
        if let Some(count) = denials.refused(&name, Instant::now()) {
            record_denied(shared, name, count);
        }
        reply.set_response_code(ResponseCode::NXDomain);
        return reply.to_vec().ok();
    }
    // A reachable name: an IPv4 address of the jail for A, no other record (the jail
    // answers IPv4 only, so clients connect where the capture knows the name back).
    if question.query_type() == RecordType::A {
        match names.address_for(&name) {
            Some(address) => {
                reply.add_answer(Record::from_rdata(
                    question.name().clone(),
                    TTL,
                    RData::A(A(address)),
                ));
            }
            None => {
                reply.set_response_code(ResponseCode::ServFail);
            }
        }
    }
    reply.to_vec().ok()
}
