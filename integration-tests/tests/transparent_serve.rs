//! `sluice serve --transparent`, with docs/kubernetes.md's capture rules as written: in a
//! network namespace this test makes (the pod's), sluice runs as the group the rules let
//! out; a recording upstream listens at the far end of a veth pair, in a second namespace
//! the test makes (10.89.0.1, an address that exists nowhere else), and a client that knows
//! nothing of the proxy connects straight to it.
//!
//! Needs root (a second group for sluice); CI runs as root.

use std::path::Path;
use std::process::Command;

use sluice_integration_tests::{TestPki, kubernetes_doc, sluice_bin};

const TOKEN: &str = "tok-REAL-transparent-0123456789";
/// The group docs/kubernetes.md's rules let out.
const SLUICE_GROUP: &str = "1337";

#[test]
fn a_client_that_knows_nothing_of_the_proxy_is_captured_by_the_documented_rules() {
    if !sluice_integration_tests::is_root() {
        eprintln!("skipped: needs root to give sluice a group of its own (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = TestPki::new();
    let (cert, key) = pki.leaf_files(&["api.test", "other.test"]);
    std::fs::write(d.join("token"), TOKEN).unwrap();
    std::fs::write(
        d.join("policy.yaml"),
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [api.test]\n    sinks: [egress]\negress:\n  allow: [other.test]\n  passthrough: [blocked.test]\n  allow_ips: [\"10.89.0.1/32\"]\n",
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("capture.nft"), kubernetes_doc::capture_rules()).unwrap();
    let client = r#"import socket, ssl, sys
run = sys.argv[1]
env = dict(line.strip().split("=", 1) for line in open(run + "/placeholders.env") if "=" in line)
context = ssl.create_default_context(cafile=run + "/ca.pem")
for name in ("api.test", "other.test"):
    tls = context.wrap_socket(socket.create_connection(("10.89.0.1", 8443), timeout=5), server_hostname=name)
    tls.sendall(("GET /%s HTTP/1.1\r\nHost: %s:8443\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (name, name, env["API_TOKEN"])).encode())
    answer = b""
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        answer += chunk
    print(name, answer.split(b"\r\n")[0].decode())
# In the clear: named by its Host (here none, so refused by sluice; nothing dialled).
raw = socket.create_connection(("10.89.0.1", 8443), timeout=5)
raw.sendall(b"GET / HTTP/1.0\r\n\r\n")
print("plain", raw.recv(65536).split(b"\r\n")[0].decode())
# TLS without a server name: nothing to decide on, closed.
bare = ssl.create_default_context(cafile=run + "/ca.pem")
bare.check_hostname = False
try:
    bare.wrap_socket(socket.create_connection(("10.89.0.1", 8443), timeout=5))
    print("unnamed", "reached")
except OSError:
    print("unnamed", "closed")
# The same decisions on both edges: captured here, through the proxy's CONNECT below.
def captured(name, context):
    try:
        context.wrap_socket(socket.create_connection(("10.89.0.1", 8443), timeout=5), server_hostname=name).close()
        return "reached"
    except OSError:
        return "closed"
untrusting = ssl.create_default_context()  # the system roots only: the run CA is not among them
url = open(run + "/proxy-url").read().strip()
credentials, address = url[len("http://"):].rsplit("@", 1)
host, port = address.rsplit(":", 1)
import base64
def connected(name, context=None):
    raw = socket.create_connection((host, int(port)), timeout=5)
    raw.sendall(("CONNECT %s:8443 HTTP/1.1\r\nHost: %s:8443\r\nProxy-Authorization: Basic %s\r\n\r\n" % (name, name, base64.b64encode(credentials.encode()).decode())).encode())
    status = raw.recv(65536).split(b"\r\n")[0].decode()
    if context is not None and " 200 " in status:
        try:
            context.wrap_socket(raw, server_hostname=name).close()
            return "reached"
        except OSError:
            return "closed"
    return status
print("captured-denied", captured("denied.test", context))
print("connect-denied", connected("denied.test"))
print("captured-blocked", captured("blocked.test", context))
print("connect-blocked", connected("blocked.test"))
print("captured-untrusted", captured("other.test", untrusting))
print("connect-untrusted", connected("other.test", untrusting))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    udp.sendto(b"x", ("10.89.0.1", 9999))
    print("udp sent")
except OSError as e:
    print("udp", type(e).__name__)
"#;
    std::fs::write(d.join("client.py"), client).unwrap();
    let recorder = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/https_recorder.py");
    let script = format!(
        r#"set -eu
cd "{d}"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
ip link set lo up
# The outside: a second namespace at the far end of a veth pair, where the upstream is.
unshare --net sh -c 'echo $$ > outside.pid; exec sleep 60' &
outside=$!
for _ in $(seq 100); do [ -s outside.pid ] && break; sleep 0.05; done
ip link add pod0 type veth peer name out0 netns "$(cat outside.pid)"
ip addr add 10.89.0.2/24 dev pod0
ip link set pod0 up
nsenter -t "$(cat outside.pid)" -n sh -c 'ip link set lo up; ip addr add 10.89.0.1/24 dev out0; ip link set out0 up'
nsenter -t "$(cat outside.pid)" -n python3 "{recorder}" 10.89.0.1 8443 "{cert}" "{key}" "{d}/upstream.log" 2>upstream.err &
upstream=$!
nft -f capture.nft
setpriv --regid={SLUICE_GROUP} --clear-groups -- "{sluice}" serve --policy policy.yaml \
  --listen 127.0.0.1:0 --transparent 127.0.0.1:15001 --run-dir run \
  --upstream-ca "{ca}" --resolve api.test=10.89.0.1 --resolve other.test=10.89.0.1 \
  --resolve blocked.test=10.89.0.3 --admin 127.0.0.1:0 \
  >serve.out 2>serve.err &
sluice=$!
for _ in $(seq 100); do [ -e run/proxy-url ] && [ -e upstream.log.ready ] && break; sleep 0.05; done
python3 client.py run
sleep 0.5  # the last handshake refusals are recorded as their alerts arrive
curl -sf "$(cat run/admin-url)/metrics" > metrics.txt
kill -TERM $sluice; wait $sluice || true
kill $upstream $outside; wait || true
"#,
        d = d.display(),
        recorder = recorder.display(),
        cert = cert.display(),
        key = key.display(),
        ca = pki.ca_path().display(),
        sluice = sluice_bin().display(),
    );
    let out = Command::new("unshare")
        .args(["--net", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let served = std::fs::read_to_string(d.join("serve.err")).unwrap_or_default();
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {stderr}\nsluice: {served}"
    );
    // (The recording upstream answers in HTTP/1.0, which is passed back as it is.)
    for line in [
        "api.test HTTP/1.0 200 OK",
        "other.test HTTP/1.1 403 Forbidden",
        "plain HTTP/1.0 400 Bad Request",
        "unnamed closed",
        "captured-denied closed",
        "connect-denied HTTP/1.1 403 Forbidden",
        "captured-blocked closed",
        "connect-blocked HTTP/1.1 403 Forbidden",
        "captured-untrusted closed",
        "connect-untrusted closed",
        "udp PermissionError",
    ] {
        assert!(
            stdout.contains(line),
            "{line:?} not in {stdout}\nsluice: {served}"
        );
    }
    // The upstream saw one request: toward the granted host, with the real value.
    let recorded = std::fs::read_to_string(d.join("upstream.log")).unwrap();
    assert_eq!(
        recorded,
        format!("/api.test Bearer {TOKEN}\n"),
        "{recorded}"
    );
    let printed = std::fs::read_to_string(d.join("serve.out")).unwrap();
    assert!(
        printed.contains("transparent capture on 127.0.0.1:15001"),
        "{printed}"
    );
    let audit = std::fs::read_to_string(d.join("run/audit.jsonl")).unwrap();
    assert!(audit.contains("\"event\":\"swap\""), "{audit}");
    assert!(audit.contains("placeholder-not-granted"), "{audit}");
    assert!(!audit.contains(TOKEN), "{audit}");
    // One decision, one event: the captured connection and the CONNECT wrote the same
    // event, host, method and reason (the code alone), through the one door.
    let events: Vec<serde_json::Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let denials = |host: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["host"] == host && e["event"] != "tunnel")
            .map(|e| format!("{} {} {}", e["event"], e["method"], e["reason"]))
            .collect()
    };
    for (host, reason) in [
        ("denied.test:8443", "host-not-allowed"),
        ("blocked.test:8443", "address-blocked"),
    ] {
        let expected = format!("\"deny\" \"CONNECT\" \"{reason}\"");
        assert_eq!(denials(host), vec![expected.clone(), expected], "{audit}");
    }
    let handshakes: Vec<_> = denials("other.test:8443")
        .into_iter()
        .filter(|d| d.contains("tls-handshake-refused"))
        .collect();
    assert_eq!(
        handshakes,
        vec!["\"deny\" \"CONNECT\" \"tls-handshake-refused\"".to_owned(); 2],
        "{audit}"
    );
    // The unnamed connection: a `deny` with its code, no free text.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "deny" && e["reason"] == "no-target"),
        "{audit}"
    );
    // Counted alike: every refusal above is in the metric under its code.
    let metrics = std::fs::read_to_string(d.join("metrics.txt")).unwrap();
    for (code, count) in [
        ("host-not-allowed", 2),
        ("address-blocked", 2),
        ("tls-handshake-refused", 2),
        ("no-target", 1),
    ] {
        let line = format!("sluice_refusals_total{{reason=\"{code}\"}} {count}");
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in {metrics}"
        );
    }
}
