//! Real clients through the real `sluice run` binary to TLS upstreams on 127.0.0.1.
//!
//! Each client runs as a sandbox would: no proxy flag, no CA flag, nothing but what
//! `sluice run` puts in its environment (`HTTPS_PROXY` and its twins, `SSL_CERT_FILE`,
//! `REQUESTS_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS`, `GIT_SSL_CAINFO`, `PIP_CERT`, and the
//! secret's placeholder under its own name). Each test proves two things: the real value
//! reached the upstream (which checks it), and it never reached the client — neither its
//! output nor any file it wrote; where the upstream echoes the value, the client received
//! the placeholder.
//!
//! A client missing from the machine fails its test with a message naming the `.ci/run`
//! step that installs it; nothing is skipped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use http::Response;
use sluice_integration_tests::git::{git, git_http_backend};
use sluice_integration_tests::launch::{
    files_containing, node_dir, python_venv, require_program, workspace_root,
};
use sluice_integration_tests::served::{basic_credentials, respond};
use sluice_integration_tests::{Launch, Recorded, RecordingUpstream, ServedUpstream, TestPki};

/// The real value: it must reach the upstreams and nothing else.
const TOKEN: &str = "ghp_REALclientValue0123456789abcdef";

const CI_CURL: &str = ".ci/run checks for curl with HTTP/2 and installs it with apt-get";
const CI_GIT: &str = ".ci/run installs it with `apt-get install git`";
const CI_NPM: &str = ".ci/run installs it with `apt-get install nodejs npm` when absent";

/// A declaration granting `secret` (read from `file`) toward `host`, in `places`.
fn policy(secret: &str, file: &Path, host: &str, places: &str) -> String {
    format!(
        r#"version: 1
secrets:
  {secret}:
    from: {{ file: {file} }}
    hosts: [{host}]
    sinks: [egress]
    in: [{places}]
egress:
  allow_ips: ["127.0.0.1/32"]
"#,
        file = file.display()
    )
}

/// Runs `launch` on a blocking thread (the upstream lives on this test's runtime).
async fn run(launch: Launch, command: Vec<OsString>) -> sluice_integration_tests::RunOutput {
    tokio::task::spawn_blocking(move || launch.run(&command))
        .await
        .expect("sluice run thread")
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Asserts the value is nowhere the sandbox can see: the launcher's redacted streams, the
/// audit log, and every file under `work`.
fn assert_value_never_reached_the_client(out: &sluice_integration_tests::RunOutput, work: &Path) {
    assert!(
        !out.stdout.contains(TOKEN),
        "value in stdout: {}",
        out.stdout
    );
    assert!(
        !out.stderr.contains(TOKEN),
        "value in stderr: {}",
        out.stderr
    );
    assert!(!out.audit.contains(TOKEN), "value in the audit log");
    let leaked = files_containing(work, TOKEN);
    assert!(
        leaked.is_empty(),
        "the real value reached the sandbox's files: {leaked:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Echo clients: POST "echo $API_TOKEN" with `Authorization: Bearer $API_TOKEN` to a
// RecordingUpstream's /echo; the secret is granted in header and body, so the upstream sees
// the value in both and echoes it back, and the client must receive the placeholder.
// ---------------------------------------------------------------------------------------

struct Echo {
    out: sluice_integration_tests::RunOutput,
    records: Vec<Recorded>,
    /// What the client wrote of the response body (bypassing the launcher's redaction).
    body_seen: String,
    work: tempfile::TempDir,
}

/// Runs `client(url, out_file)` under `sluice run` against an echo upstream.
async fn echo_client(
    what: &str,
    env: &[(&str, &str)],
    client: impl FnOnce(&str, &Path) -> Vec<OsString>,
) -> Echo {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
    let work = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&pki);
    let file = launch.secret_file("api_token", TOKEN);
    let mut launch = launch
        .policy(&policy("api_token", &file, "api.test", "header, body"))
        .resolve("api.test")
        .cwd(work.path());
    for (key, value) in env {
        launch = launch.env(key, value);
    }
    let url = format!("https://api.test:{}/echo", upstream.port());
    let body_file = work.path().join("body.out");
    let out = run(launch, client(&url, &body_file)).await;
    out.assert_success(what);
    let body_seen = std::fs::read_to_string(&body_file).unwrap_or_else(|e| {
        panic!(
            "{what} wrote no response body ({e}); stdout: {}",
            out.stdout
        )
    });
    Echo {
        out,
        records: upstream.records(),
        body_seen,
        work,
    }
}

/// Whether `text` is this run's placeholder for [`TOKEN`]: a value shaped like a GitHub
/// token gets a placeholder of that shape (#36), checksum included, never the value.
fn is_token_placeholder(text: &str) -> bool {
    text.len() == 40
        && text.starts_with("ghp_")
        && text != TOKEN
        && sluice_policies::shape::checksum_holds(text)
}

/// The swap reached the upstream in both places; the echo came back as the placeholder.
fn assert_echo_swapped(what: &str, echo: &Echo) {
    let posts: Vec<&Recorded> = echo
        .records
        .iter()
        .filter(|r| r.uri.path() == "/echo")
        .collect();
    assert_eq!(posts.len(), 1, "{what}: expected one request upstream");
    let request = posts[0];
    assert_eq!(
        request.headers["authorization"],
        format!("Bearer {TOKEN}").as_str(),
        "{what}: the header swap did not reach the upstream"
    );
    assert_eq!(
        request.body,
        Bytes::from(format!("echo {TOKEN}")),
        "{what}: the body swap did not reach the upstream"
    );
    let placeholder = echo
        .body_seen
        .strip_prefix("echo ")
        .unwrap_or_else(|| panic!("{what}: unexpected echo {:?}", echo.body_seen));
    assert!(
        is_token_placeholder(placeholder),
        "{what}: the client should have received the placeholder, got {:?}",
        echo.body_seen
    );
    assert!(
        echo.out.audit_events("swap") >= 1,
        "{what}: no swap audited"
    );
    assert_value_never_reached_the_client(&echo.out, echo.work.path());
}

fn curl_command(http: &str, url: &str, out: &Path) -> Vec<OsString> {
    // The proxy and the CA come from the environment alone (HTTPS_PROXY, CURL_CA_BUNDLE).
    let script = format!(
        "curl -sS --fail-with-body {http} -w '%{{http_version}}' \
         -H \"Authorization: Bearer $API_TOKEN\" --data-binary \"echo $API_TOKEN\" \
         -o '{out}' '{url}'",
        out = out.display()
    );
    os(&["sh", "-c", &script])
}

#[tokio::test]
async fn curl_http1_with_only_the_launchers_environment() {
    require_program("curl", CI_CURL);
    let echo = echo_client("curl --http1.1", &[], |url, out| {
        curl_command("--http1.1", url, out)
    })
    .await;
    assert_echo_swapped("curl --http1.1", &echo);
    assert_eq!(echo.out.stdout.trim(), "1.1", "curl's client leg version");
}

#[tokio::test]
async fn curl_http2_with_only_the_launchers_environment() {
    require_program("curl", CI_CURL);
    let echo = echo_client("curl --http2", &[], |url, out| {
        curl_command("--http2", url, out)
    })
    .await;
    assert_echo_swapped("curl --http2", &echo);
    assert_eq!(
        echo.out.stdout.trim(),
        "2",
        "curl negotiated HTTP/2 inside the tunnel"
    );
    assert_eq!(echo.records[0].version, http::Version::HTTP_2);
}

const PY_REQUESTS: &str = r#"
import os, sys, requests
url, out = sys.argv[1], sys.argv[2]
token = os.environ["API_TOKEN"]
r = requests.post(url, headers={"Authorization": "Bearer " + token}, data="echo " + token, timeout=20)
open(out, "w").write(r.text)
print(r.status_code, r.text)
sys.exit(0 if r.status_code == 200 else 1)
"#;

const PY_HTTPX: &str = r#"
import os, sys, httpx
url, out = sys.argv[1], sys.argv[2]
token = os.environ["API_TOKEN"]
# trust_env (the default) makes httpx read HTTPS_PROXY and SSL_CERT_FILE.
with httpx.Client(trust_env=True, timeout=20) as client:
    r = client.post(url, headers={"Authorization": "Bearer " + token}, content="echo " + token)
open(out, "w").write(r.text)
print(r.status_code, r.text)
sys.exit(0 if r.status_code == 200 else 1)
"#;

fn python_command(script: &str, url: &str, out: &Path) -> Vec<OsString> {
    let python = python_venv().join("bin/python");
    vec![
        python.into_os_string(),
        "-c".into(),
        script.into(),
        url.into(),
        out.into(),
    ]
}

#[tokio::test]
async fn python_requests_reads_https_proxy_and_requests_ca_bundle() {
    let echo = echo_client("python requests", &[], |url, out| {
        python_command(PY_REQUESTS, url, out)
    })
    .await;
    assert_echo_swapped("python requests", &echo);
}

#[tokio::test]
async fn python_httpx_reads_https_proxy_and_ssl_cert_file() {
    let echo = echo_client("python httpx", &[], |url, out| {
        python_command(PY_HTTPX, url, out)
    })
    .await;
    assert_echo_swapped("python httpx", &echo);
}

fn node_command(script: &str, url: &str, out: &Path) -> Vec<OsString> {
    let dir = node_dir();
    vec![
        "node".into(),
        dir.join(script).into_os_string(),
        url.into(),
        out.into(),
    ]
}

#[tokio::test]
async fn node_https_module_with_a_connect_agent() {
    let echo = echo_client("node https", &[], |url, out| {
        node_command("https-connect.mjs", url, out)
    })
    .await;
    assert_echo_swapped("node https", &echo);
}

#[tokio::test]
async fn node_fetch_with_undici_env_proxy_agent() {
    let echo = echo_client("node fetch (undici)", &[], |url, out| {
        node_command("fetch.mjs", url, out)
    })
    .await;
    assert_echo_swapped("node fetch (undici)", &echo);
}

// ---------------------------------------------------------------------------------------
// gRPC: grpcio (C-core's HTTP/2) through CONNECT to a Python gRPC server that speaks only
// HTTP/2 over TLS (integration-tests/python/). The client sends the placeholder in its
// `authorization` metadata and in its request message; the server echoes what arrived in its
// messages and its trailing metadata, so the client must see the placeholder in both.
// ---------------------------------------------------------------------------------------

/// The Python gRPC upstream, killed when dropped.
struct GrpcServer {
    child: std::process::Child,
    port: u16,
    /// One JSON line per call, as the server saw it (yes/no answers, never the value).
    log: PathBuf,
}

impl GrpcServer {
    /// Starts `grpc_server.py` for `grpc.test` with a leaf from `pki`, expecting `TOKEN`.
    fn start(pki: &TestPki) -> Self {
        let (cert, key) = pki.leaf_files(&["grpc.test"]);
        let log = pki.dir().join("grpc-calls.jsonl");
        let mut child = Command::new(python_venv().join("bin/python"))
            .arg(grpc_script("grpc_server.py"))
            .args([&cert, &key, &log])
            .env("EXPECTED_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the gRPC server starts");
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut first,
        )
        .expect("the gRPC server prints its port");
        let port = first
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the gRPC server printed {first:?}, not a port"));
        Self { child, port, log }
    }

    /// The calls the server received.
    fn calls(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn grpc_script(name: &str) -> PathBuf {
    workspace_root().join("integration-tests/python").join(name)
}

/// One grpcio call (`unary` or `stream`) under `sluice run`, the secret granted toward
/// grpc.test in header and body: what the server saw, and what the client got back.
struct GrpcCall {
    out: sluice_integration_tests::RunOutput,
    calls: Vec<serde_json::Value>,
    /// What the client wrote: `code`, `messages`, `trailers`.
    seen: serde_json::Value,
    work: tempfile::TempDir,
}

async fn grpc_call(call: &str) -> GrpcCall {
    let pki = TestPki::new();
    let server = GrpcServer::start(&pki);
    let work = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&pki);
    let file = launch.secret_file("api_token", TOKEN);
    let launch = launch
        .policy(&policy("api_token", &file, "grpc.test", "header, body"))
        .resolve("grpc.test")
        // As many CI images (this machine's among them) do: the launcher must win over it.
        .env(
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
            "/etc/ssl/certs/ca-certificates.crt",
        )
        .cwd(work.path());
    let out_file = work.path().join("grpc.out");
    let command = vec![
        python_venv().join("bin/python").into_os_string(),
        grpc_script("grpc_client.py").into_os_string(),
        format!("grpc.test:{}", server.port).into(),
        call.into(),
        out_file.clone().into_os_string(),
    ];
    let out = run(launch, command).await;
    out.assert_success(&format!("grpcio {call}"));
    let seen = std::fs::read_to_string(&out_file)
        .unwrap_or_else(|e| panic!("grpcio wrote nothing ({e}); stdout: {}", out.stdout));
    GrpcCall {
        calls: server.calls(),
        seen: serde_json::from_str(&seen).expect("the client's JSON"),
        out,
        work,
    }
}

/// `Bearer <placeholder>` as the client must see the echo of the real value.
fn assert_bearer_placeholder(what: &str, shown: &serde_json::Value) {
    let placeholder = shown
        .as_str()
        .and_then(|s| s.strip_prefix("Bearer "))
        .unwrap_or_else(|| panic!("{what}: expected the placeholder, got {shown}"));
    assert!(is_token_placeholder(placeholder), "{what}: {shown}");
}

/// What every grpcio call asserts: it succeeded through the proxy (which demands its Basic
/// credentials: none failed), the server got the real value in the metadata and nowhere
/// else, the trailing metadata came back redacted, and the audit log says so.
fn assert_grpc_swapped_and_redacted(what: &str, grpc: &GrpcCall, method: &str) {
    assert_eq!(grpc.seen["code"], "OK", "{what}: {}", grpc.seen);
    assert_eq!(
        grpc.calls.len(),
        1,
        "{what}: one call upstream: {:?}",
        grpc.calls
    );
    let call = &grpc.calls[0];
    assert_eq!(call["method"], method, "{what}");
    assert_eq!(
        call["authorized"], true,
        "{what}: the metadata swap did not reach the server"
    );
    assert_eq!(call["token_anywhere_else"], false, "{what}");
    assert_bearer_placeholder(
        &format!("{what}: trailing metadata"),
        &grpc.seen["trailers"]["x-echo"],
    );
    assert_eq!(
        grpc.out.audit_events("auth_fail"),
        0,
        "{what}: grpcio sent the proxy's credentials"
    );
    assert!(
        grpc.out
            .audit
            .lines()
            .any(|l| l.contains("\"event\":\"swap\"")
                && l.contains("\"location\":\"header:authorization\"")),
        "{what}: no swap audited in the metadata:\n{}",
        grpc.out.audit
    );
    assert!(
        grpc.out.audit_events("redact") >= 1,
        "{what}: no redaction audited:\n{}",
        grpc.out.audit
    );
    assert_value_never_reached_the_client(&grpc.out, grpc.work.path());
}

#[tokio::test]
async fn python_grpcio_unary_call_through_https_proxy() {
    let grpc = grpc_call("unary").await;
    assert_grpc_swapped_and_redacted("grpcio unary", &grpc, "Unary");
    // The placeholder in the request message was swapped too; both echoes came back
    // redacted inside the response message.
    assert_eq!(
        grpc.calls[0]["text_swapped"], true,
        "grpcio unary: body swap"
    );
    let reply = &grpc.seen["messages"][0];
    assert_eq!(reply["authorized"], true, "{reply}");
    assert_bearer_placeholder("grpcio unary: message", &reply["echo"]);
    let text = reply["text"].as_str().unwrap_or_default();
    assert!(
        text.strip_prefix("echo ").is_some_and(is_token_placeholder),
        "grpcio unary: the echoed text should hold the placeholder: {reply}"
    );
}

#[tokio::test]
async fn python_grpcio_server_streaming_call_through_https_proxy() {
    let grpc = grpc_call("stream").await;
    assert_grpc_swapped_and_redacted("grpcio stream", &grpc, "Stream");
    let messages = grpc.seen["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "{}", grpc.seen);
    for (seq, message) in messages.iter().enumerate() {
        assert_eq!(message["seq"], seq, "{message}");
        assert_eq!(message["authorized"], true, "{message}");
        assert_bearer_placeholder("grpcio stream: message", &message["echo"]);
    }
}

// ---------------------------------------------------------------------------------------
// git over smart HTTP: `git http-backend` as CGI behind an upstream that demands Basic
// credentials carrying the real token.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn git_ls_remote_and_clone_over_smart_http_with_a_token_in_basic_credentials() {
    require_program("git", CI_GIT);
    let pki = TestPki::new();
    let work = tempfile::tempdir().expect("tempdir");
    let server = tempfile::tempdir().expect("tempdir");
    let home = server.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // A repository with one commit, served bare.
    let source = server.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    git(&source, &home, &["init", "-q", "-b", "main"]);
    std::fs::write(source.join("README"), "hello from the sluice test repo\n").unwrap();
    git(&source, &home, &["add", "README"]);
    git(
        &source,
        &home,
        &[
            "-c",
            "user.name=sluice",
            "-c",
            "user.email=sluice@example.test",
            "commit",
            "-q",
            "-m",
            "first",
        ],
    );
    let head = git(&source, &home, &["rev-parse", "HEAD"]);
    let root = server.path().join("srv");
    std::fs::create_dir_all(&root).unwrap();
    git(
        server.path(),
        &home,
        &["clone", "-q", "--bare", "source", "srv/repo.git"],
    );

    let upstream = ServedUpstream::start(
        &pki,
        &["git.test"],
        move |request| match basic_credentials(request) {
            None => Response::builder()
                .status(401)
                .header("www-authenticate", "Basic realm=\"sluice test git\"")
                .body(Bytes::from_static(b"credentials required"))
                .expect("response"),
            Some((_, password)) if password != TOKEN => respond(
                403,
                "text/plain",
                "wrong token (the placeholder was not swapped?)",
            ),
            Some(_) => git_http_backend(&root, request),
        },
    )
    .await;

    let launch = Launch::new(&pki);
    let file = launch.secret_file("git_token", TOKEN);
    let launch = launch
        .policy(&policy("git_token", &file, "git.test", "header"))
        .resolve("git.test")
        .cwd(work.path())
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0");
    let script = format!(
        "set -e; url=\"https://x-access-token:$GIT_TOKEN@git.test:{port}/repo.git\"; \
         git ls-remote \"$url\"; git clone -q \"$url\" clone; cat clone/README; \
         git -C clone log --format=%H -1",
        port = upstream.port()
    );
    let out = run(launch, os(&["sh", "-c", &script])).await;
    out.assert_success("git ls-remote / clone");
    assert!(
        out.stdout.contains(&format!("{head}\tHEAD")),
        "ls-remote lists HEAD: {}",
        out.stdout
    );
    assert!(out.stdout.contains("hello from the sluice test repo"));
    assert!(out.stdout.trim_end().ends_with(&head), "clone is at HEAD");

    let records = upstream.records();
    let authorized: Vec<_> = records.iter().filter_map(basic_credentials).collect();
    assert!(
        records
            .iter()
            .any(|r| r.method == http::Method::POST && r.uri.path() == "/repo.git/git-upload-pack"),
        "the clone fetched a pack"
    );
    assert!(!authorized.is_empty(), "git never sent credentials");
    for (user, password) in &authorized {
        assert_eq!(user, "x-access-token");
        assert_eq!(
            password, TOKEN,
            "every credential upstream carries the value"
        );
    }
    // The clone remembers its remote with the placeholder, never the value.
    let config = std::fs::read_to_string(work.path().join("clone/.git/config")).unwrap();
    let remembered = config
        .split("x-access-token:")
        .nth(1)
        .and_then(|rest| rest.get(..40))
        .unwrap_or_default();
    assert!(is_token_placeholder(remembered), "{config}");
    assert_value_never_reached_the_client(&out, work.path());
}

// ---------------------------------------------------------------------------------------
// pip install from a PEP 503 simple index with the token in the index URL's userinfo.
// ---------------------------------------------------------------------------------------

/// Writes a minimal pure-Python wheel into `dir`; returns (file name, sha256 hex).
fn build_wheel(python: &Path, dir: &Path) -> (String, String) {
    const SCRIPT: &str = r#"
import base64, hashlib, sys, zipfile
dest = sys.argv[1]
name = "sluice_demo-0.1.0-py3-none-any.whl"
files = {
    "sluice_demo/__init__.py": b"GREETING = 'hello from sluice-demo'\n",
    "sluice_demo-0.1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sluice-demo\nVersion: 0.1.0\n",
    "sluice_demo-0.1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sluice-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{path},sha256={digest},{len(data)}\n"
record += "sluice_demo-0.1.0.dist-info/RECORD,,\n"
files["sluice_demo-0.1.0.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(f"{dest}/{name}", "w") as z:
    for path, data in files.items():
        z.writestr(path, data)
print(name, hashlib.sha256(open(f"{dest}/{name}", "rb").read()).hexdigest())
"#;
    let out = Command::new(python)
        .args(["-c", SCRIPT])
        .arg(dir)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "building the wheel: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (name, sha) = text.trim().split_once(' ').expect("name and hash");
    (name.to_owned(), sha.to_owned())
}

#[tokio::test]
async fn pip_install_from_an_index_with_a_token_in_its_url() {
    let venv = python_venv();
    let python = venv.join("bin/python");
    let pki = TestPki::new();
    let work = tempfile::tempdir().expect("tempdir");
    let files = tempfile::tempdir().expect("tempdir");
    let (wheel, sha256) = build_wheel(&python, files.path());
    let wheel_bytes = Bytes::from(std::fs::read(files.path().join(&wheel)).unwrap());

    let wheel_path = format!("/files/{wheel}");
    let served_path = wheel_path.clone();
    let upstream = ServedUpstream::start(&pki, &["index.test"], move |request| {
        match basic_credentials(request) {
            None => Response::builder()
                .status(401)
                .header("www-authenticate", "Basic realm=\"sluice test index\"")
                .body(Bytes::from_static(b"credentials required"))
                .expect("response"),
            Some((user, password)) if user != "__token__" || password != TOKEN => {
                respond(403, "text/plain", "wrong token (the placeholder was not swapped?)")
            }
            Some(_) => match request.uri.path() {
                "/simple/" => respond(
                    200,
                    "text/html",
                    "<!DOCTYPE html><html><body><a href=\"sluice-demo/\">sluice-demo</a></body></html>",
                ),
                "/simple/sluice-demo/" => respond(
                    200,
                    "text/html",
                    format!(
                        "<!DOCTYPE html><html><body><a href=\"/files/{wheel}#sha256={sha256}\">{wheel}</a></body></html>"
                    ),
                ),
                path if path == served_path => {
                    respond(200, "application/octet-stream", wheel_bytes.clone())
                }
                _ => respond(404, "text/plain", "not found"),
            },
        }
    })
    .await;

    let launch = Launch::new(&pki);
    let file = launch.secret_file("index_token", TOKEN);
    let target = work.path().join("site");
    let launch = launch
        .policy(&policy("index_token", &file, "index.test", "header"))
        .resolve("index.test")
        .cwd(work.path())
        .env("HOME", work.path())
        .env("PIP_CONFIG_FILE", "/dev/null");
    let script = format!(
        "set -e; '{python}' -m pip install --no-cache-dir --disable-pip-version-check --no-input \
         --target '{target}' --index-url \"https://__token__:$INDEX_TOKEN@index.test:{port}/simple/\" \
         sluice-demo; PYTHONPATH='{target}' '{python}' -c 'import sluice_demo; print(sluice_demo.GREETING)'",
        python = python.display(),
        target = target.display(),
        port = upstream.port()
    );
    let out = run(launch, os(&["sh", "-c", &script])).await;
    out.assert_success("pip install");
    assert!(
        out.stdout.contains("hello from sluice-demo"),
        "{}",
        out.stdout
    );
    let records = upstream.records();
    assert!(
        records.iter().any(|r| r.uri.path() == wheel_path),
        "pip downloaded the wheel: {:?}",
        records
            .iter()
            .map(|r| r.uri.to_string())
            .collect::<Vec<_>>()
    );
    for record in &records {
        let (_, password) = basic_credentials(record)
            .unwrap_or_else(|| panic!("{} arrived without credentials", record.uri));
        assert_eq!(password, TOKEN, "{}: the swapped value", record.uri);
    }
    assert_value_never_reached_the_client(&out, work.path());
}

// ---------------------------------------------------------------------------------------
// npm install from a registry with `_authToken=${NPM_TOKEN}` in .npmrc.
// ---------------------------------------------------------------------------------------

/// Packs a one-file package with `npm pack` (offline); returns (tarball, integrity, shasum).
fn pack_npm_package(dir: &Path, cache: &Path) -> (PathBuf, String, String) {
    let pkg = dir.join("sluice-demo");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"sluice-demo","version":"1.0.0","main":"index.js","license":"MIT"}"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join("index.js"),
        "module.exports = 'hello from the sluice-demo npm package';\n",
    )
    .unwrap();
    let out = Command::new("npm")
        .args(["pack", "--json", "--pack-destination"])
        .arg(dir)
        .current_dir(&pkg)
        .env("npm_config_cache", cache)
        .env("npm_config_update_notifier", "false")
        .output()
        .expect("npm runs");
    assert!(
        out.status.success(),
        "npm pack: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("npm pack --json");
    let field = |name: &str| packed[0][name].as_str().expect(name).to_owned();
    (
        dir.join(field("filename")),
        field("integrity"),
        field("shasum"),
    )
}

#[tokio::test]
async fn npm_install_from_a_registry_with_an_auth_token_in_npmrc() {
    require_program("npm", CI_NPM);
    require_program("node", CI_NPM);
    let pki = TestPki::new();
    let work = tempfile::tempdir().expect("tempdir");
    let server = tempfile::tempdir().expect("tempdir");
    let cache = server.path().join("pack-cache");
    let (tarball, integrity, shasum) = pack_npm_package(server.path(), &cache);
    let tarball = Bytes::from(std::fs::read(tarball).unwrap());

    // The registry's own URL is in its metadata; the port is known only once it listens,
    // so the handler reads it from the request's Host.
    let upstream = ServedUpstream::start(&pki, &["registry.test"], move |request| {
        let auth = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if auth != Some(format!("Bearer {TOKEN}").as_str()) {
            return respond(
                401,
                "application/json",
                r#"{"error":"the registry wants the real token"}"#,
            );
        }
        let host = request
            .uri
            .authority()
            .map(|a| a.to_string())
            .or_else(|| {
                request
                    .headers
                    .get("host")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        match request.uri.path() {
            "/sluice-demo" => respond(
                200,
                "application/json",
                serde_json::json!({
                    "name": "sluice-demo",
                    "dist-tags": { "latest": "1.0.0" },
                    "versions": { "1.0.0": {
                        "name": "sluice-demo",
                        "version": "1.0.0",
                        "main": "index.js",
                        "dist": {
                            "tarball": format!("https://{host}/sluice-demo/-/sluice-demo-1.0.0.tgz"),
                            "integrity": integrity,
                            "shasum": shasum,
                        },
                    }},
                })
                .to_string(),
            ),
            "/sluice-demo/-/sluice-demo-1.0.0.tgz" => {
                respond(200, "application/octet-stream", tarball.clone())
            }
            _ => respond(404, "application/json", r#"{"error":"not found"}"#),
        }
    })
    .await;
    let port = upstream.port();

    std::fs::write(
        work.path().join("package.json"),
        r#"{"name":"sandboxed-app","version":"1.0.0","private":true,"dependencies":{"sluice-demo":"1.0.0"}}"#,
    )
    .unwrap();
    // `${NPM_TOKEN}` is expanded by npm from the environment: the placeholder sluice set.
    std::fs::write(
        work.path().join(".npmrc"),
        format!(
            "registry=https://registry.test:{port}/\n\
             //registry.test:{port}/:_authToken=${{NPM_TOKEN}}\n\
             audit=false\nfund=false\nupdate-notifier=false\nfetch-retries=0\n"
        ),
    )
    .unwrap();
    let home = server.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // A clean sandbox's npm: no user or global npmrc. A global `cafile=` (as this machine's
    // /usr/etc/npmrc has) replaces Node's default store and so defeats NODE_EXTRA_CA_CERTS;
    // docs/guide.md says how to point it at the sluice bundle instead.
    let empty_npmrc = server.path().join("empty-npmrc");
    std::fs::write(&empty_npmrc, "").unwrap();

    let launch = Launch::new(&pki);
    let file = launch.secret_file("npm_token", TOKEN);
    let launch = launch
        .policy(&policy("npm_token", &file, "registry.test", "header"))
        .resolve("registry.test")
        .cwd(work.path())
        .env("HOME", &home)
        .env("npm_config_cache", server.path().join("npm-cache"))
        .env("npm_config_globalconfig", &empty_npmrc)
        .env("npm_config_userconfig", home.join(".npmrc"));
    let script = "set -e; npm install --no-audit --no-fund; \
                  node -e 'console.log(require(\"sluice-demo\"))'";
    let out = run(launch, os(&["sh", "-c", script])).await;
    out.assert_success("npm install");
    assert!(
        out.stdout
            .contains("hello from the sluice-demo npm package"),
        "{}",
        out.stdout
    );
    let records = upstream.records();
    assert!(
        records
            .iter()
            .any(|r| r.uri.path() == "/sluice-demo/-/sluice-demo-1.0.0.tgz"),
        "npm fetched the tarball"
    );
    for record in &records {
        assert_eq!(
            record.headers.get("authorization").map(|v| v.as_bytes()),
            Some(format!("Bearer {TOKEN}").as_bytes()),
            "{}: the swapped token",
            record.uri
        );
    }
    assert_value_never_reached_the_client(&out, work.path());
    assert_value_never_reached_the_client(&out, &home);
}

/// The tests above find their tools where `.ci/run` puts them; this one says where that is,
/// so a broken install fails here by name as well.
#[test]
fn the_client_installs_from_ci_are_in_place() {
    python_venv();
    let node = node_dir();
    assert!(
        node.join("package-lock.json").exists(),
        "the lock file is committed"
    );
    require_program("curl", CI_CURL);
    require_program("git", CI_GIT);
    require_program("npm", CI_NPM);
}

// ---------------------------------------------------------------------------------------
// `sluice serve` as the Kubernetes sidecar runs it, with the sandbox entrypoint printed in
// docs/kubernetes.md, and curl in the "sandbox".
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn serve_with_the_documented_sidecar_entrypoint() {
    require_program("curl", CI_CURL);
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"h2", b"http/1.1"]).await;
    let private = tempfile::tempdir().expect("tempdir");
    let shared = tempfile::tempdir().expect("tempdir");
    let secret = private.path().join("token");
    std::fs::write(&secret, TOKEN).unwrap();
    let policy_path = private.path().join("policy.yaml");
    std::fs::write(
        &policy_path,
        policy("api_token", &secret, "api.test", "header, body"),
    )
    .unwrap();
    let run_dir = shared.path().join("run");
    let audit = private.path().join("audit.jsonl");
    let serve = Command::new(sluice_integration_tests::sluice_bin())
        .arg("serve")
        .arg("--policy")
        .arg(&policy_path)
        .args(["--listen", "127.0.0.1:0", "--run-dir"])
        .arg(&run_dir)
        .arg("--audit-log")
        .arg(&audit)
        .arg("--upstream-ca")
        .arg(pki.ca_path())
        .args(["--resolve", "api.test=127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice serve starts");

    let entrypoint = shared.path().join("sandbox-env.sh");
    std::fs::write(
        &entrypoint,
        sluice_integration_tests::kubernetes_doc::sandbox_entrypoint(),
    )
    .unwrap();
    let body_file = shared.path().join("body.out");
    let script = format!(
        "curl -sS --fail-with-body -H \"Authorization: Bearer $API_TOKEN\" \
         --data-binary \"echo $API_TOKEN\" -o '{out}' https://api.test:{port}/echo",
        out = body_file.display(),
        port = upstream.port()
    );
    let mut sandbox = Command::new("timeout");
    sandbox
        .arg("30")
        .arg("sh")
        .arg(&entrypoint)
        .args(["sh", "-c", &script])
        .env("SLUICE_RUN_DIR", &run_dir);
    for name in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
    ] {
        sandbox.env_remove(name);
    }
    let out = tokio::task::spawn_blocking(move || sandbox.output().expect("sh runs"))
        .await
        .unwrap();

    // Stop the proxy as Kubernetes would: SIGTERM, then a clean exit.
    let killed = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let served = tokio::task::spawn_blocking(move || serve.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "the sandbox failed: {}\nsluice serve said: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&served.stderr)
    );
    assert_eq!(served.status.code(), Some(0), "SIGTERM drains and exits 0");

    let records = upstream.records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
    let seen = std::fs::read_to_string(&body_file).unwrap();
    assert!(
        seen.strip_prefix("echo ")
            .is_some_and(|p| is_token_placeholder(p.trim_end())),
        "{seen}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN));
    let leaked = files_containing(shared.path(), TOKEN);
    assert!(
        leaked.is_empty(),
        "the value reached the shared volume: {leaked:?}"
    );
    let audit = std::fs::read_to_string(&audit).unwrap();
    assert!(audit.contains("\"event\":\"swap\""));
    assert!(
        audit
            .lines()
            .last()
            .unwrap_or("")
            .contains("\"event\":\"stop\"")
    );
}
