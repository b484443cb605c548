//! Request rules (`allow:`): what they admit through `may`, how a refusal names its fix,
//! and every diagnostic of a bad rule at its line and column.

use super::{errors, expect_at};
use crate::*;

const RULED: &str = r#"version: 1
secrets:
  gh:
    from: { env: GH }
    hosts: [api.github.com]
    sinks: [egress]
    allow:
      - { methods: [GET, HEAD], paths: ["/repos/acme/**", "/user"] }
      - { methods: [POST], paths: ["/repos/acme/*/issues"] }
  open:
    from: { env: OPEN }
    hosts: [api.github.com]
    sinks: [egress]
"#;

fn policy() -> Policy {
    Policy::parse(RULED, "t.yaml").unwrap().policy
}

fn may(policy: &Policy, secret: &str, method: &str, path: &str) -> Result<Permit, Ungranted> {
    let auth = Location::Header("authorization".into());
    let line = RequestLine::new(method, path);
    policy.may(secret, Sink::Egress, "api.github.com", 443, &auth, &line)
}

#[test]
fn a_rule_admits_its_methods_on_its_paths_and_nothing_else() {
    let p = policy();
    for (method, path) in [
        ("GET", "/repos/acme/widgets"),
        ("HEAD", "/repos/acme"),
        ("GET", "/repos/acme/widgets/pulls/1/files"),
        ("GET", "/user"),
        ("POST", "/repos/acme/widgets/issues"),
        ("GET", "/repos/other/../acme/x"),
    ] {
        assert!(may(&p, "gh", method, path).is_ok(), "{method} {path}");
    }
    for (method, path) in [
        ("DELETE", "/repos/acme/widgets"),
        ("get", "/user"),
        ("GET", "/user/"),
        ("GET", "/User"),
        ("GET", "/repos/acme/../other"),
        ("GET", "/repos/acme/%2E%2E/other"),
        ("GET", "/repos/acme/x%2F..%2F..%2Fother"),
        ("POST", "/repos/acme/widgets/pulls"),
        ("POST", "/repos/acme/a/b/issues"),
        ("GET", "*"),
    ] {
        let refused = may(&p, "gh", method, path).unwrap_err();
        assert_eq!(refused.code(), "request_not_allowed", "{method} {path}");
    }
    // A secret without rules admits every request.
    assert!(may(&p, "open", "DELETE", "/anything/at/all").is_ok());
    // The other grants come first: the rules never widen a host.
    let auth = Location::Header("authorization".into());
    let line = RequestLine::new("GET", "/user");
    let elsewhere = p.may("gh", Sink::Egress, "evil.example", 443, &auth, &line);
    assert_eq!(elsewhere.unwrap_err().code(), "host_not_granted");
    // may_place decides the rest alone; may_request the rules alone.
    assert!(
        p.may_place("gh", Sink::Egress, "api.github.com", 443, &auth)
            .is_ok()
    );
    let line = RequestLine::new("DELETE", "/user");
    assert!(p.may_request(0, "api.github.com", &line).is_err());
    assert_eq!(p.ruled_secrets(), &[0]);
}

#[test]
fn a_refusal_names_the_rule_that_would_admit_it() {
    let p = policy();
    let method = may(&p, "gh", "DELETE", "/user").unwrap_err().to_string();
    assert!(
        method.contains(
            "secrets.gh.allow[0] admits this path for GET, HEAD only; add DELETE to its methods"
        ),
        "{method}"
    );
    let path = may(&p, "gh", "GET", "/repos/other//x/./y")
        .unwrap_err()
        .to_string();
    assert!(
        path.contains(r#"add { methods: [GET], paths: ["/repos/other/x/y"] } to secrets.gh.allow"#),
        "{path}"
    );
    assert!(
        path.contains("GET /repos/other/x/y toward api.github.com"),
        "{path}"
    );
}

#[test]
fn grant_lines_count_the_rules() {
    let p = policy();
    assert_eq!(
        p.secrets()[0].grant_line(),
        "egress → api.github.com; header; 2 request rules"
    );
}

fn with_allow(allow: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  gh:\n    from: {{ env: GH }}\n    hosts: [api.github.com]\n    sinks: [egress]\n    allow:\n{allow}"
    )
}

fn rule_problem(d: &Problem, pred: impl Fn(&RuleProblem) -> bool) -> bool {
    matches!(d, Problem::Rule(rule) if pred(rule))
}

#[test]
fn bad_patterns_and_methods_are_positioned_with_their_fix() {
    let src = with_allow(concat!(
        "      - { methods: [get], paths: [\"/v1/*.json\"] }\n",
        "      - { methods: [CONNECT], paths: [\"repos\"] }\n",
        "      - { methods: [\"G T\"], paths: [\"/a/../b\", \"/q?x=1\", \"/**/x/**\"] }\n",
    ));
    let d = errors(&src).0;
    expect_at(&d, 8, 21, |p| {
        rule_problem(
            p,
            |r| matches!(r, RuleProblem::LowercaseMethod { upper, .. } if upper == "GET"),
        )
    });
    expect_at(&d, 8, 35, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::PartialWildcard { .. }))
    });
    expect_at(&d, 9, 21, |p| {
        rule_problem(p, |r| *r == RuleProblem::ConnectMethod)
    });
    expect_at(&d, 9, 39, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::PathNotAbsolute { .. }))
    });
    expect_at(&d, 10, 21, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::BadMethod { .. }))
    });
    expect_at(&d, 10, 37, |p| {
        rule_problem(
            p,
            |r| matches!(r, RuleProblem::NeverNormal { normal, .. } if normal == "/b"),
        )
    });
    expect_at(&d, 10, 48, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::PathWithQuery { .. }))
    });
    expect_at(&d, 10, 58, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::TwoDoubleStars { .. }))
    });
    let shown = errors(&src).to_string();
    assert!(shown.contains("t.yaml:10:37: error: secrets.gh.allow[2].paths[0]: path pattern `/a/../b` can never match"), "{shown}");
    assert!(shown.contains("help: write `/b`"), "{shown}");
    assert!(shown.contains("help: write `GET`"), "{shown}");
}

#[test]
fn empty_rules_and_lists_are_refused() {
    let d = errors(&with_allow("      []\n")).0;
    assert!(
        d.iter()
            .any(|d| rule_problem(&d.problem, |r| matches!(r, RuleProblem::EmptyAllow { .. }))),
        "{d:#?}"
    );
    let src = with_allow("      - {}\n      - { methods: [] }\n      - { paths: [] }\n");
    let d = errors(&src).0;
    expect_at(&d, 8, 9, |p| {
        rule_problem(p, |r| *r == RuleProblem::EmptyRule)
    });
    expect_at(&d, 9, 20, |p| {
        rule_problem(p, |r| *r == RuleProblem::EmptyList { key: "methods" })
    });
    expect_at(&d, 10, 18, |p| {
        rule_problem(p, |r| *r == RuleProblem::EmptyList { key: "paths" })
    });
    // An unknown key in a rule is named, never ignored.
    let unknown = errors(&with_allow("      - { method: [GET] }\n")).to_string();
    assert!(unknown.contains("unknown key `method`"), "{unknown}");
}

#[test]
fn allow_needs_egress_and_is_refused_on_a_signing_secret() {
    let no_egress = "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [command]\n    allow: [{ methods: [GET] }]\n";
    let d = errors(no_egress).0;
    expect_at(&d, 6, 12, |p| {
        matches!(p, Problem::NeedsEgress { key: "allow", .. })
    });
    let signing = "version: 1\nsecrets:\n  aws:\n    sign: aws-sigv4\n    from:\n      access_key_id: { env: A }\n      secret_access_key: { env: B }\n    hosts: [\"*.amazonaws.com\"]\n    allow: [{ methods: [GET] }]\n";
    let d = errors(signing).0;
    expect_at(&d, 9, 12, |p| {
        rule_problem(p, |r| matches!(r, RuleProblem::OnSigningSecret { .. }))
    });
}

#[test]
fn a_rule_with_only_methods_or_only_paths_admits_the_other_freely() {
    let src = with_allow("      - { methods: [GET] }\n      - { paths: [\"/upload/**\"] }\n");
    let p = Policy::parse(&src, "t.yaml").unwrap().policy;
    assert!(may(&p, "gh", "GET", "/anything").is_ok());
    assert!(may(&p, "gh", "PUT", "/upload/a/b").is_ok());
    assert!(may(&p, "gh", "PUT", "/anything").is_err());
}
