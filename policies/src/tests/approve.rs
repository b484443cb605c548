//! `approve:` in a declaration: what it compiles to, and each error at its position.

use super::{errors, expect_at};
use crate::*;

fn with_approve(approve: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  prod:\n    from: {{ env: PROD }}\n    hosts: [api.prod.example.com]\n    approve: {approve}\n    sinks: [egress]\n"
    )
}

fn approve_problem(p: &Problem, pred: impl Fn(&ApproveProblem) -> bool) -> bool {
    matches!(p, Problem::Approve(a) if pred(a))
}

#[test]
fn approve_compiles_to_the_methods_that_wait() {
    let p = Policy::parse(&with_approve("[POST, DELETE, POST]"), "t.yaml")
        .unwrap()
        .policy;
    assert!(p.has_approvals());
    let secret = &p.secrets()[0];
    assert_eq!(
        secret.approve(),
        Some(&Approve::Methods(vec!["POST".into(), "DELETE".into()]))
    );
    assert!(secret.needs_approval("DELETE"));
    assert!(!secret.needs_approval("GET"));
    assert_eq!(
        secret.grant_line(),
        "egress → api.prod.example.com; header; POST, DELETE wait for approval"
    );
    let all = Policy::parse(&with_approve("all"), "t.yaml")
        .unwrap()
        .policy;
    assert!(all.secrets()[0].needs_approval("GET"));
    let none = Policy::parse(
        "version: 1\nsecrets:\n  prod:\n    from: { env: PROD }\n    hosts: [api.prod.example.com]\n",
        "t.yaml",
    )
    .unwrap()
    .policy;
    assert!(!none.has_approvals());
    assert!(!none.secrets()[0].needs_approval("DELETE"));
}

#[test]
fn bad_approvals_are_positioned_with_their_fix() {
    let d = errors(&with_approve("[POST, delete]")).0;
    expect_at(&d, 6, 14, |p| {
        approve_problem(p, |a| {
            *a == ApproveProblem::UnknownMethod {
                found: "delete".into(),
            }
        })
    });
    let unknown = d
        .iter()
        .find(|d| d.problem.code() == "approve-unknown-method");
    assert!(unknown.unwrap().to_string().contains("in upper case"));
    let d = errors(&with_approve("[]")).0;
    expect_at(&d, 6, 14, |p| {
        approve_problem(p, |a| *a == ApproveProblem::Empty)
    });
    let d = errors(&with_approve("sometimes")).0;
    expect_at(&d, 6, 14, |p| {
        approve_problem(p, |a| matches!(a, ApproveProblem::NotAList { .. }))
    });
    // Only a secret swapped into requests has uses to approve.
    let d = errors(
        "version: 1\nsecrets:\n  prod:\n    from: { env: PROD }\n    sinks: []\n    approve: all\n",
    )
    .0;
    expect_at(&d, 6, 14, |p| {
        matches!(p, Problem::NeedsEgress { key: "approve", .. })
    });
}

#[test]
fn approvals_do_not_apply_to_signing_secrets_yet() {
    let yaml = "version: 1\nsecrets:\n  aws:\n    sign: aws-sigv4\n    from:\n      access_key_id: { env: AK }\n      secret_access_key: { env: SK }\n    hosts: [\"s3.amazonaws.com\"]\n    approve: [PUT]\n";
    let d = errors(yaml).0;
    expect_at(&d, 9, 14, |p| {
        approve_problem(p, |a| matches!(a, ApproveProblem::OnSigningSecret { .. }))
    });
}

#[test]
fn an_asked_host_waits_is_resolvable_and_intercepted_once_allowed() {
    let yaml =
        "version: 1\negress:\n  allow: [api.example.com]\n  ask: [\"*.internal.example.com\"]\n";
    let p = Policy::parse(yaml, "t.yaml").unwrap().policy;
    assert!(p.needs_decisions());
    assert!(!p.has_approvals(), "no secret approves");
    assert!(matches!(
        p.reach("wiki.internal.example.com", 443),
        Reach::Denied(_)
    ));
    assert!(p.asks("wiki.internal.example.com", 443));
    assert!(!p.asks("api.example.com", 443) && !p.asks("example.org", 443));
    // The jail's resolver answers it (the connection is then held), and the run CA covers
    // it (an allowed connection is intercepted).
    assert!(p.resolvable("wiki.internal.example.com"));
    assert!(
        p.intercepted_hosts()
            .iter()
            .any(|h| h.to_string() == "*.internal.example.com")
    );
}

#[test]
fn an_asked_host_that_is_reachable_already_is_an_error() {
    let d = errors("version: 1\negress:\n  allow: [api.example.com]\n  ask: [api.example.com]\n").0;
    expect_at(
        &d,
        4,
        9,
        |p| matches!(p, Problem::AskReachable { list, .. } if list == "egress.allow"),
    );
    let d = errors(
        "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    hosts: [api.github.com]\n    sinks: [egress]\negress:\n  ask: [\"*.github.com\"]\n",
    )
    .0;
    expect_at(
        &d,
        8,
        9,
        |p| matches!(p, Problem::AskReachable { list, .. } if list == "secrets.gh.hosts"),
    );
}
