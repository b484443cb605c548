//! `sluice-bench soak`, shortened for CI: sixty seconds of mixed load with upstream
//! faults, reloads, rotations, long-lived WebSockets and HTTP/2 tunnels through a sluice
//! child process, and a minted credential whose tokens expire every six seconds. The soak
//! itself checks every invariant (no
//! exit or panic, the value only in the granted header toward the granted host and never
//! back to the client, in stderr or in the audit log, a verified audit chain across the
//! segments of a log rotating every 256 KiB, flat memory
//! and descriptors) and exits 1 on any violation; this test runs it with bounds loose
//! enough for a loaded two-core machine and checks that its report shows real work done.
//! The ten-minute run is documented in docs/security.md.

use std::process::Command;

#[test]
fn sixty_seconds_of_faults_and_change_leave_sluice_up_leak_free_and_flat() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json_path = dir.path().join("soak.json");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["soak", "--secs", "60", "--concurrency", "8"])
        // A reload every two seconds, every fifth of an invalid declaration; the value
        // rotated every five.
        .args(["--reload-every", "2", "--rotate-every", "5"])
        // A minted credential whose tokens live 6 s: about ten refreshes.
        .args(["--mint-lifetime", "6"])
        // The audit log rotating under all of it: every 256 KiB.
        .args(["--audit-max-bytes", "262144"])
        // A debug build on a shared machine: allocator and pool warm-up can still move
        // memory after six seconds; a per-request leak over thousands of requests cannot
        // hide under these.
        .args(["--rss-growth-mib", "48", "--fd-slack", "48"])
        .args(["--max-unexpected-percent", "5"])
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("sluice-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the soak failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("JSON written"))
            .expect("valid JSON");
    assert_eq!(summary["violations"], serde_json::json!([]), "{stdout}");
    // Every kind of request ran and got what it must at least once.
    let kinds = summary["kinds"].as_array().expect("kinds");
    assert_eq!(kinds.len(), 13, "{stdout}");
    for kind in kinds {
        assert!(kind[1]["expected"].as_u64().unwrap_or(0) > 0, "{kind}");
    }
    // Both protocols, new tunnels, and the upstream saw the swapped header.
    for field in ["h1_requests", "h2_requests", "tunnels", "upstream_swaps"] {
        assert!(
            summary[field].as_u64().unwrap_or(0) > 0,
            "{field}: {stdout}"
        );
    }
    // Reloads through the load: every valid one in force, every invalid one refused.
    let asked = &summary["reloads_asked"];
    assert!(asked["valid"].as_u64().unwrap_or(0) >= 8, "{stdout}");
    assert!(asked["invalid"].as_u64().unwrap_or(0) >= 2, "{stdout}");
    assert_eq!(summary["reloads_in_force"], asked["valid"], "{stdout}");
    assert_eq!(summary["reloads_refused"], asked["invalid"], "{stdout}");
    // Rotations: each in force, and no rotated-out value on a tunnel opened after it.
    assert!(asked["rotations"].as_u64().unwrap_or(0) >= 4, "{stdout}");
    assert_eq!(asked["rotations_in_force"], asked["rotations"], "{stdout}");
    assert_eq!(summary["stale_swaps"], 0, "{stdout}");
    // Some rotated and rewrote the declaration in one reload.
    assert!(
        asked["rotations_with_declaration"].as_u64().unwrap_or(0) >= 1,
        "{stdout}"
    );
    // The long-lived WebSockets: answered redacted, closed with 1012 by the reloads that
    // changed something and reopened, never a value.
    let sockets = &summary["websockets"];
    assert!(sockets["answers"].as_u64().unwrap_or(0) > 0, "{stdout}");
    assert!(sockets["restarts"].as_u64().unwrap_or(0) > 0, "{stdout}");
    assert_eq!(sockets["leaks"], 0, "{stdout}");
    // The held HTTP/2 tunnels: answered redacted, sent GOAWAY by the reloads that changed
    // the declaration and reopened, never a value.
    let held = &summary["held_tunnels"];
    assert!(held["answers"].as_u64().unwrap_or(0) > 0, "{stdout}");
    assert!(held["goaways"].as_u64().unwrap_or(0) > 0, "{stdout}");
    assert_eq!(held["leaks"], serde_json::json!([]), "{stdout}");
    // The minted credential: refreshed before each expiry, about once per lifetime, never
    // an expired or unknown token at the API, each mint audited.
    let minted = &summary["minted"];
    assert!(minted["tokens"].as_u64().unwrap_or(0) >= 8, "{stdout}");
    assert!(minted["live"].as_u64().unwrap_or(0) > 0, "{stdout}");
    assert_eq!(minted["expired"], 0, "{stdout}");
    assert_eq!(minted["unknown"], 0, "{stdout}");
    assert_eq!(minted["audit_mints"], minted["tokens"], "{stdout}");
    assert!(
        summary["bad_tls_attempts"].as_u64().unwrap_or(0) > 0,
        "sluice never dialled the wrong-certificate upstream: {stdout}"
    );
    // sluice was sampled through the run, after the warm-up too.
    assert!(
        summary["samples"].as_array().map_or(0, Vec::len) >= 20,
        "{stdout}"
    );
    // The audit log rotated through the run, its chain verified across the segments.
    assert!(
        summary["audit_files"].as_u64().unwrap_or(0) >= 3,
        "{stdout}"
    );
    assert!(summary["rss_after_kib"]["max"].as_u64().unwrap_or(0) > 0);
    assert!(summary["fds_after"]["max"].as_u64().unwrap_or(0) > 0);
    assert!(stdout.contains("verdict: PASS"), "{stdout}");
}
