//! Tests of the demo's parts: the declaration, the run directory, the narrator's
//! withholding, the wrap, the audit-line form, the sandbox client's credentials, and the
//! stand-in API answering over a direct TLS connection (HTTP/1.1 and HTTP/2).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use sluice_policies::{Policy, Source};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use zeroize::Zeroizing;

use super::api::{Api, ApiPki, Received};
use super::client::Sandbox;
use super::narrate::{Narrator, audit_line, wrap};
use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123";

fn token() -> Arc<Zeroizing<String>> {
    Arc::new(Zeroizing::new(TOKEN.to_owned()))
}

// --- the declaration ---

#[test]
fn declaration_loads_granting_the_api_host_only_from_the_token_file() {
    let loaded = Policy::parse(&declaration(Path::new("/run/demo/demo_token")), "demo.yaml")
        .expect("the demo's declaration has no errors");
    assert!(
        loaded.warnings.is_empty(),
        "the demo's declaration should be lint-clean: {:?}",
        loaded.warnings
    );
    let policy = loaded.policy;
    let secret = policy.secret(SECRET).expect("demo_token is declared");
    assert!(
        matches!(secret.source(), Source::File(p) if p == Path::new("/run/demo/demo_token")),
        "the token is read from its file"
    );
    let hosts: Vec<&str> = secret.hosts().iter().map(|h| h.name()).collect();
    assert_eq!(hosts, [API_HOST]);
    let allowed: Vec<&str> = policy.allow().iter().map(|h| h.name()).collect();
    assert_eq!(allowed, [OTHER_HOST]);
    assert!(policy.ip_allowed("127.0.0.1".parse().expect("ip")));
    assert!(!policy.ip_allowed("127.0.0.2".parse().expect("ip")));
}

#[test]
fn declaration_quotes_awkward_run_directory_paths() {
    let path = Path::new("/tmp/a dir: with \"quotes\" # and a hash/demo_token");
    let loaded = Policy::parse(&declaration(path), "demo.yaml").expect("still valid YAML");
    let secret = loaded
        .policy
        .secret(SECRET)
        .expect("demo_token is declared");
    assert!(matches!(secret.source(), Source::File(p) if p == path));
}

#[test]
fn declaration_has_no_literal_value() {
    let yaml = declaration(Path::new("/x/demo_token"));
    assert!(!yaml.contains("value:"), "{yaml}");
}

// --- the run directory and the token ---

#[test]
fn run_directory_is_private_and_removed_unless_kept() {
    use std::os::unix::fs::PermissionsExt;
    let mut sink = Vec::new();
    let mut say = Narrator::new(&mut sink, token());

    let removed = RunDir::create(false).expect("run dir");
    let path = removed.path().to_owned();
    let mode = fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    removed.close(&mut say).expect("close");
    assert!(!path.exists(), "{} should be gone", path.display());

    let kept = RunDir::create(true).expect("run dir");
    let path = kept.path().to_owned();
    kept.close(&mut say).expect("close");
    assert!(path.exists(), "{} should stay", path.display());
    fs::remove_dir_all(&path).expect("clean up");
    let told = String::from_utf8(sink).expect("utf-8");
    assert!(told.contains(&path.display().to_string()), "{told}");
}

#[test]
fn tokens_are_long_random_and_distinct() {
    let a = mint_token().expect("token");
    let b = mint_token().expect("token");
    assert_eq!(a.len(), TOKEN_BYTES * 2);
    assert!(a.len() >= 24);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a.as_str(), b.as_str());
}

#[test]
fn token_file_is_created_0600_and_never_overwritten() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(TOKEN_FILE);
    write_new(&path, b"first", 0o600).expect("write");
    let mode = fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(write_new(&path, b"second", 0o600).is_err());
    assert_eq!(fs::read(&path).expect("read"), b"first");
}

// --- the narrator ---

#[test]
fn narrator_withholds_the_value_wherever_it_appears() {
    let mut out = Vec::new();
    let mut say = Narrator::new(&mut out, token());
    say.line(format!("body: {{\"token\":\"{TOKEN}\"}} and again {TOKEN}"))
        .expect("write");
    say.wrapped("NOT AS EXPECTED: ", &format!("leaked {TOKEN}"))
        .expect("write");
    say.block(&format!("a\n{TOKEN}\n")).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains(TOKEN), "{text}");
    assert!(!text.contains(&TOKEN[..8]), "{text}");
    assert_eq!(
        text.matches("[REAL VALUE WITHHELD: 36 characters]").count(),
        4
    );
}

#[test]
fn narrator_leaves_text_without_the_value_alone() {
    let mut out = Vec::new();
    let mut say = Narrator::new(&mut out, token());
    assert_eq!(say.shown("SLUICE_DEMO_TOKEN_abc"), "SLUICE_DEMO_TOKEN_abc");
    say.line("plain").expect("write");
    assert_eq!(out, b"plain\n");
}

#[test]
fn narrator_detects_the_value_in_bytes() {
    let mut out = Vec::new();
    let say = Narrator::new(&mut out, token());
    assert!(say.holds_token(format!("x{TOKEN}y").as_bytes()));
    assert!(!say.holds_token(&TOKEN.as_bytes()[1..]));
    assert!(!say.holds_token(b""));
}

#[test]
fn step_headings_name_number_and_title() {
    let mut out = Vec::new();
    let mut say = Narrator::new(&mut out, token());
    say.step(Step::Refuse).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(
        text,
        "\n== Step 3: the placeholder toward another host, refused ==\n"
    );
    assert_eq!(
        Step::ALL.map(Step::number),
        [1, 2, 3, 4],
        "steps are numbered in the order told"
    );
}

#[test]
fn failures_name_their_step() {
    let failure = StepFailure {
        step: Step::Swap,
        problems: vec!["a".into(), "b".into()],
    };
    assert_eq!(
        failure.to_string(),
        "step 1, a placeholder swapped toward the granted host: a; b"
    );
    let error = DemoError::Steps(vec![failure]);
    assert!(error.to_string().starts_with("1 of 4 steps"), "{error}");
}

// --- wrapping ---

#[test]
fn wrap_keeps_lines_short_and_words_whole() {
    let text = "word ".repeat(60);
    let lines = wrap("ok: ", &text);
    assert!(lines.len() > 1);
    assert!(lines[0].starts_with("ok: word"));
    for line in &lines[1..] {
        assert!(line.starts_with("    word"), "{line:?}");
    }
    for line in &lines {
        assert!(line.chars().count() <= 92, "{line:?}");
    }
    let words: usize = lines.iter().map(|l| l.matches("word").count()).sum();
    assert_eq!(words, 60);
}

#[test]
fn wrap_keeps_an_overlong_word_on_its_own_line() {
    let long = "x".repeat(120);
    let lines = wrap("", &format!("a {long} b"));
    assert_eq!(lines, vec!["a".to_owned(), long, "b".to_owned()]);
}

#[test]
fn wrap_of_nothing_is_the_prefix() {
    assert_eq!(wrap("p: ", ""), vec!["p: ".to_owned()]);
}

// --- audit lines ---

#[test]
fn audit_lines_read_as_sentences() {
    let swap = r#"{"seq":2,"ts":"t","run_id":"r","event":"swap","secret":"demo_token","host":"api.demo.test","method":"GET","path":"/v1/whoami","location":"header:authorization","prev":"00112233445566778899"}"#;
    assert_eq!(
        audit_line(swap),
        "  2 swap      demo_token  api.demo.test  GET /v1/whoami  in header:authorization  (prev 001122334455…)"
    );
    let refuse = r#"{"seq":4,"event":"refuse","secret":"demo_token","host":"other.demo.test","reason":"not granted","prev":"ab"}"#;
    assert_eq!(
        audit_line(refuse),
        "  4 refuse    demo_token  other.demo.test  \"not granted\"  (prev ab…)"
    );
    let redact = r#"{"seq":3,"event":"redact","secret":"demo_token","count":1,"prev":"ab"}"#;
    assert!(audit_line(redact).contains("×1"));
    let stop = r#"{"seq":5,"event":"stop","counts":{"swap":1,"refuse":0,"redact":2},"prev":"ab"}"#;
    assert_eq!(
        audit_line(stop),
        "  5 stop      swap 1, redact 2  (prev ab…)"
    );
    let quiet = r#"{"seq":2,"event":"stop","counts":{"swap":0},"prev":"ab"}"#;
    assert_eq!(audit_line(quiet), "  2 stop      no events  (prev ab…)");
    let start = r#"{"seq":1,"event":"start","run_id":"r1","version":"0.1.0","policy_sha256":"aaaaaaaaaaaaaaaa","ca_sha256":"bbbbbbbbbbbbbbbb","prev":"cc"}"#;
    assert_eq!(
        audit_line(start),
        "  1 start     run r1  sluice 0.1.0  policy sha256:aaaaaaaaaaaa…  CA sha256:bbbbbbbbbbbb…  (prev cc…)"
    );
}

#[test]
fn audit_lines_cannot_drive_the_terminal() {
    let line = "{\"seq\":2,\"event\":\"refuse\",\"reason\":\"a\\u001b[2Jb\",\"prev\":\"x\"}";
    let shown = audit_line(line);
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    assert!(shown.contains("a\u{fffd}[2Jb"), "{shown:?}");
    assert_eq!(audit_line("not json\u{7}"), "not json\u{fffd}");
}

// --- the sandbox client ---

#[test]
fn sandbox_needs_credentials_in_the_proxy_url() {
    let pki = ApiPki::mint(&[API_HOST]).expect("pki");
    let addr = "127.0.0.1:9".parse().expect("addr");
    let error = Sandbox::new(addr, "http://127.0.0.1:9", pki.ca_pem())
        .err()
        .expect("refused");
    assert!(error.contains("no credentials"), "{error}");
    assert!(Sandbox::new(addr, "http://u:t@127.0.0.1:9", pki.ca_pem()).is_ok());
    let error = Sandbox::new(addr, "http://u:t@127.0.0.1:9", "not a pem")
        .err()
        .expect("refused");
    assert!(error.contains("no certificate"), "{error}");
}

#[tokio::test]
async fn sandbox_reports_a_refused_connect_with_its_status() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.expect("accept");
        let mut buf = [0u8; 1024];
        let _ = tcp.read(&mut buf).await;
        let _ = tcp
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
            .await;
    });
    let pki = ApiPki::mint(&[API_HOST]).expect("pki");
    let sandbox = Sandbox::new(addr, "http://u:t@127.0.0.1:1", pki.ca_pem()).expect("client");
    let error = sandbox
        .get(API_HOST, 443, "/", None)
        .await
        .expect_err("refused");
    assert!(error.contains("407"), "{error}");
    assert!(!error.contains("u:t"), "{error}");
}

// --- the stand-in API ---

/// A direct client of the API (no proxy), trusting its test CA, speaking `alpn`.
async fn ask_api(
    api: &Api,
    pki: &ApiPki,
    host: &str,
    path: &str,
    authorization: Option<&str>,
    alpn: &[u8],
) -> (StatusCode, String) {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pki.ca_pem().as_bytes()) {
        roots.add(cert.expect("pem")).expect("root");
    }
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(api.addr()).await.expect("connect");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(host.to_owned()).expect("name"), tcp)
        .await
        .expect("the API's certificate verifies against its test CA");
    let mut request = Request::get(format!("https://{host}:{}{path}", api.port()));
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let request = request.body(Empty::<Bytes>::new()).expect("request");
    let io = TokioIo::new(tls);
    let response = if alpn == b"h2" {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .expect("h2");
        tokio::spawn(conn);
        send.send_request(request).await.expect("response")
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
        tokio::spawn(conn);
        let (mut parts, body) = request.into_parts();
        parts.uri = path.parse().expect("path");
        parts.headers.insert(
            header::HOST,
            format!("{host}:{}", api.port()).parse().expect("host"),
        );
        send.send_request(Request::from_parts(parts, body))
            .await
            .expect("response")
    };
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn api_accepts_only_the_real_token_and_says_what_it_received() {
    let pki = ApiPki::mint(&[API_HOST, OTHER_HOST]).expect("pki");
    let api = Api::start(&pki, token()).await.expect("api");
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let (status, body) = ask_api(
            &api,
            &pki,
            API_HOST,
            "/v1/whoami",
            Some(&format!("Bearer {TOKEN}")),
            alpn,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains(r#""user":"demo""#), "{body}");
        assert!(body.contains("the real token (36 characters)"), "{body}");
        assert!(
            !body.contains(TOKEN),
            "whoami never echoes the token: {body}"
        );

        let (status, body) = ask_api(
            &api,
            &pki,
            API_HOST,
            "/v1/whoami",
            Some("Bearer SLUICE_DEMO_TOKEN_x"),
            alpn,
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body.contains("Bearer SLUICE_DEMO_TOKEN_x"), "{body}");

        let (status, body) = ask_api(&api, &pki, OTHER_HOST, "/v1/whoami", None, alpn).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(body.contains("no Authorization header"), "{body}");
    }
    let seen = api.seen();
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[0].host, API_HOST);
    assert_eq!(seen[0].path, "/v1/whoami");
    assert_eq!(seen[0].authorization, Received::RealToken);
    assert_eq!(
        seen[1].authorization,
        Received::Other("Bearer SLUICE_DEMO_TOKEN_x".into())
    );
    assert_eq!(seen[2].host, OTHER_HOST);
    assert_eq!(seen[2].authorization, Received::Nothing);
    assert_eq!(seen[3].host, API_HOST, "HTTP/2 :authority is read too");
}

#[tokio::test]
async fn api_token_endpoint_leaks_the_token_and_odd_forms_are_not_echoed() {
    let pki = ApiPki::mint(&[API_HOST]).expect("pki");
    let api = Api::start(&pki, token()).await.expect("api");
    let (status, body) = ask_api(&api, &pki, API_HOST, "/v1/token", None, b"http/1.1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(TOKEN), "the leak the demo redacts: {body}");

    let (status, body) = ask_api(
        &api,
        &pki,
        API_HOST,
        "/v1/whoami",
        Some(&format!("Token {TOKEN}")),
        b"http/1.1",
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.contains(TOKEN), "{body}");
    assert_eq!(api.seen()[1].authorization, Received::TokenInAnotherForm);

    let (status, _) = ask_api(&api, &pki, API_HOST, "/nope", None, b"http/1.1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
