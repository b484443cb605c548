//! `sluice-bench --smoke` end to end: the harness starts its upstream and sluice as child
//! processes, checks that sluice swaps and redacts, runs every phase for a fraction of a
//! second against direct and sluice, and reports figures for each.

use std::process::Command;

#[test]
fn smoke_mode_measures_every_phase_for_direct_and_sluice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json_path = dir.path().join("smoke.json");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .arg("--smoke")
        .arg("--phase-secs")
        .arg("0.2")
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sluice-bench --smoke failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("JSON written"))
            .expect("valid JSON");
    let peers = report["peers"].as_array().expect("peers");
    let names: Vec<&str> = peers.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        ["direct", "sluice"],
        "smoke mode measures these two only"
    );
    let phases = [
        "h1-c1",
        "h1-c16",
        "h1-c64",
        "h2-s64",
        "tunnels-c16",
        "large",
    ];
    for peer in peers {
        let name = peer["name"].as_str().unwrap_or_default();
        assert_eq!(
            peer["status"]["state"], "measured",
            "{name}: {}",
            peer["status"]
        );
        for phase in phases {
            let figures = &peer["phases"][phase];
            assert!(
                figures["completed"].as_u64().unwrap_or(0) > 0,
                "{name} / {phase} completed nothing: {figures}"
            );
            assert_eq!(figures["errors"], 0, "{name} / {phase}: {figures}");
            assert!(
                figures["rate"].as_f64().unwrap_or(0.0) > 0.0,
                "{name} / {phase}"
            );
        }
    }
    // sluice runs in its own process: its CPU and memory are read from /proc.
    let sluice = &peers[1];
    assert!(
        sluice["memory"]["peak_kib"].as_u64().unwrap_or(0) > 0,
        "{sluice}"
    );
    assert!(
        sluice["phases"]["h1-c16"]["proxy_cpu_s"].is_number(),
        "{sluice}"
    );
    // The 4 MiB body arrived whole: the harness checked its exact length, in which each of
    // the four values became a placeholder of about the same length.
    let large = sluice["phases"]["large"]["bytes"].as_u64().unwrap_or(0);
    assert!(large.abs_diff(4 << 20) < 4 * 64, "{large} bytes");
    // And the Markdown report names every phase and judges the targets.
    for heading in ["### Small GETs, HTTP/2", "### New tunnels", "### Targets"] {
        assert!(stdout.contains(heading), "missing {heading:?} in\n{stdout}");
    }
}
