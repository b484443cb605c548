//! Reloads and rotations during the soak.
//!
//! - `--reload-every SECS`: every period the declaration file is rewritten (a new generation,
//!   one more loopback address allowed, so each reload changes the policy's hash) and sluice
//!   is sent `SIGHUP`; every fifth time the file is made invalid first, so that reload must
//!   be refused with the declaration in force kept, then made valid again for the next.
//! - `--rotate-every SECS`: every period the secret's file source gets a new value (which the
//!   upstream accepts from then on) and sluice is sent `SIGHUP`; once the audit log shows the
//!   reload in force, every earlier value is retired: a tunnel opened after that must never
//!   carry one to the upstream, and no value, current or retired, may reach the client. With
//!   `--reload-every` too, every other rotation rewrites the declaration in the same reload:
//!   tunnels opened before it keep their declaration, yet must redact the value it brought
//!   in (what the soak once found them not to).
//!
//! The audit log must hold one `reload` event per `SIGHUP`, put in force or refused as
//! asked, and the load must go on through them without failures the design does not make.
//! Signals are sent one at a time, at least half a second apart: two close together could
//! be taken as one reload.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::values::Values;

/// The reloads asked for.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub(super) struct Reloads {
    /// With a valid declaration (rotations included): each must be put in force.
    pub(super) valid: u64,
    /// With an invalid one: each must be refused.
    pub(super) invalid: u64,
    /// Of the valid ones, those that rotated the value.
    pub(super) rotations: u64,
    /// Rotations whose reload the audit log showed in force within 10 s.
    pub(super) rotations_in_force: u64,
    /// Of the rotations, those whose reload rewrote the declaration too.
    pub(super) rotations_with_declaration: u64,
}

/// Every fifth plain reload is of an invalid declaration.
const INVALID_EVERY: u64 = 5;

/// What the task needs.
pub(super) struct Plan {
    pub(super) pid: u32,
    pub(super) policy: PathBuf,
    pub(super) declaration: Box<dyn Fn(u64) -> String + Send>,
    pub(super) reload_every: Option<Duration>,
    pub(super) rotate_every: Option<Duration>,
    pub(super) value_file: PathBuf,
    pub(super) values: Arc<Values>,
    /// The directory of sluice's audit log (`audit.jsonl` and any segments).
    pub(super) audit: PathBuf,
    pub(super) until: Instant,
    pub(super) stop: Arc<AtomicBool>,
}

/// Sends reloads and rotations until the plan's end (or `stop`).
pub(super) async fn run(plan: Plan) -> Reloads {
    let mut asked = Reloads::default();
    let tick = match (plan.reload_every, plan.rotate_every) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return asked,
    }
    .max(Duration::from_millis(500));
    let mut generation = 0;
    let mut last_rotation = Instant::now();
    loop {
        tokio::time::sleep(tick).await;
        if Instant::now() + tick / 2 >= plan.until || plan.stop.load(Ordering::Relaxed) {
            return asked;
        }
        generation += 1;
        let rotate = plan
            .rotate_every
            .is_some_and(|every| last_rotation.elapsed() >= every);
        if rotate {
            last_rotation = Instant::now();
            let value = crate::harness::stand_in_value(&format!("soakrotated{generation}x"));
            plan.values.add(&value);
            let before = count(&plan.audit).0;
            // The value alone changes, as a rotation does: tunnels already open then take it
            // for their next requests (sluice's values in force), under their declaration.
            // Every other one rewrites the declaration in the same reload: tunnels already
            // open keep theirs, and redact the new value with the guard in force.
            let with_declaration = plan.reload_every.is_some() && asked.rotations % 2 == 1;
            if with_declaration
                && std::fs::write(&plan.policy, (plan.declaration)(generation)).is_err()
            {
                return asked;
            }
            if std::fs::write(&plan.value_file, &value).is_err() || !hang_up(&plan) {
                return asked;
            }
            asked.rotations_with_declaration += u64::from(with_declaration);
            asked.valid += 1;
            asked.rotations += 1;
            // In force once its reload is in the log: older values are retired from then.
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if count(&plan.audit).0 > before {
                    plan.values.retire_older();
                    asked.rotations_in_force += 1;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            continue;
        }
        if plan.reload_every.is_none() {
            continue;
        }
        let invalid = generation % INVALID_EVERY == 0;
        let text = if invalid {
            "version: 1\nsecrets: [this is not a declaration\n".to_owned()
        } else {
            (plan.declaration)(generation)
        };
        if std::fs::write(&plan.policy, text).is_err() || !hang_up(&plan) {
            return asked;
        }
        if invalid {
            asked.invalid += 1;
            // Let sluice read (and refuse) it, then put a valid one back for the next.
            tokio::time::sleep(Duration::from_millis(500)).await;
            if std::fs::write(&plan.policy, (plan.declaration)(generation)).is_err() {
                return asked;
            }
        } else {
            asked.valid += 1;
        }
    }
}

/// `kill -HUP PID`, noted first (a tunnel opened before it may be closed by it).
fn hang_up(plan: &Plan) -> bool {
    plan.values.note_reload();
    std::process::Command::new("kill")
        .args(["-HUP", &plan.pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// The `reload` events of an audit log: put in force, and refused.
fn count(audit: &std::path::Path) -> (u64, u64) {
    tally(&super::verdict::audit_text(audit))
}

fn tally(audit: &str) -> (u64, u64) {
    let (mut in_force, mut refused) = (0, 0);
    for line in audit.lines().filter(|l| l.contains("\"event\":\"reload\"")) {
        if line.contains("\"reason\":\"reloaded\"") {
            in_force += 1;
        } else if line.contains("\"reason\":\"refused") {
            refused += 1;
        }
    }
    (in_force, refused)
}

/// How the audit log's `reload` events compare with what was asked: the violations.
pub(super) fn judge(audit: &str, asked: Reloads) -> (u64, u64, Vec<String>) {
    let (in_force, refused) = tally(audit);
    let mut violations = Vec::new();
    if in_force != asked.valid {
        violations.push(format!(
            "{} valid declarations were reloaded, and the audit log shows {in_force} put in force",
            asked.valid
        ));
    }
    if refused != asked.invalid {
        violations.push(format!(
            "{} invalid declarations were reloaded, and the audit log shows {refused} refused",
            asked.invalid
        ));
    }
    if asked.rotations_in_force != asked.rotations {
        violations.push(format!(
            "{} rotations asked, {} seen in force within 10 s",
            asked.rotations, asked.rotations_in_force
        ));
    }
    (in_force, refused, violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_events_are_counted_against_what_was_asked() {
        let audit = "{\"event\":\"reload\",\"reason\":\"reloaded\"}\n\
                     {\"event\":\"swap\"}\n\
                     {\"event\":\"reload\",\"reason\":\"refused: line 2\"}\n\
                     {\"event\":\"reload\",\"reason\":\"reloaded\"}\n";
        let asked = Reloads {
            valid: 2,
            invalid: 1,
            ..Reloads::default()
        };
        let (in_force, refused, violations) = judge(audit, asked);
        assert_eq!((in_force, refused), (2, 1));
        assert!(violations.is_empty());
        let asked = Reloads {
            valid: 3,
            invalid: 1,
            rotations: 1,
            rotations_in_force: 0,
            rotations_with_declaration: 0,
        };
        let (_, _, violations) = judge(audit, asked);
        assert_eq!(violations.len(), 2);
    }
}
