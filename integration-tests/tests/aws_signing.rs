//! Signing secrets end to end: the real AWS CLI and boto3 under `sluice run`, holding only
//! placeholders, against a local upstream that checks SigV4 as AWS does, with botocore's own
//! signer and the real key (`python/aws_upstream.py`).
//!
//! What must hold: every request the upstream receives verifies with the real key; the
//! requests sluice refuses (a signature the placeholder key did not make, a service or region
//! the secret does not grant) never reach it; and the real key is nowhere the sandbox or a
//! reviewer can read (the sandbox's environment and output, sluice's logs, the audit log).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sluice_integration_tests::launch::{Launch, RunOutput, python_venv};
use sluice_integration_tests::pki::TestPki;

const REAL_KEY_ID: &str = "AKIAREALKEY7EXAMPLE1";
const REAL_SECRET: &str = "rEaLsEcReTkEy/0123456789+abcdefghijKLMNOP";
const REAL_TOKEN: &str = "FwoGZXIvYXdzEREALTOKEN/with+slashes=and=equals0123456789";
const S3: &str = "s3.eu-west-1.amazonaws.com";
const STS: &str = "sts.eu-west-1.amazonaws.com";

/// The upstream: a process on a free loopback port, killed on drop.
struct Upstream {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Upstream {
    /// The upstream, wanting `token` as the session token when one is given.
    fn start(pki: &TestPki, dir: &Path, token: Option<&str>) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (cert, key) = pki.leaf_files(&[S3, STS]);
        let log = dir.join("upstream.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/aws_upstream.py");
        let mut command = Command::new(python_venv().join("bin/python"));
        if let Some(token) = token {
            command.env("UPSTREAM_AWS_SESSION_TOKEN", token);
        }
        let child = command
            .arg(script)
            .arg("127.0.0.1")
            .arg(port.to_string())
            .arg(cert)
            .arg(key)
            .arg(&log)
            .env("UPSTREAM_AWS_ACCESS_KEY_ID", REAL_KEY_ID)
            .env("UPSTREAM_AWS_SECRET_ACCESS_KEY", REAL_SECRET)
            .spawn()
            .expect("the AWS upstream starts");
        let ready = log.with_extension("jsonl.ready");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "the AWS upstream did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Upstream { child, port, log }
    }

    /// Every request the upstream received, one JSON object each.
    fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn declaration(services: &str, token: bool) -> String {
    let token = if token {
        "\n      session_token: { env: AWS_SESSION_TOKEN }"
    } else {
        ""
    };
    format!(
        r#"version: 1
secrets:
  aws_prod:
    sign: aws-sigv4
    from:
      access_key_id: {{ env: AWS_ACCESS_KEY_ID }}
      secret_access_key: {{ env: AWS_SECRET_ACCESS_KEY }}{token}
    hosts: [{S3}, {STS}]
    services: [{services}]
    regions: [eu-west-1]
egress:
  allow_ips: ["127.0.0.1/32"]
"#
    )
}

/// A launch holding the real key in sluice's environment (as an operator's shell would),
/// with the AWS CLI configured for path-style SigV4 against the local upstream.
fn launch(pki: &TestPki, dir: &Path, services: &str, token: Option<&str>) -> Launch {
    let config = dir.join("aws-config");
    std::fs::write(
        &config,
        "[default]\nregion = eu-west-1\ns3 =\n  addressing_style = path\n  signature_version = s3v4\n",
    )
    .unwrap();
    let launch = match token {
        Some(token) => Launch::new(pki).env("AWS_SESSION_TOKEN", token),
        None => Launch::new(pki),
    };
    launch
        .policy(&declaration(services, token.is_some()))
        .resolve(S3)
        .resolve(STS)
        .env("AWS_ACCESS_KEY_ID", REAL_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", REAL_SECRET)
        .env("AWS_CONFIG_FILE", config)
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("VENV", python_venv())
        .env("NODE_DIR", sluice_integration_tests::launch::node_dir())
        .env(
            "GO_S3",
            sluice_integration_tests::launch::go_client("aws_s3"),
        )
        .env("AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED", "true")
        .cwd(dir)
}

/// The real key id, secret and token are in none of what the run left: the sandbox's
/// output, sluice's own stderr (its logs), the audit log.
fn assert_nowhere_a_real_part(out: &RunOutput) {
    for (what, text) in [
        ("stdout", &out.stdout),
        ("stderr", &out.stderr),
        ("the audit log", &out.audit),
    ] {
        assert_no_real_key(what, text);
    }
}

fn assert_no_real_key(what: &str, text: &str) {
    assert!(
        !text.contains(REAL_KEY_ID),
        "{what} holds the real key id:\n{text}"
    );
    assert!(
        !text.contains(REAL_SECRET),
        "{what} holds the real secret:\n{text}"
    );
    assert!(
        !text.contains(REAL_TOKEN),
        "{what} holds the real session token:\n{text}"
    );
}

#[test]
fn the_aws_cli_and_boto3_sign_with_placeholders_and_sluice_re_signs_with_the_real_key() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(&pki, dir.path(), None);
    let port = upstream.port;
    let chunked = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/aws_chunked_client.py");
    let chunked = chunked.display();
    let script = format!(
        r#"set -eu
aws="$VENV/bin/aws"
s3="https://{S3}:{port}"
echo "env: $(env | grep '^AWS_' | sort | tr '\n' ' ')"
echo hello > hello.txt
"$aws" --endpoint-url "$s3" s3 cp hello.txt s3://sluice-test/hello.txt --no-progress
"$aws" --endpoint-url "$s3" s3 ls
# A multipart upload with streaming checksums (aws-chunked, unsigned, CRC32 trailers).
head -c 20971520 /dev/urandom > big.bin
"$aws" --endpoint-url "$s3" s3 cp big.bin s3://sluice-test/big.bin --no-progress
"$aws" --endpoint-url "$s3" s3 cp s3://sluice-test/big.bin back.bin --no-progress
cmp big.bin back.bin && echo "multipart intact"
# A signed aws-chunked upload (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), every chunk signed.
"$VENV/bin/python" "{chunked}" "$s3/sluice-test/chunked.bin" big.bin eu-west-1 s3
"$aws" --endpoint-url "$s3" s3 cp s3://sluice-test/chunked.bin chunked-back.bin --no-progress
cmp big.bin chunked-back.bin && echo "signed chunks intact"
# Signed chunks and a signed trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER): the CRC32
# passes unchanged, checked by the upstream against the data.
"$VENV/bin/python" "{chunked}" --trailer "$s3/sluice-test/trailed.bin" big.bin eu-west-1 s3
"$aws" --endpoint-url "$s3" s3 cp s3://sluice-test/trailed.bin trailed-back.bin --no-progress
cmp big.bin trailed-back.bin && echo "signed trailer intact"
# AWS's JavaScript SDK v3, and its Go SDK v2.
node "$NODE_DIR/aws_s3.mjs" "$s3" sluice-test
"$GO_S3" "$s3" sluice-test
url=$("$aws" --endpoint-url "$s3" s3 presign s3://sluice-test/hello.txt)
echo "presigned: $(curl -s -o /dev/null -w '%{{http_code}}' "$url")"
"$aws" --endpoint-url "https://{STS}:{port}" sts get-caller-identity --output text
"$VENV/bin/python" - <<'PY'
import boto3
s3 = boto3.client("s3", endpoint_url="https://{S3}:{port}", region_name="eu-west-1",
                  config=boto3.session.Config(s3={{"addressing_style": "path"}}))
print("buckets:", [b["Name"] for b in s3.list_buckets()["Buckets"]])
# A signed Accept-Encoding naming a coding sluice cannot decode: narrowed, then signed again.
def ask_compress(request, **kwargs):
    request.headers["Accept-Encoding"] = "compress, gzip"
s3.meta.events.register("before-sign.s3.ListBuckets", ask_compress)
print("signed accept-encoding:", [b["Name"] for b in s3.list_buckets()["Buckets"]])
PY
"#
    );
    let out = launch(&pki, dir.path(), "s3, sts", None).run(&["bash", "-c", &script]);
    out.assert_success("the AWS CLI and boto3");
    assert!(out.stdout.contains("multipart intact"), "{}", out.stdout);
    for intact in ["signed chunks intact", "signed trailer intact"] {
        assert!(out.stdout.contains(intact), "{intact}: {}", out.stdout);
    }
    assert!(out.stdout.contains("sluice-test"), "{}", out.stdout);
    assert!(out.stdout.contains("presigned: 200"), "{}", out.stdout);
    // The JavaScript and Go SDKs signed with the placeholders too, a 6 MiB object intact.
    for line in [
        "js get: hello from js",
        "js big intact",
        "go buckets: sluice-test",
        "go get: hello from go",
        "go big intact",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} missing in\n{}",
            out.stdout
        );
    }
    assert!(
        out.stdout.contains("buckets: ['sluice-test']"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("signed accept-encoding: ['sluice-test']"),
        "{}",
        out.stdout
    );
    // The sandbox holds placeholders under the names SDKs read.
    let env_line = out.stdout.lines().find(|l| l.starts_with("env:")).unwrap();
    assert!(env_line.contains("AWS_ACCESS_KEY_ID=SLUICE"), "{env_line}");
    assert!(
        env_line.contains("AWS_PROD_SECRET_ACCESS_KEY=SLUICE_"),
        "{env_line}"
    );
    // STS answers with the key id it saw, the real one: redacted on its way back.
    let identity = out
        .stdout
        .lines()
        .find(|l| l.contains("123456789012"))
        .unwrap();
    assert!(identity.contains("SLUICE"), "{identity}");
    assert_nowhere_a_real_part(&out);
    // Every request that reached the upstream verified with the real key.
    let requests = upstream.requests();
    assert!(requests.len() >= 4, "{requests:?}");
    for request in &requests {
        assert_eq!(request["verified"], true, "{request}");
    }
    let payloads: Vec<&str> = requests
        .iter()
        .filter_map(|r| r["payload"].as_str())
        .collect();
    assert!(
        payloads.contains(&"STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
        "{payloads:?}"
    );
    assert!(
        payloads.contains(&"STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        "{payloads:?}"
    );
    // The trailer reached it signed by the real key, its checksum as the client computed.
    assert!(
        requests.iter().any(
            |r| r["payload"] == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
                && r["trailer_verified"] == true
        ),
        "{requests:?}"
    );
    assert!(
        requests.iter().any(|r| r["form"] == "query"),
        "the presigned URL reached it"
    );
    assert!(
        requests.iter().any(|r| r["service"] == "sts"),
        "the STS call reached it"
    );
    // Each re-signing is a swap at location signature, service and region in the reason.
    let swaps: Vec<&str> = out
        .audit
        .lines()
        .filter(|l| l.contains("\"event\":\"swap\"") && l.contains("\"location\":\"signature\""))
        .collect();
    assert!(swaps.len() >= 4, "{}", out.audit);
    assert!(
        swaps.iter().all(|l| l.contains("\"secret\":\"aws_prod\"")),
        "{swaps:?}"
    );
    assert!(
        swaps
            .iter()
            .any(|l| l.contains("service sts, region eu-west-1")),
        "{swaps:?}"
    );
}

#[test]
fn a_signature_the_placeholder_key_did_not_make_or_an_ungranted_scope_is_refused_and_nothing_is_sent()
 {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(&pki, dir.path(), None);
    let port = upstream.port;
    let chunked = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/aws_chunked_client.py");
    let chunked = chunked.display();
    let script = format!(
        r#"set -u
aws="$VENV/bin/aws"
# Signed with another secret under the placeholder key id: a forgery, or a client that
# mangled its key.
AWS_SECRET_ACCESS_KEY=not-the-placeholder-secret-0123456789abcdef "$aws" --endpoint-url "https://{S3}:{port}" s3 ls 2>&1 | tail -1
# A region the secret is not granted.
"$aws" --region us-east-1 --endpoint-url "https://{S3}:{port}" s3 ls 2>&1 | tail -1
# A service the secret is not granted (sts is not among its services here).
"$aws" --endpoint-url "https://{STS}:{port}" sts get-caller-identity 2>&1 | tail -1
# A signed aws-chunked upload with a chunk changed after it was signed.
head -c 300000 /dev/zero > zeros.bin
"$VENV/bin/python" "{chunked}" --tamper "https://{S3}:{port}/sluice-test/tampered.bin" zeros.bin eu-west-1 s3 2>&1 | tail -1
# A signed trailer whose checksum changed after it was signed, and one the head did not announce.
"$VENV/bin/python" "{chunked}" --tamper-trailer "https://{S3}:{port}/sluice-test/tampered-trailer.bin" zeros.bin eu-west-1 s3 2>&1
"$VENV/bin/python" "{chunked}" --unannounced "https://{S3}:{port}/sluice-test/tampered-unannounced.bin" zeros.bin eu-west-1 s3 2>&1
# A placeholder in a signed trailer: never swapped there, refused.
"$VENV/bin/python" "{chunked}" --key-in-trailer "https://{S3}:{port}/sluice-test/tampered-key-in-trailer.bin" zeros.bin eu-west-1 s3 2>&1
# Two Content-Encoding fields, signed as SigV4 joins them: refused, not read by the first.
"$VENV/bin/python" "{chunked}" --second-coding "https://{S3}:{port}/sluice-test/two-codings.bin" zeros.bin eu-west-1 s3 2>&1
# A placeholder in an upload's data: never swapped there, refused.
echo "key=$AWS_ACCESS_KEY_ID" > leak.txt
"$aws" --endpoint-url "https://{S3}:{port}" s3 cp leak.txt s3://sluice-test/leak.txt 2>&1 | tail -1
"#
    );
    // The signer's own tracing is asked for: it must stay silent about the real key.
    let out = launch(&pki, dir.path(), "s3", None)
        .env(
            "RUST_LOG",
            "aws_sigv4=trace,sluice_sign=trace,sluice_proxy=debug",
        )
        .run(&["bash", "-c", &script]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    // Of all these, only the tampered uploads' heads (their signatures were the placeholder
    // key's) and their checked chunks reached the upstream, and none completed: a signed
    // trailer is sent only once its signature verified.
    let reached = upstream.requests();
    assert!(
        reached.iter().all(|r| r["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/sluice-test/tampered"))
            && r["verified"] != true),
        "only the cut uploads reached the upstream, unfinished: {reached:?}"
    );
    let refusals: Vec<&str> = out
        .audit
        .lines()
        .filter(|l| l.contains("\"event\":\"refuse\""))
        .collect();
    let has = |code: &str| {
        refusals
            .iter()
            .any(|l| l.contains(&format!("\"reason\":\"{code}\"")))
    };
    assert!(has("signature-invalid"), "{}", out.audit);
    assert!(has("signing-not-granted"), "{}", out.audit);
    assert!(has("placeholder-not-granted"), "{}", out.audit);
    assert!(
        refusals.iter().any(|l| l.contains("key-in-trailer")
            && l.contains("\"reason\":\"placeholder-not-granted\"")),
        "the placeholder in a trailer: {}",
        out.audit
    );
    let signature_refusals = refusals
        .iter()
        .filter(|l| l.contains("signature-invalid"))
        .count();
    assert_eq!(
        signature_refusals, 4,
        "the forged signature, the tampered chunk, the tampered and the unannounced trailer: {}",
        out.audit
    );
    for why in [
        "trailers' signature does not verify",
        "trailers are not the ones x-amz-trailer announces",
    ] {
        assert!(out.stdout.contains(why), "{why}: {}", out.stdout);
    }
    assert!(out.stdout.contains("403"), "{}", out.stdout);
    // (Refused at its head: the client, still writing its body, may see the connection
    // close before it reads the answer, so the audit log says it.)
    assert!(
        refusals
            .iter()
            .any(|l| l.contains("two-codings.bin") && l.contains("\"reason\":\"bad-request\"")),
        "two Content-Encoding fields: {}",
        out.audit
    );
    assert_nowhere_a_real_part(&out);
}

#[test]
fn temporary_credentials_sign_with_the_placeholder_token_and_leave_with_the_real_one() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start(&pki, dir.path(), Some(REAL_TOKEN));
    let port = upstream.port;
    let script = format!(
        r#"set -eu
aws="$VENV/bin/aws"
echo "token: $AWS_SESSION_TOKEN"
"$aws" --endpoint-url "https://{S3}:{port}" s3 ls
url=$("$aws" --endpoint-url "https://{S3}:{port}" s3 presign s3://sluice-test/none.txt)
echo "presigned: $(curl -s -o /dev/null -w '%{{http_code}}' "$url")"
"$aws" --endpoint-url "https://{STS}:{port}" sts get-caller-identity --output text
"#
    );
    let out = launch(&pki, dir.path(), "s3, sts", Some(REAL_TOKEN)).run(&["bash", "-c", &script]);
    out.assert_success("temporary credentials");
    let token = out
        .stdout
        .lines()
        .find(|l| l.starts_with("token:"))
        .unwrap();
    assert!(
        token.starts_with("token: SLUICE_AWS_PROD_SESSION_TOKEN_"),
        "{token}"
    );
    assert!(out.stdout.contains("sluice-test"), "{}", out.stdout);
    // The object does not exist: the upstream checked the presigned URL and answered 404.
    assert!(out.stdout.contains("presigned: 404"), "{}", out.stdout);
    assert_nowhere_a_real_part(&out);
    let requests = upstream.requests();
    assert!(requests.len() >= 3, "{requests:?}");
    for request in &requests {
        assert_eq!(
            request["verified"], true,
            "the real token went with each: {request}"
        );
    }
}
