//! The real `sluice serve` binary as a child process: a declaration written to a temporary
//! directory, upstream hosts pinned to 127.0.0.1, the run directory read back for the proxy
//! URL, the CA and the placeholders. Stopped with SIGTERM, as an operator stops it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::ProxyAt;
use crate::pki::TestPki;

/// A running `sluice serve`, stopped (SIGTERM) when dropped.
pub struct ServeBinary {
    child: Child,
    dir: tempfile::TempDir,
    run_dir: PathBuf,
}

impl ServeBinary {
    /// `sluice serve --policy` of `yaml`, trusting `pki` for upstreams, with each of
    /// `hosts` resolved to 127.0.0.1 and `extra` arguments after the rest.
    pub fn start(yaml: &str, pki: &TestPki, hosts: &[&str], extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, yaml).expect("write the declaration");
        let run_dir = dir.path().join("run");
        let mut command = Command::new(crate::sluice_bin());
        command
            .arg("serve")
            .arg("--policy")
            .arg(&policy)
            .args(["--listen", "127.0.0.1:0", "--no-watch", "--run-dir"])
            .arg(&run_dir)
            .arg("--upstream-ca")
            .arg(pki.ca_path());
        for host in hosts {
            command.args(["--resolve", &format!("{host}=127.0.0.1")]);
        }
        let child = command
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("serve.err")).expect("stderr file"))
            .spawn()
            .expect("sluice serve starts");
        let serve = Self {
            child,
            dir,
            run_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        // `proxy-url` is written last (docs/serve.md): the other run files are there then.
        while !serve.run_dir.join("proxy-url").exists() {
            assert!(
                Instant::now() < deadline,
                "sluice serve wrote no proxy-url: {}",
                serve.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        serve
    }

    /// A file of the run directory, trimmed.
    pub fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.run_dir.join(file))
            .expect("run file")
            .trim()
            .to_owned()
    }

    /// Where the proxy listens, with its credentials and CA.
    pub fn proxy(&self) -> ProxyAt {
        let url = self.read("proxy-url");
        let addr = url
            .rsplit('@')
            .next()
            .expect("host:port")
            .parse()
            .expect("addr");
        ProxyAt {
            addr,
            url,
            ca: self.ca_path(),
        }
    }

    /// The run CA, PEM.
    pub fn ca_path(&self) -> PathBuf {
        self.run_dir.join("ca.pem")
    }

    /// The placeholder of the secret whose variable is `variable` (`API_TOKEN`).
    pub fn placeholder(&self, variable: &str) -> String {
        let prefix = format!("{variable}=");
        self.read("placeholders.env")
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
            .unwrap_or_else(|| panic!("{variable} in placeholders.env"))
    }

    /// The audit log.
    pub fn audit_path(&self) -> PathBuf {
        self.run_dir.join("audit.jsonl")
    }

    /// The audit log's lines so far.
    pub fn audit_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// What sluice printed on stderr.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.err")).unwrap_or_default()
    }

    /// The temporary directory that holds the declaration and the run directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `yaml` over the declaration and reloads it (SIGHUP), returning once the
    /// audit log says it was put in force.
    pub fn reload(&self, yaml: &str) {
        let reloaded = |lines: &[String]| {
            lines
                .iter()
                .filter(|l| l.contains("\"event\":\"reload\"") && l.contains("\"reloaded\""))
                .count()
        };
        let before = reloaded(&self.audit_lines());
        std::fs::write(self.dir.path().join("policy.yaml"), yaml).expect("write the declaration");
        let _ = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while reloaded(&self.audit_lines()) == before {
            assert!(
                Instant::now() < deadline,
                "the reload was not put in force: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Stops sluice with SIGTERM, waits for it to flush its log, and returns the log.
    pub fn stop(mut self) -> Vec<String> {
        self.terminate();
        let status = self.child.wait().expect("sluice exits");
        assert!(
            status.success(),
            "sluice serve exited {status}: {}",
            self.stderr()
        );
        self.audit_lines()
    }

    /// Kills sluice outright (SIGKILL: no drain, no `stop` record, nothing flushed), as an
    /// OOM kill or a crash would, and waits for it to be gone.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }
}

impl Drop for ServeBinary {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
            let _ = self.child.wait();
        }
    }
}
