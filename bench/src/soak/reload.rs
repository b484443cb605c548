//! Reloads during the soak (`--reload-every SECS`): every period the declaration file is
//! rewritten (a new generation, one more loopback address allowed, so each reload changes
//! the policy's hash) and sluice is sent `SIGHUP`; every fifth time the file is made invalid first, so
//! that reload must be refused with the declaration in force kept, then made valid again
//! for the next. The audit log must hold one `reload` event per `SIGHUP`, put in force or
//! refused as asked, and the load must go on through them without failures the design
//! does not make.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The reloads asked for.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub(super) struct Reloads {
    /// With a valid declaration: each must be put in force.
    pub(super) valid: u64,
    /// With an invalid one: each must be refused.
    pub(super) invalid: u64,
}

/// Every fifth reload is of an invalid declaration.
const INVALID_EVERY: u64 = 5;

/// Sends reloads to `pid` every `every` until `until` (or `stop`), writing `policy` with
/// `declaration(generation)` before each.
pub(super) async fn run(
    pid: u32,
    policy: PathBuf,
    declaration: fn(u64) -> String,
    every: Duration,
    until: Instant,
    stop: Arc<AtomicBool>,
) -> Reloads {
    let mut asked = Reloads::default();
    let mut generation = 0;
    loop {
        tokio::time::sleep(every).await;
        if Instant::now() + every / 2 >= until || stop.load(Ordering::Relaxed) {
            return asked;
        }
        generation += 1;
        let invalid = generation % INVALID_EVERY == 0;
        let text = if invalid {
            "version: 1\nsecrets: [this is not a declaration\n".to_owned()
        } else {
            declaration(generation)
        };
        if std::fs::write(&policy, text).is_err() || !hang_up(pid) {
            return asked;
        }
        if invalid {
            asked.invalid += 1;
            // Let sluice read (and refuse) it, then put a valid one back for the next.
            tokio::time::sleep(Duration::from_millis(500)).await;
            if std::fs::write(&policy, declaration(generation)).is_err() {
                return asked;
            }
        } else {
            asked.valid += 1;
        }
    }
}

/// `kill -HUP PID`.
fn hang_up(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// How the audit log's `reload` events compare with what was asked: the violations.
pub(super) fn judge(audit: &str, asked: Reloads) -> (u64, u64, Vec<String>) {
    let (mut in_force, mut refused) = (0, 0);
    for line in audit.lines().filter(|l| l.contains("\"event\":\"reload\"")) {
        if line.contains("\"reason\":\"reloaded\"") {
            in_force += 1;
        } else if line.contains("\"reason\":\"refused") {
            refused += 1;
        }
    }
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
        let (in_force, refused, violations) = judge(
            audit,
            Reloads {
                valid: 2,
                invalid: 1,
            },
        );
        assert_eq!((in_force, refused), (2, 1));
        assert!(violations.is_empty());
        let (_, _, violations) = judge(
            audit,
            Reloads {
                valid: 3,
                invalid: 1,
            },
        );
        assert_eq!(violations.len(), 1);
    }
}
