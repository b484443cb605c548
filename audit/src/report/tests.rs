//! The report over logs written by the real writer: aggregates that agree with the summary,
//! every field escaped on the page, a broken chain named first, and a page that stays small.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::{AuditLog, Event, EventKind, Rotation, StartInfo, summarize};

fn start(withheld: &[&str]) -> StartInfo {
    StartInfo {
        withheld: withheld.iter().map(|s| (*s).to_owned()).collect(),
        ..StartInfo::new("ab".repeat(32), "cd".repeat(32))
    }
}

/// A run with something of every kind: 2 swaps, 1 verbatim, 3 refusals, 2 redactions of
/// 7 values, a denial, a failed login, a materialized value, a reload.
fn known_run(path: &Path) {
    let log = AuditLog::open(path, "run-known", start(&["AWS_SECRET_ACCESS_KEY"])).unwrap();
    let gh = || {
        Event::new(EventKind::Swap)
            .secret("github_token")
            .host("api.github.com")
            .location("header:authorization")
    };
    log.record(gh().method("GET").path("/user")).unwrap();
    log.record(gh().method("POST").path("/graphql")).unwrap();
    log.record(
        Event::new(EventKind::Verbatim)
            .secret("openai_key")
            .host("api.anthropic.com")
            .location("body"),
    )
    .unwrap();
    for path in ["/api/new?key=x", "/api/new?key=y", "/other"] {
        log.record(
            Event::new(EventKind::Refuse)
                .secret("github_token")
                .host("paste.example")
                .method("POST")
                .path(path)
                .location("body")
                .reason("placeholder-not-granted"),
        )
        .unwrap();
    }
    for count in [3, 4] {
        log.record(
            Event::new(EventKind::Redact)
                .secret("github_token")
                .host("api.github.com")
                .count(count),
        )
        .unwrap();
    }
    log.record(
        Event::new(EventKind::Deny)
            .host("169.254.169.254")
            .reason("address-blocked"),
    )
    .unwrap();
    log.record(Event::new(EventKind::AuthFail).reason("proxy-auth-required"))
        .unwrap();
    log.record(
        Event::new(EventKind::Materialize)
            .secret("deploy_key")
            .location("file"),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Reload)
            .reason("reloaded")
            .policy_sha256("c3".repeat(32)),
    )
    .unwrap();
    log.close().unwrap();
}

#[test]
fn the_report_aggregates_what_the_summary_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    known_run(&path);
    let paths = [path.clone()];
    let report = build(&paths).unwrap();
    let summary = summarize(&paths).unwrap();
    assert!(report.intact());
    assert_eq!(report.totals.lines, summary.events);
    assert_eq!(report.totals.runs, 1);
    assert_eq!(report.logs[0].runs[0].run_id, "run-known");
    assert!(report.logs[0].runs[0].complete);
    for row in &summary.rows {
        let (Some(secret), Some(host)) = (&row.secret, &row.host) else {
            continue;
        };
        let flow = report
            .flows
            .iter()
            .find(|f| &f.secret == secret && &f.host == host)
            .unwrap_or_else(|| panic!("no flow for {secret} → {host}"));
        assert_eq!(
            (flow.swap, flow.verbatim, flow.refused, flow.redacted),
            (row.swaps, row.verbatim, row.refused(), row.redactions)
        );
    }
    assert_eq!(report.totals.redacted, 7);

    let group = &report.refusals[0];
    assert_eq!(
        (group.reason.as_str(), group.count),
        ("placeholder-not-granted", 3)
    );
    assert!(
        group
            .fix
            .contains("list paste.example in secrets.github_token.hosts")
    );
    // Paths as the log has them: query values elided, so two requests are one path.
    assert_eq!(group.paths[0].name, "/api/new?key=…");
    assert_eq!(group.paths[0].count, 2);
    assert_eq!(report.denied[0].name, "169.254.169.254");
    assert_eq!(report.auth_failures[0].count, 1);
    assert_eq!(report.withheld, ["AWS_SECRET_ACCESS_KEY"]);
    assert_eq!(report.materialized[0].name, "deploy_key");
    assert_eq!(report.reloads[0].policy_sha256, "c3".repeat(32));
    assert_eq!(
        report
            .timeline
            .buckets
            .iter()
            .map(|b| b.refusals)
            .sum::<u64>(),
        3
    );

    let html = report.to_html().unwrap();
    for shown in [
        "Every chain verified",
        "run-known",
        "github_token",
        "paste.example",
        "169.254.169.254",
    ] {
        assert!(html.contains(shown), "the page lacks {shown}");
    }
    // Self-contained: nothing fetched, no script.
    for absent in ["<script", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(absent), "the page holds {absent}");
    }
}

/// What a hostile sandbox might put in a field the log keeps.
const HOSTILE: &str = "<script>alert(\"x\")</script>'\u{1b}[2J";

#[test]
fn every_field_from_the_log_is_escaped_on_the_page() {
    let event = |kind| Event::new(kind);
    type MakeEvent = Box<dyn Fn() -> Event>;
    let fields: [(&str, MakeEvent); 6] = [
        (
            "host",
            Box::new(move || event(EventKind::Swap).secret("s").host(HOSTILE)),
        ),
        (
            "path",
            Box::new(move || {
                event(EventKind::Refuse)
                    .secret("s")
                    .host("h")
                    .path(format!("/{HOSTILE}"))
                    .reason("bad-request")
            }),
        ),
        (
            "reason",
            Box::new(move || event(EventKind::Refuse).host("h").reason(HOSTILE)),
        ),
        (
            "secret",
            Box::new(move || event(EventKind::Swap).secret(HOSTILE).host("h")),
        ),
        (
            "location",
            Box::new(move || event(EventKind::Redact).secret("s").location(HOSTILE)),
        ),
        (
            "deny reason",
            Box::new(move || event(EventKind::Deny).host("h").reason(HOSTILE)),
        ),
    ];
    for (field, make) in fields {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, "run-x", start(&[HOSTILE])).unwrap();
        log.record(make()).unwrap();
        log.close().unwrap();
        let html = build(&[path]).unwrap().to_html().unwrap();
        assert!(
            !html.contains("<script"),
            "{field}: a script tag on the page"
        );
        assert!(
            !html.contains('\u{1b}'),
            "{field}: an escape character on the page"
        );
        assert!(
            html.contains("&lt;script&gt;") || html.contains("&#60;script&#62;"),
            "{field}: the text is not shown"
        );
        assert!(
            html.contains("␛[2J"),
            "{field}: the escape is not shown as text"
        );
        assert!(
            !html.contains("alert(\"x\")"),
            "{field}: quotes not escaped"
        );
    }
}

#[test]
fn a_broken_chain_is_the_first_thing_said() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    known_run(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("paste.example", "fine.example", 1);
    std::fs::write(&path, edited).unwrap();
    let report = build(std::slice::from_ref(&path)).unwrap();
    assert!(!report.intact());
    let broken = report.logs[0].broken.as_ref().unwrap();
    assert_eq!(broken.line, 6);
    assert!(broken.why.contains("prev does not match"), "{}", broken.why);
    let html = report.to_html().unwrap();
    let verdict = html.find("id=\"verdict\"").unwrap();
    assert!(html[verdict..].contains("BROKEN"));
    assert!(html[verdict..].contains("line 6:"));
    assert!(html.find("BROKEN").unwrap() < html.find("id=\"runs\"").unwrap());
    // Counted up to the break only: the edited line and what follows are not.
    assert_eq!(report.totals.lines, 5);
}

#[test]
fn no_value_reaches_the_page() {
    const VALUE: &str = "ghp_RealValueNeverOnThePage12345";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // The proxy hands the log the guard's redaction; this one stands in for it.
    let redactor: crate::Redactor =
        Arc::new(|text: String| text.replace(VALUE, "SLUICE_GITHUB_TOKEN_x"));
    let log = AuditLog::open_with(
        &path,
        "run-v",
        start(&[]),
        Some(redactor),
        Rotation::default(),
    )
    .unwrap();
    log.record(
        Event::new(EventKind::Refuse)
            .secret("github_token")
            .host(format!("{VALUE}.evil.example"))
            .path(format!("/leak/{VALUE}?q={VALUE}"))
            .reason("secret-value-refused"),
    )
    .unwrap();
    log.close().unwrap();
    let report = build(&[path]).unwrap();
    assert!(!report.to_html().unwrap().contains(VALUE));
    assert!(!serde_json::to_string(&report).unwrap().contains(VALUE));
}

#[test]
fn the_page_stays_small_however_many_names_the_log_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let withheld: Vec<String> = (0..300).map(|i| format!("SOME_TOKEN_{i}")).collect();
    let withheld: Vec<&str> = withheld.iter().map(String::as_str).collect();
    let log = AuditLog::open(&path, "run-big", start(&withheld)).unwrap();
    for i in 0..20_000 {
        let event = match i % 4 {
            0 => Event::new(EventKind::Deny)
                .host(format!("probe-{i}.example"))
                .reason("host-not-allowed"),
            1 => Event::new(EventKind::Refuse)
                .secret(format!("s{}", i % 97))
                .host(format!("h{i}.example"))
                .path(format!("/p/{i}"))
                .reason(format!("reason-{}", i % 61)),
            3 if i % 8 == 3 => Event::new(EventKind::Materialize)
                .secret(format!("m{i}"))
                .location("command"),
            _ => Event::new(EventKind::Swap)
                .secret(format!("s{}", i % 97))
                .host(format!("h{}.example", i % 89)),
        };
        // The writer's queue is bounded: pace the test as a proxy under load would be.
        while log.queued() > 8_000 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        log.record(event).unwrap();
    }
    log.close().unwrap();
    let report = build(&[path]).unwrap();
    assert_eq!(report.totals.lines, 20_002);
    assert!(report.flows.len() <= TOP_FLOWS && report.more_flows.rows > 0);
    assert!(report.denied.len() <= TOP_DENIED && report.more_denied.events > 0);
    assert!(report.refusals.len() <= TOP_REASONS);
    assert_eq!(report.withheld.len(), TOP_WITHHELD);
    assert_eq!(report.more_withheld, 300 - TOP_WITHHELD as u64);
    assert_eq!(report.materialized.len(), TOP_MATERIALIZED);
    assert_eq!(
        report.more_materialized.rows,
        2_500 - TOP_MATERIALIZED as u64
    );
    let html = report.to_html().unwrap();
    assert!(
        html.contains("and 200 more"),
        "the page says what it left out"
    );
    assert!(html.len() < 512 * 1024, "{} bytes", html.len());
}

#[test]
fn a_rotated_log_is_one_log_on_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let rotation = Rotation {
        max_bytes: Some(crate::MIN_SEGMENT_BYTES),
        max_age: None,
    };
    let log = AuditLog::open_with(&path, "run-r", start(&[]), None, rotation).unwrap();
    for _ in 0..100 {
        log.record(Event::new(EventKind::Swap).secret("s").host("api.example"))
            .unwrap();
    }
    log.close().unwrap();
    let report = build(&[dir.path().to_owned()]).unwrap();
    assert_eq!(report.logs.len(), 1);
    assert!(report.logs[0].files.len() > 2);
    assert_eq!(
        report.logs[0].runs[0].segments as usize,
        report.logs[0].files.len()
    );
    assert_eq!(report.flows[0].swap, 100);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any one byte changed anywhere but the last line breaks the chain, and the report
    /// (which reads hostile files) says so without panicking.
    #[test]
    fn any_edit_before_the_last_line_is_caught(at in 0.0f64..1.0, byte in proptest::prelude::any::<u8>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        known_run(&path);
        known_run(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        let last_line_start = bytes[..bytes.len() - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
        let i = ((last_line_start - 1) as f64 * at) as usize;
        proptest::prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        std::fs::write(&path, &bytes).unwrap();
        let report = build(std::slice::from_ref(&path)).unwrap();
        proptest::prop_assert!(!report.intact());
        let html = report.to_html().unwrap();
        proptest::prop_assert!(html.contains("BROKEN"));
    }
}

#[test]
fn approvals_show_who_decided_what() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, "run-approvals", start(&[])).unwrap();
    let approve = |decision: &str, scope: &str, channel: &str| {
        Event::new(EventKind::Approve)
            .secret("prod")
            .host("api.prod.example.com")
            .method("DELETE")
            .path("/items/7")
            .approval(crate::Approval {
                id: 1,
                decision: decision.into(),
                scope: scope.into(),
                channel: channel.into(),
                waited_ms: 1200,
            })
    };
    for (decision, scope, channel) in [
        ("allow", "once", "terminal"),
        ("allow", "once", "terminal"),
        ("deny", "run", "webhook"),
    ] {
        log.record(approve(decision, scope, channel)).unwrap();
    }
    log.close().unwrap();
    let report = build(&[path]).unwrap();
    let rows: Vec<(&str, &str, u64)> = report
        .approvals
        .iter()
        .map(|a| (a.name.as_str(), a.detail.as_str(), a.count))
        .collect();
    assert_eq!(
        rows,
        [
            (
                "prod",
                "allow once: DELETE api.prod.example.com (by terminal)",
                2
            ),
            (
                "prod",
                "deny for the run: DELETE api.prod.example.com (by webhook)",
                1
            ),
        ]
    );
    let html = report.to_html().unwrap();
    assert!(html.contains("<h2>Approvals</h2>"), "{html}");
    assert!(html.contains("deny for the run: DELETE api.prod.example.com (by webhook)"));
}

#[test]
fn minted_credentials_are_counted_by_secret_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, "run-mints", start(&[])).unwrap();
    let mint = |reason: &str| {
        Event::new(EventKind::Mint)
            .secret("google")
            .host("oauth2.googleapis.com")
            .reason(reason)
    };
    for reason in [
        "minted jwt_bearer; expires in 3599s",
        "minted jwt_bearer; expires in 3600s",
        "refused jwt_bearer: invalid_grant",
        "answered the sandbox's metadata-server token request with its placeholder",
    ] {
        log.record(mint(reason)).unwrap();
    }
    log.close().unwrap();
    let report = build(&[path]).unwrap();
    let rows: Vec<(&str, &str, u64)> = report
        .mints
        .iter()
        .map(|m| (m.name.as_str(), m.detail.as_str(), m.count))
        .collect();
    assert_eq!(
        rows,
        [
            ("google", "minted jwt_bearer", 2),
            (
                "google",
                "answered the sandbox's metadata-server token request",
                1
            ),
            ("google", "refused jwt_bearer: invalid_grant", 1),
        ]
    );
    let html = report.to_html().unwrap();
    assert!(html.contains("<h2>Minted credentials</h2>"), "{html}");
    assert!(html.contains("refused jwt_bearer: invalid_grant"));
}

#[test]
fn grants_no_swap_used_are_listed_for_narrowing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut start = start(&[]);
    start.grants = [
        (
            "gh",
            vec![
                "api.github.com header",
                "api.github.com query",
                "*.githubusercontent.com header",
            ],
        ),
        ("aws", vec!["s3.eu-west-1.amazonaws.com signature"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    let log = AuditLog::open(&path, "run-grants", start).unwrap();
    for (secret, host, location) in [
        ("gh", "api.github.com:443", "header:authorization"),
        ("gh", "raw.githubusercontent.com", "header:authorization"),
    ] {
        log.record(
            Event::new(EventKind::Swap)
                .secret(secret)
                .host(host)
                .location(location),
        )
        .unwrap();
    }
    log.close().unwrap();
    let report = build(&[path]).unwrap();
    let unused: Vec<(&str, &str)> = report
        .unused_grants
        .iter()
        .map(|g| (g.name.as_str(), g.detail.as_str()))
        .collect();
    assert_eq!(
        unused,
        [
            ("aws", "s3.eu-west-1.amazonaws.com signature"),
            ("gh", "api.github.com query"),
        ]
    );
    let html = report.to_html().unwrap();
    assert!(html.contains("<h2>Grants never used</h2>"), "{html}");
}

#[test]
fn a_host_pattern_matches_as_the_grant_decision_reads_it() {
    use super::grants::host_matches;
    assert!(host_matches("api.github.com", "api.github.com"));
    assert!(host_matches("api.github.com", "API.github.com:443"));
    assert!(host_matches("*.example.com", "a.b.example.com"));
    assert!(!host_matches("*.example.com", "example.com"));
    assert!(host_matches("idp.test:8443", "idp.test:8443"));
    assert!(!host_matches("idp.test:8443", "idp.test:443"));
    assert!(!host_matches("idp.test:8443", "idp.test"));
    assert!(host_matches("[::1]:8443", "[::1]:8443"));
}
