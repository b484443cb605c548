//! What makes a client trust the run CA: one PEM bundle (the run CA, then the system roots)
//! and one hashed certificate directory, and every variable a client family reads to find a
//! CA bundle or directory ([`sluice_policies::launcher_env`], shared with the declaration's
//! check that no secret takes one), pointed at them.
//!
//! In the jail, the JVM's trust store too: the run bundle as a Java keystore
//! ([`write_jvm_store`]), bound over each `cacerts` the system has, since the JDK reads
//! neither the CA variables nor PEM; and the hashed directory Mono's TLS (btls) reads,
//! which `cert-sync` fills from the system roots, bound to the run's hashed directory.
//!
//! The variables win over inherited ones: an operator's environment that already points
//! gRPC, gcloud or Nix at the system roots (as many CI images do) would otherwise leave
//! those clients refusing the run CA. What it must never do: leave an inherited trust
//! variable pointing elsewhere, or write the CA's key (only its certificate is here).

use std::io;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use sluice_policies::launcher_env::{CA_BUNDLE_VARIABLES, CA_DIRECTORY_VARIABLES};

/// Where the system's CA bundle may live, first found wins; the sandbox's bundle is the run
/// CA plus these roots, so hosts sluice does not intercept (passthrough) still verify.
pub(super) const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// Where the JVM's system trust store (`cacerts`) may live: the distributions' shared
/// stores, and each JDK's own under `/usr/lib/jvm` (often a link to the shared one).
const JVM_STORES: [&str; 2] = [
    "/etc/ssl/certs/java/cacerts",
    "/etc/pki/ca-trust/extracted/java/cacerts",
];

/// Where Mono's TLS (btls, BoringSSL) looks its roots up: a hashed directory of PEM files,
/// as OpenSSL's (Debian's `ca-certificates-mono` fills it with `cert-sync`).
const MONO_HASHED_STORES: [&str; 1] = ["/usr/share/.mono/new-certs/Trust"];

/// The keystore password the JDK's `cacerts` is known by. A JKS password guards only the
/// store's integrity check; the JDK reads the certificates of a trust store without it.
const JVM_STORE_PASSWORD: &[u8] = b"changeit";

/// Where the system's hashed certificate directory may live, first found wins.
const SYSTEM_DIRECTORIES: [&str; 2] = ["/etc/ssl/certs", "/etc/pki/tls/certs"];

/// Whether sluice sets `name` itself to point a client at the run's trust.
pub(super) fn is_trust_variable(name: &str) -> bool {
    CA_BUNDLE_VARIABLES.contains(&name) || CA_DIRECTORY_VARIABLES.contains(&name)
}

/// The run's trust, written into the run directory.
pub(super) struct Trust {
    /// `ca-bundle.pem`: the run CA, then the system roots.
    bundle: PathBuf,
    /// `certs/`: the system's hashed directory (as links) plus the run CA under its hash.
    directory: PathBuf,
}

impl Trust {
    /// Writes the bundle and the directory for the CA `ca_pem`, whose OpenSSL subject hash
    /// is `subject_hash`.
    pub(super) fn write(run_dir: &Path, ca_pem: &str, subject_hash: &str) -> io::Result<Self> {
        Ok(Self {
            bundle: write_bundle(run_dir, ca_pem)?,
            directory: write_directory(run_dir, ca_pem, subject_hash)?,
        })
    }

    /// Every trust variable and the path it gets.
    pub(super) fn variables(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        let bundle = CA_BUNDLE_VARIABLES
            .into_iter()
            .map(|name| (name, self.bundle.as_path()));
        let directory = CA_DIRECTORY_VARIABLES
            .into_iter()
            .map(|name| (name, self.directory.as_path()));
        bundle.chain(directory)
    }
}

/// Where the run's hashed certificate directory is written in the run directory.
pub(super) fn directory_path(run_dir: &Path) -> PathBuf {
    run_dir.join("certs")
}

/// Where the run bundle is written in the run directory.
pub(super) fn bundle_path(run_dir: &Path) -> PathBuf {
    run_dir.join("ca-bundle.pem")
}

/// The run CA followed by the system roots, as one PEM bundle in the run directory.
fn write_bundle(run_dir: &Path, ca_pem: &str) -> io::Result<PathBuf> {
    let mut bundle = ca_pem.to_owned();
    match SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    {
        Some(system) => {
            bundle.push('\n');
            bundle.push_str(&system);
        }
        None => tracing::warn!(
            "no system CA bundle found; the sandbox trusts only the run CA (passthrough hosts will not verify)"
        ),
    }
    let path = bundle_path(run_dir);
    crate::files::write_new(&path, bundle.as_bytes(), 0o644)?;
    Ok(path)
}

/// Every JVM trust store on this system, each once (links resolved).
pub(super) fn jvm_stores() -> Vec<PathBuf> {
    let jdks = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|jdk| jdk.path().join("lib/security/cacerts"));
    let mut stores: Vec<PathBuf> = JVM_STORES
        .iter()
        .map(PathBuf::from)
        .chain(jdks)
        .filter_map(|path| path.canonicalize().ok())
        .filter(|path| path.is_file())
        .collect();
    stores.sort();
    stores.dedup();
    stores
}

/// The run bundle (the run CA, then the system roots) as a Java keystore of trusted
/// certificates, `cacerts` in the run directory.
pub(super) fn write_jvm_store(run_dir: &Path) -> io::Result<PathBuf> {
    let bundle = std::fs::read(bundle_path(run_dir))?;
    let mut store = jks::KeyStore::new();
    let now = std::time::SystemTime::now();
    for (index, certificate) in rustls_pki_types::CertificateDer::pem_slice_iter(&bundle)
        .flatten()
        .enumerate()
    {
        // The run CA comes first in the bundle.
        let alias = if index == 0 {
            "sluice-run-ca".to_owned()
        } else {
            format!("system-{index}")
        };
        let entry = jks::TrustedCertificateEntry {
            creation_time: now,
            certificate: jks::Certificate {
                cert_type: "X.509".into(),
                content: certificate.to_vec(),
            },
        };
        store
            .set_trusted_certificate_entry(&alias, entry)
            .map_err(io::Error::other)?;
    }
    let mut bytes = Vec::new();
    store
        .store(&mut bytes, JVM_STORE_PASSWORD)
        .map_err(io::Error::other)?;
    let path = run_dir.join("cacerts");
    crate::files::write_new(&path, &bytes, 0o644)?;
    Ok(path)
}

/// Every hashed directory Mono's TLS reads on this system: the run's hashed directory
/// ([`directory_path`]) is bound over each.
pub(super) fn mono_hashed_stores() -> Vec<PathBuf> {
    MONO_HASHED_STORES
        .iter()
        .map(PathBuf::from)
        .filter(|path| path.is_dir())
        .collect()
}

/// A hashed certificate directory: a link to each hashed entry of the system's own
/// directory, and the run CA as `<hash>.N`, N the first index the system does not use.
fn write_directory(run_dir: &Path, ca_pem: &str, subject_hash: &str) -> io::Result<PathBuf> {
    let directory = directory_path(run_dir);
    std::fs::create_dir(&directory)?;
    let mut taken = Vec::new();
    if let Some(system) = SYSTEM_DIRECTORIES
        .iter()
        .map(Path::new)
        .find(|dir| dir.is_dir())
    {
        for entry in std::fs::read_dir(system)?.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|name| is_hashed_name(name)) else {
                continue;
            };
            std::os::unix::fs::symlink(entry.path(), directory.join(name))?;
            taken.push(name.to_owned());
        }
    }
    let index = (0..)
        .find(|i| !taken.contains(&format!("{subject_hash}.{i}")))
        .unwrap_or(0);
    crate::files::write_new(
        &directory.join(format!("{subject_hash}.{index}")),
        ca_pem.as_bytes(),
        0o644,
    )?;
    Ok(directory)
}

/// Whether `name` is a hashed directory entry: eight hex digits, a dot, an index
/// (`5ad8a5d6.0`), as `c_rehash` and `openssl rehash` write them.
fn is_hashed_name(name: &str) -> bool {
    let Some((hash, index)) = name.split_once('.') else {
        return false;
    };
    hash.len() == 8
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jvm_store_holds_the_run_ca_first_then_every_system_root() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["sluice run CA".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["a system root".into()]).unwrap();
        std::fs::write(
            bundle_path(dir.path()),
            format!("{}\n{}", ca.cert.pem(), other.cert.pem()),
        )
        .unwrap();
        let path = write_jvm_store(dir.path()).unwrap();
        // Read back (the jail's tests have the JDK itself read it).
        let mut store = jks::KeyStore::new();
        store
            .load(std::fs::File::open(&path).unwrap(), JVM_STORE_PASSWORD)
            .unwrap();
        let run_ca = store
            .get_trusted_certificate_entry("sluice-run-ca")
            .expect("the run CA");
        assert_eq!(run_ca.certificate.content, ca.cert.der().to_vec());
        assert!(store.get_trusted_certificate_entry("system-1").is_ok());
    }

    #[test]
    fn hashed_names_are_recognised_and_other_files_are_not() {
        assert!(is_hashed_name("5ad8a5d6.0"));
        assert!(is_hashed_name("0123abcd.12"));
        for name in [
            "ca-certificates.crt",
            "5ad8a5d6",
            "5ad8a5d6.",
            "5ad8a5d.0",
            "5ad8a5d6.0.pem",
            "ISRG_Root_X1.pem",
        ] {
            assert!(!is_hashed_name(name), "{name}");
        }
    }

    #[test]
    fn the_run_ca_takes_the_first_index_its_hash_leaves_free() {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::write(dir.path(), "-----BEGIN CERTIFICATE-----\n", "0badc0de").unwrap();
        let ca = trust.directory.join("0badc0de.0");
        assert_eq!(
            std::fs::read_to_string(ca).unwrap(),
            "-----BEGIN CERTIFICATE-----\n"
        );
        let names: Vec<&str> = trust.variables().map(|(name, _)| name).collect();
        assert!(names.contains(&"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"));
        assert!(names.contains(&"SSL_CERT_DIR"));
        assert!(trust.variables().all(|(name, _)| is_trust_variable(name)));
    }
}
