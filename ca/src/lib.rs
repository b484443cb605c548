//! `sluice-ca`: the certificate authority of one sluice run.
//!
//! sluice terminates the sandbox's TLS, so the sandbox must trust a CA that sluice holds. This
//! crate makes that CA as worthless as possible outside the run:
//!
//! - it is minted in memory when the run starts ([`RunCa::mint`]): an ECDSA P-256 key, a
//!   subject naming sluice and the run id, `CA:TRUE, pathlen:0`, key usage `keyCertSign`
//!   only, valid from 5 minutes before now (clock skew) to the run's end (24 hours by default,
//!   never more than 7 days);
//! - its certificate carries X.509 name constraints: permitted dNSName subtrees for exactly
//!   the hosts the caller passes, permitted /32 or /128 subtrees for IP literals it passes,
//!   and every family with nothing permitted excluded outright (`0.0.0.0/0`, `::/0`, and all
//!   DNS names when no host is given). A client that honours name constraints refuses a leaf
//!   for any other name, even one signed by this key;
//! - leaves ([`RunCa::leaf`]) name exactly one host (a DNS name or an IP), use a fresh P-256
//!   key each, carry the `serverAuth` extended key usage, are valid for a few hours at most and
//!   never beyond the CA, and are minted on first request and cached: concurrent first
//!   requests for one name mint once, and the cache is bounded (least recently used evicted);
//! - a rustls [`ResolvesServerCert`] ([`RunCa::resolver_for`]) hands out one host's leaf,
//!   for a connection whose host the caller has decided (the proxy's CONNECT host); an SNI
//!   naming another host aborts the handshake.
//!
//! # What this crate never does
//!
//! - It never writes, exports, serializes for a caller, or prints the CA's private key or a
//!   leaf's. Only certificates leave the crate ([`RunCa::cert_pem`], [`RunCa::cert_der`]). No
//!   type holding a key prints it through `Debug`, and none implements `Display`.
//! - It keeps keys in memory only, and wipes the copies it can reach: rcgen's PKCS#8
//!   serialization of every key is zeroized on drop (the CA's when the [`RunCa`] drops, each
//!   leaf's as soon as rustls has parsed it); the parsed keys live inside aws-lc, which
//!   cleanses memory it frees.
//! - It never signs a leaf for a name outside the constraints, a wildcard, or more than one
//!   name.
//! - It does no I/O of any kind: no files, no network, no environment, no logging. It needs no
//!   async runtime.
//! - It builds on one crypto provider, aws-lc-rs, shared with rustls (never ring).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use sluice_ca::{CaConfig, RunCa};
//!
//! let ca = Arc::new(RunCa::mint(CaConfig::new("run-42", ["api.example.com", "*.example.org"]))?);
//! assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
//!
//! let leaf = ca.leaf("cdn.example.org")?;       // minted now
//! let again = ca.leaf("CDN.example.org.")?;     // the same leaf, from the cache
//! assert!(Arc::ptr_eq(&leaf, &again));
//! assert_eq!(ca.minted_count(), 1);
//!
//! assert!(ca.leaf("example.org").is_err());     // the apex is not under `*.example.org`
//! assert!(ca.leaf("evil.example.net").is_err()); // never certified by this run
//!
//! let resolver = ca.resolver_for("api.example.com")?; // for a rustls ServerConfig
//! # let _ = resolver;
//! # Ok::<(), sluice_ca::CaError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]

mod cache;
mod config;
mod error;
mod key;
mod name;
mod resolver;
mod subject_hash;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyUsagePurpose, SanType,
};
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

pub use crate::config::CaConfig;
pub use crate::error::CaError;

use crate::cache::{LeafCache, Minted};
use crate::key::SecretKey;
use crate::name::{LeafName, Permitted};
use crate::resolver::FixedResolver;

/// The CA of one run: its certificate, its in-memory key, and the cache of leaves it signed.
///
/// `RunCa` is `Send + Sync`; share it behind an [`Arc`]. Dropping it wipes the key (see the
/// crate docs for what that covers).
///
/// # Resource usage
///
/// Each leaf costs one P-256 key generation and one signature on a cache miss (about a
/// hundred microseconds; see the crate's README for measured figures) and a little over a
/// kilobyte while cached. At most [`CaConfig::cache_capacity`] leaves are kept.
pub struct RunCa {
    run_id: String,
    issuer: Issuer<'static, SecretKey>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    fingerprint: String,
    /// OpenSSL's subject hash, for a hashed certificate directory.
    subject_hash: String,
    permitted: Permitted,
    not_before: SystemTime,
    not_after: SystemTime,
    leaf_validity: Duration,
    cache: LeafCache,
    minted: AtomicUsize,
}

impl RunCa {
    /// Mints the run CA: a fresh key, a self-signed, name-constrained certificate.
    ///
    /// # Errors
    ///
    /// A run id that does not fit the subject ([`CaError::InvalidRunId`]), a validity longer
    /// than 7 days ([`CaError::ValidityTooLong`]) or shorter than a minute
    /// ([`CaError::ValidityTooShort`]), a cache capacity of 0
    /// ([`CaError::ZeroCacheCapacity`]), a malformed host pattern
    /// ([`CaError::InvalidPattern`]), or a failure inside the crypto library
    /// ([`CaError::Crypto`], a bug).
    pub fn mint(config: CaConfig) -> Result<Self, CaError> {
        config.check()?;
        let permitted = Permitted::parse(&config.permitted)?;

        let now = whole_seconds(SystemTime::now());
        let not_before = now - CaConfig::CLOCK_SKEW;
        let not_after = now + config.validity;

        let mut params = CertificateParams::default();
        let common_name = format!("sluice run CA {}", config.run_id);
        let subject_hash = subject_hash::subject_hash(&[
            (subject_hash::COMMON_NAME, &common_name),
            (subject_hash::ORGANIZATION, "sluice"),
        ]);
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "sluice");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        params.name_constraints = Some(permitted.name_constraints());
        params.not_before = OffsetDateTime::from(not_before);
        params.not_after = OffsetDateTime::from(not_after);

        let key = SecretKey::generate()?;
        let cert = params.self_signed(&key).map_err(|error| CaError::Crypto {
            what: "signing the CA certificate",
            detail: error.to_string(),
        })?;
        let cert_der = cert.der().clone();
        let fingerprint = hex::encode(Sha256::digest(&cert_der));

        Ok(Self {
            run_id: config.run_id,
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
            cert_der,
            fingerprint,
            subject_hash,
            permitted,
            not_before,
            not_after,
            leaf_validity: config.leaf_validity,
            cache: LeafCache::new(config.cache_capacity),
            minted: AtomicUsize::new(0),
        })
    }

    /// The CA certificate in PEM, for the sandbox to trust (`ca.pem`).
    pub fn cert_pem(&self) -> String {
        self.cert_pem.clone()
    }

    /// The CA certificate in DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// The SHA-256 of the CA certificate's DER, in lowercase hex (64 characters).
    pub fn fingerprint_sha256(&self) -> String {
        self.fingerprint.clone()
    }

    /// OpenSSL's hash of the CA's subject (`openssl x509 -hash`), eight lowercase hex
    /// digits: the CA is found in a hashed certificate directory (`SSL_CERT_DIR`) as
    /// `<hash>.0`.
    pub fn subject_hash(&self) -> &str {
        &self.subject_hash
    }

    /// The run id named in the CA's subject.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The start of the CA's validity (5 minutes before it was minted).
    pub fn not_before(&self) -> SystemTime {
        self.not_before
    }

    /// The end of the CA's validity: no leaf is valid after it.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// Whether [`RunCa::leaf`] would certify `name` (a well-formed name inside the
    /// constraints), without minting anything.
    pub fn permits(&self, name: &str) -> bool {
        LeafName::parse(name).is_ok_and(|name| self.permitted.permits(&name))
    }

    /// Whether this CA can certify every name `pattern` stands for (`host`, `*.suffix` or an
    /// IP literal, with an optional port, as [`CaConfig::new`] takes them): what a reloaded
    /// declaration asks of a CA whose name constraints were fixed when it was minted.
    ///
    /// # Errors
    ///
    /// [`CaError::InvalidPattern`] for a malformed pattern.
    pub fn covers(&self, pattern: &str) -> Result<bool, CaError> {
        self.permitted.covers(pattern)
    }

    /// The leaf for `name` (a DNS name in any case with an optional trailing dot, or an IP
    /// literal, IPv6 with or without brackets; no port), minted on first request and cached.
    ///
    /// Concurrent first requests for one name wait for one mint. A cached leaf close to the
    /// end of its validity is minted again, once. The chain holds the leaf alone: clients
    /// trust the CA itself.
    ///
    /// # Errors
    ///
    /// [`CaError::InvalidName`] for anything but one DNS name or IP literal (wildcards and
    /// ports included), [`CaError::NotPermitted`] for a name the constraints do not cover,
    /// [`CaError::Expired`] once the CA has expired, [`CaError::Crypto`] on a crypto failure
    /// (a bug; nothing is cached, the next request tries again).
    pub fn leaf(&self, name: &str) -> Result<Arc<CertifiedKey>, CaError> {
        self.leaf_at(name, SystemTime::now())
    }

    /// [`RunCa::leaf`] as seen at `now`.
    fn leaf_at(&self, name: &str, now: SystemTime) -> Result<Arc<CertifiedKey>, CaError> {
        self.leaf_named(&LeafName::parse(name)?, now)
    }

    /// [`RunCa::leaf`] for a parsed name, as seen at `now`.
    fn leaf_named(&self, name: &LeafName, now: SystemTime) -> Result<Arc<CertifiedKey>, CaError> {
        if !self.permitted.permits(name) {
            return Err(CaError::NotPermitted {
                name: error::quote(&name.key()),
            });
        }
        self.check_alive(now)?;
        let margin = self.leaf_validity / 10;
        let is_fresh =
            |leaf: &Minted| leaf.not_after >= self.not_after || now + margin < leaf.not_after;
        self.cache
            .get_or_mint(&name.key(), is_fresh, || self.mint_leaf(name, now))
    }

    /// A resolver for a rustls `ServerConfig` that serves the leaf for `name` only, for a
    /// connection whose host the caller has already decided (the CONNECT host, SNI checked).
    /// A ClientHello without SNI gets the leaf (clients send none for IP literals); one whose
    /// SNI names another host, or without ECDSA P-256 among its signature schemes, gets no
    /// certificate: rustls aborts the handshake.
    ///
    /// Each handshake takes the leaf from the CA's cache, so a resolver kept for the whole run
    /// serves a renewed leaf once the first nears its end, never an expired one.
    ///
    /// # Errors
    ///
    /// As [`RunCa::leaf`]: the leaf is minted (or taken from the cache) now.
    pub fn resolver_for(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Arc<dyn ResolvesServerCert>, CaError> {
        let name = LeafName::parse(name)?;
        self.leaf_named(&name, SystemTime::now())?;
        Ok(Arc::new(FixedResolver {
            ca: self.clone(),
            name,
        }))
    }

    /// Drops the cached leaf of every name `keep` refuses (names as the cache keys them:
    /// lowercase DNS names, IP literals without brackets): after a reload, the leaves of
    /// hosts no longer reachable. A handshake holding one finishes with it.
    pub fn retain_leaves(&self, keep: impl Fn(&str) -> bool) {
        self.cache.retain(keep);
    }

    /// How many leaves this CA has minted (cache misses and renewals), for tests and metrics.
    pub fn minted_count(&self) -> usize {
        self.minted.load(Ordering::Relaxed)
    }

    /// How many leaves the cache holds now (at most the configured capacity).
    pub fn cached_count(&self) -> usize {
        self.cache.len()
    }

    /// Refuses to sign once the CA has expired.
    fn check_alive(&self, now: SystemTime) -> Result<(), CaError> {
        match now.duration_since(self.not_after) {
            Ok(ago) => Err(CaError::Expired {
                ago_secs: ago.as_secs(),
            }),
            Err(_) => Ok(()),
        }
    }

    /// Mints a leaf for `name` without consulting the constraints: callers check them first.
    fn mint_leaf(&self, name: &LeafName, now: SystemTime) -> Result<Minted, CaError> {
        let now = whole_seconds(now);
        self.check_alive(now)?;
        let not_before = (now - CaConfig::CLOCK_SKEW).max(self.not_before);
        let not_after = (now + self.leaf_validity).min(self.not_after);

        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "sluice");
        let crypto = |what| {
            move |error: rcgen::Error| CaError::Crypto {
                what,
                detail: error.to_string(),
            }
        };
        params.subject_alt_names = vec![match name {
            LeafName::Dns(dns) => {
                // The common name repeats the DNS name for tools that still display it. An IP
                // leaf gets none: OpenSSL would check a dotted-quad CN as a DNS name.
                params
                    .distinguished_name
                    .push(DnType::CommonName, dns.as_str());
                SanType::DnsName(
                    dns.as_str()
                        .try_into()
                        .map_err(crypto("encoding a DNS name"))?,
                )
            }
            LeafName::Ip(ip) => SanType::IpAddress(*ip),
        }];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = OffsetDateTime::from(not_before);
        params.not_after = OffsetDateTime::from(not_after);

        let key = SecretKey::generate()?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(crypto("signing a leaf certificate"))?;
        let signer = key.into_rustls_signer()?;
        self.minted.fetch_add(1, Ordering::Relaxed);
        Ok(Minted {
            key: Arc::new(CertifiedKey::new(vec![cert.der().clone()], signer)),
            not_after,
        })
    }

    /// Test-only: a leaf for any well-formed name, signed with the CA key, bypassing the
    /// constraint check (and the cache), to show that verifiers refuse it.
    #[cfg(test)]
    fn mint_unchecked(&self, name: &str) -> Arc<CertifiedKey> {
        let name = LeafName::parse(name).expect("a well-formed name");
        self.mint_leaf(&name, SystemTime::now())
            .expect("minting succeeds")
            .key
    }
}

impl fmt::Debug for RunCa {
    /// Names the run and the certificate; never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunCa")
            .field("run_id", &self.run_id)
            .field("fingerprint_sha256", &self.fingerprint)
            .field("permitted", &self.permitted)
            .field("minted", &self.minted_count())
            .finish_non_exhaustive()
    }
}

/// Drops the sub-second part: X.509 times have whole seconds, and leaf expiry must be
/// compared with what the certificate says.
fn whole_seconds(time: SystemTime) -> SystemTime {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => UNIX_EPOCH + Duration::from_secs(since.as_secs()),
        Err(_) => time,
    }
}
