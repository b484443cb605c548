//! `sluice-bench websocket --smoke` end to end: 64 KiB echoes over WebSockets through an
//! inspecting sluice (every message swapped out and redacted back, checked against its audit
//! log by the benchmark itself), a passthrough sluice and directly (the figures are not
//! meaningful in debug).

use std::process::Command;

#[test]
fn the_websocket_benchmark_echoes_through_every_path() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["websocket", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| sluice, frames inspected (swap out, redact back) |",
        "| sluice, passthrough (tunnelled uninspected) |",
        "| direct (no proxy) |",
        "inspected ≥ 0.7× passthrough",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
    // Every path echoed something: its round-trip count (the last column) is not zero.
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("| sluice,") || l.starts_with("| direct"))
    {
        let round_trips = line
            .trim_end_matches(" |")
            .rsplit("| ")
            .next()
            .unwrap_or("");
        assert_ne!(round_trips.trim(), "0", "no echo: {line}");
        assert!(round_trips.trim().parse::<u64>().is_ok(), "{line}");
    }
}
