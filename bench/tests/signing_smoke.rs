//! `sluice-bench signing --smoke` end to end: a header swap and a SigV4-signed GET through
//! one sluice, both answered; an unsigned, a signed and a signed-trailer aws-chunked upload,
//! each counted whole by the upstream, the last checked byte for byte against the real key's
//! framing (the run fails otherwise); the figures are not meaningful in debug.

use std::process::Command;

#[test]
fn the_signing_benchmark_measures_both_gets_and_every_upload() {
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
        "| signed aws-chunked with a signed CRC32 trailer |",
        "| one in-process `aws-sigv4` sign of that request |",
        "| one SHA-256 pass over the same bytes, in process |",
        "| signed-trailer upload intact at the upstream, signed by the real key | byte for byte | met |",
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
