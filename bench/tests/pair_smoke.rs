//! The side-by-side benchmarks (`bench/src/pair.rs`) end to end, `--smoke`: each answered
//! without an error. The figures are not meaningful in debug.
//!
//! - `upstream-proxy`: small GETs through a sluice dialling the upstream directly and one
//!   chained through a real Squid, whose access log shows the chained one went through it
//!   (the benchmark fails otherwise).
//! - `approvals`: small GETs through a sluice without `approve:` and one whose secret
//!   waits for approval, allowed for the run through the admin endpoint first.

use std::process::Command;

#[test]
fn the_upstream_proxy_benchmark_measures_both_routes() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["upstream-proxy", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in ["| sluice → upstream |", "| sluice → Squid → upstream |"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row:?} not in {stdout}"));
        assert!(line.trim_end().ends_with("| 0 |"), "errors: {line}");
    }
    assert!(stdout.contains("through Squid: "), "{stdout}");
}

#[test]
fn the_approvals_benchmark_measures_a_standing_decision_against_none() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["approvals", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in ["| no approve: |", "| approve: all, allowed for the run |"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row:?} not in {stdout}"));
        assert!(line.trim_end().ends_with("| 0 |"), "errors: {line}");
    }
    assert!(
        stdout.contains("under a standing run decision: "),
        "{stdout}"
    );
}
