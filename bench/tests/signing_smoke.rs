//! `sluice-bench signing --smoke` end to end: a header swap and a SigV4-signed GET through
//! one sluice, both answered, and an unsigned and a signed aws-chunked upload, each counted
//! whole by the upstream (the figures are not meaningful in debug).

use std::process::Command;

#[test]
fn the_signing_benchmark_measures_both_gets_and_both_uploads() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["signing", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| header swap (bearer placeholder) |",
        "| SigV4 header, verified and re-signed |",
        "| `UNSIGNED-PAYLOAD` |",
        "| signed aws-chunked, 64 KiB chunks |",
        "re-signing ≤ 15 µs more CPU per request",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
    // Every GET was answered (an upload that was not counted whole fails the run).
    for line in stdout
        .lines()
        .filter(|l| l.contains("placeholder) |") || l.contains("re-signed |"))
    {
        assert!(line.trim_end().ends_with("| 0 |"), "errors: {line}");
    }
}
