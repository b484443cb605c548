//! The container image, built from the repository's Dockerfile by deploy/image-test.sh and
//! run by podman as docs/kubernetes.md deploys it: `sluice serve` in the image swapping,
//! redacting and refusing; its default command and healthcheck; and the documented pod,
//! whose capture init container leaves a sandbox that ignores the proxy no way around it.
//!
//! Ignored by a plain `cargo test` (they need root, podman and the built image);
//! deploy/image-test.sh runs them with `--ignored` once the image is built. The upstreams
//! are real hyper servers on the host's 127.0.0.1, which the containers reach as
//! 10.0.2.2 (slirp4netns with `allow_host_loopback`): nothing else is dialled.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use sluice_integration_tests::podman::{
    self, HOST_LOOPBACK, NETWORK, Scope, exit_code, logs, ok, wait_for_file,
};
use sluice_integration_tests::{Curl, RecordingUpstream, TestPki, kubernetes_doc, sluice_bin};

const TOKEN: &str = "tok-REAL-image-0123456789abcdef";
const NEEDS_THE_IMAGE: &str = "needs root, podman and the image: run deploy/image-test.sh";
/// The image's user, and the group docs/kubernetes.md's capture rules let out.
const NONROOT: u32 = 65532;
const SLUICE_GROUP: u32 = 1337;

/// The directory mounted at /etc/sluice: the declaration (the token comes from the
/// environment, as a Secret's `secretKeyRef` gives it) and the test upstreams' CA. Readable
/// by the image's user, as a ConfigMap is.
fn config_dir(pki: &TestPki) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("policy.yaml"),
        format!(
            "version: 1\nsecrets:\n  api_token:\n    from: {{ env: API_TOKEN }}\n    hosts: [api.test]\n    sinks: [egress]\n    in: [header, body]\negress:\n  allow: [other.test]\n  allow_ips: [\"{HOST_LOOPBACK}/32\"]\n"
        ),
    )
    .expect("write the declaration");
    std::fs::copy(pki.ca_path(), dir.path().join("upstream-ca.pem")).expect("copy the CA");
    for entry in std::fs::read_dir(dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// The placeholder `serve` wrote for `api_token`.
fn placeholder(run_dir: &Path) -> String {
    let env = std::fs::read_to_string(run_dir.join("placeholders.env")).expect("placeholders");
    env.lines()
        .find_map(|line| line.strip_prefix("API_TOKEN="))
        .expect("API_TOKEN in placeholders.env")
        .to_owned()
}

fn verify_audit(log: &Path) -> String {
    let audit = std::fs::read_to_string(log).expect("the audit log");
    assert!(
        !audit.contains(TOKEN),
        "the real value in the audit log: {audit}"
    );
    let verified = std::process::Command::new(sluice_bin())
        .args(["audit", "verify"])
        .arg(log)
        .output()
        .expect("sluice audit verify");
    assert!(
        verified.status.success(),
        "the image's audit log does not verify: {}",
        String::from_utf8_lossy(&verified.stderr)
    );
    audit
}

#[test]
#[ignore = "needs root, podman and the image: run deploy/image-test.sh"]
fn the_image_runs_sluice_as_its_entrypoint() {
    let (image, _) = podman::images();
    let version = ok("sluice --version", &["run", "--rm", &image, "--version"]);
    assert_eq!(
        version,
        format!("sluice {}", env!("CARGO_PKG_VERSION")),
        "{NEEDS_THE_IMAGE}"
    );
    // The runtime has no shell (distroless): nothing for a compromised process to run.
    let shell = podman::podman(&[
        "run",
        "--rm",
        "--entrypoint",
        "/bin/sh",
        &image,
        "-c",
        "true",
    ]);
    // 127: the runtime found no such program (any other failure would say nothing).
    assert_eq!(
        shell.status.code(),
        Some(127),
        "a shell in the image? {shell:?}"
    );
    let user = ok(
        "the image's user",
        &["image", "inspect", "--format", "{{.Config.User}}", &image],
    );
    assert_eq!(user, format!("{NONROOT}:{NONROOT}"));
}

#[tokio::test]
#[ignore = "needs root, podman and the image: run deploy/image-test.sh"]
async fn serve_in_the_image_swaps_redacts_refuses_and_drains_on_stop() {
    let pki = TestPki::new();
    let upstream =
        RecordingUpstream::start(&pki, &["api.test", "other.test"], &[b"http/1.1"]).await;
    let port = upstream.port();
    let config = config_dir(&pki);
    let config_path = config.path().to_owned();
    let outcome = tokio::task::spawn_blocking(move || {
        let (image, _) = podman::images();
        let mut scope = Scope::new("serve");
        let (volume, run_dir) = scope.volume("run");
        let name = scope.container("sluice");
        ok(
            "start sluice serve in the image",
            &[
                "run",
                "-d",
                "--name",
                &name,
                "--network",
                NETWORK,
                "--no-healthcheck",
                "-p",
                "127.0.0.1::3128",
                "--add-host",
                &format!("api.test:{HOST_LOOPBACK}"),
                "--add-host",
                &format!("other.test:{HOST_LOOPBACK}"),
                "-e",
                &format!("API_TOKEN={TOKEN}"),
                "-v",
                &format!("{}:/etc/sluice:ro", config_path.display()),
                "-v",
                &format!("{volume}:/run/sluice"),
                &image,
                "serve",
                "--policy",
                "/etc/sluice/policy.yaml",
                "--listen",
                "0.0.0.0:3128",
                "--run-dir",
                "/run/sluice",
                "--upstream-ca",
                "/etc/sluice/upstream-ca.pem",
            ],
        );
        wait_for_file(&run_dir.join("proxy-url"), &name);

        // The run directory: the image's user's, 0700; proxy-url 0600.
        let meta = std::fs::metadata(&run_dir).expect("run dir");
        assert_eq!(
            (meta.uid(), meta.mode() & 0o777),
            (NONROOT, 0o700),
            "run dir"
        );
        let url_meta = std::fs::metadata(run_dir.join("proxy-url")).expect("proxy-url");
        assert_eq!((url_meta.uid(), url_meta.mode() & 0o777), (NONROOT, 0o600));

        // proxy-url names the loopback a neighbour dials; the host reaches the published port.
        let url = std::fs::read_to_string(run_dir.join("proxy-url")).expect("proxy-url");
        let url = url.trim();
        assert!(url.ends_with("@127.0.0.1:3128"), "proxy-url: {url}");
        let published = ok("the published port", &["port", &name, "3128/tcp"]);
        let published = published.lines().next().expect("a port").to_owned();
        let from_host = url.replace("127.0.0.1:3128", &published);
        let ca = run_dir.join("ca.pem");
        let placeholder = placeholder(&run_dir);

        // A swap, and the echo redacted on its way back.
        let swapped = Curl::new(&from_host, &ca)
            .args(["-H", &format!("Authorization: Bearer {placeholder}")])
            .args(["--data-binary", &format!("echo {placeholder}")])
            .get(&format!("https://api.test:{port}/echo"));
        assert_eq!(swapped.status, 200, "swap: {swapped:?}\n{}", logs(&name));
        assert_eq!(swapped.body, format!("echo {placeholder}"), "redaction");
        // A placeholder toward a host its secret does not grant: 403, nothing sent.
        let refused = Curl::new(&from_host, &ca)
            .args(["-H", &format!("Authorization: Bearer {placeholder}")])
            .get(&format!("https://other.test:{port}/not-granted"));
        assert_eq!(refused.status, 403, "not granted: {refused:?}");
        // No proxy credentials: 407.
        let anonymous = Curl::new(&format!("http://{published}"), &ca)
            .get(&format!("https://api.test:{port}/anonymous"));
        assert!(
            anonymous.stderr.contains("response 407") || anonymous.status == 407,
            "no credentials: {anonymous:?}"
        );

        // `podman stop` sends the image's STOPSIGNAL: sluice drains and exits 0.
        ok("podman stop", &["stop", "-t", "20", &name]);
        assert_eq!(exit_code(&name), 0, "sluice's exit: {}", logs(&name));
        let said = logs(&name);
        assert!(
            !said.contains(TOKEN),
            "the real value in sluice's logs: {said}"
        );
        verify_audit(&run_dir.join("audit.jsonl"))
    })
    .await
    .expect("the steps ran");

    for event in [
        "\"event\":\"swap\"",
        "\"event\":\"redact\"",
        "placeholder-not-granted",
    ] {
        assert!(outcome.contains(event), "{event} not in {outcome}");
    }
    let records = upstream.records();
    let paths: Vec<_> = records.iter().map(|r| r.uri.path().to_owned()).collect();
    assert_eq!(paths, ["/echo"], "what reached the upstream");
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str(),
        "the real value, toward the granted host"
    );
    assert_eq!(records[0].body, format!("echo {TOKEN}").as_bytes());
}

#[test]
#[ignore = "needs root, podman and the image: run deploy/image-test.sh"]
fn the_default_command_writes_a_proxy_url_its_neighbours_dial_and_passes_its_healthcheck() {
    let (image, tools) = podman::images();
    let pki = TestPki::new();
    let config = config_dir(&pki);
    let mut scope = Scope::new("default");
    let (volume, run_dir) = scope.volume("run");
    let name = scope.container("sluice");
    // The image's own command: `serve --listen 0.0.0.0:3128 --run-dir /run/sluice`. Its
    // healthcheck kept, but run by hand below: podman's timer for it needs systemd.
    ok(
        "start the image's default command",
        &[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            NETWORK,
            "--health-interval",
            "disable",
            "-e",
            "API_TOKEN=tok-REAL-default-command-0123456789",
            "-v",
            &format!("{}:/etc/sluice:ro", config.path().display()),
            "-v",
            &format!("{volume}:/run/sluice"),
            &image,
        ],
    );
    wait_for_file(&run_dir.join("proxy-url"), &name);
    let url = std::fs::read_to_string(run_dir.join("proxy-url")).expect("proxy-url");
    assert!(
        url.starts_with("http://") && url.trim().ends_with("@127.0.0.1:3128"),
        "proxy-url of a 0.0.0.0 listener: {url}"
    );

    // The healthcheck is in the image (Docker's format keeps it) and passes.
    let inspected: serde_json::Value =
        serde_json::from_str(&ok("inspect the image", &["image", "inspect", &image]))
            .expect("podman's JSON");
    let check = &inspected[0]["Healthcheck"]["Test"];
    assert!(
        check.to_string().contains("busybox nc"),
        "no HEALTHCHECK in the image: {check}"
    );
    ok("podman healthcheck run", &["healthcheck", "run", &name]);

    // A neighbour in the same network namespace (a pod's sandbox) uses proxy-url as written.
    let neighbour = scope.container("neighbour");
    let answer = ok(
        "a neighbour dials proxy-url",
        &[
            "run",
            "--name",
            &neighbour,
            "--network",
            &format!("container:{name}"),
            "--user",
            &format!("{NONROOT}:{NONROOT}"),
            "-v",
            &format!("{volume}:/run/sluice:ro"),
            &tools,
            "sh",
            "-c",
            "curl -sS -o /dev/null -D - --proxy \"$(cat /run/sluice/proxy-url)\" http://denied.test/",
        ],
    );
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains("sluice-error: host-not-allowed"),
        "{answer}"
    );

    ok("podman stop", &["stop", "-t", "20", &name]);
    assert_eq!(exit_code(&name), 0, "sluice's exit: {}", logs(&name));

    // The same healthcheck in a container of the image where nothing listens on 3128 (a
    // sluice that never started): unhealthy.
    let idle = scope.container("idle");
    ok(
        "start the image with nothing listening",
        &[
            "run",
            "-d",
            "--name",
            &idle,
            "--network",
            NETWORK,
            "--health-interval",
            "disable",
            "--entrypoint",
            "/usr/local/bin/busybox",
            &image,
            "sleep",
            "60",
        ],
    );
    let unhealthy = podman::podman(&["healthcheck", "run", &idle]);
    assert!(
        !unhealthy.status.success(),
        "healthy with nothing listening: {unhealthy:?}"
    );
}

#[tokio::test]
#[ignore = "needs root, podman and the image: run deploy/image-test.sh"]
async fn the_documented_pod_captures_a_sandbox_that_ignores_the_proxy() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, &["api.test"], &[b"http/1.1"]).await;
    let port = upstream.port();
    let config = config_dir(&pki);
    let config_path = config.path().to_owned();
    let capture = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        capture.path().join("capture.nft"),
        kubernetes_doc::capture_rules(),
    )
    .expect("capture.nft");
    let capture_path = capture.path().to_owned();
    let (said, audit) = tokio::task::spawn_blocking(move || {
        let (image, tools) = podman::images();
        let mut scope = Scope::new("pod");
        let pod = scope.pod("agent");
        // emptyDir volumes with the pod's `fsGroup: 65532`: group-owned and group-writable.
        let (run_volume, run_root) = scope.volume("sluice-run");
        let (audit_volume, audit_root) = scope.volume("sluice-audit");
        for dir in [&run_root, &audit_root] {
            std::os::unix::fs::chown(dir, Some(0), Some(NONROOT)).expect("chown");
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o2775)).expect("chmod");
        }
        ok(
            "create the pod",
            &["pod", "create", "--name", &pod, "--network", NETWORK,
              "--add-host", &format!("api.test:{HOST_LOOPBACK}")],
        );
        // Step 4's init container: the rules, with NET_ADMIN and nothing else.
        let init = scope.container("sluice-capture");
        ok(
            "create the capture init container",
            &[
                "create", "--pod", &pod, "--name", &init, "--init-ctr", "once",
                "--user", "0", "--cap-drop", "all", "--cap-add", "NET_ADMIN",
                "-v", &format!("{}:/etc/sluice-capture:ro", capture_path.display()),
                &tools, "nft", "-f", "/etc/sluice-capture/capture.nft",
            ],
        );
        // Step 2's sidecar, with step 4's changes: its args as the page lists them, then
        // --transparent; user 65532, group 1337, the volumes' group beside it.
        let sidecar = scope.container("sluice");
        let mut create = vec![
            "create".to_owned(), "--pod".into(), pod.clone(), "--name".into(), sidecar.clone(),
            "--user".into(), format!("{NONROOT}:{SLUICE_GROUP}"),
            "--group-add".into(), NONROOT.to_string(),
            "--read-only".into(), "--cap-drop".into(), "all".into(),
            "--security-opt".into(), "no-new-privileges".into(),
            "-e".into(), format!("API_TOKEN={TOKEN}"), "-e".into(), "RUST_LOG=info".into(),
            "-v".into(), format!("{run_volume}:/run/sluice"),
            "-v".into(), format!("{audit_volume}:/var/log/sluice"),
            "-v".into(), format!("{}:/etc/sluice:ro", config_path.display()),
            image,
        ];
        create.extend(kubernetes_doc::sidecar_args());
        create.push("--transparent=127.0.0.1:15001".into());
        // The test's upstream is signed by the test's CA (a real one has a public certificate).
        create.push("--upstream-ca=/etc/sluice/upstream-ca.pem".into());
        let create: Vec<&str> = create.iter().map(String::as_str).collect();
        ok("create the sluice sidecar", &create);
        ok("start the pod", &["pod", "start", &pod]);
        let run_dir = run_root.join("run");
        // (podman removes a `once` init container when it has run; had `nft` failed, the
        // pod would not have started.)
        wait_for_file(&run_dir.join("proxy-url"), &sidecar);

        // The sandbox: an unprivileged user, no capabilities, the run volume read-only, no
        // proxy variable at all. It trusts the run CA and holds only the placeholder.
        let script = format!(
            r#"set -a; . /run/sluice/run/placeholders.env; set +a
env | grep -i '_proxy=' && echo "proxy variable set"
echo "captured $(curl -sS --max-time 20 --cacert /run/sluice/run/ca.pem -H "Authorization: Bearer $API_TOKEN" --data-binary "echo $API_TOKEN" -w ' %{{http_code}}' https://api.test:{port}/echo)"
curl -sk --max-time 10 -o /dev/null https://{HOST_LOOPBACK}:{port}/bare-ip && echo "bare-ip reached" || echo "bare-ip closed"
echo "plain $(curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' http://{HOST_LOOPBACK}:{port}/plain)"
echo x 2>/dev/null >/dev/udp/{HOST_LOOPBACK}/9999; echo "udp exit $?"
touch /run/sluice/run/written 2>/dev/null; echo "write exit $?"
"#
        );
        let sandbox = scope.container("sandbox");
        let out = podman::podman(&[
            "run", "--pod", &pod, "--name", &sandbox,
            "--user", &format!("{NONROOT}:{NONROOT}"), "--cap-drop", "all",
            "--security-opt", "no-new-privileges",
            "-v", &format!("{run_volume}:/run/sluice:ro"),
            &tools, "bash", "-c", &script,
        ]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "the sandbox: {said}{}\nsluice: {}",
            String::from_utf8_lossy(&out.stderr),
            logs(&sidecar)
        );
        let placeholder = placeholder(&run_dir);
        ok("stop the pod", &["pod", "stop", "-t", "20", &pod]);
        assert_eq!(exit_code(&sidecar), 0, "sluice's exit: {}", logs(&sidecar));
        let sidecar_said = logs(&sidecar);
        assert!(!sidecar_said.contains(TOKEN), "the real value in sluice's logs");
        (
            said.replace(&placeholder, "PLACEHOLDER"),
            verify_audit(&audit_root.join("audit.jsonl")),
        )
    })
    .await
    .expect("the steps ran");

    for line in [
        // Captured by its name, swapped, and the echo redacted back.
        "captured echo PLACEHOLDER 200",
        // TLS to a bare address has no name to decide on: closed.
        "bare-ip closed",
        // In the clear, named by its Host: an address nothing allows.
        "plain 403",
        // The rules' way_out: nothing but TCP to sluice and DNS.
        "udp exit 1",
        "write exit 1",
    ] {
        assert!(said.contains(line), "{line:?} not in {said}");
    }
    assert!(!said.contains("proxy variable set"), "{said}");
    assert!(
        !said.contains(TOKEN),
        "the sandbox saw the real value: {said}"
    );
    // Nothing reached the upstream but the one swapped request, through sluice.
    let records = upstream.records();
    let paths: Vec<_> = records.iter().map(|r| r.uri.path().to_owned()).collect();
    assert_eq!(paths, ["/echo"], "what reached the upstream");
    assert_eq!(
        records[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
    for event in ["\"event\":\"swap\"", "\"event\":\"redact\"", "no-target"] {
        assert!(audit.contains(event), "{event} not in {audit}");
    }
}
