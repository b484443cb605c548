//! What one audit event costs: the caller's time in [`AuditLog::record`] and the writer
//! thread's.
//!
//! `cargo bench -p sluice-audit --bench record` runs two threads that each record a swap
//! event like the proxy's every 80 µs (25,000 events a second in all, a busy proxy's rate
//! on this machine), sleeping between events as a proxy's workers wait on their sockets,
//! into a log in a temporary directory. It measures the CPU time each sender spends inside
//! `record` (its thread's CPU clock around the call: building the line, queueing it, and
//! waking the writer when it must) and the CPU time of the writer thread over the run (its
//! scheduler statistics: serialising, hashing, writing, sleeping and waking), and prints
//! both per event, best of five rounds of 2 s.
//!
//! Under `cargo test --benches` it runs one round of 0.2 s, as a smoke test.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use rustix::time::{ClockId, clock_gettime};
use sluice_audit::{AuditLog, Event, EventKind, StartInfo};

/// Between two events of one thread.
const PERIOD: Duration = Duration::from_micros(80);
const THREADS: usize = 2;

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Nanoseconds the writer thread (named `sluice-audit`) has run, from its schedstat.
fn writer_ns() -> u64 {
    // The thread names itself once it runs: give it a moment after the log opens.
    for _ in 0..100 {
        if let Some(ns) = find_writer_ns() {
            return ns;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no writer thread");
}

fn find_writer_ns() -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "sluice-audit" {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).expect("schedstat");
            return stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse().ok());
        }
    }
    None
}

/// Runs the paced senders for `secs`: events recorded, their time inside `record`, and the
/// writer's time meanwhile.
fn round(log: &AuditLog, secs: f64) -> (u64, Duration, Duration) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let writer_before = writer_ns();
    let (events, inside) = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || {
                    let (mut events, mut inside) = (0u64, Duration::ZERO);
                    let mut next = Instant::now();
                    while next < deadline {
                        let path = format!("/repos/owner/name/issues/{}", events % 1000 + t as u64);
                        let before = thread_cpu();
                        log.record(
                            Event::new(EventKind::Swap)
                                .secret("github_token")
                                .host("api.github.com:443")
                                .method("GET")
                                .path(path)
                                .location("header:authorization")
                                .count(1),
                        )
                        .expect("the log takes the event");
                        inside += thread_cpu() - before;
                        events += 1;
                        next += PERIOD;
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                    }
                    (events, inside)
                })
            })
            .collect();
        senders
            .into_iter()
            .map(|s| s.join().expect("no panic"))
            .fold((0, Duration::ZERO), |(e, d), (e2, d2)| (e + e2, d + d2))
    });
    // Let the writer finish the last batch before reading its clock.
    std::thread::sleep(Duration::from_millis(20));
    let writer = Duration::from_nanos(writer_ns() - writer_before);
    (events, inside, writer)
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (secs, rounds) = if quick { (0.2, 1) } else { (2.0, 5) };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let start = StartInfo::new("a1".repeat(32), "b2".repeat(32));
    let log =
        AuditLog::open(&dir.path().join("audit.jsonl"), "bench", start).expect("the log opens");
    let mut best = f64::MAX;
    for n in 0..rounds {
        let (events, inside, writer) = round(&log, secs);
        let per = |d: Duration| d.as_secs_f64() * 1e6 / events as f64;
        let total = per(inside) + per(writer);
        println!(
            "round {n}: {events} events; per event {:.2} µs in record, {:.2} µs in the writer: {total:.2} µs",
            per(inside),
            per(writer)
        );
        best = best.min(total);
    }
    println!("an audit event costs {best:.2} µs of CPU (best round)");
    log.close().expect("the log closes");
}
