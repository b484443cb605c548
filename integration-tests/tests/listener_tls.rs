//! The TLS sluice terminates inside a CONNECT tunnel: only TLS 1.2 and 1.3, only
//! forward-secret AEAD suites, no compression, no renegotiation, and the certificate is the
//! run CA's leaf for the CONNECT host and no other.
//!
//! Two kinds of probe, both through a real proxy's CONNECT tunnel: `openssl s_client`
//! (`-proxy`, `-proxy_user`, `-proxy_pass`) for everything OpenSSL 3 can still offer, and
//! hand-built ClientHellos for what it no longer can (SSLv3, RC4, 3DES, EXPORT, DEFLATE
//! compression), answered by the proxy's first record (a ServerHello or an alert). After the
//! probes the service still serves a request, and none of the probes reached the upstream.

use std::time::Duration;

use sluice_integration_tests::{Curl, RecordingUpstream, TestPki, TestProxy, client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

const HOST: &str = "api.test";

const DECLARATION: &str = r#"
version: 1
egress:
  allow: [api.test]
  allow_ips: ["127.0.0.1/32"]
"#;

async fn setup() -> (TestPki, RecordingUpstream, TestProxy) {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &[HOST], &[b"http/1.1"]).await;
    let proxy = TestProxy::start(DECLARATION, &pki, &[HOST]).await;
    (pki, upstream, proxy)
}

/// What one `openssl s_client` run printed.
struct Probe {
    success: bool,
    /// stdout and stderr together.
    output: String,
}

impl Probe {
    /// The protocol and suite of `New, TLSv1.3, Cipher is X`, unless the handshake failed.
    fn negotiated(&self) -> Option<(String, String)> {
        let line = self.output.lines().find(|l| l.starts_with("New, "))?;
        let rest = line.strip_prefix("New, ")?;
        let (protocol, cipher) = rest.split_once(", Cipher is ")?;
        (cipher != "(NONE)").then(|| (protocol.to_owned(), cipher.trim().to_owned()))
    }

    fn describe(&self) -> String {
        format!("success={} output:\n{}", self.success, self.output)
    }
}

/// `openssl s_client` through the proxy to `HOST:port`, trusting the run CA alone and
/// checking the host name, with `extra` options and `input` on stdin. Stdin stays open
/// while `keep_stdin_open` (so a command such as `R` runs before s_client quits).
async fn s_client(
    proxy: &TestProxy,
    port: u16,
    extra: &[&str],
    input: &str,
    keep_stdin_open: bool,
) -> Probe {
    let url = proxy.url();
    let userinfo = url
        .trim_start_matches("http://")
        .split('@')
        .next()
        .unwrap_or_default();
    let (user, token) = userinfo.split_once(':').expect("proxy URL has credentials");
    let ca = proxy.ca_path();
    let mut command = Command::new("openssl");
    command
        .arg("s_client")
        .args(["-proxy", &proxy.addr().to_string()])
        .args(["-proxy_user", user])
        // The token through the environment, not argv.
        .args(["-proxy_pass", "env:SLUICE_TEST_PROXY_TOKEN"])
        .env("SLUICE_TEST_PROXY_TOKEN", token)
        .args(["-connect", &format!("{HOST}:{port}")])
        .args(["-servername", HOST])
        .arg("-CAfile")
        .arg(&ca)
        .args(["-no-CApath", "-no-CAstore"])
        .args(["-verify_return_error", "-verify_hostname", HOST])
        .args(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .expect("openssl must be installed (.ci/run installs it)");
    let mut stdin = child.stdin.take().expect("stdin piped");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    let held = if keep_stdin_open {
        Some(stdin)
    } else {
        drop(stdin);
        None
    };
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("openssl s_client finished within 60 s")
        .expect("openssl s_client ran");
    drop(held);
    Probe {
        success: out.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Runs `openssl x509` over the first certificate in `pem_text`, printing `args`.
async fn x509(pem_text: &str, args: &[&str]) -> String {
    let start = pem_text
        .find("-----BEGIN CERTIFICATE-----")
        .expect("s_client printed the server certificate");
    let mut child = Command::new("openssl")
        .arg("x509")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("openssl x509");
    let mut stdin = child.stdin.take().expect("stdin piped");
    stdin
        .write_all(&pem_text.as_bytes()[start..])
        .await
        .expect("write certificate");
    drop(stdin);
    let out = child.wait_with_output().await.expect("openssl x509 ran");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_3_and_1_2_with_aead_suites_are_accepted_with_the_run_ca_leaf() {
    let (_pki, upstream, proxy) = setup().await;
    let port = upstream.port();
    // Each TLS 1.3 suite rustls offers, and the strong TLS 1.2 ECDHE + AEAD suites.
    let accepted: &[(&[&str], &str, &str)] = &[
        (&["-tls1_3"], "TLSv1.3", ""),
        (
            &["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"],
            "TLSv1.3",
            "TLS_AES_128_GCM_SHA256",
        ),
        (
            &["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"],
            "TLSv1.3",
            "TLS_AES_256_GCM_SHA384",
        ),
        (
            &["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"],
            "TLSv1.3",
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
        (
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"],
            "TLSv1.2",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
        (
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"],
            "TLSv1.2",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
        ),
        (
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"],
            "TLSv1.2",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
        ),
    ];
    for (args, protocol, cipher) in accepted {
        let probe = s_client(&proxy, port, args, "", false).await;
        let negotiated = probe.negotiated();
        let (got_protocol, got_cipher) = negotiated
            .clone()
            .unwrap_or_else(|| panic!("{args:?} refused: {}", probe.describe()));
        assert_eq!(got_protocol, *protocol, "{args:?}: {}", probe.describe());
        if !cipher.is_empty() {
            assert_eq!(got_cipher, *cipher, "{args:?}: {}", probe.describe());
        }
        // The chain verified against the run CA alone, for the CONNECT host's name.
        assert!(
            probe.output.contains("Verify return code: 0 (ok)"),
            "{args:?}: {}",
            probe.describe()
        );
        assert!(
            probe.output.contains("Compression: NONE"),
            "{args:?}: {}",
            probe.describe()
        );
        assert!(
            probe.output.contains("issuer=CN = sluice run CA"),
            "{args:?}: {}",
            probe.describe()
        );
    }
    // The leaf names exactly the CONNECT host, is no CA, and serves TLS servers only.
    let probe = s_client(&proxy, port, &["-tls1_3"], "", false).await;
    let extensions = x509(
        &probe.output,
        &[
            "-noout",
            "-ext",
            "subjectAltName,basicConstraints,extendedKeyUsage",
        ],
    )
    .await;
    let names: Vec<&str> = extensions
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("DNS:") || w.starts_with("IP"))
        .collect();
    assert_eq!(names, [format!("DNS:{HOST}")], "{extensions}");
    assert!(extensions.contains("CA:FALSE"), "{extensions}");
    assert!(
        extensions.contains("TLS Web Server Authentication"),
        "{extensions}"
    );
    // Handshakes only: nothing reached the upstream.
    assert!(upstream.records().is_empty());
    assert_still_serves(&proxy, &upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_protocols_and_weak_suites_are_refused() {
    let (_pki, upstream, proxy) = setup().await;
    let port = upstream.port();
    // `@SECLEVEL=0` lets OpenSSL 3 offer what its defaults no longer would.
    let refused: &[(&str, &[&str])] = &[
        ("TLS 1.0", &["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
        ("TLS 1.1", &["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
        (
            "CBC with SHA-1",
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:@SECLEVEL=0",
            ],
        ),
        (
            "CBC with SHA-2",
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384:@SECLEVEL=0",
            ],
        ),
        (
            "NULL encryption",
            &["-tls1_2", "-cipher", "eNULL:@SECLEVEL=0"],
        ),
        ("anonymous", &["-tls1_2", "-cipher", "aNULL:@SECLEVEL=0"]),
        (
            "static RSA key exchange",
            &["-tls1_2", "-cipher", "kRSA:@SECLEVEL=0"],
        ),
        (
            "CCM with an 8-byte tag (TLS 1.2)",
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-CCM8:@SECLEVEL=0"],
        ),
        (
            "CCM with an 8-byte tag (TLS 1.3)",
            &["-tls1_3", "-ciphersuites", "TLS_AES_128_CCM_8_SHA256"],
        ),
    ];
    for (what, args) in refused {
        let probe = s_client(&proxy, port, args, "", false).await;
        assert!(
            !probe.output.contains("no cipher match")
                && !probe.output.contains("no ciphers available"),
            "{what}: OpenSSL could not offer it, so this probes nothing: {}",
            probe.describe()
        );
        assert!(
            !probe.success && probe.negotiated().is_none(),
            "{what} was accepted: {}",
            probe.describe()
        );
        // Refused by the server with an alert, not a client that gave up on its own.
        assert!(
            probe.output.contains("alert"),
            "{what}: {}",
            probe.describe()
        );
    }
    assert!(upstream.records().is_empty());
    assert_still_serves(&proxy, &upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_initiated_renegotiation_is_refused() {
    let (_pki, upstream, proxy) = setup().await;
    // `R` asks s_client to renegotiate once the handshake is done; stdin stays open so
    // that it does not quit first.
    let probe = s_client(&proxy, upstream.port(), &["-tls1_2"], "R\n", true).await;
    let (protocol, _) = probe
        .negotiated()
        .unwrap_or_else(|| panic!("the first handshake failed: {}", probe.describe()));
    assert_eq!(protocol, "TLSv1.2");
    assert!(
        probe.output.contains("RENEGOTIATING"),
        "{}",
        probe.describe()
    );
    assert!(
        probe.output.contains("no renegotiation"),
        "the renegotiation was not refused: {}",
        probe.describe()
    );
    assert!(upstream.records().is_empty());
    assert_still_serves(&proxy, &upstream).await;
}

/// Cipher suite code points, for the hand-built ClientHellos.
mod suite {
    pub(super) const ECDHE_ECDSA_AES128_GCM_SHA256: u16 = 0xc02b;
    pub(super) const ECDHE_ECDSA_RC4_128_SHA: u16 = 0xc007;
    pub(super) const ECDHE_RSA_RC4_128_SHA: u16 = 0xc011;
    pub(super) const RSA_RC4_128_SHA: u16 = 0x0005;
    pub(super) const RSA_RC4_128_MD5: u16 = 0x0004;
    pub(super) const ECDHE_ECDSA_3DES_EDE_CBC_SHA: u16 = 0xc008;
    pub(super) const ECDHE_RSA_3DES_EDE_CBC_SHA: u16 = 0xc012;
    pub(super) const RSA_3DES_EDE_CBC_SHA: u16 = 0x000a;
    pub(super) const RSA_EXPORT_RC4_40_MD5: u16 = 0x0003;
    pub(super) const RSA_EXPORT_DES40_CBC_SHA: u16 = 0x0008;
    pub(super) const DHE_RSA_EXPORT_DES40_CBC_SHA: u16 = 0x0014;
    pub(super) const RSA_AES128_SHA: u16 = 0x002f;
}

/// A ClientHello record: `version` in the record and the hello, `suites`, `compression`
/// methods, SNI for [`HOST`], and the extensions a TLS 1.2 ECDHE client sends.
fn client_hello(version: u16, suites: &[u16], compression: &[u8]) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut extensions = Vec::new();
    let mut sni = Vec::new();
    sni.extend_from_slice(&((HOST.len() + 3) as u16).to_be_bytes());
    sni.push(0);
    sni.extend_from_slice(&(HOST.len() as u16).to_be_bytes());
    sni.extend_from_slice(HOST.as_bytes());
    ext(&mut extensions, 0x0000, &sni);
    // supported_groups: x25519, secp256r1.
    ext(&mut extensions, 0x000a, &[0, 4, 0x00, 0x1d, 0x00, 0x17]);
    // ec_point_formats: uncompressed.
    ext(&mut extensions, 0x000b, &[1, 0]);
    // signature_algorithms: ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256.
    ext(
        &mut extensions,
        0x000d,
        &[0, 6, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01],
    );
    // renegotiation_info, empty (initial handshake).
    ext(&mut extensions, 0xff01, &[0]);
    let mut hello = Vec::new();
    hello.extend_from_slice(&version.to_be_bytes());
    hello.extend_from_slice(&[0x5a; 32]); // random
    hello.push(0); // no session id
    hello.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for suite in suites {
        hello.extend_from_slice(&suite.to_be_bytes());
    }
    hello.push(compression.len() as u8);
    hello.extend_from_slice(compression);
    hello.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    hello.extend_from_slice(&extensions);
    let mut handshake = vec![1]; // client_hello
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16];
    record.extend_from_slice(&version.to_be_bytes());
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

/// How the proxy answered a hand-built ClientHello.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// A ServerHello choosing this version, suite and compression method.
    ServerHello {
        version: u16,
        suite: u16,
        compression: u8,
    },
    /// An alert (level, description).
    Alert(u8, u8),
    /// The connection closed without a record.
    Closed,
}

/// Opens a tunnel to `HOST:port`, sends `hello`, reads the first record back.
async fn probe_hello(proxy: &TestProxy, port: u16, hello: &[u8]) -> Answer {
    let auth = client::basic_auth(&proxy.url());
    let mut tunnel = client::connect(proxy.addr(), &format!("{HOST}:{port}"), Some(&auth))
        .await
        .expect("CONNECT accepted");
    tunnel.write_all(hello).await.expect("send ClientHello");
    let read = async {
        let mut head = [0u8; 5];
        if tunnel.read_exact(&mut head).await.is_err() {
            return Answer::Closed;
        }
        let len = u16::from_be_bytes([head[3], head[4]]) as usize;
        let mut body = vec![0u8; len];
        if tunnel.read_exact(&mut body).await.is_err() {
            return Answer::Closed;
        }
        match head[0] {
            0x15 if body.len() >= 2 => Answer::Alert(body[0], body[1]),
            0x16 => parse_server_hello(&body).expect("a well-formed ServerHello"),
            other => panic!("unexpected record type {other:#x}: {body:?}"),
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the proxy answered within 30 s")
}

fn parse_server_hello(body: &[u8]) -> Option<Answer> {
    // type(1) length(3) version(2) random(32) session_id(1+n) suite(2) compression(1)
    if *body.first()? != 2 {
        return None;
    }
    let mut at = 4;
    let mut version = u16::from_be_bytes([*body.get(at)?, *body.get(at + 1)?]);
    at += 2 + 32;
    at += 1 + *body.get(at)? as usize;
    let suite = u16::from_be_bytes([*body.get(at)?, *body.get(at + 1)?]);
    let compression = *body.get(at + 2)?;
    at += 3;
    // TLS 1.3 says its version in supported_versions.
    if let (Some(a), Some(b)) = (body.get(at), body.get(at + 1)) {
        let end = (at + 2 + u16::from_be_bytes([*a, *b]) as usize).min(body.len());
        at += 2;
        while at + 4 <= end {
            let kind = u16::from_be_bytes([body[at], body[at + 1]]);
            let len = u16::from_be_bytes([body[at + 2], body[at + 3]]) as usize;
            if kind == 0x002b && len == 2 && at + 6 <= end {
                version = u16::from_be_bytes([body[at + 4], body[at + 5]]);
            }
            at += 4 + len;
        }
    }
    Some(Answer::ServerHello {
        version,
        suite,
        compression,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_built_hellos_for_sslv3_rc4_3des_export_and_compression_are_refused() {
    let (_pki, upstream, proxy) = setup().await;
    let port = upstream.port();
    // The control: the builder's hello is sound, and offered DEFLATE beside null, the
    // proxy picks null.
    let control = client_hello(0x0303, &[suite::ECDHE_ECDSA_AES128_GCM_SHA256], &[1, 0]);
    assert_eq!(
        probe_hello(&proxy, port, &control).await,
        Answer::ServerHello {
            version: 0x0303,
            suite: suite::ECDHE_ECDSA_AES128_GCM_SHA256,
            compression: 0,
        }
    );
    let refused: &[(&str, Vec<u8>)] = &[
        (
            "SSLv3",
            client_hello(
                0x0300,
                &[
                    suite::RSA_AES128_SHA,
                    suite::RSA_3DES_EDE_CBC_SHA,
                    suite::RSA_RC4_128_SHA,
                ],
                &[0],
            ),
        ),
        (
            "RC4",
            client_hello(
                0x0303,
                &[
                    suite::ECDHE_ECDSA_RC4_128_SHA,
                    suite::ECDHE_RSA_RC4_128_SHA,
                    suite::RSA_RC4_128_SHA,
                    suite::RSA_RC4_128_MD5,
                ],
                &[0],
            ),
        ),
        (
            "3DES",
            client_hello(
                0x0303,
                &[
                    suite::ECDHE_ECDSA_3DES_EDE_CBC_SHA,
                    suite::ECDHE_RSA_3DES_EDE_CBC_SHA,
                    suite::RSA_3DES_EDE_CBC_SHA,
                ],
                &[0],
            ),
        ),
        (
            "EXPORT",
            client_hello(
                0x0303,
                &[
                    suite::RSA_EXPORT_RC4_40_MD5,
                    suite::RSA_EXPORT_DES40_CBC_SHA,
                    suite::DHE_RSA_EXPORT_DES40_CBC_SHA,
                ],
                &[0],
            ),
        ),
        (
            "DEFLATE compression only",
            client_hello(0x0303, &[suite::ECDHE_ECDSA_AES128_GCM_SHA256], &[1]),
        ),
    ];
    for (what, hello) in refused {
        let answer = probe_hello(&proxy, port, hello).await;
        assert!(
            matches!(answer, Answer::Alert(2, _) | Answer::Closed),
            "{what}: expected a fatal alert or a closed connection, got {answer:?}"
        );
    }
    assert!(upstream.records().is_empty());
    assert_still_serves(&proxy, &upstream).await;
}

/// A real request through the proxy still gets through, and is the only one the upstream
/// ever saw.
async fn assert_still_serves(proxy: &TestProxy, upstream: &RecordingUpstream) {
    let url = format!("https://{HOST}:{}/after", upstream.port());
    let ca = proxy.ca_path();
    let proxy_url = proxy.url();
    let out = tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).get(&url))
        .await
        .expect("curl task");
    assert_eq!(out.status, 200, "{out:?}");
    let records = upstream.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].uri.path(), "/after");
}
