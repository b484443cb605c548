//! Pinned connections: a secret with `pin:` is swapped only into a connection whose
//! verified certificate chain holds one of its pins.
//!
//! A request that carries pinned secrets names them in a [`PinDemand`]; it goes over a leg
//! of its own for that exact demand (its pools, its TLS configuration, its verifier), so
//! that a connection dialled for an unpinned request, or for another demand, never carries
//! it. The verifier runs ordinary verification first and only then looks for the pins: a
//! pin narrows which verified chains are accepted, it never admits one. A chain without
//! them fails the handshake, before a byte of the request is written.
//!
//! Invariant: every connection in a pinned leg passed that leg's verifier at a full
//! handshake. Each leg has its own TLS session store, filled only by such handshakes, so
//! a resumed session (which presents no certificate) cannot skip the pins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use sluice_policies::SpkiPin;

/// One pinned secret a request carries, with its pins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PinSet {
    /// The secret's name.
    pub(crate) secret: String,
    /// Its pins: the chain must hold at least one.
    pub(crate) pins: Vec<SpkiPin>,
}

/// Every pinned secret of one request: the connection's verified chain must hold a pin of
/// each. Sorted by secret, each once, so that equal demands share a leg.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PinDemand(Vec<PinSet>);

impl PinDemand {
    /// The demand of `sets`; `None` when there is none (an unpinned request).
    pub(crate) fn new(mut sets: Vec<PinSet>) -> Option<Self> {
        sets.sort_by(|a, b| a.secret.cmp(&b.secret));
        sets.dedup_by(|a, b| a.secret == b.secret);
        (!sets.is_empty()).then_some(Self(sets))
    }

    /// The secrets of the sets no key in `spkis` meets.
    fn unmet<'a>(&'a self, spkis: &[SpkiPin]) -> Vec<&'a str> {
        self.0
            .iter()
            .filter(|set| !set.pins.iter().any(|pin| spkis.contains(pin)))
            .map(|set| set.secret.as_str())
            .collect()
    }
}

/// The handshake failed because no verified chain holds the pins of these secrets.
#[derive(Debug, thiserror::Error)]
#[error("no verified certificate chain holds a pin of secret {}", .secrets.join(", "))]
pub(crate) struct PinMismatch {
    /// The secrets whose pins were not met.
    pub(crate) secrets: Vec<String>,
}

impl PinMismatch {
    /// The mismatch a failed handshake's error holds, if that is why it failed.
    pub(crate) fn in_handshake(error: &std::io::Error) -> Option<&Self> {
        match error.get_ref()?.downcast_ref::<rustls::Error>()? {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(other))) => {
                other.downcast_ref::<Self>()
            }
            _ => None,
        }
    }
}

/// What every pinned leg's verifier is built from: the ordinary verifier and its roots.
pub(super) struct PinBase {
    ordinary: Arc<WebPkiServerVerifier>,
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinBase {
    pub(super) fn new(
        roots: Arc<RootCertStore>,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, rustls::client::VerifierBuilderError> {
        let ordinary =
            WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone()).build()?;
        Ok(Self {
            ordinary,
            roots,
            algorithms: provider.signature_verification_algorithms,
        })
    }

    /// `config` (a base TLS configuration) for connections that must meet `demand`: its
    /// verifier checks the pins, and its session store is its own.
    pub(super) fn config_for(
        self: &Arc<Self>,
        config: &rustls::ClientConfig,
        demand: &PinDemand,
        resumption: &Resumption,
    ) -> Arc<rustls::ClientConfig> {
        let mut config = config.clone();
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(PinVerifier {
                base: self.clone(),
                demand: demand.clone(),
            }));
        config.resumption = resumption.clone();
        Arc::new(config)
    }
}

/// A leg's legs by demand, built on first use (one worker's, one generation's).
pub(super) struct PinnedLegs<L> {
    legs: Mutex<HashMap<PinDemand, Arc<L>>>,
}

impl<L> Default for PinnedLegs<L> {
    fn default() -> Self {
        Self {
            legs: Mutex::new(HashMap::new()),
        }
    }
}

impl<L> PinnedLegs<L> {
    /// The leg for `demand`, built by `build` the first time. The number of legs is bounded
    /// by the distinct sets of pinned secrets that requests carry together.
    pub(super) fn get(&self, demand: &PinDemand, build: impl FnOnce() -> L) -> Arc<L> {
        let mut legs = self.legs.lock().unwrap_or_else(|e| e.into_inner());
        legs.entry(demand.clone())
            .or_insert_with(|| Arc::new(build()))
            .clone()
    }

    /// Calls `each` on every leg built so far.
    pub(super) fn for_each(&self, mut each: impl FnMut(&L)) {
        let legs = self.legs.lock().unwrap_or_else(|e| e.into_inner());
        legs.values().for_each(|leg| each(leg));
    }
}

/// What webpki asks of each candidate path it builds.
type PathCheck<'a> = dyn Fn(&webpki::VerifiedPath<'_>) -> Result<(), webpki::Error> + 'a;

/// Ordinary verification, then the pins over a verified path.
#[derive(Debug)]
struct PinVerifier {
    base: Arc<PinBase>,
    demand: PinDemand,
}

impl std::fmt::Debug for PinBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinBase").finish_non_exhaustive()
    }
}

impl PinVerifier {
    /// Whether some verified path from `end_entity` holds a pin of every set: webpki
    /// builds paths and asks of each in turn, so a server whose chain can be completed two
    /// ways meets the pins if either way does. The secrets unmet on the path ordinary
    /// verification found, when none does.
    fn check_pins(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), PinMismatch> {
        let unmet_all = || PinMismatch {
            secrets: self.demand.0.iter().map(|s| s.secret.clone()).collect(),
        };
        let cert = webpki::EndEntityCert::try_from(end_entity).map_err(|_| unmet_all())?;
        let verify = |meets: Option<&PathCheck<'_>>| {
            cert.verify_for_usage(
                self.base.algorithms.all,
                &self.base.roots.roots,
                intermediates,
                now,
                webpki::KeyUsage::server_auth(),
                None,
                meets,
            )
            .map(|path| path_pins(&path))
        };
        let meets = |path: &webpki::VerifiedPath<'_>| {
            if self.demand.unmet(&path_pins(path)).is_empty() {
                Ok(())
            } else {
                // Not fatal to path building: the next candidate path is asked.
                Err(webpki::Error::UnknownIssuer)
            }
        };
        if verify(Some(&meets)).is_ok() {
            return Ok(());
        }
        match verify(None) {
            Ok(pins) => Err(PinMismatch {
                secrets: self
                    .demand
                    .unmet(&pins)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            }),
            Err(_) => Err(unmet_all()),
        }
    }
}

/// The pins of every key on `path`: the end entity's, each intermediate's, the anchor's.
fn path_pins(path: &webpki::VerifiedPath<'_>) -> Vec<SpkiPin> {
    let mut pins = vec![SpkiPin::of_spki(
        &path.end_entity().subject_public_key_info(),
    )];
    pins.extend(
        path.intermediate_certificates()
            .map(|cert| SpkiPin::of_spki(&cert.subject_public_key_info())),
    );
    pins.push(SpkiPin::of_spki(&webpki::spki_for_anchor(path.anchor())));
    pins
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.base.ordinary.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        self.check_pins(end_entity, intermediates, now)
            .map_err(|mismatch| {
                rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    mismatch,
                ))))
            })?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.base
            .ordinary
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.base
            .ordinary
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.base.ordinary.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, PublicKeyData,
    };

    use super::*;

    /// A root, an intermediate it issued and a leaf for `api.test` the intermediate issued,
    /// with the pin of each one's key.
    struct Chain {
        roots: Arc<RootCertStore>,
        leaf: CertificateDer<'static>,
        intermediate: CertificateDer<'static>,
        pins: [SpkiPin; 3],
    }

    fn chain() -> Chain {
        let ca = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            params
        };
        let root_key = KeyPair::generate().unwrap();
        let root_pin = SpkiPin::of_spki(&root_key.subject_public_key_info());
        let root = CertifiedIssuer::self_signed(ca("root"), root_key).unwrap();
        let mid_key = KeyPair::generate().unwrap();
        let mid_pin = SpkiPin::of_spki(&mid_key.subject_public_key_info());
        let mid = CertifiedIssuer::signed_by(ca("intermediate"), mid_key, &root).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_pin = SpkiPin::of_spki(&leaf_key.subject_public_key_info());
        let leaf = CertificateParams::new(vec!["api.test".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &mid)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(root.der().clone()).unwrap();
        Chain {
            roots: Arc::new(roots),
            leaf: leaf.der().clone(),
            intermediate: mid.der().clone(),
            pins: [leaf_pin, mid_pin, root_pin],
        }
    }

    fn demand(sets: &[(&str, &[SpkiPin])]) -> PinDemand {
        let sets = sets
            .iter()
            .map(|(secret, pins)| PinSet {
                secret: (*secret).to_owned(),
                pins: pins.to_vec(),
            })
            .collect();
        PinDemand::new(sets).unwrap()
    }

    fn verify(chain: &Chain, demand: PinDemand) -> Result<ServerCertVerified, rustls::Error> {
        let base = Arc::new(PinBase::new(chain.roots.clone(), &crate::suites::provider()).unwrap());
        let verifier = PinVerifier { base, demand };
        verifier.verify_server_cert(
            &chain.leaf,
            std::slice::from_ref(&chain.intermediate),
            &ServerName::try_from("api.test").unwrap(),
            &[],
            UnixTime::now(),
        )
    }

    fn mismatch(error: rustls::Error) -> Vec<String> {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, error);
        PinMismatch::in_handshake(&io)
            .expect("a pin mismatch")
            .secrets
            .clone()
    }

    #[test]
    fn any_key_of_the_verified_path_meets_a_pin_and_no_other_does() {
        let chain = chain();
        let [leaf, mid, root] = chain.pins;
        for pin in [leaf, mid, root] {
            assert!(verify(&chain, demand(&[("gh", &[pin])])).is_ok(), "{pin}");
        }
        let nobody = SpkiPin::of_spki(b"a key nobody serves");
        assert!(verify(&chain, demand(&[("gh", &[nobody, root])])).is_ok());
        let refused = verify(&chain, demand(&[("gh", &[nobody])])).unwrap_err();
        assert_eq!(mismatch(refused), ["gh"]);
        // Every secret's pins must be met; the error names those that are not.
        let two = demand(&[("b", &[nobody]), ("a", &[leaf]), ("c", &[nobody])]);
        assert_eq!(mismatch(verify(&chain, two).unwrap_err()), ["b", "c"]);
    }

    #[test]
    fn a_pin_never_admits_a_chain_ordinary_verification_refuses() {
        let chain = chain();
        let [leaf, ..] = chain.pins;
        // The leaf's own pin, toward a name the certificate is not for.
        let base = Arc::new(PinBase::new(chain.roots.clone(), &crate::suites::provider()).unwrap());
        let verifier = PinVerifier {
            base,
            demand: demand(&[("gh", &[leaf])]),
        };
        let wrong_name = verifier.verify_server_cert(
            &chain.leaf,
            std::slice::from_ref(&chain.intermediate),
            &ServerName::try_from("other.test").unwrap(),
            &[],
            UnixTime::now(),
        );
        assert!(
            matches!(
                wrong_name,
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. }
                ))
            ),
            "{wrong_name:?}"
        );
        // Against other roots, the chain does not verify, pinned or not.
        let other = super::tests::chain();
        let stranger = Chain {
            roots: other.roots,
            ..chain
        };
        let untrusted = verify(&stranger, demand(&[("gh", &[leaf])])).unwrap_err();
        // Refused as ordinary verification refuses it (another root of the same name: a
        // bad signature), not as a pin mismatch.
        assert!(
            matches!(
                untrusted,
                rustls::Error::InvalidCertificate(CertificateError::BadSignature)
            ),
            "{untrusted:?}"
        );
    }

    #[test]
    fn equal_demands_are_one_key_whatever_their_order() {
        let a = SpkiPin::of_spki(b"a");
        let first = demand(&[("x", &[a]), ("y", &[a])]);
        let second = demand(&[("y", &[a]), ("x", &[a]), ("x", &[a])]);
        assert_eq!(first, second);
        assert!(PinDemand::new(Vec::new()).is_none());
    }
}
