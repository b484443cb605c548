//! `sluice-bench grants`: what finer grants cost, each figure against a baseline measured in
//! the same run.
//!
//! - **Request rules**: the per-request work the proxy adds for a secret with `allow:` (the
//!   request line normalised and cut once, then its rules weighed: `RequestLine::new` and
//!   `RequestRules::admits`, as `Outbound::for_request` calls them) for a secret of 100
//!   rules, over a mix of requests (admitted by rules all along the list, refused after
//!   walking all of it, some paths with dot segments and escapes to normalise), against the
//!   same mix weighed by a secret of one rule. The target is judged on the 100-rule mix and
//!   on its refused requests alone, which walk every rule.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sluice_policies::{Policy, RequestLine, RequestRules};

use crate::error::BenchError;

/// What `sluice-bench grants` takes.
#[derive(Debug, Args)]
pub(crate) struct GrantsArgs {
    /// Rounds of each measurement; the median round is reported.
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// A quick check that the benchmark works (one short round); the targets are not judged.
    #[arg(long)]
    smoke: bool,
}

/// The target for rule matching: nanoseconds per request, 100 rules per secret.
const RULES_TARGET_NS: f64 = 2_000.0;

/// Per-request costs of the rules, in nanoseconds.
#[derive(Debug, Clone, Copy)]
struct RuleCost {
    one_rule: f64,
    hundred_rules: f64,
    hundred_refused: f64,
}

/// Runs the benchmark and prints the report; exit 2 when a target is missed.
pub(crate) fn run(args: &GrantsArgs) -> Result<ExitCode, BenchError> {
    let (rounds, passes) = if args.smoke {
        (1, 20)
    } else {
        (args.rounds.max(1), 2_000)
    };
    let cost = rule_cost(rounds, passes)?;
    println!("{}", render(&cost));
    let met = cost.hundred_rules <= RULES_TARGET_NS && cost.hundred_refused <= RULES_TARGET_NS;
    Ok(if met || args.smoke {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn render(cost: &RuleCost) -> String {
    let judge = |ns: f64| {
        if ns <= RULES_TARGET_NS {
            "met"
        } else {
            "MISSED"
        }
    };
    format!(
        "| request rules, per request | ns |\n|---|---:|\n\
         | 1 rule, the mix (baseline) | {:.0} |\n\
         | 100 rules, the mix | {:.0} |\n\
         | 100 rules, refused requests only (every rule weighed) | {:.0} |\n\
         \n\
         100 rules against 1: {:.1}×.\n\
         \n\
         | target | measured | |\n|---|---:|---|\n\
         | rule matching, 100 rules per secret ≤ 2 µs per request (the mix; refused only) | {:.2} µs; {:.2} µs | {}; {} |",
        cost.one_rule,
        cost.hundred_rules,
        cost.hundred_refused,
        cost.hundred_rules / cost.one_rule,
        cost.hundred_rules / 1_000.0,
        cost.hundred_refused / 1_000.0,
        judge(cost.hundred_rules),
        judge(cost.hundred_refused),
    )
}

/// The rules of a secret: `count` of them, in the shapes real grants take (a tree with
/// `**`, a collection with `*`, exact paths), over a few methods.
fn declaration(count: usize) -> String {
    let mut yaml = String::from(
        "version: 1\nsecrets:\n  api:\n    from: { env: API }\n    hosts: [api.test]\n    sinks: [egress]\n    allow:\n",
    );
    for i in 0..count {
        let rule = match i % 4 {
            0 => format!("{{ methods: [GET, HEAD], paths: [\"/v1/orgs/org{i}/**\"] }}"),
            1 => format!("{{ methods: [POST], paths: [\"/v1/orgs/org{i}/*/issues\"] }}"),
            2 => format!(
                "{{ methods: [GET], paths: [\"/v1/users/user{i}\", \"/v1/users/user{i}/keys\"] }}"
            ),
            _ => format!("{{ methods: [PUT, PATCH], paths: [\"/v1/repos/*/hooks/hook{i}\"] }}"),
        };
        yaml.push_str(&format!("      - {rule}\n"));
    }
    yaml
}

/// The requests weighed: for every fourth rule one it admits, and as many it refuses.
fn mix(count: usize) -> Vec<(&'static str, String)> {
    let mut requests = Vec::new();
    for i in (0..count.max(4)).step_by(4) {
        requests.push(("GET", format!("/v1/orgs/org{i}/repo/pulls/7")));
        requests.push(("POST", format!("/v1/orgs/org{}/repo/issues", i + 1)));
        requests.push(("GET", format!("/v1/users/user{}/./keys", i + 2)));
        requests.push(("PATCH", format!("/v1/repos/r%2Dx/hooks/hook{}", i + 3)));
    }
    for (i, refused) in refused(count).into_iter().enumerate() {
        if i < requests.len() {
            requests.push(refused);
        }
    }
    requests
}

/// Requests no rule admits: a method beside a matching path, a path outside every tree,
/// and a walk out of one.
fn refused(count: usize) -> Vec<(&'static str, String)> {
    (0..count.max(4))
        .map(|i| match i % 4 {
            0 => ("DELETE", format!("/v1/orgs/org{}/repo", i - i % 4)),
            1 => ("GET", format!("/v1/admin/org{i}/keys")),
            2 => ("GET", format!("/v1/orgs/org{}/../../admin", i - i % 4)),
            _ => ("POST", format!("/v1/orgs/org{}/a/b/issues", i - i % 4 + 1)),
        })
        .collect()
}

fn rules_of(count: usize) -> Result<RequestRules, BenchError> {
    let loaded = Policy::parse(&declaration(count), "bench.yaml")
        .map_err(|d| BenchError::peer("declaration", d))?;
    loaded.policy.secrets()[0]
        .rules()
        .cloned()
        .ok_or_else(|| BenchError::peer("declaration", "the secret has no rules"))
}

/// The median over `rounds` of the nanoseconds one request of `requests` takes, each round
/// weighing every request `passes` times. Also returns how many were admitted, so that the
/// work is not optimised away and the mix is checked.
fn time_per_request(
    rules: &RequestRules,
    requests: &[(&'static str, String)],
    rounds: usize,
    passes: usize,
) -> (f64, usize) {
    let mut per_round = Vec::with_capacity(rounds);
    let mut admitted = 0;
    for _ in 0..rounds {
        admitted = 0;
        let started = Instant::now();
        for _ in 0..passes {
            for (method, path) in requests {
                let line = RequestLine::new(black_box(method), black_box(path));
                admitted += usize::from(black_box(rules.admits(&line)));
            }
        }
        let ns = started.elapsed().as_nanos() as f64 / (passes * requests.len()) as f64;
        per_round.push(ns);
        admitted /= passes;
    }
    per_round.sort_by(f64::total_cmp);
    (per_round[per_round.len() / 2], admitted)
}

fn rule_cost(rounds: usize, passes: usize) -> Result<RuleCost, BenchError> {
    let (one, hundred) = (rules_of(1)?, rules_of(100)?);
    let requests = mix(100);
    let refused = refused(100);
    let (hundred_rules, admitted) = time_per_request(&hundred, &requests, rounds, passes);
    // Half the mix is admitted, half refused: a mix that drifted would measure something
    // else.
    if admitted * 2 != requests.len() {
        return Err(BenchError::peer(
            "rules",
            format!(
                "{admitted} of {} requests admitted, expected half",
                requests.len()
            ),
        ));
    }
    let (hundred_refused, none) = time_per_request(&hundred, &refused, rounds, passes);
    if none != 0 {
        return Err(BenchError::peer(
            "rules",
            format!("{none} refused requests admitted"),
        ));
    }
    let (one_rule, _) = time_per_request(&one, &requests, rounds, passes);
    Ok(RuleCost {
        one_rule,
        hundred_rules,
        hundred_refused,
    })
}
