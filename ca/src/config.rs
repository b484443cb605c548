//! What a run CA is minted from: the run id, the hosts it may certify, and its lifetimes.
//!
//! This module only describes and checks a configuration; it never generates a key.

use std::time::Duration;

use crate::error::{CaError, quote, secs};

/// How the run CA is minted.
///
/// # Defaults
///
/// [`CaConfig::new`] sets:
/// - `validity`: [`CaConfig::DEFAULT_VALIDITY`] (24 hours); at most [`CaConfig::MAX_VALIDITY`]
///   (7 days), at least [`CaConfig::MIN_VALIDITY`] (1 minute).
/// - `leaf_validity`: [`CaConfig::DEFAULT_LEAF_VALIDITY`] (6 hours), at least
///   [`CaConfig::MIN_VALIDITY`]; a leaf never outlives the CA whatever this says.
/// - `cache_capacity`: [`CaConfig::DEFAULT_CACHE_CAPACITY`] leaves (1024), at least 1.
///
/// Every certificate is back-dated by [`CaConfig::CLOCK_SKEW`] (5 minutes) so that a client
/// whose clock runs a little behind still accepts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaConfig {
    /// The run's id, named in the CA's subject: 1 to [`CaConfig::MAX_RUN_ID_LEN`] characters
    /// from `[A-Za-z0-9._-]`.
    pub run_id: String,
    /// The hosts the CA may certify: exact names (`api.example.com`), wildcard patterns
    /// (`*.example.com`: one or more labels under `example.com`, never the apex), and IP
    /// literals (`127.0.0.1`, `::1`, `[::1]`). An optional `:port` is accepted and dropped:
    /// ports are not part of name constraints. Names must be ASCII (IDNA already applied);
    /// they are lowercased and lose one trailing dot.
    pub permitted: Vec<String>,
    /// How long the CA is valid, counted from the moment it is minted.
    pub validity: Duration,
    /// How long each leaf is valid, counted from the moment it is minted (cut short at the
    /// CA's end). A cached leaf close to its end is minted again.
    pub leaf_validity: Duration,
    /// How many leaves the cache holds before it evicts the least recently used one.
    pub cache_capacity: usize,
}

impl CaConfig {
    /// The CA validity [`CaConfig::new`] sets: 24 hours.
    pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(24 * 3600);
    /// The longest CA validity accepted: 7 days. A run CA must be worthless after its run.
    pub const MAX_VALIDITY: Duration = Duration::from_secs(7 * 24 * 3600);
    /// The shortest validity (CA or leaf) accepted: 1 minute.
    pub const MIN_VALIDITY: Duration = Duration::from_secs(60);
    /// The leaf validity [`CaConfig::new`] sets: 6 hours.
    pub const DEFAULT_LEAF_VALIDITY: Duration = Duration::from_secs(6 * 3600);
    /// The leaf cache capacity [`CaConfig::new`] sets.
    pub const DEFAULT_CACHE_CAPACITY: usize = 1024;
    /// How far before "now" every certificate's validity starts, for clock skew.
    pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);
    /// The longest run id accepted (the CA's common name must stay within 64 characters).
    pub const MAX_RUN_ID_LEN: usize = 48;

    /// A configuration with the defaults listed on [`CaConfig`].
    pub fn new(
        run_id: impl Into<String>,
        permitted: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            permitted: permitted.into_iter().map(Into::into).collect(),
            validity: Self::DEFAULT_VALIDITY,
            leaf_validity: Self::DEFAULT_LEAF_VALIDITY,
            cache_capacity: Self::DEFAULT_CACHE_CAPACITY,
        }
    }

    /// Checks everything but the host patterns (parsed by the CA itself).
    pub(crate) fn check(&self) -> Result<(), CaError> {
        let run_id_ok = (1..=Self::MAX_RUN_ID_LEN).contains(&self.run_id.len())
            && self
                .run_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !run_id_ok {
            return Err(CaError::InvalidRunId {
                run_id: quote(&self.run_id),
                max: Self::MAX_RUN_ID_LEN,
            });
        }
        if self.validity > Self::MAX_VALIDITY {
            return Err(CaError::ValidityTooLong {
                requested_secs: secs(self.validity),
                max_secs: secs(Self::MAX_VALIDITY),
            });
        }
        for (what, validity) in [("run CA", self.validity), ("leaves", self.leaf_validity)] {
            if validity < Self::MIN_VALIDITY {
                return Err(CaError::ValidityTooShort {
                    what,
                    requested_secs: secs(validity),
                    min_secs: secs(Self::MIN_VALIDITY),
                });
            }
        }
        if self.cache_capacity == 0 {
            return Err(CaError::ZeroCacheCapacity);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_the_check() {
        let config = CaConfig::new("run-1", ["api.example.com"]);
        assert_eq!(config.validity, Duration::from_secs(86_400));
        assert!(config.leaf_validity < config.validity);
        assert_eq!(config.check(), Ok(()));
    }

    #[test]
    fn seven_days_is_the_most_a_ca_may_live() {
        let mut config = CaConfig::new("run-1", ["api.example.com"]);
        config.validity = CaConfig::MAX_VALIDITY;
        assert_eq!(config.check(), Ok(()));
        config.validity = CaConfig::MAX_VALIDITY + Duration::from_secs(1);
        assert_eq!(
            config.check(),
            Err(CaError::ValidityTooLong {
                requested_secs: 7 * 86_400 + 1,
                max_secs: 7 * 86_400,
            })
        );
    }

    #[test]
    fn too_short_validities_and_empty_caches_are_refused() {
        let mut config = CaConfig::new("run-1", ["api.example.com"]);
        config.validity = Duration::ZERO;
        assert!(matches!(
            config.check(),
            Err(CaError::ValidityTooShort { what: "run CA", .. })
        ));
        let mut config = CaConfig::new("run-1", ["api.example.com"]);
        config.leaf_validity = Duration::from_secs(59);
        assert!(matches!(
            config.check(),
            Err(CaError::ValidityTooShort { what: "leaves", .. })
        ));
        let mut config = CaConfig::new("run-1", ["api.example.com"]);
        config.cache_capacity = 0;
        assert_eq!(config.check(), Err(CaError::ZeroCacheCapacity));
    }

    #[test]
    fn run_ids_must_fit_a_subject() {
        for good in ["a", "run-2024.01_x", &"r".repeat(CaConfig::MAX_RUN_ID_LEN)] {
            assert_eq!(CaConfig::new(good, ["a.example"]).check(), Ok(()), "{good}");
        }
        for bad in [
            "",
            "has space",
            "new\nline",
            "caf\u{e9}",
            &"r".repeat(CaConfig::MAX_RUN_ID_LEN + 1),
        ] {
            assert!(
                matches!(
                    CaConfig::new(bad, ["a.example"]).check(),
                    Err(CaError::InvalidRunId { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
