//! `sluice serve` as a child process, for the cases that weigh the proxy's own memory or
//! descriptors (floods, a slow reader, running out of file descriptors).

use std::time::Duration;

use sluice_integration_tests::TestPki;
use sluice_integration_tests::client::ProxyAt;

use crate::HOSTS;

/// `sluice serve` as a child process, so that its memory can be read from
/// `/proc/<pid>/status` apart from the test's own.
pub(crate) struct ServeProcess {
    child: std::process::Child,
    pub(crate) at: ProxyAt,
    _dir: tempfile::TempDir,
}

impl ServeProcess {
    /// Starts `sluice serve` with `yaml`, trusting `pki`, every host of [`HOSTS`] pinned to
    /// 127.0.0.1. `shell_prefix` runs before it in `sh` (a `ulimit`, say).
    pub(crate) async fn start(yaml: &str, pki: &TestPki, shell_prefix: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, yaml).expect("policy");
        let run_dir = dir.path().join("run");
        let mut command = format!(
            "{shell_prefix} exec '{}' serve --policy '{}' --listen 127.0.0.1:0 --run-dir '{}' --upstream-ca '{}'",
            sluice_integration_tests::sluice_bin().display(),
            policy.display(),
            run_dir.display(),
            pki.ca_path().display()
        );
        for host in HOSTS {
            command.push_str(&format!(" --resolve {host}=127.0.0.1"));
        }
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn sluice serve");
        let url_file = run_dir.join("proxy-url");
        let mut url = String::new();
        for _ in 0..400 {
            url = std::fs::read_to_string(&url_file).unwrap_or_default();
            if url.ends_with('\n') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let url = url.trim().to_owned();
        let addr = url
            .rsplit('@')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("sluice serve wrote no proxy URL: {url:?}"));
        Self {
            child,
            at: ProxyAt {
                addr,
                url,
                ca: run_dir.join("ca.pem"),
            },
            _dir: dir,
        }
    }

    /// The child's resident memory, in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the proxy process is gone");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// How many file descriptors the child has open.
    pub(crate) fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|dir| dir.count())
            .unwrap_or(0)
    }

    /// Panics unless the child is still running.
    pub(crate) fn assert_alive(&mut self) {
        let exited = self.child.try_wait().expect("wait");
        assert!(exited.is_none(), "sluice serve exited: {exited:?}");
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident memory may grow this much over a flood or a slow read, and no more (the floods
/// and the slow read would hold hundreds of MiB if any of them were buffered).
pub(crate) const RSS_GROWTH_LIMIT_KIB: u64 = 96 * 1024;
