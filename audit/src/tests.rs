//! Tests of the audit log: writer, elision, chain verification and summary.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::writer::{Sink, open_with_sink};
use super::*;

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-audit-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_info() -> StartInfo {
    StartInfo::new("a1".repeat(32), "b2".repeat(32))
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap()
}

/// A log of a known run: 2 swaps, 1 verbatim, 3 refusals (2 reasons), 2 redactions
/// (counts 3 and 4), 1 tunnel, 1 deny, 1 auth_fail.
fn known_run(path: &Path) {
    let log = AuditLog::open(path, "run-known", start_info()).unwrap();
    let gh = || {
        Event::new(EventKind::Swap)
            .secret("github_token")
            .host("api.github.com")
    };
    log.record(
        gh().method("GET")
            .path("/user")
            .location("header:authorization"),
    )
    .unwrap();
    log.record(
        gh().method("POST")
            .path("/graphql")
            .location("header:authorization"),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Verbatim)
            .secret("openai_key")
            .host("api.anthropic.com")
            .location("body"),
    )
    .unwrap();
    for reason in [
        "host not granted",
        "host not granted",
        "location not granted",
    ] {
        log.record(
            Event::new(EventKind::Refuse)
                .secret("github_token")
                .host("evil.example")
                .reason(reason),
        )
        .unwrap();
    }
    for count in [3, 4] {
        log.record(
            Event::new(EventKind::Redact)
                .secret("github_token")
                .host("api.github.com")
                .count(count),
        )
        .unwrap();
    }
    log.record(Event::new(EventKind::Tunnel).host("pinned.example:443"))
        .unwrap();
    log.record(
        Event::new(EventKind::Deny)
            .host("169.254.169.254")
            .reason("blocked address"),
    )
    .unwrap();
    log.record(Event::new(EventKind::AuthFail).reason("wrong proxy credentials"))
        .unwrap();
    log.record(
        Event::new(EventKind::Materialize)
            .secret("deploy_key")
            .location("file"),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Reload)
            .reason("reloaded")
            .policy_sha256("c3".repeat(32)),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Mint)
            .secret("google")
            .host("oauth2.googleapis.com")
            .reason("minted refresh_token; expires in 3599s"),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Approve)
            .secret("prod_api")
            .host("api.prod.example.com")
            .method("DELETE")
            .path("/v1/items/7?force=true")
            .approval(Approval {
                id: 3,
                decision: "allow".into(),
                scope: "run".into(),
                channel: "admin-api".into(),
                waited_ms: 2150,
            }),
    )
    .unwrap();
    log.close().unwrap();
}

// --- writer -------------------------------------------------------------------------

#[test]
fn a_policy_hash_is_written_on_reload_events_only_and_only_when_it_is_a_hash_and_a_decision_on_approve_only()
 {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path, "run-hash", start_info()).unwrap();
    let hash = "d4".repeat(32);
    log.record(Event::new(EventKind::Reload).policy_sha256(hash.as_str()))
        .unwrap();
    log.record(Event::new(EventKind::Reload).policy_sha256("not a hash: SLUICE_X_0123"))
        .unwrap();
    log.record(Event::new(EventKind::Swap).policy_sha256(hash.as_str()))
        .unwrap();
    // Likewise a decision, on `approve` events only.
    let approval = Approval {
        id: 1,
        decision: "deny".into(),
        scope: "once".into(),
        channel: "terminal".into(),
        waited_ms: 1,
    };
    log.record(Event::new(EventKind::Swap).approval(approval))
        .unwrap();
    log.close().unwrap();
    let lines = lines(&path);
    assert_eq!(json(&lines[1])["policy_sha256"], hash);
    assert!(json(&lines[2]).get("policy_sha256").is_none());
    assert!(json(&lines[3]).get("policy_sha256").is_none());
    assert!(!lines.concat().contains("not a hash"));
    assert!(json(&lines[4]).get("approval").is_none());
}

#[test]
fn every_event_kind_is_written_with_its_fields() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    known_run(&path);
    let lines = lines(&path);
    assert_eq!(lines.len(), 17);
    let events: Vec<String> = lines
        .iter()
        .map(|l| json(l)["event"].as_str().unwrap().to_owned())
        .collect();
    for kind in EventKind::ALL {
        assert!(
            events.contains(&kind.to_string()),
            "no `{kind}` in {events:?}"
        );
    }

    let start = json(&lines[0]);
    assert_eq!(start["seq"], 1);
    assert_eq!(start["event"], "start");
    assert_eq!(start["run_id"], "run-known");
    assert_eq!(start["prev"], genesis("run-known"));
    assert_eq!(start["policy_sha256"], "a1".repeat(32));
    assert_eq!(start["ca_sha256"], "b2".repeat(32));
    assert_eq!(start["version"], env!("CARGO_PKG_VERSION"));

    let swap = json(&lines[1]);
    assert_eq!(swap["event"], "swap");
    assert_eq!(swap["secret"], "github_token");
    assert_eq!(swap["host"], "api.github.com");
    assert_eq!(swap["method"], "GET");
    assert_eq!(swap["path"], "/user");
    assert_eq!(swap["location"], "header:authorization");
    assert_eq!(swap["prev"], line_hash(lines[0].as_bytes()));
    // Absent fields are omitted, never null.
    assert!(swap.get("count").is_none() && swap.get("reason").is_none());
    assert!(!lines[1].contains("null"));

    let redact = json(&lines[7]);
    assert_eq!(
        (redact["event"].as_str(), redact["count"].as_u64()),
        (Some("redact"), Some(3))
    );
    let deny = json(&lines[10]);
    assert_eq!(deny["reason"], "blocked address");

    let reload = json(&lines[13]);
    assert_eq!(reload["event"], "reload");
    assert_eq!(reload["policy_sha256"], "c3".repeat(32));
    let approve = json(&lines[15]);
    assert_eq!(approve["event"], "approve");
    assert_eq!(approve["path"], "/v1/items/7?force=…");
    assert_eq!(
        approve["approval"],
        serde_json::json!({"id": 3, "decision": "allow", "scope": "run", "channel": "admin-api", "waited_ms": 2150})
    );
    let stop = json(&lines[16]);
    assert_eq!(stop["event"], "stop");
    assert_eq!(stop["seq"], 17);
    let counts: Counts = serde_json::from_value(stop["counts"].clone()).unwrap();
    let expected = Counts {
        swap: 2,
        refuse: 3,
        verbatim: 1,
        redact: 2,
        tunnel: 1,
        deny: 1,
        auth_fail: 1,
        materialize: 1,
        mint: 1,
        reload: 1,
        approve: 1,
    };
    assert_eq!(counts, expected);

    for (i, line) in lines.iter().enumerate() {
        let value = json(line);
        assert_eq!(value["seq"], i as u64 + 1);
        assert_eq!(value["run_id"], "run-known");
        let ts = value["ts"].as_str().unwrap();
        assert!(ts.len() == 24 && ts.ends_with('Z'), "ts {ts}");
    }
    let verified = verify(&path).unwrap();
    assert_eq!(verified.lines, 17);
    assert!(verified.complete);
    assert_eq!(verified.counts, expected);
    assert_eq!(verified.head, line_hash(lines[16].as_bytes()));
}

#[test]
fn the_log_file_is_created_0600_and_a_file_that_is_not_a_log_is_left_alone() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    // `start` is on disk before `open` returns.
    let written = lines(&path);
    assert_eq!(written.len(), 1);
    assert_eq!(json(&written[0])["event"], "start");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    log.close().unwrap();

    // Not a sluice log, or one whose last line was cut: refused, the file untouched.
    for (name, text) in [
        ("other.jsonl", "old content\n"),
        ("cut.jsonl", "{\"seq\":1"),
    ] {
        let other = dir.join(name);
        std::fs::write(&other, text).unwrap();
        match AuditLog::open(&other, "run-2", start_info()) {
            Err(AuditError::NotAppendable { path, why }) => {
                assert_eq!(path, other);
                assert!(!why.is_empty());
            }
            result => panic!("{name}: expected NotAppendable, got {result:?}"),
        }
        assert_eq!(std::fs::read_to_string(&other).unwrap(), text);
    }
}

#[test]
fn start_and_stop_cannot_be_recorded() {
    let dir = TempDir::new();
    let log = AuditLog::open(&dir.join("a.jsonl"), "run-1", start_info()).unwrap();
    for kind in [EventKind::Start, EventKind::Stop] {
        let err = log.record(Event::new(kind)).unwrap_err();
        assert!(matches!(err, AuditError::ReservedKind { kind: k } if k == kind));
    }
    assert!(log.is_healthy());
    log.close().unwrap();
}

#[test]
fn unusable_arguments_are_refused_without_echoing_them() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    for run_id in ["", "has space", "line\nbreak", &"x".repeat(65)] {
        let err = AuditLog::open(&path, run_id, start_info()).unwrap_err();
        assert!(matches!(err, AuditError::InvalidRunId { .. }), "{run_id:?}");
    }
    let bad = StartInfo {
        policy_sha256: "ghp_notadigestbutasecretvalue".to_owned(),
        ca_sha256: "b2".repeat(32),
        withheld: Vec::new(),
        placeholders: Default::default(),
        settings: Default::default(),
        grants: Default::default(),
    };
    let err = AuditLog::open(&path, "run-1", bad).unwrap_err();
    assert!(matches!(
        err,
        AuditError::InvalidDigest {
            field: "policy_sha256",
            ..
        }
    ));
    assert!(!err.to_string().contains("ghp_"), "{err}");
    let upper = StartInfo {
        policy_sha256: "A1".repeat(32),
        ca_sha256: "b2".repeat(32),
        withheld: Vec::new(),
        placeholders: Default::default(),
        settings: Default::default(),
        grants: Default::default(),
    };
    assert!(AuditLog::open(&path, "run-1", upper).is_err());
    assert!(!path.exists(), "nothing is created for refused arguments");
}

#[test]
fn an_unwritable_path_is_a_loud_error_at_start() {
    let dir = TempDir::new();
    let err = AuditLog::open(&dir.join("missing/dir/a.jsonl"), "run-1", start_info()).unwrap_err();
    assert!(matches!(err, AuditError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("missing/dir/a.jsonl"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_at_start_is_a_loud_error() {
    let err = AuditLog::open(Path::new("/dev/full"), "run-1", start_info()).unwrap_err();
    assert!(matches!(err, AuditError::Start { .. }), "{err:?}");
    assert!(err.to_string().contains("/dev/full"), "{err}");
}

/// A sink that keeps what is written until told the disk is full; then it writes to
/// `/dev/full` (on Linux; elsewhere it fails the same way by itself).
#[derive(Clone, Default)]
struct FillingDisk {
    full: Arc<AtomicBool>,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Write for FillingDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.full.load(Ordering::SeqCst) {
            #[cfg(target_os = "linux")]
            return std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")?
                .write(buf);
            #[cfg(not(target_os = "linux"))]
            return Err(io::Error::other("No space left on device (test)"));
        }
        self.bytes.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for FillingDisk {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A disk full in the middle of a run, then freed: the log refuses while it is full, then
/// writes what it had accepted, in order, and takes records again; the chain holds.
#[test]
fn a_full_disk_mid_run_fails_closed_then_recovers_with_the_chain_intact() {
    let disk = FillingDisk::default();
    let log = open_with_sink(Box::new(disk.clone()), "run-1", start_info()).unwrap();
    let newlines = || {
        disk.bytes
            .lock()
            .unwrap()
            .iter()
            .filter(|b| **b == b'\n')
            .count()
    };
    log.record(Event::new(EventKind::Swap).secret("a")).unwrap();
    wait_until("the first record to be flushed", || newlines() == 2);

    disk.full.store(true, Ordering::SeqCst);
    log.record(Event::new(EventKind::Swap).secret("b")).unwrap();
    wait_until("the log to fail", || !log.is_healthy());
    assert!(matches!(
        log.record(Event::new(EventKind::Deny)),
        Err(AuditError::Failed { .. })
    ));
    assert_eq!(log.write_failures(), 1, "one failure, however many retries");
    std::thread::sleep(super::writer::RETRY * 3);
    assert!(!log.is_healthy(), "still full: still failed");
    assert_eq!(newlines(), 2, "nothing written while full");

    disk.full.store(false, Ordering::SeqCst);
    wait_until("the log to recover", || log.is_healthy());
    log.record(Event::new(EventKind::Swap).secret("c")).unwrap();
    log.close().unwrap();
    let bytes = disk.bytes.lock().unwrap().clone();
    let dir = TempDir::new();
    let path = dir.join("recovered.jsonl");
    std::fs::write(&path, &bytes).unwrap();
    let verified = verify(&path).unwrap();
    assert!(verified.complete);
    // a and b (accepted before the disk filled), c after: the refused Deny is not there.
    assert_eq!(verified.counts.swap, 3);
    assert_eq!(verified.counts.deny, 0);
    let secrets: Vec<String> = lines(&path)
        .iter()
        .filter_map(|l| json(l)["secret"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(secrets, ["a", "b", "c"]);
}

#[test]
fn a_write_error_mid_run_fails_the_log_closed() {
    let disk = FillingDisk::default();
    let log = open_with_sink(Box::new(disk.clone()), "run-1", start_info()).unwrap();
    log.record(Event::new(EventKind::Swap).secret("a")).unwrap();
    wait_until("the first record to be flushed", || {
        disk.bytes
            .lock()
            .unwrap()
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            == 2
    });
    assert!(log.is_healthy());

    disk.full.store(true, Ordering::SeqCst);
    // Accepted into the queue; the writer's flush then fails.
    log.record(Event::new(EventKind::Swap).secret("b")).unwrap();
    wait_until("the log to fail", || !log.is_healthy());
    let clone = log.clone();
    let err = clone.record(Event::new(EventKind::Swap)).unwrap_err();
    assert!(
        matches!(&err, AuditError::Failed { reason } if reason.contains("No space left on device")),
        "{err:?}"
    );
    assert!(matches!(
        log.record(Event::new(EventKind::Deny)),
        Err(AuditError::Failed { .. })
    ));
    assert!(matches!(clone.close(), Err(AuditError::Failed { .. })));
    assert!(matches!(log.close(), Err(AuditError::Failed { .. })));
}

/// A sink whose writes wait while the disk is stalled, and that keeps what it was given.
#[derive(Clone, Default)]
struct StallingDisk {
    stalled: Arc<(Mutex<bool>, std::sync::Condvar)>,
    written: Arc<Mutex<Vec<u8>>>,
}

impl StallingDisk {
    fn set(&self, stalled: bool) {
        *self.stalled.0.lock().unwrap() = stalled;
        self.stalled.1.notify_all();
    }
}

impl Write for StallingDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (lock, wake) = &*self.stalled;
        let _unstalled = wake
            .wait_while(lock.lock().unwrap(), |stalled| *stalled)
            .unwrap();
        self.written.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for StallingDisk {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A disk so slow that the queue fills fails the log (every later record refused) until
/// the writer has written everything it was behind on, the record that found the queue
/// full included; then the log is healthy again, and nothing accepted is missing.
#[test]
fn a_full_queue_fails_the_log_closed_until_the_writer_catches_up() {
    let disk = StallingDisk::default();
    let log = open_with_sink(Box::new(disk.clone()), "run-1", start_info()).unwrap();
    disk.set(true);
    let mut accepted = 0usize;
    let err = loop {
        match log.record(Event::new(EventKind::Swap).secret("s").path("/p")) {
            Ok(()) => accepted += 1,
            Err(err) => break err,
        }
        assert!(
            accepted <= QUEUE_CAPACITY + 10_000,
            "the queue never filled"
        );
    };
    assert!(
        matches!(
            err,
            AuditError::Backlog {
                capacity: QUEUE_CAPACITY
            }
        ),
        "{err:?}"
    );
    assert!(accepted >= QUEUE_CAPACITY);
    assert!(!log.is_healthy());
    assert!(matches!(
        log.record(Event::new(EventKind::Swap)),
        Err(AuditError::Failed { .. })
    ));
    disk.set(false);
    wait_until("the writer to catch up", || log.is_healthy());
    log.record(Event::new(EventKind::Deny).host("after.example"))
        .unwrap();
    log.close().unwrap();

    // start, every accepted record, the one that found the queue full (kept), the one
    // refused (not), the one after, stop; chained without a gap.
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    std::fs::write(&path, &*disk.written.lock().unwrap()).unwrap();
    let verified = verify(&path).unwrap();
    assert_eq!(verified.lines, accepted as u64 + 4, "{verified:?}");
    assert!(verified.complete, "{verified:?}");
}

/// A run killed in the middle of a write, then a run started on the same log: the cut line
/// is kept and named, and the chain holds across it.
/// A write stopped just before its newline leaves a whole record: the next run gives it
/// its newline and follows it, and the log verifies. (Named cut, the record would be
/// chained through and the `start` naming it cut would break the log for good.)
#[test]
fn a_record_that_lost_only_its_newline_is_followed_as_whole() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(Event::new(EventKind::Deny).host("h")).unwrap();
    log.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.trim_end_matches('\n')).unwrap();
    let log = AuditLog::open(&path, "run-2", start_info()).unwrap();
    log.close().unwrap();
    let written = lines(&path);
    assert_eq!(written.len(), 5);
    assert!(json(&written[3]).get("torn").is_none());
    let logs = verify_logs(std::slice::from_ref(&path)).unwrap();
    assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
    assert_eq!(logs[0].runs.len(), 2);
    assert!(
        logs[0]
            .runs
            .iter()
            .all(|run| run.complete && run.torn.is_none())
    );
}

#[test]
fn a_line_cut_short_is_kept_named_and_chained_over() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(Event::new(EventKind::Deny).host("h")).unwrap();
    drop(log);
    // What `kill -9` in the middle of a write leaves: part of a line, no newline.
    let cut = "{\"seq\":3,\"ts\":\"2026-12-05T00:00:00Z\",\"run_id\":\"run-1\",\"ev";
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(cut.as_bytes())
        .unwrap();
    // Until a run follows it, the cut is where the chain breaks.
    let before = verify(&path).unwrap_err();
    assert!(
        matches!(before.why(), Some(Break::NotTerminated)),
        "{before}"
    );
    let log = AuditLog::open(&path, "run-2", start_info()).unwrap();
    log.record(Event::new(EventKind::Swap).secret("s")).unwrap();
    log.close().unwrap();
    let written = lines(&path);
    assert_eq!(written[2], cut, "the cut line is kept as it was");
    assert_eq!(json(&written[3])["torn"], cut.len());
    let logs = verify_logs(std::slice::from_ref(&path)).unwrap();
    let runs = &logs[0].runs;
    assert!(logs[0].broken.is_none(), "{:?}", logs[0].broken);
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].complete, runs[0].torn),
        (false, Some(cut.len() as u64))
    );
    assert_eq!((runs[1].complete, runs[1].torn), (true, None));

    // The cut line taken out, or another length named: the `start` no longer holds.
    let whole = std::fs::read_to_string(&path).unwrap();
    for (name, text) in [
        ("dropped.jsonl", whole.replace(&format!("{cut}\n"), "")),
        ("longer.jsonl", whole.replace(cut, &format!("{cut}x"))),
    ] {
        let edited = dir.join(name);
        std::fs::write(&edited, text).unwrap();
        let error = verify(&edited).unwrap_err();
        assert!(matches!(error.why(), Some(Break::Torn)), "{name}: {error}");
    }
    // A line that is not a record, followed by anything but a `start` naming it: broken there.
    let garbage = dir.join("garbage.jsonl");
    let mut text: Vec<&str> = whole.lines().collect();
    text.insert(1, "not a record");
    std::fs::write(&garbage, text.join("\n") + "\n").unwrap();
    match verify(&garbage).unwrap_err() {
        ChainError::Broken { line, why, .. } => {
            assert_eq!(line, 2);
            assert!(matches!(why, Break::Malformed(_)), "{why}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn records_reach_the_file_within_the_flush_interval() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(Event::new(EventKind::Tunnel).host("pinned.example"))
        .unwrap();
    wait_until("the record to be flushed", || lines(&path).len() == 2);
    // Still open: the chain holds so far, without `stop`.
    let verified = verify(&path).unwrap();
    assert_eq!((verified.lines, verified.complete), (2, false));
    log.close().unwrap();
    assert!(verify(&path).unwrap().complete);
}

#[test]
fn close_closes_every_clone_and_is_safe_to_repeat() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    let clones: Vec<AuditLog> = (0..4).map(|_| log.clone()).collect();
    log.record(Event::new(EventKind::Swap).secret("s")).unwrap();
    log.close().unwrap();
    for clone in &clones {
        assert!(!clone.is_healthy());
        assert!(matches!(
            clone.record(Event::new(EventKind::Swap)),
            Err(AuditError::Closed)
        ));
    }
    for clone in clones {
        clone.close().unwrap();
    }
    let lines = lines(&path);
    assert_eq!(lines.len(), 3, "one stop only: {lines:?}");
    assert_eq!(verify(&path).unwrap().counts.swap, 1);
}

#[test]
fn concurrent_closers_both_return_after_stop_is_written() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    let other = log.clone();
    let handle = std::thread::spawn(move || other.close());
    log.close().unwrap();
    handle.join().unwrap().unwrap();
    assert!(verify(&path).unwrap().complete);
}

#[test]
fn dropping_the_last_handle_flushes_without_stop() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(Event::new(EventKind::Deny).host("h")).unwrap();
    drop(log);
    let verified = verify(&path).unwrap();
    assert_eq!((verified.lines, verified.complete), (2, false));
}

#[test]
fn concurrent_writers_produce_whole_lines_with_gapless_seq() {
    const THREADS: usize = 8;
    const EACH: usize = 400;
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    log.record(
                        Event::new(EventKind::Swap)
                            .secret(format!("secret_{t}"))
                            .host(format!("host-{t}.example"))
                            .path(format!("/thread/{t}/event/{i}/{}", "x".repeat(i % 300)))
                            .reason(format!("{t}:{i}")),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    log.close().unwrap();

    let lines = lines(&path);
    assert_eq!(lines.len(), THREADS * EACH + 2);
    let mut next_per_thread = [0usize; THREADS];
    for (i, line) in lines.iter().enumerate() {
        let value = json(line);
        assert_eq!(value["seq"], i as u64 + 1);
        if value["event"] != "swap" {
            continue;
        }
        let reason = value["reason"].as_str().unwrap();
        let (t, n) = reason.split_once(':').unwrap();
        let (t, n): (usize, usize) = (t.parse().unwrap(), n.parse().unwrap());
        // Each thread's events appear in the order it recorded them.
        assert_eq!(n, next_per_thread[t]);
        next_per_thread[t] += 1;
        assert_eq!(value["secret"], format!("secret_{t}"));
    }
    assert_eq!(next_per_thread, [EACH; THREADS]);
    let verified = verify(&path).unwrap();
    assert_eq!(verified.counts.swap, (THREADS * EACH) as u64);
}

// --- never a value --------------------------------------------------------------------

const SECRETS: &[&str] = &[
    "ghp_R3alT0kenValue0123456789abcdef",
    "sk-live-51HqzSecretStripeKey",
    "AKIAIOSFODNN7EXAMPLE",
    "hunter2hunter2",
    "eyJhbGciOiJIUzI1NiJ9.payload.sig",
];

#[test]
fn a_request_full_of_secrets_leaves_none_in_the_log() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    let target = format!(
        "https://user:{}@api.example/v1/items?access_token={}&key={}&{}&empty=&sig={}#{}",
        SECRETS[3], SECRETS[0], SECRETS[1], SECRETS[2], SECRETS[4], SECRETS[0]
    );
    for kind in EventKind::ALL {
        if matches!(kind, EventKind::Start | EventKind::Stop) {
            continue;
        }
        log.record(
            Event::new(kind)
                .secret("github_token")
                .host("api.example")
                .method(SECRETS[2])
                .path(&target)
                .location("query")
                .count(2)
                .reason("placeholder of github_token in query toward api.example")
                .approval(Approval {
                    id: 1,
                    decision: SECRETS[0].into(),
                    scope: "once".into(),
                    channel: SECRETS[1].into(),
                    waited_ms: 1,
                }),
        )
        .unwrap();
        log.record(
            Event::new(kind)
                .method("GET")
                .path(format!("/x?q={}", SECRETS[1])),
        )
        .unwrap();
    }
    log.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} survived in:\n{text}");
    }
    let swap = json(&lines(&path)[1]);
    assert_eq!(
        swap["path"],
        "https://…@api.example/v1/items?access_token=…&key=…&…&empty=…&sig=…#…"
    );
    assert_eq!(swap["method"], NONSTANDARD_METHOD);
    assert_eq!(verify(&path).unwrap().lines, 24);
}

#[test]
fn the_redactor_sees_every_free_text_field() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let redactor: Redactor = Arc::new(|text: String| text.replace(SECRETS[0], "SLUICE_GH_x"));
    let log = AuditLog::open_with_redactor(&path, "run-1", start_info(), redactor).unwrap();
    log.record(
        Event::new(EventKind::Deny)
            .host(format!("{}.exfil.example", SECRETS[0]))
            .path(format!("/bot{}/send", SECRETS[0]))
            .location(format!("header:{}", SECRETS[0]))
            .reason(format!("careless {}", SECRETS[0])),
    )
    .unwrap();
    log.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(SECRETS[0]), "{text}");
    let deny = json(&lines(&path)[1]);
    assert_eq!(deny["host"], "SLUICE_GH_x.exfil.example");
    assert_eq!(deny["path"], "/botSLUICE_GH_x/send");
}

/// The start event's fields are redacted before they are capped: a value the cap would cut
/// in two (an argv of `sluice run` is often longer than the cap) is no longer one the guard
/// knows, and its first part would be written.
#[test]
fn a_value_across_the_start_events_cap_is_redacted_whole() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let redactor: Redactor = Arc::new(|text: String| text.replace(SECRETS[0], "SLUICE_GH_x"));
    let mut start = start_info();
    // The value starts 10 bytes before the cap of 200.
    let argv = format!("{} --token {}", "a".repeat(180), SECRETS[0]);
    start.settings.insert("argv".into(), argv.clone());
    start.withheld = vec![argv];
    let log = AuditLog::open_with_redactor(&path, "run-1", start, redactor).unwrap();
    log.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(&SECRETS[0][..10]), "{text}");
    let start = json(&lines(&path)[0]);
    assert!(
        start["settings"]["argv"]
            .as_str()
            .unwrap()
            .contains("SLUICE_GH_x")
    );
}

#[test]
fn long_fields_are_capped() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(
        Event::new(EventKind::Refuse)
            .path("/é".repeat(5000))
            .reason("r".repeat(5000)),
    )
    .unwrap();
    log.close().unwrap();
    let refuse = json(&lines(&path)[1]);
    let path_field = refuse["path"].as_str().unwrap();
    assert!(path_field.len() <= 2048 && path_field.ends_with('…'));
    assert!(refuse["reason"].as_str().unwrap().len() <= 512);
}

#[test]
fn query_values_are_elided_and_names_kept() {
    let cases = [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a?token=x&b=2", "/a?token=…&b=…"),
        ("/a?", "/a?"),
        ("/a?flag", "/a?…"),
        ("/a?x=1&&y=", "/a?x=…&&y=…"),
        ("/a?x=a=b;c=d", "/a?x=…"),
        ("/a#frag", "/a#…"),
        ("/a?x=1#f?y=2", "/a?x=…#…"),
        (
            "http://u:p@h.example:8080/p?q=1",
            "http://…@h.example:8080/p?q=…",
        ),
        ("http://h.example/p@q", "http://h.example/p@q"),
        ("*", "*"),
    ];
    for (target, expected) in cases {
        assert_eq!(elide_path(target), expected, "{target}");
    }
}

#[test]
fn methods_outside_the_standard_set_are_not_written() {
    assert_eq!(sanitize_method("GET"), "GET");
    assert_eq!(sanitize_method("PROPFIND"), "PROPFIND");
    assert_eq!(sanitize_method("get"), NONSTANDARD_METHOD);
    assert_eq!(sanitize_method("ABCDEFGHSECRET"), NONSTANDARD_METHOD);
}

#[test]
fn timestamps_are_rfc3339_utc() {
    let at = |secs: u64, millis: u64| UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis);
    // In order: the thread keeps the text of the last second, so the runs of one second
    // (and the step back to an earlier one) check that the cached text is reused and
    // replaced correctly.
    let cases = [
        (UNIX_EPOCH, "1970-01-01T00:00:00.000Z"),
        (at(951_782_400, 5), "2000-02-29T00:00:00.005Z"),
        (at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z"),
        (at(1_709_251_199, 42), "2024-02-29T23:59:59.042Z"),
        (at(1_709_251_199, 0), "2024-02-29T23:59:59.000Z"),
        (at(1_709_251_200, 120), "2024-03-01T00:00:00.120Z"),
        (at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z"),
        (at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z"),
        // Before the epoch: written as the epoch.
        (
            UNIX_EPOCH - Duration::from_secs(1),
            "1970-01-01T00:00:00.000Z",
        ),
    ];
    for (time, expected) in cases {
        assert_eq!(format_timestamp(time), expected);
    }
}

#[test]
fn genesis_names_the_run() {
    assert_eq!(genesis("r"), line_hash(b"sluice-audit-genesis:r"));
    assert_ne!(genesis("run-1"), genesis("run-2"));
    assert_eq!(genesis("run-1").len(), 64);
}

// --- verification ---------------------------------------------------------------------

/// Writes `lines` (each with its newline) to a fresh file and verifies it.
fn verify_lines(dir: &TempDir, lines: &[String]) -> Result<Verified, ChainError> {
    let path = dir.join("tampered.jsonl");
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    verify(&path)
}

fn parse(line: &str) -> Line {
    serde_json::from_str(line).unwrap()
}

/// Serialises lines as the writer does (same field order), so only what a test changed
/// differs from the original bytes.
fn unparse(lines: &[Line]) -> Vec<String> {
    lines
        .iter()
        .map(|l| serde_json::to_string(l).unwrap())
        .collect()
}

fn broken_at(result: Result<Verified, ChainError>) -> (u64, Break) {
    match result {
        Err(ChainError::Broken { line, why, .. }) => (line, why),
        other => panic!("expected a broken chain, got {other:?}"),
    }
}

#[test]
fn verification_catches_tampering() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    known_run(&path);
    let good = lines(&path);
    assert!(verify_lines(&dir, &good).is_ok());

    // Edited: line 5 says another host; line 6's prev no longer matches.
    let mut edited = good.clone();
    edited[4] = edited[4].replace("evil.example", "fine.example");
    assert_ne!(edited[4], good[4]);
    assert_eq!(
        broken_at(verify_lines(&dir, &edited)),
        (6, Break::Prev { previous: 5 })
    );

    // Edited, even by one byte of whitespace.
    let mut spaced = good.clone();
    spaced[2] = spaced[2].replacen(':', ": ", 1);
    assert_eq!(
        broken_at(verify_lines(&dir, &spaced)),
        (4, Break::Prev { previous: 3 })
    );

    // A run id outside the writer's alphabet (a terminal's escape in it), even with its
    // genesis recomputed: refused before anything prints it.
    let mut escaped = parse(&good[0]);
    escaped.run_id = "run\u{1b}[2Kx".to_owned();
    escaped.prev = genesis(&escaped.run_id);
    let escaped = vec![serde_json::to_string(&escaped).unwrap()];
    assert_eq!(
        broken_at(verify_lines(&dir, &escaped)),
        (1, Break::StartFields { field: "run_id" })
    );

    // Dropped: line 3 removed; the new line 3 has seq 4.
    let mut dropped = good.clone();
    dropped.remove(2);
    assert_eq!(
        broken_at(verify_lines(&dir, &dropped)),
        (
            3,
            Break::Seq {
                expected: 3,
                found: 4
            }
        )
    );

    // Inserted: a forged line 3 that chains onto line 2 and carries seq 3.
    let mut inserted = good.clone();
    let mut forged = parse(&good[2]);
    forged.host = Some("forged.example".to_owned());
    forged.prev = line_hash(good[1].as_bytes());
    inserted.insert(2, serde_json::to_string(&forged).unwrap());
    assert_eq!(
        broken_at(verify_lines(&dir, &inserted)),
        (
            4,
            Break::Seq {
                expected: 4,
                found: 3
            }
        )
    );

    // Inserted, and every later seq renumbered: prev catches it.
    let mut renumbered: Vec<Line> = good.iter().map(|l| parse(l)).collect();
    renumbered.insert(2, forged);
    for (i, line) in renumbered.iter_mut().enumerate() {
        line.seq = i as u64 + 1;
    }
    assert_eq!(
        broken_at(verify_lines(&dir, &unparse(&renumbered))),
        (4, Break::Prev { previous: 3 })
    );

    // Reordered: lines 6 and 7 swapped.
    let mut reordered = good.clone();
    reordered.swap(5, 6);
    assert_eq!(
        broken_at(verify_lines(&dir, &reordered)),
        (
            6,
            Break::Seq {
                expected: 6,
                found: 7
            }
        )
    );

    // Dropped first line: no start.
    assert_eq!(
        broken_at(verify_lines(&dir, &good[1..])),
        (
            1,
            Break::MissingStart {
                found: EventKind::Swap
            }
        )
    );

    // A line from another run spliced in.
    let mut other_run = good.clone();
    other_run[5] = other_run[5].replace("run-known", "run-other");
    let (line, why) = broken_at(verify_lines(&dir, &other_run));
    assert_eq!(line, 6);
    assert!(matches!(why, Break::RunId { .. }), "{why:?}");

    // The run id of line 1 changed: its genesis no longer holds.
    let mut renamed = good.clone();
    renamed[0] = renamed[0].replace("run-known", "run-renamd");
    let (line, why) = broken_at(verify_lines(&dir, &renamed));
    assert_eq!(line, 1);
    assert!(matches!(why, Break::Genesis { .. }), "{why:?}");

    // Malformed JSON, an unknown field, an empty line.
    let mut malformed = good.clone();
    malformed[8].truncate(20);
    assert!(matches!(
        broken_at(verify_lines(&dir, &malformed)),
        (9, Break::Malformed(_))
    ));
    let mut unknown = good.clone();
    unknown[8] = unknown[8].replacen('{', "{\"value\":\"x\",", 1);
    assert!(matches!(
        broken_at(verify_lines(&dir, &unknown)),
        (9, Break::Malformed(_))
    ));
    let mut empty_line = good.clone();
    empty_line.insert(3, String::new());
    assert!(matches!(
        broken_at(verify_lines(&dir, &empty_line)),
        (4, Break::Malformed(_))
    ));

    // Something after stop.
    let mut after = good.clone();
    after.push(good[1].clone());
    assert_eq!(
        broken_at(verify_lines(&dir, &after)),
        (18, Break::AfterStop)
    );

    // A second start inside the run: it does not follow the line before it.
    let mut second_start: Vec<Line> = good.iter().map(|l| parse(l)).collect();
    second_start[1] = second_start[0].clone();
    assert_eq!(
        broken_at(verify_lines(&dir, &unparse(&second_start))),
        (2, Break::Follows)
    );
    // Nor does one numbered as the next line of the run.
    second_start[1].seq = 2;
    second_start[1].prev = line_hash(good[0].as_bytes());
    assert_eq!(
        broken_at(verify_lines(&dir, &unparse(&second_start))),
        (
            2,
            Break::Seq {
                expected: 1,
                found: 2
            }
        )
    );

    // Stop counts that disagree with the lines (a refusal dropped and re-chained).
    let mut recount: Vec<Line> = good.iter().map(|l| parse(l)).collect();
    recount.remove(4);
    let mut prev = genesis("run-known");
    let mut rechained = Vec::new();
    for (i, line) in recount.iter_mut().enumerate() {
        line.seq = i as u64 + 1;
        line.prev = prev.clone();
        let text = serde_json::to_string(line).unwrap();
        prev = line_hash(text.as_bytes());
        rechained.push(text);
    }
    let (line, why) = broken_at(verify_lines(&dir, &rechained));
    assert_eq!(line, 16);
    assert!(matches!(why, Break::StopCounts { .. }), "{why:?}");
}

#[test]
fn verification_catches_a_cut_tail_and_an_empty_file() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    known_run(&path);
    let text = std::fs::read_to_string(&path).unwrap();

    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() - 10]).unwrap();
    let (line, why) = broken_at(verify(&cut));
    assert_eq!((line, why), (17, Break::NotTerminated));

    // Whole lines cut from the end: the chain holds but `stop` is missing.
    let last_two = text[..text.len() - 1].rfind('\n').unwrap();
    std::fs::write(&cut, &text[..=last_two]).unwrap();
    let verified = verify(&cut).unwrap();
    assert_eq!((verified.lines, verified.complete), (16, false));

    std::fs::write(&cut, "").unwrap();
    assert_eq!(broken_at(verify(&cut)), (1, Break::Empty));

    let err = verify(&dir.join("absent.jsonl")).unwrap_err();
    assert!(matches!(err, ChainError::Read { .. }) && err.line().is_none());
}

// --- summary --------------------------------------------------------------------------

#[test]
fn the_summary_counts_a_known_run() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    known_run(&path);
    let summary = summarize(std::slice::from_ref(&path)).unwrap();
    assert_eq!(summary.runs.len(), 1);
    assert_eq!(summary.runs[0].run_id, "run-known");
    assert_eq!(summary.events, 17);
    assert_eq!(summary.reloads, 1);
    assert!(summary.runs[0].complete);
    let row = |secret: Option<&str>, host: Option<&str>| {
        summary
            .rows
            .iter()
            .find(|r| r.secret.as_deref() == secret && r.host.as_deref() == host)
            .unwrap_or_else(|| panic!("no row for {secret:?} {host:?}: {:?}", summary.rows))
    };
    let gh = row(Some("github_token"), Some("api.github.com"));
    assert_eq!((gh.swaps, gh.redactions, gh.refused()), (2, 7, 0));
    let evil = row(Some("github_token"), Some("evil.example"));
    assert_eq!(evil.refused(), 3);
    assert_eq!(evil.refusals["host not granted"], 2);
    assert_eq!(evil.refusals["location not granted"], 1);
    assert_eq!(
        row(Some("openai_key"), Some("api.anthropic.com")).verbatim,
        1
    );
    assert_eq!(row(None, Some("pinned.example:443")).tunnels, 1);
    assert_eq!(row(None, Some("169.254.169.254")).denials, 1);
    assert_eq!(row(None, None).auth_failures, 1);
    assert_eq!(row(Some("deploy_key"), None).materialized, 1);
    assert_eq!(row(Some("google"), Some("oauth2.googleapis.com")).mints, 1);
    assert_eq!(summary.rows.len(), 8);

    let table = summary.to_table();
    assert!(
        table.starts_with(
            "run run-known: 17 events, chain intact\ndeclaration reloaded 1 time(s)\n"
        ),
        "{table}"
    );
    let gh_line = table
        .lines()
        .find(|l| l.contains("api.github.com"))
        .unwrap();
    let cells: Vec<&str> = gh_line.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "github_token",
            "api.github.com",
            "2",
            "0",
            "0",
            "7",
            "0",
            "0",
            "0",
            "0",
            "0"
        ]
    );
    assert!(table.contains("refusals by reason:"), "{table}");
    let reason_line = table
        .lines()
        .find(|l| l.contains("location not granted"))
        .unwrap();
    assert!(
        reason_line.starts_with("github_token  evil.example"),
        "{reason_line}"
    );

    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["rows"][0]["secret"], serde_json::Value::Null);
}

#[test]
fn the_summary_refuses_a_broken_log() {
    let dir = TempDir::new();
    let path = dir.join("audit.jsonl");
    known_run(&path);
    let mut good = lines(&path);
    good.swap(2, 3);
    let err = summarize(&[{
        let tampered = dir.join("t.jsonl");
        std::fs::write(&tampered, good.join("\n") + "\n").unwrap();
        tampered
    }])
    .unwrap_err();
    assert_eq!(err.line(), Some(3));
}

#[test]
fn the_summary_table_does_not_pass_control_characters() {
    let dir = TempDir::new();
    let path = dir.join("a.jsonl");
    let log = AuditLog::open(&path, "run-1", start_info()).unwrap();
    log.record(
        Event::new(EventKind::Refuse)
            .secret("s")
            .host("h")
            .reason("bad\u{1b}[2J"),
    )
    .unwrap();
    log.close().unwrap();
    let table = summarize(std::slice::from_ref(&path)).unwrap().to_table();
    assert!(
        !table.contains('\u{1b}') && table.contains("bad\u{fffd}[2J"),
        "{table}"
    );
}
