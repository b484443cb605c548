//! Signing keys derived once: `aws-sigv4`'s `generate_signing_key` (four HMACs over the
//! secret, the date, the region and the service) computed the first time a credential signs
//! a chunk for a date, region and service, and kept for the run in that credential.
//!
//! A key is zeroized when the last chain holding it drops, and never printed. The cache is
//! bounded: the scope comes from the request (verified with the placeholder key, but the
//! sandbox holds that key), so a client sending a thousand regions must not grow it past
//! [`MAX_KEYS`]; it starts over when full.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_sigv4::sign::v4::generate_signing_key;
use zeroize::Zeroizing;

/// The most keys one credential keeps (a run signs for a few dates, regions and services).
const MAX_KEYS: usize = 32;

/// One derived signing key (`kSigning`): 32 bytes, zeroized on drop, no `Debug`.
pub(crate) struct SigningKey(Zeroizing<[u8; 32]>);

impl SigningKey {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// One derived key and the `DATE/REGION/SERVICE` it signs for.
type Scoped = (String, Arc<SigningKey>);

/// A credential's derived keys, by `DATE/REGION/SERVICE`.
#[derive(Clone, Default)]
pub(crate) struct SigningKeys {
    keys: Arc<Mutex<Vec<Scoped>>>,
}

impl SigningKeys {
    /// The key of `secret` for `scope` (`DATE/REGION/SERVICE`, the date that of `time`),
    /// derived now if it was not before.
    pub(crate) fn get(
        &self,
        secret: &str,
        time: SystemTime,
        scope: &str,
        region: &str,
        service: &str,
    ) -> Arc<SigningKey> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, key)) = keys.iter().find(|(s, _)| s == scope) {
            return key.clone();
        }
        let derived = generate_signing_key(secret, time, region, service);
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(derived.as_ref());
        let key = Arc::new(SigningKey(bytes));
        if keys.len() >= MAX_KEYS {
            keys.clear();
        }
        keys.push((scope.to_owned(), key.clone()));
        key
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_derived_once_per_scope_and_the_cache_stays_bounded() {
        let keys = SigningKeys::default();
        let time = SystemTime::UNIX_EPOCH;
        let a = keys.get("secret", time, "19700101/eu-west-1/s3", "eu-west-1", "s3");
        let again = keys.get("secret", time, "19700101/eu-west-1/s3", "eu-west-1", "s3");
        assert!(Arc::ptr_eq(&a, &again));
        let other = keys.get("secret", time, "19700101/us-east-1/s3", "us-east-1", "s3");
        assert_ne!(a.as_bytes(), other.as_bytes());
        let expected = generate_signing_key("secret", time, "eu-west-1", "s3");
        assert_eq!(a.as_bytes(), expected.as_ref());
        for i in 0..100 {
            let region = format!("r{i}");
            keys.get(
                "secret",
                time,
                &format!("19700101/{region}/s3"),
                &region,
                "s3",
            );
        }
        assert!(keys.len() <= MAX_KEYS);
    }
}
