//! A real Squid (Debian's `squid`) on 127.0.0.1 as the organisation's egress proxy: started
//! by the test with a configuration it writes (names resolved from a hosts file of its own,
//! so that nothing it is asked for leaves loopback), optionally with Basic authentication
//! (its `basic_ncsa_auth` helper, over a password file made with `openssl passwd`), and a
//! domain it denies. Its access log says which connections went through it. The tests use
//! it, and so does `sluice-bench upstream-proxy`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The running Squid, stopped when dropped.
pub struct Squid {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

/// How to configure it.
pub struct SquidConfig<'a> {
    /// Names Squid resolves, each to 127.0.0.1.
    pub hosts: &'a [&'a str],
    /// A user and password it requires (Basic), if any.
    pub user: Option<(&'a str, &'a str)>,
    /// A domain it denies.
    pub denied: Option<&'a str>,
}

impl Squid {
    /// Starts it on a free port of 127.0.0.1 and waits until it accepts.
    pub fn start(config: &SquidConfig<'_>) -> Self {
        assert!(
            squid_binary().exists(),
            "squid is missing; ./test.sh installs it with `apt-get install squid` when absent"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        // Squid drops to its own user when started as root: its files must be open to it.
        set_mode(d, 0o777);
        let port = free_port();
        let hosts: String = config
            .hosts
            .iter()
            .map(|h| format!("127.0.0.1 {h}\n"))
            .collect();
        std::fs::write(d.join("hosts"), hosts).unwrap();
        let mut conf = format!(
            "http_port 127.0.0.1:{port}
pid_filename {dir}/squid.pid
access_log stdio:{dir}/access.log squid
cache_log {dir}/cache.log
cache_store_log none
cache deny all
coredump_dir {dir}
hosts_file {dir}/hosts
dns_nameservers 127.0.0.1
shutdown_lifetime 0 seconds
",
            dir = d.display()
        );
        if let Some(domain) = config.denied {
            conf.push_str(&format!(
                "acl denied dstdomain {domain}\nhttp_access deny denied\n"
            ));
        }
        if let Some((user, password)) = config.user {
            let hashed = Command::new("openssl")
                .args(["passwd", "-apr1", password])
                .output()
                .expect("openssl passwd");
            let hashed = String::from_utf8_lossy(&hashed.stdout).trim().to_owned();
            std::fs::write(d.join("passwd"), format!("{user}:{hashed}\n")).unwrap();
            set_mode(&d.join("passwd"), 0o644);
            conf.push_str(&format!(
                "auth_param basic program /usr/lib/squid/basic_ncsa_auth {}/passwd
auth_param basic realm sluice-test
acl authed proxy_auth REQUIRED
http_access deny !authed
",
                d.display()
            ));
        }
        conf.push_str("http_access allow all\n");
        std::fs::write(d.join("squid.conf"), conf).unwrap();
        // A service name of its own: Squids of tests running at once would share their
        // shared-memory segments (named after it) otherwise.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let service = format!(
            "sluice{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let child = Command::new(squid_binary())
            .args(["-N", "-n", &service, "-f"])
            .arg(d.join("squid.conf"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("stderr")).unwrap())
            .spawn()
            .expect("squid starts");
        let squid = Self { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "squid did not listen: {}{}",
                squid.read("stderr"),
                squid.read("cache.log")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        squid
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process (started with `-N`: one process, whose CPU is all of Squid's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether Debian's `squid` is installed.
    pub fn installed() -> bool {
        squid_binary().exists()
    }

    /// Its access log so far (one line per request it handled).
    pub fn access_log(&self) -> String {
        self.read("access.log")
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(file)).unwrap_or_default()
    }
}

impl Drop for Squid {
    /// SIGTERM first, so that Squid removes its shared-memory segments; SIGKILL after 5 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn squid_binary() -> PathBuf {
    ["/usr/sbin/squid", "/usr/bin/squid"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("squid"))
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
