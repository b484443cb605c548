//! `sluice-bench jail --smoke` end to end: start-up with and without the jail through the
//! real `sluice` binary, then, in a namespace of its own, the explicit and the transparent
//! path through one sluice, each answering (the figures are not meaningful in debug).

use std::process::Command;

#[test]
fn the_jail_benchmark_measures_both_paths_and_both_start_ups() {
    let bench = std::path::PathBuf::from(env!("CARGO_BIN_EXE_sluice-bench"));
    // `cargo test --workspace` builds the proxy's binary beside this one.
    let sluice = bench.with_file_name("sluice");
    assert!(
        sluice.exists(),
        "{} is missing: run `cargo build -p sluice` or `cargo test --workspace`",
        sluice.display()
    );
    let out = Command::new(&bench)
        .args(["jail", "--smoke", "--sluice"])
        .arg(&sluice)
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| explicit (CONNECT) |",
        "| transparent (redirected, SNI) |",
        "| `--no-jail` |",
        "| jail |",
        "transparent ≥ 0.95× explicit requests/s",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
    // Both paths answered every request.
    for line in stdout
        .lines()
        .filter(|l| l.contains("(CONNECT)") || l.contains("SNI)"))
    {
        assert!(line.trim_end().ends_with("| 0 |"), "errors: {line}");
    }
}
