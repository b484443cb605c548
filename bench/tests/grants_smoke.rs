//! `sluice-bench grants --smoke` end to end: the request-rule mix weighed by 1 and 100
//! rules, half of it admitted (the benchmark checks), every figure reported (the figures are
//! not meaningful in debug).

use std::process::Command;

#[test]
fn the_grants_benchmark_weighs_the_rules() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["grants", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| 1 rule, the mix (baseline) |",
        "| 100 rules, the mix |",
        "| 100 rules, refused requests only (every rule weighed) |",
        "rule matching, 100 rules per secret ≤ 2 µs per request",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
}
