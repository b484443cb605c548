//! The environment variables `sluice run` sets for the command itself, and those the
//! workload cannot run without: a secret's variable (its name uppercased) may be none of
//! them, or it would replace sluice's proxy or trust variable with a placeholder, or break
//! the command's `PATH`. The declaration refuses such a secret ([`reserved`]); the launcher
//! sets exactly these lists.
//!
//! # Example
//! ```
//! use sluice_policies::launcher_env::{Reserved, reserved};
//!
//! assert_eq!(reserved("HTTPS_PROXY"), Some(Reserved::Proxy));
//! assert_eq!(reserved("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"), Some(Reserved::Trust));
//! assert_eq!(reserved("PATH"), Some(Reserved::Workload));
//! assert_eq!(reserved("GITHUB_TOKEN"), None);
//! ```

use std::fmt;

/// Variables that point a client at a proxy. `NO_PROXY` and `no_proxy` are set empty.
pub const PROXY_VARIABLES: [&str; 8] = [
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Variables that point a client at a CA bundle file, and who reads each (docs/launcher.md
/// has the same table). The launcher points each at the run bundle, over any inherited
/// value.
pub const CA_BUNDLE_VARIABLES: [&str; 20] = [
    // OpenSSL and what is built on it (Python's ssl, Ruby, PHP, .NET), Go, rustls-native-certs.
    "SSL_CERT_FILE",
    // Python requests.
    "REQUESTS_CA_BUNDLE",
    // curl (and requests, as a fallback).
    "CURL_CA_BUNDLE",
    // Node.js, added to its own store.
    "NODE_EXTRA_CA_CERTS",
    // git.
    "GIT_SSL_CAINFO",
    // pip.
    "PIP_CERT",
    // cargo.
    "CARGO_HTTP_CAINFO",
    // The AWS CLI and SDKs.
    "AWS_CA_BUNDLE",
    // npm's `cafile` replaces Node's store (so NODE_EXTRA_CA_CERTS is ignored) when a global
    // npmrc sets one, as Debian's does; the variable overrides every npmrc. npm reads it in
    // either case.
    "npm_config_cafile",
    "NPM_CONFIG_CAFILE",
    // gRPC core (Python, Ruby, C++, PHP): without it, gRPC uses its own roots.
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    // gcloud.
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    // httplib2 (google-api-python-client), which carries its own roots otherwise.
    "HTTPLIB2_CA_CERTS",
    // Nix.
    "NIX_SSL_CERT_FILE",
    // Deno, added to its own store.
    "DENO_CERT",
    // Bundler.
    "BUNDLE_SSL_CA_CERT",
    // Composer.
    "COMPOSER_CAFILE",
    // Elixir's Hex.
    "HEX_CACERTS_PATH",
    // Python's websocket-client.
    "WEBSOCKET_CLIENT_CA_BUNDLE",
    // Yarn 2 and later (`caFilePath`).
    "YARN_CA_FILE_PATH",
];

/// Variables that point a client at a hashed certificate directory (`<hash>.0` files).
pub const CA_DIRECTORY_VARIABLES: [&str; 2] = [
    // OpenSSL's lookup by subject hash, Go and rustls-native-certs (which read every file).
    "SSL_CERT_DIR",
    // git's `http.sslCAPath`.
    "GIT_SSL_CAPATH",
];

/// Variables the workload needs to run at all, inherited as they are.
pub const WORKLOAD_VARIABLES: [&str; 4] = ["PATH", "HOME", "USER", "SHELL"];

/// Why a variable name is not a secret's to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// sluice points the command's clients at its proxy with it.
    Proxy,
    /// sluice points the command's clients at the run CA with it.
    Trust,
    /// The workload needs it to run.
    Workload,
}

impl fmt::Display for Reserved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Proxy => "a proxy variable sluice sets for the command",
            Self::Trust => "a CA-trust variable sluice sets for the command",
            Self::Workload => "a variable the workload needs",
        })
    }
}

/// Whether a variable named `name` (compared without regard to ASCII case, as the secret's
/// variable is uppercased) is one of these.
pub fn reserved(name: &str) -> Option<Reserved> {
    let is = |list: &[&str]| list.iter().any(|v| v.eq_ignore_ascii_case(name));
    if is(&PROXY_VARIABLES) {
        Some(Reserved::Proxy)
    } else if is(&CA_BUNDLE_VARIABLES) || is(&CA_DIRECTORY_VARIABLES) {
        Some(Reserved::Trust)
    } else if is(&WORKLOAD_VARIABLES) {
        Some(Reserved::Workload)
    } else {
        None
    }
}
