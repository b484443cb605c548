//! `sluice-bench operations --smoke` end to end: small GETs through one sluice with its admin
//! endpoint on, scraped and not, every one answered; and reloads of 10 and 100 secrets
//! timed (the figures are not meaningful in debug).

use std::process::Command;

#[test]
fn the_operations_benchmark_measures_scrapes_and_reloads() {
    let bench = env!("CARGO_BIN_EXE_sluice-bench");
    let out = Command::new(bench)
        .args(["operations", "--smoke"])
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for row in [
        "| admin endpoint on, not scraped (median round) |",
        "| `/metrics` scraped every second (median round) |",
        "One scrape costs sluice",
        "| 10 |",
        "| 100 |",
        "scraped CPU/request within 3% of not scraped",
    ] {
        assert!(stdout.contains(row), "{row:?} not in {stdout}");
    }
    // Every GET was answered, and the scraped round did scrape.
    let scraped = stdout
        .lines()
        .find(|l| l.contains("scraped every second"))
        .unwrap();
    let cells: Vec<&str> = scraped.split('|').map(str::trim).collect();
    assert_eq!(cells[4], "0", "errors: {scraped}");
    assert!(
        cells[5].parse::<usize>().unwrap() >= 1,
        "no scrape: {scraped}"
    );
    let quiet = stdout
        .lines()
        .find(|l| l.contains("not scraped (median"))
        .unwrap();
    assert_eq!(
        quiet.split('|').map(str::trim).nth(4),
        Some("0"),
        "errors: {quiet}"
    );
}
