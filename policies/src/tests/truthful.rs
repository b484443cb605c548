//! The declaration means what it says: each line that only looks harmless is refused at its
//! position with a fix, and the nearest declaration that is fine loads (each error paired
//! with its near miss).

use super::*;

/// (what, refused declaration, line, column, the problem, the nearest fine declaration).
type Case = (&'static str, String, u64, u64, fn(&Problem) -> bool, String);

fn secret(body: &str) -> String {
    format!("version: 1\nsecrets:\n  k:\n    from: {{ env: K }}\n{body}")
}

fn named(name: &str) -> String {
    format!("version: 1\nsecrets:\n  {name}:\n    from: {{ env: K }}\n    sinks: [command]\n")
}

fn cases() -> Vec<Case> {
    vec![
        (
            "hosts on a secret granted only command (an egress hole)",
            secret("    sinks: [command]\n    hosts: [evil.example.com]\n"),
            6,
            12,
            |p| matches!(p, Problem::NeedsEgress { key: "hosts", .. }),
            secret("    sinks: [command]\n"),
        ),
        (
            "in on a secret granted only file",
            secret("    sinks: [file]\n    in: [body]\n"),
            6,
            9,
            |p| matches!(p, Problem::NeedsEgress { key: "in", .. }),
            secret("    sinks: [file, egress]\n    hosts: [a.example.com]\n    in: [body]\n"),
        ),
        (
            "header on a redact-only secret",
            secret("    sinks: []\n    header: [X-Api-Key]\n"),
            6,
            13,
            |p| matches!(p, Problem::NeedsEgress { key: "header", .. }),
            secret("    sinks: []\n"),
        ),
        (
            "in written with no value",
            secret("    sinks: [egress]\n    hosts: [a.example.com]\n    in:\n"),
            7,
            5,
            |p| matches!(p, Problem::NoValue { key } if key == "secrets.k.in"),
            secret("    sinks: [egress]\n    hosts: [a.example.com]\n    in: [header]\n"),
        ),
        (
            "header written as null",
            secret("    sinks: [egress]\n    hosts: [a.example.com]\n    header: null\n"),
            7,
            5,
            |p| matches!(p, Problem::NoValue { key } if key == "secrets.k.header"),
            secret(
                "    sinks: [egress]\n    hosts: [a.example.com]\n    header: [Authorization]\n",
            ),
        ),
        (
            "egress.allow written with no value",
            "version: 1\negress:\n  allow:\n".to_owned(),
            3,
            3,
            |p| matches!(p, Problem::NoValue { key } if key == "egress.allow"),
            "version: 1\negress:\n  allow: []\n".to_owned(),
        ),
        (
            "a secret named after the proxy variable",
            named("https_proxy"),
            3,
            3,
            |p| {
                matches!(p, Problem::ReservedVariable { variable, why, .. }
                    if variable == "HTTPS_PROXY" && why.contains("proxy"))
            },
            named("https_proxy_token"),
        ),
        (
            "a secret named after a CA variable",
            named("grpc_default_ssl_roots_file_path"),
            3,
            3,
            |p| matches!(p, Problem::ReservedVariable { why, .. } if why.contains("CA-trust")),
            named("grpc_token"),
        ),
        (
            "a secret named path",
            named("path"),
            3,
            3,
            |p| {
                matches!(p, Problem::ReservedVariable { variable, why, .. }
                    if variable == "PATH" && why.contains("workload"))
            },
            named("path_token"),
        ),
        (
            "a secret named no-proxy",
            named("no-proxy"),
            3,
            3,
            |p| matches!(p, Problem::ReservedVariable { variable, .. } if variable == "NO_PROXY"),
            named("no-proxy-key"),
        ),
    ]
}

#[test]
fn what_only_looks_harmless_is_refused_at_its_line_and_its_near_miss_loads() {
    for (what, refused, line, column, problem, fine) in cases() {
        let diagnostics = errors(&refused);
        let hits: Vec<&Diagnostic> = diagnostics
            .0
            .iter()
            .filter(|d| problem(&d.problem))
            .collect();
        assert_eq!(hits.len(), 1, "{what}: {diagnostics}");
        assert!(hits[0].is_error(), "{what}: {}", hits[0]);
        expect_at(&diagnostics.0, line, column, problem);
        if let Err(d) = Policy::parse(&fine, "t.yaml") {
            panic!("{what}: the near miss is refused:\n{fine}\n{d}");
        }
    }
}

#[test]
fn only_a_secret_granted_egress_makes_a_host_reachable() {
    let loaded = Policy::parse(
        &secret("    sinks: [egress, command]\n    hosts: [api.example.com]\n"),
        "t.yaml",
    )
    .unwrap();
    assert_eq!(
        loaded.policy.reach("api.example.com", 443),
        Reach::Intercept
    );
    assert!(matches!(
        loaded.policy.reach("evil.example.com", 443),
        Reach::Denied(_)
    ));
    assert_eq!(loaded.policy.intercepted_hosts().len(), 1);
    // A name lookup carries no port: a name is resolvable when some port of it is reachable.
    let loaded = Policy::parse(
        &secret("    sinks: [egress]\n    hosts: [\"api.example.com:8443\", \"*.cdn.example\"]\n"),
        "t.yaml",
    )
    .unwrap();
    assert!(loaded.policy.resolvable("API.example.com."));
    assert!(loaded.policy.resolvable("a.b.cdn.example"));
    assert!(!loaded.policy.resolvable("cdn.example"));
    assert!(!loaded.policy.resolvable("evil.example.com"));
}
