//! The bounded, single-flight cache of minted leaves.
//!
//! This module owns the rule "concurrent first requests for one name mint once": each name
//! has a slot with its own lock, and whoever takes the slot first mints while the others wait
//! for the result. Different names never wait on each other's minting. It must never hold the
//! map's lock while minting, and never grow beyond its capacity.
//!
//! When the map is full, the least recently used name is evicted (an O(n) scan, paid only on
//! a miss, which already pays for a key generation and a signature).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use rustls::sign::CertifiedKey;

/// A minted leaf and the end of its validity.
#[derive(Debug, Clone)]
pub(crate) struct Minted {
    /// The chain (the leaf alone) and its signer, as rustls takes them.
    pub(crate) key: Arc<CertifiedKey>,
    /// The moment after which a client refuses the leaf.
    pub(crate) not_after: SystemTime,
}

/// One name's slot: `None` until the first mint succeeds.
type Cell = Arc<Mutex<Option<Minted>>>;

#[derive(Debug)]
struct Slot {
    cell: Cell,
    last_used: u64,
}

#[derive(Debug, Default)]
struct Slots {
    map: HashMap<String, Slot>,
    clock: u64,
}

/// Leaves by normalised name, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct LeafCache {
    capacity: usize,
    slots: Mutex<Slots>,
}

/// Takes a lock even if a previous holder panicked: every critical section here leaves the
/// data consistent at each step, so the poison flag carries no information.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LeafCache {
    /// An empty cache. `capacity` is at least 1 (checked by the caller).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            slots: Mutex::new(Slots::default()),
        }
    }

    /// The cached leaf for `key` if `is_fresh` accepts it; otherwise the result of `mint`,
    /// cached. Callers asking for one key at once share one call to `mint`; if it fails,
    /// nothing is cached and the next caller tries again.
    pub(crate) fn get_or_mint<E>(
        &self,
        key: &str,
        is_fresh: impl Fn(&Minted) -> bool,
        mint: impl FnOnce() -> Result<Minted, E>,
    ) -> Result<Arc<CertifiedKey>, E> {
        let cell = self.slot(key);
        let mut minted = lock(&cell);
        if let Some(leaf) = minted.as_ref()
            && is_fresh(leaf)
        {
            return Ok(leaf.key.clone());
        }
        let leaf = mint()?;
        let key = leaf.key.clone();
        *minted = Some(leaf);
        Ok(key)
    }

    /// Drops every leaf whose name `keep` refuses; a caller holding one keeps its own handle.
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        lock(&self.slots).map.retain(|name, _| keep(name));
    }

    /// How many names hold a slot.
    pub(crate) fn len(&self) -> usize {
        lock(&self.slots).map.len()
    }

    /// The slot for `key`, created (evicting the least recently used one when full) if absent.
    fn slot(&self, key: &str) -> Cell {
        let mut slots = lock(&self.slots);
        slots.clock += 1;
        let now = slots.clock;
        if let Some(slot) = slots.map.get_mut(key) {
            slot.last_used = now;
            return slot.cell.clone();
        }
        if slots.map.len() >= self.capacity
            && let Some(oldest) = slots
                .map
                .iter()
                .min_by_key(|(_, slot)| slot.last_used)
                .map(|(name, _)| name.clone())
        {
            // A caller still minting into the evicted slot keeps its own handle and finishes;
            // the result is simply not cached.
            slots.map.remove(&oldest);
        }
        let cell = Cell::default();
        slots.map.insert(
            key.to_owned(),
            Slot {
                cell: cell.clone(),
                last_used: now,
            },
        );
        cell
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A leaf stand-in: the cache never looks inside a `CertifiedKey`.
    fn fake_leaf() -> Minted {
        let signer = crate::key::SecretKey::generate()
            .unwrap()
            .into_rustls_signer()
            .unwrap();
        Minted {
            key: Arc::new(CertifiedKey::new(
                vec![rustls_pki_types::CertificateDer::from(vec![0x30, 0x00])],
                signer,
            )),
            not_after: SystemTime::now() + Duration::from_secs(3600),
        }
    }

    #[test]
    fn a_hit_does_not_mint_again() {
        let cache = LeafCache::new(4);
        let mints = AtomicUsize::new(0);
        let mint = || {
            mints.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Infallible>(fake_leaf())
        };
        let first = cache.get_or_mint("a.example", |_| true, mint).unwrap();
        let second = cache
            .get_or_mint(
                "a.example",
                |_| true,
                || -> Result<Minted, Infallible> {
                    panic!("a cached leaf must not be minted again")
                },
            )
            .unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(mints.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_stale_leaf_is_minted_again() {
        let cache = LeafCache::new(4);
        let first = cache
            .get_or_mint("a.example", |_| true, || Ok::<_, Infallible>(fake_leaf()))
            .unwrap();
        let second = cache
            .get_or_mint("a.example", |_| false, || Ok::<_, Infallible>(fake_leaf()))
            .unwrap();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn retain_drops_the_refused_names_only() {
        let cache = LeafCache::new(4);
        let mint = || Ok::<_, Infallible>(fake_leaf());
        cache.get_or_mint("keep.example", |_| true, mint).unwrap();
        cache.get_or_mint("drop.example", |_| true, mint).unwrap();
        cache.retain(|name| name != "drop.example");
        assert_eq!(cache.len(), 1);
        cache
            .get_or_mint(
                "keep.example",
                |_| true,
                || -> Result<Minted, Infallible> { panic!("a kept leaf must not be minted again") },
            )
            .unwrap();
    }

    #[test]
    fn a_failed_mint_caches_nothing_and_the_next_caller_retries() {
        let cache = LeafCache::new(4);
        let error = cache
            .get_or_mint("a.example", |_| true, || Err::<Minted, _>("boom"))
            .unwrap_err();
        assert_eq!(error, "boom");
        let minted = cache.get_or_mint("a.example", |_| true, || Ok::<_, &str>(fake_leaf()));
        assert!(minted.is_ok());
    }

    #[test]
    fn the_least_recently_used_name_is_evicted_when_full() {
        let cache = LeafCache::new(2);
        let mint = || Ok::<_, Infallible>(fake_leaf());
        let a = cache.get_or_mint("a", |_| true, mint).unwrap();
        cache.get_or_mint("b", |_| true, mint).unwrap();
        // Touch `a`, so that `b` is the oldest.
        let a_again = cache.get_or_mint("a", |_| true, mint).unwrap();
        assert!(Arc::ptr_eq(&a, &a_again));
        cache.get_or_mint("c", |_| true, mint).unwrap();
        assert_eq!(cache.len(), 2);
        let a_third = cache.get_or_mint("a", |_| true, mint).unwrap();
        assert!(
            Arc::ptr_eq(&a, &a_third),
            "`a` was used recently and must stay"
        );
        let minted_b = AtomicUsize::new(0);
        cache
            .get_or_mint(
                "b",
                |_| true,
                || {
                    minted_b.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Infallible>(fake_leaf())
                },
            )
            .unwrap();
        assert_eq!(minted_b.load(Ordering::SeqCst), 1, "`b` was evicted");
        assert_eq!(cache.len(), 2);
    }
}
