//! `sluice-bench audit-report --smoke` end to end: a log written by sluice's writer,
//! verified, and the report rendered, with its size and times printed.

use std::process::Command;

#[test]
fn the_report_benchmark_renders_a_written_log() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["audit-report", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("A log of 20002 events"), "{stdout}");
    for row in [
        "| `sluice audit verify` (the chain alone) |",
        "| `sluice audit report` (chain, aggregates, page) |",
        "Page: ",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
}
