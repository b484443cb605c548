//! `sluice-bench minted --smoke` end to end: a plain swap and a minted token's swap through
//! one sluice, both answered, and 64 connections across a token's expiry with one token
//! request (the figures are not meaningful in debug; the count is).

use std::process::Command;

#[test]
fn the_minted_benchmark_measures_both_swaps_and_the_expiry() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["minted", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| plain swap |",
        "| minted token, cached |",
        "| token requests during the phase | 1 |",
        "minted swap ≤ 2 µs more CPU per request",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("| plain swap |") || l.starts_with("| minted token, cached |"))
    {
        assert!(line.trim_end().ends_with("| 0 |"), "errors: {line}");
    }
    assert!(
        stdout.contains("| requests (errors) |") && stdout.contains(" (0) |"),
        "{stdout}"
    );
}
