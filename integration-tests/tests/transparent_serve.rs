//! `sluice serve --transparent`, with docs/kubernetes.md's capture rules as written: in a
//! network namespace this test makes (the pod's), sluice runs as the group the rules let
//! out; a recording upstream listens at the far end of a veth pair, in a second namespace
//! the test makes (10.89.0.1, an address that exists nowhere else), and a client that knows
//! nothing of the proxy connects straight to it.
//!
//! Needs root (a second group for sluice); CI runs as root.

use std::path::Path;
use std::process::Command;

use sluice_integration_tests::{TestPki, sluice_bin};

const TOKEN: &str = "tok-REAL-transparent-0123456789";
/// The group docs/kubernetes.md's rules let out.
const SLUICE_GROUP: &str = "1337";

/// The `nft` block of docs/kubernetes.md, as a reader would copy it.
fn documented_rules() -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/kubernetes.md"),
    )
    .unwrap();
    let start = doc
        .find("```nft\n")
        .expect("an nft block in docs/kubernetes.md")
        + 7;
    let end = start + doc[start..].find("```").unwrap();
    let rules: String = doc[start..end]
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("   ").unwrap_or(line)))
        .collect();
    assert!(rules.contains(&format!("meta skgid {SLUICE_GROUP} return")));
    assert!(rules.contains("redirect to :15001"));
    rules
}

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
            "version: 1\nsecrets:\n  api_token:\n    from: {{ file: {}/token }}\n    hosts: [api.test]\n    sinks: [egress]\negress:\n  allow: [other.test]\n  allow_ips: [\"10.89.0.1/32\"]\n",
            d.display()
        ),
    )
    .unwrap();
    std::fs::write(d.join("capture.nft"), documented_rules()).unwrap();
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
  >serve.out 2>serve.err &
sluice=$!
for _ in $(seq 100); do [ -e run/proxy-url ] && [ -e upstream.log.ready ] && break; sleep 0.05; done
python3 client.py run
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
    assert!(audit.contains("no TLS server name"), "{audit}");
    assert!(!audit.contains(TOKEN), "{audit}");
}
