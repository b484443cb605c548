//! `sluice-bench approvals`: what a decision standing for the run costs a request (issue
//! #40's target: at most 1 µs more of sluice's CPU per request than without `approve:`).
//!
//! Two sluices ([`crate::pair`]): the measured declaration as it is, and the same with
//! `approve: all` on its secret and the admin endpoint on. The second is sent one request
//! first, which waits until the benchmark allows it for the run (`GET` then `POST
//! /v1/approvals/{id}`, as `sluice approve` does); every later request is answered by that
//! standing decision. Then each sluice is driven in turn, round after round; reported:
//! requests/s, median and p99 latency, sluice's CPU per request, and the difference
//! against the target: the median of the rounds' paired differences, each sluice going first
//! in turn. The CPU figures come from `/proc` over whole rounds, whose noise (±2 µs of CPU
//! per request between rounds here) is larger than the target: hence many rounds.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::admin::Admin;
use crate::error::BenchError;
use crate::harness::{read_trimmed, stand_in_value};
use crate::load;
use crate::pair::{Gets, Peer, median};
use crate::pki::Proto;

/// The target: sluice's CPU per request under a standing decision, over without `approve:`.
const TARGET_US: f64 = 1.0;

/// What `sluice-bench approvals` takes.
#[derive(Debug, Args)]
pub(crate) struct ApprovalsArgs {
    /// Rounds; each figure is the median round's.
    /// Rounds: many short ones, since the difference sought is smaller than one round's
    /// noise (±2 µs of CPU per request here).
    #[arg(long, default_value_t = 21)]
    rounds: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 2.0)]
    phase_secs: f64,
    /// A quick check that the benchmark works (short phases, one round; no verdict).
    #[arg(long)]
    smoke: bool,
}

/// Runs the benchmark and prints the report; exit 1 when a sluice answered with errors,
/// 2 when the target was missed (not in a smoke run).
pub(crate) fn run(args: &ApprovalsArgs) -> Result<ExitCode, BenchError> {
    let runtime = crate::harness::client_runtime()?;
    let (rounds, phase) = if args.smoke {
        (1, Duration::from_millis(300))
    } else {
        (args.rounds.max(1), Duration::from_secs_f64(args.phase_secs))
    };
    let (plain, approving, extra) = runtime.block_on(measure(rounds, phase))?;
    println!("{}", render(plain, approving, extra));
    Ok(if plain.errors > 0 || approving.errors > 0 {
        ExitCode::FAILURE
    } else if !args.smoke && extra > TARGET_US {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn render(plain: Gets, approving: Gets, extra: f64) -> String {
    let row = |name: &str, g: Gets| {
        format!(
            "| {name} | {:.0} | {:.2} | {:.2} | {:.1} | {} |\n",
            g.requests_per_s, g.median_ms, g.p99_ms, g.sluice_cpu_us, g.errors
        )
    };
    let verdict = if extra <= TARGET_US { "met" } else { "missed" };
    format!(
        "| GET /small, HTTP/1.1, 16 connections | requests/s | median ms | p99 ms | sluice CPU µs/request | errors |\n\
         |---|---:|---:|---:|---:|---:|\n\
         {}{}\n\
         under a standing run decision: {:.2}× the requests/s, sluice's CPU {extra:+.2} µs/request \
         (median of the rounds' differences; target ≤ {TARGET_US:+.1}: {verdict})",
        row("no approve:", plain),
        row("approve: all, allowed for the run", approving),
        approving.requests_per_s / plain.requests_per_s.max(1e-9),
    )
}

/// The measured declaration, its secret's every use waiting for approval.
fn approving_declaration() -> String {
    crate::sluice_peer::declaration().replace(
        "    header: [Authorization]\n",
        "    header: [Authorization]\n    approve: all\n",
    )
}

/// Each sluice's median round, and the median of the rounds' differences in sluice's CPU
/// per request (each round drives both, one after the other, each first in turn: paired,
/// the machine's drift between rounds cancels).
async fn measure(rounds: usize, phase: Duration) -> Result<(Gets, Gets, f64), BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    let policy = dir.join("approving.yaml");
    std::fs::write(&policy, approving_declaration()).map_err(BenchError::file(&policy))?;
    let plain = Peer::start(&exe, &dir.join("plain"), &value, &upstream, |_| {}).await?;
    let approving_dir = dir.join("approving");
    let approving = Peer::start(&exe, &approving_dir, &value, &upstream, |sluice| {
        sluice.arg("--policy").arg(&policy).arg("--admin");
    })
    .await?;
    let result = async {
        allow_for_the_run(&approving, &read_trimmed(&approving_dir, "admin-url")?).await?;
        let (mut plains, mut approvings, mut extras) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            // Each goes first in every other round: what going first or second does to a
            // phase (caches, frequency) falls on both alike.
            let (without, with) = if round % 2 == 0 {
                let without = plain.round(None, phase).await?;
                (without, approving.round(None, phase).await?)
            } else {
                let with = approving.round(None, phase).await?;
                (plain.round(None, phase).await?, with)
            };
            extras.push(with.sluice_cpu_us - without.sluice_cpu_us);
            plains.push(without);
            approvings.push(with);
        }
        extras.sort_by(f64::total_cmp);
        let extra = extras[extras.len() / 2];
        Ok((median(&mut plains), median(&mut approvings), extra))
    }
    .await;
    plain.sluice.stop(Duration::from_secs(3)).await;
    approving.sluice.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    result
}

/// Sends one request through `peer`, which waits for approval, and allows it for the run
/// through the admin endpoint; returns once it was answered.
async fn allow_for_the_run(peer: &Peer, admin_url: &str) -> Result<(), BenchError> {
    let admin = Admin::from_url(admin_url)?;
    let first = tokio::spawn(load::small(
        peer.route.clone(),
        Proto::H1,
        1,
        1,
        Duration::from_millis(100),
    ));
    let failed = |why: String| BenchError::peer("sluice", why);
    let mut id = None;
    for _ in 0..200 {
        let (_, listing) = admin
            .request(http::Method::GET, "/v1/approvals", "")
            .await?;
        let listing: serde_json::Value =
            serde_json::from_str(&listing).map_err(|e| failed(e.to_string()))?;
        id = listing["pending"][0]["id"].as_u64();
        if id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let id = id.ok_or_else(|| failed("the first request never waited for approval".into()))?;
    let (status, answer) = admin
        .request(
            http::Method::POST,
            &format!("/v1/approvals/{id}"),
            r#"{"decision": "allow", "scope": "run"}"#,
        )
        .await?;
    if status != http::StatusCode::OK {
        return Err(failed(format!(
            "the decision was answered {status}: {answer}"
        )));
    }
    let tally = first.await.map_err(|e| failed(e.to_string()))?;
    if tally.latencies_ns.is_empty() || tally.errors > 0 {
        return Err(failed(format!(
            "the approved request was not answered: {}",
            tally.first_error.unwrap_or_default()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approving_declaration_approves_every_use_of_the_measured_secret() {
        let yaml = approving_declaration();
        let loaded = sluice_policies::Policy::parse(&yaml, "bench.yaml").unwrap();
        assert!(loaded.policy.has_approvals(), "{yaml}");
        assert!(loaded.policy.secrets()[0].needs_approval("GET"));
    }
}
