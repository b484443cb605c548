//! Driving the real `sluice run` binary the way a platform would: a declaration on disk,
//! `--upstream-ca` for the test PKI, `--resolve` pins to 127.0.0.1, and a child command that
//! gets nothing but what the launcher puts in its environment.
//!
//! Also the checks a client test repeats: that a real value appears nowhere under a
//! directory the sandbox wrote, and that a client tool is installed (failing loudly, naming
//! the `.ci/run` step that installs it, when it is not).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pki::TestPki;
use crate::sluice_bin;

/// What one `sluice run` produced.
#[derive(Debug)]
pub struct RunOutput {
    /// sluice's exit code (the child's, or 128 + N, or 125).
    pub code: Option<i32>,
    /// The child's stdout, as redacted by the launcher.
    pub stdout: String,
    /// The child's stderr, as redacted by the launcher, and sluice's own.
    pub stderr: String,
    /// This run's part of the audit log (its chain, from `start`), one JSON event per line.
    pub audit: String,
}

impl RunOutput {
    /// Panics with both streams unless the run exited 0.
    pub fn assert_success(&self, what: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed under sluice run\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
    }

    /// How many audit events have `"event":"<kind>"`.
    pub fn audit_events(&self, kind: &str) -> usize {
        let needle = format!("\"event\":\"{kind}\"");
        self.audit.lines().filter(|l| l.contains(&needle)).count()
    }
}

/// One `sluice run` to prepare: a declaration, the hosts pinned to 127.0.0.1, extra
/// environment for the child, and a working directory.
pub struct Launch {
    dir: tempfile::TempDir,
    upstream_ca: PathBuf,
    resolve: Vec<String>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
}

impl Launch {
    /// A launch whose upstreams chain to `pki`. Its private directory (for the declaration,
    /// secret files and the audit log) is apart from anything the child is given.
    pub fn new(pki: &TestPki) -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
            upstream_ca: pki.ca_path(),
            resolve: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Writes a secret's value into a 0600 file of the private directory; returns its path,
    /// for `from: { file: ... }`.
    pub fn secret_file(&self, name: &str, value: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        std::fs::write(&path, value).expect("write secret file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod secret file");
        path
    }

    /// Writes the declaration.
    pub fn policy(self, yaml: &str) -> Self {
        std::fs::write(self.policy_path(), yaml).expect("write policy");
        self
    }

    /// Pins `host` to 127.0.0.1 (`--resolve host=127.0.0.1`).
    pub fn resolve(mut self, host: &str) -> Self {
        self.resolve.push(format!("{host}=127.0.0.1"));
        self
    }

    /// Sets a variable in sluice's environment, which the child inherits (redacted).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The child's working directory.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_owned());
        self
    }

    fn policy_path(&self) -> PathBuf {
        self.dir.path().join("policy.yaml")
    }

    fn audit_path(&self) -> PathBuf {
        self.dir.path().join("audit.jsonl")
    }

    /// Runs `sluice run ... -- command` (blocking: call it from `spawn_blocking` when an
    /// upstream runs on the test's runtime).
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, command: &[S]) -> RunOutput {
        let mut cmd = Command::new(sluice_bin());
        cmd.arg("run")
            .arg("--policy")
            .arg(self.policy_path())
            .arg("--audit-log")
            .arg(self.audit_path())
            .arg("--upstream-ca")
            .arg(&self.upstream_ca);
        for pin in &self.resolve {
            cmd.arg("--resolve").arg(pin);
        }
        cmd.arg("--").args(command);
        // The child must get its proxy and trust from sluice alone: drop anything the test
        // runner's own environment would have lent it.
        for name in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            cmd.env_remove(name);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        // The log is appended to run after run: this run's lines are those after `before`.
        let before = std::fs::metadata(self.audit_path()).map_or(0, |m| m.len() as usize);
        let out = cmd.output().expect("sluice run starts");
        let audit = std::fs::read_to_string(self.audit_path()).unwrap_or_default();
        RunOutput {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            audit: audit.get(before..).unwrap_or_default().to_owned(),
        }
    }
}

/// Every file under `dir` whose bytes contain `needle` (symlinks not followed).
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.is_file()
            && std::fs::read(&path)
                .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        {
            found.push(path);
        }
    }
    found
}

/// Asserts `program` runs (`program --version`), or fails naming what is missing and how
/// `.ci/run` installs it. A client that cannot run fails the test; it never skips.
pub fn require_program(program: &str, installed_by: &str) {
    let ran = Command::new(program).arg("--version").output();
    assert!(
        matches!(&ran, Ok(out) if out.status.success()),
        "`{program}` is missing or broken on this machine ({ran:?}); {installed_by}"
    );
}

/// The workspace root (the parent of `integration-tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests has a parent")
        .to_owned()
}

/// The Python virtual environment `.ci/run` prepares with `requests`, `httpx` and `grpcio`
/// (`$SLUICE_CLIENTS_VENV`, default `target/clients/venv`). Fails loudly when it is missing.
pub fn python_venv() -> PathBuf {
    let venv = std::env::var_os("SLUICE_CLIENTS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/clients/venv"));
    let python = venv.join("bin/python");
    let probe = Command::new(&python)
        .args(["-c", "import requests, httpx, grpc, pip"])
        .output();
    assert!(
        matches!(&probe, Ok(out) if out.status.success()),
        "the client venv at {} is missing or lacks requests/httpx/grpcio ({probe:?}); .ci/run \
         creates it with `python3 -m venv target/clients/venv` and `pip install requests httpx \
         grpcio` into it",
        venv.display()
    );
    venv
}

/// The Go program `integration-tests/go/NAME.go`, built against Debian's packaged Go
/// libraries (GOPATH mode: this machine kind reaches no Go module proxy) into
/// `target/clients/go/`, with its build cache there too. Fails loudly when Go or the
/// packages are missing (`.ci/run` installs `golang-go` and
/// `golang-github-aws-aws-sdk-go-v2-dev`).
pub fn go_client(name: &str) -> PathBuf {
    let gopath = "/usr/share/gocode";
    let source = workspace_root().join(format!("integration-tests/go/{name}.go"));
    let out_dir = workspace_root().join("target/clients/go");
    std::fs::create_dir_all(&out_dir).expect("target/clients/go");
    // Built under a name of this process's own, then renamed into place: concurrent tests
    // never write one file, and a binary being run is never changed under it.
    let built_as = out_dir.join(format!(
        "{name}.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let binary = out_dir.join(name);
    let built = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&built_as)
        .arg(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath)
        .env("GOCACHE", out_dir.join("cache"))
        .env("GOFLAGS", "")
        .output();
    assert!(
        matches!(&built, Ok(out) if out.status.success()),
        "building {} failed ({built:?}); .ci/run installs Go and the AWS SDK with `apt-get \
         install golang-go golang-github-aws-aws-sdk-go-v2-dev`",
        source.display()
    );
    std::fs::rename(&built_as, &binary).expect("the Go client moved into place");
    binary
}

/// `integration-tests/node`, with `node_modules` installed by `.ci/run` (`npm ci`). Fails
/// loudly when Node or its packages are missing.
pub fn node_dir() -> PathBuf {
    require_program(
        "node",
        ".ci/run installs it with `apt-get install nodejs npm` when absent",
    );
    let dir = workspace_root().join("integration-tests/node");
    assert!(
        dir.join("node_modules/undici/package.json").exists(),
        "{}/node_modules/undici is missing; .ci/run installs it with `npm ci` in integration-tests/node",
        dir.display()
    );
    dir
}

/// `sluice run` (in its jail) of `sh -c SCRIPT` over a declaration a test wrote itself: the
/// declaration, the audit log, the test PKI's CA for upstreams, names pinned to 127.0.0.1,
/// the working directory and variables of sluice's own environment.
pub struct ScriptRun {
    /// The declaration file.
    pub policy: PathBuf,
    /// Where the audit log goes.
    pub audit: PathBuf,
    /// The upstreams' CA (`--upstream-ca`).
    pub ca: PathBuf,
    /// Names pinned to 127.0.0.1 (`--resolve NAME=127.0.0.1`).
    pub resolve: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Variables set in sluice's environment (the command's, as the launcher passes them).
    pub env: Vec<(String, String)>,
}

impl ScriptRun {
    /// Runs `script`, off the async runtime, and returns what `sluice run` printed and its
    /// status.
    pub async fn run(&self, script: &str) -> std::process::Output {
        let mut command = Command::new(sluice_bin());
        command
            .arg("run")
            .arg("--policy")
            .arg(&self.policy)
            .arg("--audit-log")
            .arg(&self.audit)
            .arg("--upstream-ca")
            .arg(&self.ca);
        for name in &self.resolve {
            command.args(["--resolve", &format!("{name}=127.0.0.1")]);
        }
        command
            .args(["--", "sh", "-c", script])
            .current_dir(&self.cwd)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        tokio::task::spawn_blocking(move || command.output().expect("sluice run starts"))
            .await
            .expect("the sluice run task")
    }
}
