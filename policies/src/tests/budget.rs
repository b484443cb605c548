//! `budget:` in a declaration: what it compiles to, and each error at its position.

use std::time::Duration;

use super::{errors, expect_at};
use crate::*;

fn with_budget(budget: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  gh:\n    from: {{ env: GH }}\n    hosts: [api.github.com]\n    sinks: [egress]\n    budget: {budget}\n"
    )
}

fn budget_problem(p: &Problem, pred: impl Fn(&BudgetProblem) -> bool) -> bool {
    matches!(p, Problem::Budget(b) if pred(b))
}

#[test]
fn a_budget_compiles_to_requests_per_window() {
    let p = Policy::parse(&with_budget("{ requests: 600, per: 1h }"), "t.yaml")
        .unwrap()
        .policy;
    let budget = p.secrets()[0].budget().unwrap();
    assert_eq!(budget.requests, 600);
    assert_eq!(budget.per, Duration::from_secs(3600));
    assert_eq!(
        p.secrets()[0].grant_line(),
        "egress → api.github.com; header; at most 600 requests per 1h"
    );
}

#[test]
fn bad_budgets_are_positioned_with_their_fix() {
    let d = errors(&with_budget("{ requests: 0, per: 1h }")).0;
    expect_at(&d, 7, 25, |p| {
        budget_problem(p, |b| *b == BudgetProblem::NoRequests)
    });
    let d = errors(&with_budget("{ requests: 5, per: soon }")).0;
    expect_at(&d, 7, 33, |p| {
        budget_problem(p, |b| matches!(b, BudgetProblem::BadDuration { .. }))
    });
    for window in ["500ms", "40d"] {
        let d = errors(&with_budget(&format!("{{ requests: 5, per: {window} }}"))).0;
        expect_at(&d, 7, 33, |p| {
            budget_problem(p, |b| matches!(b, BudgetProblem::WindowOutOfRange { .. }))
        });
    }
    let d = errors(&with_budget("{ requests: 5 }")).0;
    expect_at(&d, 7, 13, |p| {
        budget_problem(p, |b| *b == BudgetProblem::Incomplete { missing: "per" })
    });
    let shown = errors(&with_budget("{ per: 1h }")).to_string();
    assert!(shown.contains("`requests:` is missing"), "{shown}");
    assert!(
        shown.contains("help: write both, e.g. `budget: { requests: 600, per: 1h }`"),
        "{shown}"
    );
    let unknown = errors(&with_budget("{ requests: 5, per: 1h, burst: 2 }")).to_string();
    assert!(unknown.contains("unknown key `burst`"), "{unknown}");
}

#[test]
fn a_budget_needs_egress() {
    let src = "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [command]\n    budget: { requests: 5, per: 1h }\n";
    let d = errors(src).0;
    expect_at(&d, 6, 13, |p| {
        matches!(p, Problem::NeedsEgress { key: "budget", .. })
    });
}
