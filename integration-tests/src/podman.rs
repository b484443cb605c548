//! podman, as the image's tests (tests/image.rs) drive it: the image under test, names no
//! other run can hold, and what a test made removed when it ends, failing or not.
//!
//! The containers reach the host's loopback as 10.0.2.2 (slirp4netns with
//! `allow_host_loopback`), where the tests' upstreams listen: no other address is dialled.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The network every container and pod of the tests uses.
pub const NETWORK: &str = "slirp4netns:allow_host_loopback=true";
/// The host's 127.0.0.1, seen from inside [`NETWORK`].
pub const HOST_LOOPBACK: &str = "10.0.2.2";

/// The image deploy/image-test.sh built (`SLUICE_IMAGE`), and the tools image it made for
/// the pod's other containers (`SLUICE_IMAGE_TOOLS`: sh, curl, nft).
pub fn images() -> (String, String) {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: these tests run from deploy/image-test.sh")
        })
    };
    (var("SLUICE_IMAGE"), var("SLUICE_IMAGE_TOOLS"))
}

/// `podman ARGS`, whatever its exit.
pub fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("podman runs (deploy/image-test.sh installs it)")
}

/// `podman ARGS`, which must succeed (`what` names the step in the failure); its stdout,
/// trimmed.
pub fn ok(what: &str, args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "{what}: podman {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Names for one test's containers, volumes and pods, all removed on drop.
pub struct Scope {
    prefix: String,
    containers: Vec<String>,
    pods: Vec<String>,
    volumes: Vec<String>,
}

impl Scope {
    /// A scope whose names start `sluice-it-TEST-PID`.
    pub fn new(test: &str) -> Self {
        Self {
            prefix: format!("sluice-it-{test}-{}", std::process::id()),
            containers: Vec::new(),
            pods: Vec::new(),
            volumes: Vec::new(),
        }
    }

    /// A container's name, removed (with `-f`) at the end.
    pub fn container(&mut self, role: &str) -> String {
        let name = format!("{}-{role}", self.prefix);
        self.containers.push(name.clone());
        name
    }

    /// A pod's name, removed (with its containers) at the end.
    pub fn pod(&mut self, role: &str) -> String {
        let name = format!("{}-{role}", self.prefix);
        self.pods.push(name.clone());
        name
    }

    /// A new named volume, and where it is on the host.
    pub fn volume(&mut self, role: &str) -> (String, PathBuf) {
        let name = format!("{}-{role}", self.prefix);
        ok("create a volume", &["volume", "create", &name]);
        self.volumes.push(name.clone());
        let at = ok(
            "find a volume",
            &["volume", "inspect", "--format", "{{.Mountpoint}}", &name],
        );
        (name, PathBuf::from(at))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = podman(&["rm", "-f", "-t", "0", name]);
        }
        for name in &self.pods {
            let _ = podman(&["pod", "rm", "-f", "-t", "0", name]);
        }
        for name in &self.volumes {
            let _ = podman(&["volume", "rm", "-f", name]);
        }
    }
}

/// Waits (up to 60 s) for `path` to exist, naming `container`'s logs if it never does.
pub fn wait_for_file(path: &std::path::Path, container: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        if Instant::now() > deadline {
            let logs = podman(&["logs", container]);
            panic!(
                "{} never appeared; {container} said: {}{}",
                path.display(),
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A container's logs (stdout and stderr together).
pub fn logs(container: &str) -> String {
    let out = podman(&["logs", container]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A stopped container's exit code.
pub fn exit_code(container: &str) -> i64 {
    ok(
        "read an exit code",
        &["inspect", "--format", "{{.State.ExitCode}}", container],
    )
    .parse()
    .expect("an exit code")
}
