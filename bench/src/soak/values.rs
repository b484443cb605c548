//! The secret's values over a soak: the first, then one more at each rotation
//! (`--rotate-every`), each earlier one retired once the reload that replaced it is in
//! force. Shared by the upstream (which accepts any of them as a swap, and flags a retired
//! one arriving on a tunnel opened after its retirement), the client (which must never
//! receive any of them) and the rotation itself. Times are milliseconds since the soak began.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Every value the secret has had, oldest first.
pub(crate) struct Values {
    epoch: Instant,
    all: RwLock<Vec<Known>>,
    /// When sluice was last sent `SIGHUP` (ms; 0 before the first).
    last_reload_ms: AtomicU64,
}

/// How long before a tunnel opened a reload may have been asked and still be put in force
/// after sluice accepted it (sluice reads the file and builds the generation first).
const RELOAD_TAKES_MS: u64 = 2_000;

/// Every value, and how many of them sluice has been given (the rest are on their way).
pub(crate) struct Snapshot {
    pub(crate) all: Vec<Vec<u8>>,
    pub(crate) known_to_sluice: usize,
}

struct Known {
    value: Vec<u8>,
    /// Whether sluice has it (the first, or a rotation's once its reload is in force).
    in_force: bool,
    /// When a later value was in force: from then on, a new tunnel must not carry it.
    retired_ms: Option<u64>,
}

/// What a bearer token toward the granted host was.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bearer {
    /// A value the secret has (or had, on a tunnel opened before its retirement).
    Real,
    /// A retired value on a tunnel opened after it was retired: a stale swap.
    Stale,
    /// Not one of its values.
    Other,
}

impl Values {
    pub(crate) fn new(first: &str) -> Arc<Values> {
        Arc::new(Values {
            epoch: Instant::now(),
            all: RwLock::new(vec![Known {
                value: first.as_bytes().to_vec(),
                in_force: true,
                retired_ms: None,
            }]),
            last_reload_ms: AtomicU64::new(0),
        })
    }

    /// Milliseconds since the soak began.
    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Notes that sluice is being sent `SIGHUP` now.
    pub(crate) fn note_reload(&self) {
        self.last_reload_ms
            .store(self.now_ms().max(1), Ordering::Relaxed);
    }

    /// Whether a reload was asked after (or just before) a tunnel opened at `opened_ms`:
    /// only then may sluice close it before a request, or answer `421 tunnel-outdated`.
    pub(crate) fn reloaded_since(&self, opened_ms: u64) -> bool {
        let last = self.last_reload_ms.load(Ordering::Relaxed);
        last > 0 && last + RELOAD_TAKES_MS >= opened_ms
    }

    /// Milliseconds since the last reload was asked, if one was.
    pub(crate) fn since_reload_ms(&self) -> Option<u64> {
        let last = self.last_reload_ms.load(Ordering::Relaxed);
        (last > 0).then(|| self.now_ms().saturating_sub(last))
    }

    /// Every value, oldest first.
    pub(crate) fn all(&self) -> Vec<Vec<u8>> {
        self.snapshot().all
    }

    /// Every value, and how many sluice has (a value added and not yet in force is not).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let all = self.all.read().unwrap_or_else(|e| e.into_inner());
        let pending = all.last().is_some_and(|k| !k.in_force);
        Snapshot {
            all: all.iter().map(|k| k.value.clone()).collect(),
            known_to_sluice: all.len() - usize::from(pending),
        }
    }

    /// A new value: accepted from now on (the reload that puts it in force is on its way).
    pub(crate) fn add(&self, value: &str) {
        let mut all = self.all.write().unwrap_or_else(|e| e.into_inner());
        all.push(Known {
            value: value.as_bytes().to_vec(),
            in_force: false,
            retired_ms: None,
        });
    }

    /// The newest value is in force: every earlier one not yet retired is, now.
    pub(crate) fn retire_older(&self) {
        let now = self.now_ms();
        let mut all = self.all.write().unwrap_or_else(|e| e.into_inner());
        let newest = all.len().saturating_sub(1);
        for known in all.iter_mut().take(newest) {
            known.retired_ms.get_or_insert(now);
        }
        if let Some(known) = all.last_mut() {
            known.in_force = true;
        }
    }

    /// What `token` (the bearer's credential) is, on a tunnel opened at `tunnel_ms`.
    pub(crate) fn bearer(&self, token: &[u8], tunnel_ms: Option<u64>) -> Bearer {
        let all = self.all.read().unwrap_or_else(|e| e.into_inner());
        match all.iter().find(|k| k.value == token) {
            None => Bearer::Other,
            Some(Known {
                retired_ms: Some(retired),
                ..
            }) if tunnel_ms.is_some_and(|opened| opened > *retired) => Bearer::Stale,
            Some(_) => Bearer::Real,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_value_is_stale_only_on_tunnels_opened_after_its_retirement() {
        let values = Values::new("first");
        values.add("second");
        assert_eq!(values.bearer(b"first", Some(u64::MAX)), Bearer::Real);
        values.retire_older();
        let retired = values.now_ms();
        assert_eq!(values.bearer(b"first", Some(0)), Bearer::Real);
        assert_eq!(values.bearer(b"first", Some(retired + 1)), Bearer::Stale);
        assert_eq!(values.bearer(b"second", Some(retired + 1)), Bearer::Real);
        assert_eq!(values.bearer(b"third", None), Bearer::Other);
        assert_eq!(values.all().len(), 2);
    }
}
