//! WebSocket frames through the real `sluice serve` binary: Python's `websockets` as the
//! echo server (`python/ws_echo.py`) and as the client (`python/ws_client.py`), with and
//! without permessage-deflate. A placeholder sent in a message reaches the upstream as its
//! value; the value coming back, in one frame, fragmented or compressed, reaches the client
//! as its placeholder; a placeholder toward an ungranted host closes the connection with
//! `1008` before the message leaves; so does a frame no negotiated extension explains.
//! Over HTTP/2 (RFC 8441 extended CONNECT, hyper's client with tokio-tungstenite's framing)
//! the same messages get the same scan.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use sluice_integration_tests::launch::python_venv;
use sluice_integration_tests::{ServeBinary, TestPki};

const TOKEN: &str = "ws-REAL-token-0123456789abcdef";

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// The Python echo server for `names`, killed when dropped.
struct EchoServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl EchoServer {
    fn start(pki: &TestPki, names: &[&str]) -> Self {
        let (cert, key) = pki.leaf_files(names);
        let log = pki.dir().join(format!("{}-ws.jsonl", names[0]));
        let mut child = Command::new(python_venv().join("bin/python"))
            .arg(script("ws_echo.py"))
            .args([&cert, &key, &log])
            .env("EXPECTED_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the WebSocket server starts");
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut first,
        )
        .expect("the WebSocket server prints its port");
        let port = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the WebSocket server printed {first:?}, not a port"));
        Self { child, port, log }
    }

    /// What the server logged: one entry per connection opened and per message received.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }

    /// The messages the server received.
    fn messages(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| e.get("opened").is_none())
            .collect()
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the Python client against `wss://host:port/path` through `serve` with `messages`,
/// and returns what it printed, one JSON value per line.
fn client(serve: &ServeBinary, url: &str, compression: &str, messages: &Value) -> Vec<Value> {
    let proxy = serve.proxy();
    let out = Command::new(python_venv().join("bin/python"))
        .arg(script("ws_client.py"))
        .args([url, &proxy.url])
        .arg(&proxy.ca)
        .args([compression, &messages.to_string()])
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("the WebSocket client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains(TOKEN),
        "the client received the token: {stdout}"
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn replies(printed: &[Value]) -> Vec<String> {
    printed
        .iter()
        .filter_map(|e| e.get("reply").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

struct World {
    pki: TestPki,
    granted: EchoServer,
    other: EchoServer,
    serve: ServeBinary,
}

impl World {
    fn new() -> Self {
        Self::with_grant("")
    }

    /// The world with `more` (YAML keys, indented as the secret's) added to the secret.
    fn with_grant(more: &str) -> Self {
        let pki = TestPki::new();
        let granted = EchoServer::start(&pki, &["api.test"]);
        let other = EchoServer::start(&pki, &["other.test"]);
        let yaml = format!(
            "version: 1\nsecrets:\n  ws:\n    value: \"{TOKEN}\"\n    hosts: [api.test]\n    in: [header, body]\n{more}egress:\n  allow: [other.test]\n  allow_ips: [\"127.0.0.1/32\"]\n"
        );
        let serve = ServeBinary::start(&yaml, &pki, &["api.test", "other.test"], &[]);
        Self {
            pki,
            granted,
            other,
            serve,
        }
    }

    fn url(&self, host: &str) -> String {
        let port = match host {
            "api.test" => self.granted.port,
            _ => self.other.port,
        };
        format!("wss://{host}:{port}/socket")
    }
}

#[test]
fn messages_are_swapped_out_and_redacted_back_however_they_are_framed() {
    let world = World::new();
    let placeholder = world.serve.placeholder("WS");
    let messages = json!([
        { "text": format!("echo:token={placeholder}") },
        // The placeholder cut across three frames of one message.
        { "fragments": ["echo:tok", format!("en={}", &placeholder[..5]), placeholder[5..].to_owned()] },
        { "text": "leak" },
        { "text": "leak-fragments" },
        { "text": format!("fragments:and {placeholder} once more") },
        { "binary": hex(format!("bin {placeholder}").as_bytes()) },
        // A ping from the upstream, and the client's pong back, cross as control frames.
        { "text": "ping:hello" },
    ]);
    for compression in ["deflate", "none"] {
        let printed = client(&world.serve, &world.url("api.test"), compression, &messages);
        let extensions = printed[0]["extensions"].as_str().unwrap_or("");
        assert_eq!(
            extensions.contains("permessage-deflate"),
            compression == "deflate",
            "{printed:?}"
        );
        // Whatever came back holding the value reached the client as the placeholder.
        assert_eq!(
            replies(&printed),
            [
                format!("token={placeholder}"),
                format!("token={placeholder}"),
                format!("here it is: {placeholder}"),
                format!("here it is: {placeholder}"),
                format!("and {placeholder} once more"),
                "pinged".to_owned(),
            ],
            "{compression}: {printed:?}"
        );
        let binary = printed
            .iter()
            .find_map(|e| e["binary"].as_str())
            .expect("a binary reply");
        assert_eq!(binary, hex(format!("bin {placeholder}").as_bytes()));
    }
    // The upstream got the value, in every message that carried the placeholder, and
    // negotiated compression when the client offered it.
    let log = world.granted.log();
    let opened: Vec<bool> = log
        .iter()
        .filter_map(|e| e.get("deflate").and_then(Value::as_bool))
        .collect();
    assert_eq!(opened, [true, false], "{log:?}");
    let messages = world.granted.messages();
    assert_eq!(messages.len(), 14, "{messages:?}");
    for run in messages.chunks(7) {
        assert_eq!(run[0]["is_token_command"], true, "{run:?}");
        assert_eq!(run[1]["is_token_command"], true, "{run:?}");
        assert_eq!(run[2]["holds_token"], false);
        assert_eq!(run[4]["holds_token"], true);
        assert_eq!(run[5]["holds_token"], true, "the binary message: {run:?}");
    }

    let audit = world.serve.stop();
    let swaps = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"swap\"") && l.contains("\"location\":\"websocket\""))
        .count();
    // Four messages a run carried the placeholder...
    assert_eq!(swaps, 8, "{audit:#?}");
    let redactions = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"redact\"") && l.contains("websocket-response"))
        .count();
    // ...and six replies a run carried the value.
    assert_eq!(redactions, 12, "{audit:#?}");
    assert!(
        !audit.join("\n").contains(TOKEN),
        "the audit log holds the token"
    );
    drop(world.pki);
}

#[test]
fn a_placeholder_toward_an_ungranted_host_closes_the_connection_before_it_leaves() {
    let world = World::new();
    let placeholder = world.serve.placeholder("WS");
    let messages = json!([
        { "text": "echo:hello" },
        { "text": format!("echo:token={placeholder}") },
        { "text": "echo:never sent" },
    ]);
    let printed = client(&world.serve, &world.url("other.test"), "deflate", &messages);
    assert_eq!(replies(&printed), ["hello"], "{printed:?}");
    let closed = printed.last().expect("a close");
    assert_eq!(closed["closed"], 1008, "{printed:?}");
    assert_eq!(closed["reason"], "sluice-error: placeholder-not-granted");
    // The upstream got the first message only: nothing of the refused one.
    let messages = world.other.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["text"], "echo:hello");

    let audit = world.serve.stop();
    let refusals: Vec<&String> = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"refuse\""))
        .collect();
    assert_eq!(refusals.len(), 1, "{audit:#?}");
    assert!(
        refusals[0].contains("placeholder-not-granted"),
        "{refusals:?}"
    );
    assert!(refusals[0].contains("\"secret\":\"ws\""), "{refusals:?}");
    drop(world.pki);
}

#[test]
fn each_message_swapping_a_budgeted_secret_is_one_use_and_the_one_past_it_closes_the_connection() {
    let world = World::with_grant("    budget: { requests: 2, per: 1h }\n");
    let placeholder = world.serve.placeholder("WS");
    let messages = json!([
        { "text": format!("echo:one {placeholder}") },
        { "text": "echo:no secret here" },
        { "text": format!("echo:two {placeholder}") },
        { "text": format!("echo:three {placeholder}") },
        { "text": "echo:never sent" },
    ]);
    let printed = client(&world.serve, &world.url("api.test"), "none", &messages);
    assert_eq!(
        replies(&printed),
        [
            format!("one {placeholder}"),
            "no secret here".to_owned(),
            format!("two {placeholder}"),
        ],
        "{printed:?}"
    );
    let closed = printed.last().expect("a close");
    assert_eq!(closed["closed"], 1008, "{printed:?}");
    assert_eq!(closed["reason"], "sluice-error: budget-exhausted");
    // The upstream got the two uses and the message between them: nothing of the third.
    let received = world.granted.messages();
    assert_eq!(received.len(), 3, "{received:?}");
    assert_eq!(received[0]["holds_token"], true);
    assert_eq!(received[2]["holds_token"], true);
    let audit = world.serve.stop();
    let refusals: Vec<&String> = audit
        .iter()
        .filter(|l| l.contains("\"event\":\"refuse\""))
        .collect();
    assert_eq!(refusals.len(), 1, "{audit:#?}");
    assert!(refusals[0].contains("budget-exhausted"), "{refusals:?}");
    drop(world.pki);
}

#[test]
fn a_frame_no_negotiated_extension_explains_closes_with_1008() {
    let world = World::new();
    let messages = json!([{ "text": "rsv" }]);
    let printed = client(&world.serve, &world.url("api.test"), "deflate", &messages);
    let closed = printed.last().expect("a close");
    assert_eq!(closed["closed"], 1008, "{printed:?}");
    assert!(
        closed["reason"]
            .as_str()
            .unwrap_or("")
            .contains("RSV2/RSV3"),
        "{printed:?}"
    );
    world.serve.stop();
    drop(world.pki);
}

#[test]
fn websocket_over_http2_extended_connect_is_scanned_like_http1() {
    use futures_util::{SinkExt, StreamExt};
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;
    use tokio_tungstenite::tungstenite::{Message, protocol::Role};

    let world = World::new();
    let placeholder = world.serve.placeholder("WS");
    let port = world.granted.port;
    let proxy = world.serve.proxy();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (statuses, replies, other_protocol) = runtime.block_on(async {
        let (mut send, _conn, probed) = h2_tunnel(&proxy, port).await;
        let connect = |protocol: &'static str| {
            let mut request = http::Request::connect(format!("https://api.test:{port}/socket"))
                .version(http::Version::HTTP_2)
                .header("sec-websocket-version", "13")
                .body(Empty::<bytes::Bytes>::new())
                .unwrap();
            request
                .extensions_mut()
                .insert(hyper::ext::Protocol::from_static(protocol));
            request
        };
        let other = send
            .send_request(connect("connect-udp"))
            .await
            .expect("answered");
        let response = send
            .send_request(connect("websocket"))
            .await
            .expect("the extended CONNECT is answered");
        let status = response.status();
        let upgraded = hyper::upgrade::on(response).await.expect("upgraded");
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Client,
            None,
        )
        .await;
        let mut replies = Vec::new();
        for text in [format!("echo:token={placeholder}"), "leak".to_owned()] {
            ws.send(Message::text(text)).await.expect("sent");
            match ws.next().await {
                Some(Ok(Message::Text(reply))) => replies.push(reply.as_str().to_owned()),
                other => panic!("no text reply: {other:?}"),
            }
        }
        let _ = ws.close(None).await;
        (
            (probed.as_u16(), status.as_u16()),
            replies,
            other.status().as_u16(),
        )
    });
    assert_ne!(statuses.0, 0);
    assert_eq!(statuses.1, 200, "RFC 8441 answers 200");
    assert_eq!(other_protocol, 400, "another :protocol is refused");
    // Swapped on the way out (the upstream saw the token), redacted on the way back.
    assert_eq!(
        replies,
        [
            format!("token={placeholder}"),
            format!("here it is: {placeholder}")
        ]
    );
    let messages = world.granted.messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["is_token_command"], true, "{messages:?}");
    // The upstream leg was an HTTP/1.1 upgrade, with a key sluice made and checked.
    let opened: Vec<Value> = world
        .granted
        .log()
        .into_iter()
        .filter(|e| e.get("opened").is_some())
        .collect();
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0]["opened"], "/socket");
    let audit = world.serve.stop();
    assert!(
        audit
            .iter()
            .any(|l| l.contains("\"event\":\"swap\"") && l.contains("\"location\":\"websocket\"")),
        "{audit:#?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l.contains("\"event\":\"refuse\"") && l.contains("\"reason\":\"bad-request\"")),
        "{audit:#?}"
    );
    assert!(!audit.join("\n").contains(TOKEN));
    drop(world.pki);
}

/// A reload that takes `body` out of the grant: the WebSocket opened before it is closed
/// with `1012` rather than go on swapping under the old grant, an HTTP/2 tunnel gets GOAWAY,
/// and a WebSocket opened after it is decided under the new declaration.
#[test]
fn a_reload_closes_open_websockets_with_1012_and_what_reconnects_gets_the_new_grant() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

    let world = World::new();
    let placeholder = world.serve.placeholder("WS");
    let port = world.granted.port;
    let proxy = world.serve.proxy();
    let url = world.url("api.test");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let open = || async {
        let tls = proxy
            .tunnel_to("api.test", port, &[b"http/1.1"])
            .await
            .expect("tunnel");
        let (ws, _) = tokio_tungstenite::client_async(url.as_str(), tls)
            .await
            .expect("the WebSocket opens");
        ws
    };
    let swap = Message::text(format!("echo:token={placeholder}"));
    let (mut ws, mut h2, h2_conn) = runtime.block_on(async {
        let mut ws = open().await;
        ws.send(swap.clone()).await.expect("sent");
        let reply = ws.next().await.expect("a reply").expect("a message");
        assert_eq!(reply, Message::text(format!("token={placeholder}")));
        let (h2, conn, _) = h2_tunnel(&proxy, port).await;
        (ws, h2, conn)
    });
    assert_eq!(world.granted.messages().len(), 1);

    world.serve.reload(&format!(
        "version: 1\nsecrets:\n  ws:\n    value: \"{TOKEN}\"\n    hosts: [api.test]\n    in: [header]\negress:\n  allow: [other.test]\n  allow_ips: [\"127.0.0.1/32\"]\n"
    ));

    runtime.block_on(async {
        let wait = std::time::Duration::from_secs(10);
        // The open WebSocket is closed, by sluice, with 1012.
        let closed = tokio::time::timeout(wait, ws.next())
            .await
            .expect("closed in time");
        match closed {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(frame.code, CloseCode::Restart, "{frame:?}");
                assert!(frame.reason.contains("reloaded"), "{frame:?}");
            }
            other => panic!("no close frame: {other:?}"),
        }
        // The HTTP/2 tunnel was told to go away: its connection ends, and takes no request.
        tokio::time::timeout(wait, h2_conn)
            .await
            .expect("the HTTP/2 tunnel ended in time")
            .expect("joined")
            .expect("a clean GOAWAY");
        assert!(
            h2.ready().await.is_err(),
            "the old tunnel still takes requests"
        );
        // A WebSocket opened now is under the new declaration: no swap in a message.
        let mut ws = open().await;
        ws.send(swap.clone()).await.expect("sent");
        match tokio::time::timeout(wait, ws.next())
            .await
            .expect("in time")
        {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(frame.code, CloseCode::Policy, "{frame:?}");
            }
            other => panic!("the message was not refused: {other:?}"),
        }
    });
    assert_eq!(
        world.granted.messages().len(),
        1,
        "a message reached the upstream after the grant was taken back"
    );
    let audit = world.serve.stop().join("\n");
    assert!(!audit.contains(TOKEN));
    drop(world.pki);
}

/// An HTTP/2 tunnel to api.test through sluice: the request sender, the connection's task,
/// and the status of one plain GET sent first (so that sluice's SETTINGS, which enable
/// extended CONNECT, have arrived before anything else is sent).
async fn h2_tunnel(
    proxy: &sluice_integration_tests::client::ProxyAt,
    port: u16,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
    http::StatusCode,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let tls = proxy
        .tunnel_to("api.test", port, &[b"h2"])
        .await
        .expect("tunnel");
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let probe = http::Request::get(format!("https://api.test:{port}/socket"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let probed = send.send_request(probe).await.expect("probe answered");
    (send, conn, probed.status())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
