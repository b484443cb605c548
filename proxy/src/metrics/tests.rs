//! Tests of the counters and the page they make.

use std::time::Duration;

use super::*;

#[test]
fn every_workers_counts_are_summed_into_one_page() {
    let metrics = Metrics::default();
    let (a, b) = (metrics.worker(), metrics.worker());
    a.event(&Event::new(EventKind::Swap).secret("github_token"));
    b.event(&Event::new(EventKind::Swap).secret("github_token"));
    b.event(&Event::new(EventKind::Refuse).secret("github_token"));
    a.event(&Event::new(EventKind::Deny));
    a.refusals("placeholder-not-granted", 1);
    b.refusals("placeholder-not-granted", 1);
    a.tls_handshake(true);
    b.tls_handshake(false);
    a.request_took(Duration::from_millis(3));
    a.scanned(1000);
    b.scanned(24);
    metrics.reload(true);
    metrics.reload(false);
    metrics.reload(false);
    let page = metrics.encode(&Gauges {
        connections_open: 2,
        upstream_idle: 3,
        audit_healthy: true,
        secrets: 1,
        guard_patterns: 7,
        guard_bytes: 272_261,
        ..Gauges::default()
    });
    for line in [
        "sluice_events_total{event=\"swap\"} 2",
        "sluice_events_total{event=\"deny\"} 1",
        "sluice_events_total{event=\"reload\"} 0",
        "sluice_secret_events_total{secret=\"github_token\",event=\"swap\"} 2",
        "sluice_secret_events_total{secret=\"github_token\",event=\"refuse\"} 1",
        "sluice_refusals_total{reason=\"placeholder-not-granted\"} 2",
        "sluice_reloads_total{result=\"ok\"} 1",
        "sluice_reloads_total{result=\"refused\"} 2",
        "sluice_tls_handshakes_total 1",
        "sluice_tls_handshake_failures_total 1",
        "sluice_request_duration_seconds_count 1",
        "sluice_request_duration_seconds_bucket{le=\"0.005\"} 1",
        "sluice_request_duration_seconds_bucket{le=\"0.0025\"} 0",
        "sluice_connections_open 2",
        "sluice_scanned_bytes_total 1024",
        "sluice_upstream_idle_connections 3",
        "sluice_audit_write_failures_total 0",
        "sluice_audit_healthy 1",
        "sluice_guard_patterns 7",
        "sluice_guard_bytes 272261",
        "# TYPE sluice_request_duration_seconds histogram",
    ] {
        assert!(
            page.lines().any(|l| l == line),
            "missing {line:?} in\n{page}"
        );
    }
    // A secret with no events of a kind has no series for it: the page stays small.
    assert!(!page.contains("secret=\"github_token\",event=\"deny\""));
}

#[test]
fn a_scrape_while_workers_count_sees_each_count_once() {
    let metrics = Arc::new(Metrics::default());
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let counters = metrics.worker();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    counters.event(&Event::new(EventKind::Redact).secret("s"));
                }
            })
        })
        .collect();
    let midway = metrics.encode(&Gauges::default());
    for thread in threads {
        thread.join().unwrap();
    }
    let page = metrics.encode(&Gauges::default());
    assert!(
        page.contains("sluice_events_total{event=\"redact\"} 20000"),
        "{page}"
    );
    assert!(page.contains("sluice_secret_events_total{secret=\"s\",event=\"redact\"} 20000"));
    assert!(midway.contains("sluice_events_total{event=\"redact\"}"));
}

#[test]
fn mints_are_counted_per_secret_and_result_and_a_providers_own_code_is_no_label() {
    use crate::mint::MintFailure;
    let metrics = Metrics::default();
    let (a, b) = (metrics.worker(), metrics.worker());
    a.mint("idp", "ok");
    b.mint("idp", "ok");
    let refused = MintFailure::Provider("invalid_grant");
    a.mint("idp", refused.code());
    // A code the provider made up (it could echo the request) is not a label.
    let made_up = MintFailure::Provider(crate::mint::client::provider_code("secret_xyz_echoed"));
    b.mint("idp", made_up.code());
    a.mint_waited(Duration::from_millis(40));
    let page = metrics.encode(&Gauges::default());
    for line in [
        "sluice_mints_total{secret=\"idp\",result=\"ok\"} 2",
        "sluice_mints_total{secret=\"idp\",result=\"invalid_grant\"} 1",
        "sluice_mints_total{secret=\"idp\",result=\"other_error\"} 1",
        "sluice_mint_wait_seconds_count 1",
        "sluice_mint_wait_seconds_bucket{le=\"0.05\"} 1",
        "sluice_mint_wait_seconds_bucket{le=\"0.025\"} 0",
    ] {
        assert!(
            page.lines().any(|l| l == line),
            "missing {line:?} in\n{page}"
        );
    }
    assert!(!page.contains("secret_xyz_echoed"), "{page}");
}
