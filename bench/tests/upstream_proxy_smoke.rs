//! `sluice-bench upstream-proxy --smoke` end to end: small GETs through a sluice dialling
//! the upstream directly and one chained through a real Squid, both answered without an
//! error, and Squid's access log showing the chained one went through it (the benchmark
//! fails otherwise). The figures are not meaningful in debug.

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
