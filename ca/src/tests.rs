//! Tests of the run CA as its users see it: rustls' webpki verifier and `openssl verify` as
//! outside judges, real rustls handshakes through the resolver, the single-flight cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use rcgen::PublicKeyData;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::*;

const OPENSSL: &str = "/usr/bin/openssl";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn ca_for(permitted: &[&str]) -> Arc<RunCa> {
    Arc::new(RunCa::mint(CaConfig::new("test-run", permitted.iter().copied())).unwrap())
}

fn github_ca() -> Arc<RunCa> {
    ca_for(&["api.github.com", "*.githubusercontent.com", "127.0.0.1"])
}

/// Verifies `leaf` for `name` as a rustls client trusting only `ca` would.
fn webpki_verify(ca: &RunCa, leaf: &CertifiedKey, name: &str) -> Result<(), rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .unwrap();
    verifier
        .verify_server_cert(
            &leaf.cert[0],
            &[],
            &ServerName::try_from(name.to_owned()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("sluice-ca-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn write(&self, name: &str, contents: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the openssl CLI; a missing binary fails the test loudly rather than skipping it.
fn openssl(args: &[&str]) -> Output {
    assert!(
        Path::new(OPENSSL).exists(),
        "{OPENSSL} is missing: the outside check of the CA needs the openssl CLI"
    );
    Command::new(OPENSSL).args(args).output().unwrap()
}

fn to_text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `openssl verify -x509_strict -purpose sslserver -CAfile ca.pem leaf.pem`, plus the name.
fn openssl_verify(ca: &RunCa, leaf: &CertifiedKey, name: &str) -> Output {
    let dir = TempDir::new();
    let ca_pem = dir.write("ca.pem", ca.cert_pem().as_bytes());
    let leaf_der = dir.write("leaf.der", leaf.cert[0].as_ref());
    let leaf_pem = dir.0.join("leaf.pem");
    let converted = openssl(&[
        "x509",
        "-inform",
        "DER",
        "-in",
        leaf_der.to_str().unwrap(),
        "-out",
        leaf_pem.to_str().unwrap(),
    ]);
    assert!(converted.status.success(), "{}", to_text(&converted));
    let name_check = if name.parse::<std::net::IpAddr>().is_ok() {
        "-verify_ip"
    } else {
        "-verify_hostname"
    };
    openssl(&[
        "verify",
        "-x509_strict",
        "-purpose",
        "sslserver",
        name_check,
        name,
        "-CAfile",
        ca_pem.to_str().unwrap(),
        leaf_pem.to_str().unwrap(),
    ])
}

fn openssl_text(der: &[u8]) -> String {
    let dir = TempDir::new();
    let path = dir.write("cert.der", der);
    let output = openssl(&[
        "x509",
        "-inform",
        "DER",
        "-in",
        path.to_str().unwrap(),
        "-noout",
        "-text",
    ]);
    assert!(output.status.success(), "{}", to_text(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_ca_certificate_says_what_it_may_do_and_for_whom() {
    let ca = github_ca();
    let text = openssl_text(ca.cert_der().as_ref());
    for expected in [
        "CN = sluice run CA test-run",
        "O = sluice",
        "X509v3 Basic Constraints: critical",
        "CA:TRUE, pathlen:0",
        "Certificate Sign",
        "X509v3 Name Constraints: critical",
        "DNS:api.github.com",
        "DNS:githubusercontent.com",
        "IP:127.0.0.1/255.255.255.255",
        "Excluded:",
        "IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0",
        "ASN1 OID: prime256v1",
        "ecdsa-with-SHA256",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("Digital Signature"), "{text}");
    assert!(!text.contains("CRL Sign"), "{text}");
    assert!(
        !text.contains("IP:0.0.0.0/0.0.0.0"),
        "v4 is permitted here: {text}"
    );
}

#[test]
fn without_ip_literals_every_ip_is_excluded() {
    let ca = ca_for(&["api.example.com"]);
    let text = openssl_text(ca.cert_der().as_ref());
    assert!(text.contains("IP:0.0.0.0/0.0.0.0"), "{text}");
    assert!(
        text.contains("IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0"),
        "{text}"
    );
}

#[test]
fn the_ca_is_valid_from_a_little_before_now_to_the_runs_end() {
    let before = SystemTime::now();
    let ca = github_ca();
    let after = SystemTime::now();
    let skew = CaConfig::CLOCK_SKEW;
    assert!(ca.not_before() <= before - skew + Duration::from_secs(1));
    assert!(ca.not_before() >= before - skew - Duration::from_secs(1));
    assert!(ca.not_after() <= after + CaConfig::DEFAULT_VALIDITY);
    assert!(ca.not_after() >= before + CaConfig::DEFAULT_VALIDITY - Duration::from_secs(1));
}

#[test]
fn pem_der_and_fingerprint_agree() {
    let ca = github_ca();
    let pem = ca.cert_pem();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
    let from_pem = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    assert_eq!(from_pem, ca.cert_der());
    let fingerprint = ca.fingerprint_sha256();
    assert_eq!(fingerprint.len(), 64);
    assert!(
        fingerprint
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    );
    assert_eq!(
        fingerprint,
        hex::encode(Sha256::digest(ca.cert_der().as_ref()))
    );
    assert_eq!(ca.run_id(), "test-run");

    let dir = TempDir::new();
    let path = dir.write("ca.pem", pem.as_bytes());
    let output = openssl(&[
        "x509",
        "-in",
        path.to_str().unwrap(),
        "-noout",
        "-fingerprint",
        "-sha256",
    ]);
    let printed = to_text(&output).to_ascii_lowercase().replace(':', "");
    assert!(printed.contains(&fingerprint), "{printed}");
}

#[test]
fn minted_leaves_pass_the_webpki_verifier() {
    let ca = github_ca();
    for name in [
        "api.github.com",
        "raw.githubusercontent.com",
        "a.b.githubusercontent.com",
        "127.0.0.1",
    ] {
        let leaf = ca.leaf(name).unwrap();
        assert_eq!(leaf.cert.len(), 1, "the chain is the leaf alone");
        webpki_verify(&ca, &leaf, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_leaf_is_valid_for_its_own_name_only() {
    let ca = github_ca();
    let leaf = ca.leaf("raw.githubusercontent.com").unwrap();
    let error = webpki_verify(&ca, &leaf, "api.github.com").unwrap_err();
    assert!(
        matches!(
            error,
            rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. }
            )
        ),
        "{error:?}"
    );
}

#[test]
fn minted_leaves_pass_openssl_verify() {
    let ca = github_ca();
    for name in [
        "api.github.com",
        "objects.githubusercontent.com",
        "127.0.0.1",
    ] {
        let leaf = ca.leaf(name).unwrap();
        let output = openssl_verify(&ca, &leaf, name);
        let text = to_text(&output);
        assert!(
            output.status.success() && text.contains(": OK"),
            "{name}: {text}"
        );
    }
}

#[test]
fn leaves_have_one_name_server_auth_and_no_ca_bit() {
    let ca = github_ca();
    let dns = openssl_text(ca.leaf("api.github.com").unwrap().cert[0].as_ref());
    for expected in [
        "DNS:api.github.com",
        "CA:FALSE",
        "TLS Web Server Authentication",
        "Digital Signature",
        "X509v3 Authority Key Identifier",
        "ASN1 OID: prime256v1",
        "Issuer: CN = sluice run CA test-run, O = sluice",
    ] {
        assert!(dns.contains(expected), "missing {expected:?} in:\n{dns}");
    }
    assert_eq!(dns.matches("DNS:").count(), 1, "{dns}");
    let ip = openssl_text(ca.leaf("127.0.0.1").unwrap().cert[0].as_ref());
    assert!(ip.contains("IP Address:127.0.0.1"), "{ip}");
    assert!(!ip.contains("DNS:"), "{ip}");
    assert!(
        ip.contains("Subject: O = sluice\n"),
        "an IP leaf has no common name: {ip}"
    );
    assert!(
        dns.contains("Subject: O = sluice, CN = api.github.com\n"),
        "{dns}"
    );
}

#[test]
fn a_leaf_outside_the_constraints_signed_by_the_ca_key_is_refused_by_webpki() {
    let ca = github_ca();
    for name in [
        "evil.example",
        "github.com",
        "githubusercontent.com.evil.test",
        "192.0.2.1",
    ] {
        let forged = ca.mint_unchecked(name);
        let error = webpki_verify(&ca, &forged, name).unwrap_err();
        assert!(
            matches!(
                error,
                rustls::Error::InvalidCertificate(rustls::CertificateError::Other(_))
                    | rustls::Error::InvalidCertificate(
                        rustls::CertificateError::NotValidForNameContext { .. }
                    )
            ),
            "{name}: {error:?}"
        );
        assert!(
            format!("{error:?}").contains("NameConstraintViolation"),
            "{name}: {error:?}"
        );
    }
}

#[test]
fn a_leaf_outside_the_constraints_signed_by_the_ca_key_is_refused_by_openssl() {
    let ca = github_ca();
    for name in ["evil.example", "192.0.2.1"] {
        let forged = ca.mint_unchecked(name);
        let output = openssl_verify(&ca, &forged, name);
        let text = to_text(&output);
        assert!(!output.status.success(), "{name}: {text}");
        assert!(
            text.contains("permitted subtree violation"),
            "{name}: {text}"
        );
    }
}

#[test]
fn ips_are_refused_by_verifiers_when_no_ip_is_permitted() {
    let ca = ca_for(&["api.example.com"]);
    let forged = ca.mint_unchecked("127.0.0.1");
    assert!(webpki_verify(&ca, &forged, "127.0.0.1").is_err());
    let output = openssl_verify(&ca, &forged, "127.0.0.1");
    assert!(!output.status.success(), "{}", to_text(&output));
    assert!(
        to_text(&output).contains("excluded subtree violation"),
        "{}",
        to_text(&output)
    );
}

#[test]
fn a_ca_with_no_hosts_certifies_nothing() {
    let ca = ca_for(&[]);
    assert!(matches!(
        ca.leaf("a.example"),
        Err(CaError::NotPermitted { .. })
    ));
    let forged = ca.mint_unchecked("a.example");
    assert!(webpki_verify(&ca, &forged, "a.example").is_err());
    let output = openssl_verify(&ca, &forged, "a.example");
    assert!(!output.status.success(), "{}", to_text(&output));
}

#[test]
fn names_outside_the_constraints_or_malformed_get_no_leaf() {
    let ca = github_ca();
    for name in [
        "evil.example",
        "github.com",
        "x.api.github.com",
        "githubusercontent.com",
        "127.0.0.2",
    ] {
        assert!(
            matches!(ca.leaf(name), Err(CaError::NotPermitted { .. })),
            "{name}"
        );
        assert!(!ca.permits(name), "{name}");
    }
    for name in [
        "",
        "*.githubusercontent.com",
        "api.github.com:443",
        "api github com",
        "\u{e9}.example",
    ] {
        assert!(
            matches!(ca.leaf(name), Err(CaError::InvalidName { .. })),
            "{name:?}"
        );
    }
    assert_eq!(ca.minted_count(), 0);
    assert_eq!(ca.cached_count(), 0);
    assert!(ca.permits("API.GitHub.com."));
}

#[test]
fn names_are_normalised_before_the_cache() {
    let ca = github_ca();
    let a = ca.leaf("API.GitHub.com").unwrap();
    let b = ca.leaf("api.github.com.").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(ca.minted_count(), 1);
}

#[test]
fn two_runs_never_share_a_ca() {
    let a = github_ca();
    let b = github_ca();
    assert_ne!(a.fingerprint_sha256(), b.fingerprint_sha256());
    assert_ne!(a.issuer.key().der_bytes(), b.issuer.key().der_bytes());
    // A leaf of one run means nothing to a client of the other.
    let leaf = a.leaf("api.github.com").unwrap();
    assert!(webpki_verify(&b, &leaf, "api.github.com").is_err());
}

#[test]
fn concurrent_first_requests_for_one_name_mint_once() {
    const THREADS: usize = 16;
    let ca = github_ca();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let ca = ca.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                ca.leaf("raw.githubusercontent.com").unwrap()
            })
        })
        .collect();
    let leaves: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(ca.minted_count(), 1);
    assert!(leaves.iter().all(|leaf| Arc::ptr_eq(leaf, &leaves[0])));
}

#[test]
fn concurrent_first_requests_for_different_names_each_mint_once() {
    const THREADS: usize = 16;
    let ca = github_ca();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let ca = ca.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                ca.leaf(&format!("h{}.githubusercontent.com", i % 4))
                    .unwrap()
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(ca.minted_count(), 4);
    assert_eq!(ca.cached_count(), 4);
}

#[test]
fn the_cache_bound_holds() {
    let mut config = CaConfig::new("test-run", ["*.example.com"]);
    config.cache_capacity = 3;
    let ca = RunCa::mint(config).unwrap();
    for i in 0..10 {
        ca.leaf(&format!("h{i}.example.com")).unwrap();
        assert!(ca.cached_count() <= 3);
    }
    assert_eq!(ca.cached_count(), 3);
    assert_eq!(ca.minted_count(), 10);
    // The most recent names are still cached; the first was evicted and is minted again.
    ca.leaf("h9.example.com").unwrap();
    assert_eq!(ca.minted_count(), 10);
    ca.leaf("h0.example.com").unwrap();
    assert_eq!(ca.minted_count(), 11);
    assert_eq!(ca.cached_count(), 3);
}

#[test]
fn a_validity_over_seven_days_is_refused() {
    let mut config = CaConfig::new("test-run", ["api.example.com"]);
    config.validity = Duration::from_secs(7 * 86_400 + 1);
    let error = RunCa::mint(config).unwrap_err();
    assert_eq!(
        error,
        CaError::ValidityTooLong {
            requested_secs: 7 * 86_400 + 1,
            max_secs: 7 * 86_400
        }
    );
    assert!(
        error.to_string().contains("expected at most 604800s"),
        "{error}"
    );
}

#[test]
fn malformed_patterns_and_run_ids_are_refused_at_mint() {
    let error = RunCa::mint(CaConfig::new("test-run", ["a.*.example.com"])).unwrap_err();
    assert!(matches!(error, CaError::InvalidPattern { .. }), "{error}");
    let error = RunCa::mint(CaConfig::new("bad run", ["a.example.com"])).unwrap_err();
    assert!(matches!(error, CaError::InvalidRunId { .. }), "{error}");
}

#[test]
fn leaves_never_outlive_the_ca() {
    let mut config = CaConfig::new("test-run", ["api.example.com"]);
    config.validity = Duration::from_secs(3600);
    config.leaf_validity = Duration::from_secs(6 * 3600);
    let ca = RunCa::mint(config).unwrap();
    let name = LeafName::parse("api.example.com").unwrap();
    let minted = ca.mint_leaf(&name, SystemTime::now()).unwrap();
    assert_eq!(minted.not_after, ca.not_after());

    let config = CaConfig::new("test-run", ["api.example.com"]);
    let ca = RunCa::mint(config).unwrap();
    let now = SystemTime::now();
    let minted = ca.mint_leaf(&name, now).unwrap();
    assert!(minted.not_after <= now + CaConfig::DEFAULT_LEAF_VALIDITY);
    assert!(minted.not_after < ca.not_after());
}

#[test]
fn a_leaf_close_to_its_end_is_minted_again_once() {
    let ca = github_ca();
    let now = SystemTime::now();
    let first = ca.leaf_at("api.github.com", now).unwrap();
    let later = now + CaConfig::DEFAULT_LEAF_VALIDITY - Duration::from_secs(60);
    let renewed = ca.leaf_at("api.github.com", later).unwrap();
    assert!(!Arc::ptr_eq(&first, &renewed));
    let again = ca.leaf_at("api.github.com", later).unwrap();
    assert!(Arc::ptr_eq(&renewed, &again));
    assert_eq!(ca.minted_count(), 2);
}

#[test]
fn an_expired_ca_signs_nothing() {
    let ca = github_ca();
    let after_end = ca.not_after() + Duration::from_secs(10);
    let error = ca.leaf_at("api.github.com", after_end).unwrap_err();
    assert_eq!(error, CaError::Expired { ago_secs: 10 });
    assert_eq!(ca.minted_count(), 0);
}

#[test]
fn debug_output_never_holds_the_key() {
    let ca = github_ca();
    let printed = format!("{ca:?}");
    assert!(printed.contains(&ca.fingerprint_sha256()), "{printed}");
    let pkcs8 = ca.issuer.key().pkcs8_for_test().to_vec();
    assert!(!pkcs8.is_empty());
    assert!(!printed.contains(&hex::encode(&pkcs8)));
    assert!(!printed.contains(&format!("{pkcs8:?}")));
    assert!(!format!("{:?}", ca.issuer).contains(&format!("{pkcs8:?}")));
    let resolver = ca.resolver_for("api.github.com").unwrap();
    let printed = format!("{resolver:?}");
    assert!(printed.contains("api.github.com"), "{printed}");
    assert!(!printed.contains(&format!("{pkcs8:?}")));
}

#[test]
fn run_ca_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RunCa>();
}

// --- real handshakes, in memory ------------------------------------------------------------

/// Moves every pending TLS byte from `from` to `to`.
macro_rules! transfer {
    ($from:expr, $to:expr) => {
        while $from.wants_write() {
            let mut buf = Vec::new();
            $from.write_tls(&mut buf).unwrap();
            let mut offset = 0;
            while offset < buf.len() {
                offset += $to.read_tls(&mut &buf[offset..]).unwrap();
            }
        }
    };
}

/// Which side refused a handshake, and why.
#[derive(Debug)]
enum Refused {
    Server(rustls::Error),
    Client(#[allow(dead_code, reason = "read through Debug in assertion messages")] rustls::Error),
}

/// The server aborted because its resolver handed out no certificate.
fn is_no_certificate(refused: &Refused) -> bool {
    matches!(refused, Refused::Server(rustls::Error::General(reason))
        if reason == "no server certificate chain resolved")
}

/// Runs a TLS handshake between a client trusting only `ca` and a server using `resolver`.
fn handshake(
    ca: &RunCa,
    resolver: Arc<dyn ResolvesServerCert>,
    server_name: &str,
    send_sni: bool,
) -> Result<(), Refused> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert_der()).unwrap();
    let mut client_config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_config.enable_sni = send_sni;
    let server_config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(resolver);

    let name = ServerName::try_from(server_name.to_owned()).unwrap();
    let mut client = ClientConnection::new(Arc::new(client_config), name).unwrap();
    let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
    for _ in 0..16 {
        transfer!(client, server);
        server.process_new_packets().map_err(Refused::Server)?;
        transfer!(server, client);
        client.process_new_packets().map_err(Refused::Client)?;
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
    }
    panic!("the handshake made no progress");
}

#[test]
fn a_handshake_whose_sni_names_the_host_in_any_case_succeeds() {
    let ca = github_ca();
    let pinned = ca.resolver_for("raw.githubusercontent.com").unwrap();
    handshake(&ca, pinned.clone(), "Raw.GitHubUserContent.com", true).unwrap();
    handshake(&ca, pinned, "raw.githubusercontent.com", true).unwrap();
    assert_eq!(ca.minted_count(), 1);
}

#[test]
fn a_handshake_whose_sni_names_another_host_fails() {
    let ca = github_ca();
    let pinned = ca.resolver_for("api.github.com").unwrap();
    for sni in ["evil.example", "x.api.github.com", "githubusercontent.com"] {
        let refused = handshake(&ca, pinned.clone(), sni, true).unwrap_err();
        assert!(is_no_certificate(&refused), "{sni}: {refused:?}");
    }
    assert_eq!(ca.minted_count(), 1);
}

#[test]
fn the_resolver_serves_its_host_with_or_without_sni_and_nothing_else() {
    let ca = github_ca();
    // IP literals: clients send no SNI, so the proxy pins the leaf to the CONNECT host.
    let pinned = ca.resolver_for("127.0.0.1").unwrap();
    handshake(&ca, pinned, "127.0.0.1", true).unwrap();
    let pinned = ca.resolver_for("api.github.com").unwrap();
    handshake(&ca, pinned.clone(), "api.github.com", true).unwrap();
    handshake(&ca, pinned.clone(), "api.github.com", false).unwrap();
    let refused = handshake(&ca, pinned, "raw.githubusercontent.com", true).unwrap_err();
    assert!(is_no_certificate(&refused), "{refused:?}");
    assert!(matches!(
        ca.resolver_for("evil.example"),
        Err(CaError::NotPermitted { .. })
    ));
}

#[test]
fn the_resolver_takes_its_leaf_from_the_ca_at_each_handshake() {
    // With room for one leaf, another host's evicts the pinned one: the next handshake mints
    // it again rather than serving the copy the resolver was made with (the same path serves
    // a renewed leaf once the first nears its end).
    let mut config = CaConfig::new("test-run", ["api.github.com", "*.githubusercontent.com"]);
    config.cache_capacity = 1;
    let ca = Arc::new(RunCa::mint(config).unwrap());
    let pinned = ca.resolver_for("api.github.com").unwrap();
    assert_eq!(ca.minted_count(), 1);
    handshake(&ca, pinned.clone(), "api.github.com", true).unwrap();
    assert_eq!(ca.minted_count(), 1);
    ca.leaf("raw.githubusercontent.com").unwrap();
    handshake(&ca, pinned.clone(), "api.github.com", true).unwrap();
    assert_eq!(ca.minted_count(), 3);
    handshake(&ca, pinned, "api.github.com", true).unwrap();
    assert_eq!(ca.minted_count(), 3);
}

#[test]
fn the_subject_hash_is_the_one_openssl_computes() {
    for run_id in ["test-run", "0f7a423a72d9af54"] {
        let ca = RunCa::mint(CaConfig::new(run_id, ["api.example.com"])).unwrap();
        let dir = TempDir::new();
        let pem = dir.write("ca.pem", ca.cert_pem().as_bytes());
        let out = openssl(&["x509", "-noout", "-hash", "-in", pem.to_str().unwrap()]);
        assert!(out.status.success(), "{}", to_text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            ca.subject_hash()
        );
    }
}
