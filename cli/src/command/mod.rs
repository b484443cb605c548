//! The `sluice` command line: argument definitions and dispatch to one handler per
//! subcommand. Handlers live beside this file, one per subcommand; each returns the
//! process exit code and prints its own diagnostics.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use sluice_proxy::Limits;

use clap::{Args, CommandFactory, Parser, Subcommand};

mod approve;
mod audit;
mod check;
mod demo;
mod redact;
mod run;
mod serve;

/// sluice: a TLS-inspecting egress proxy that swaps placeholders for secrets only toward the
/// hosts a declaration grants, and turns every secret that comes back into its placeholder.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run CMD behind sluice: proxy and CA variables set, secrets as placeholders, output redacted.
    Run(RunArgs),
    /// Run the proxy for sandboxes on a network, writing what they need into a run directory.
    Serve(ServeArgs),
    /// Validate a declaration: exit 0 when clean (warnings allowed), 1 with errors.
    Check(CheckArgs),
    /// Copy stdin to stdout, turning every known secret value into its placeholder.
    Redact(RedactArgs),
    /// Decide, from a terminal, the uses of secrets that wait for approval (`approve:`) in
    /// a running proxy: one key per decision.
    Approve(ApproveArgs),
    /// Verify or summarise an audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Show the whole story offline: a local TLS API, a placeholder swapped, an echo
    /// redacted, a refusal, and the audit log.
    Demo(DemoArgs),
    /// Print a completion script for SHELL on stdout (e.g. `sluice completions bash >
    /// /etc/bash_completion.d/sluice`).
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout (e.g. `sluice man | man -l -`).
    Man,
    /// Internal: the first step of a command `sluice run` starts in a terminal of its own.
    /// Makes that terminal the session's controlling terminal, then becomes the command.
    #[command(name = "__terminal-exec", hide = true)]
    TerminalExec(TerminalExecArgs),
    /// Internal: the jail's inside, which `sluice run` starts and which becomes the command.
    #[command(name = "__jail-helper", hide = true)]
    JailHelper(JailHelperArgs),
    /// Internal: process 1 of the jail's PID namespace, which the helper starts and which
    /// starts the command.
    #[command(name = "__jail-init", hide = true)]
    JailInit,
}

/// Arguments of the internal `sluice __jail-helper`.
#[derive(Debug, Args)]
pub(crate) struct JailHelperArgs {
    /// The unix socket sluice waits on.
    pub(crate) socket: PathBuf,
}

/// Arguments of the internal `sluice __terminal-exec`.
#[derive(Debug, Args)]
pub(crate) struct TerminalExecArgs {
    /// The command and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub(crate) command: Vec<std::ffi::OsString>,
}

/// Arguments of `sluice check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The declaration to validate (YAML or JSON).
    pub(crate) file: PathBuf,
    /// Print the verdict, every diagnostic and the preview as one JSON object on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Arguments of `sluice run`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: sluice run --policy policy.yaml -- curl https://api.github.com/user"
)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) proxy: ProxyArgs,
    /// Where the audit log goes (default: ./sluice-audit.jsonl).
    #[arg(long)]
    pub(crate) audit_log: Option<PathBuf>,
    /// Pass this variable to the command unchanged although it looks like a credential
    /// (repeatable). Undeclared credential-shaped variables are withheld otherwise.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub(crate) pass_env: Vec<std::ffi::OsString>,
    /// Pass the command only PATH, HOME, USER, LANG, LC_*, TERM, TZ, TMPDIR and SHELL of
    /// sluice's environment (and any --pass-env), besides what sluice sets: for untrusted
    /// workloads.
    #[arg(long)]
    pub(crate) clear_env: bool,
    /// Reload when the declaration file or a `file` source changes (looked at once a
    /// second). Off by default under `run`: the command may be able to write those files,
    /// and a reload gives whatever they say force (keep them out of its reach first).
    #[arg(long)]
    pub(crate) watch: bool,
    /// Where `--admin` writes its admin-url (0600; default ./sluice-admin-url).
    #[arg(long, value_name = "FILE", requires = "admin")]
    pub(crate) admin_url_file: Option<PathBuf>,
    /// Run the command in this machine's network, with the proxy variables only: the
    /// egress policy is then advisory. By default it runs in the jail, where sluice is the
    /// only way out.
    #[arg(long)]
    pub(crate) no_jail: bool,
    /// Print everything `run` decides before it starts the command (each variable it would
    /// get, files, grants by sink, the jail), and start nothing; exit as `run` would refuse,
    /// or 0. Never prints a value.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The command and its arguments, after `--`; passed as given, never through a shell.
    #[arg(last = true, required = true, num_args = 1..)]
    pub(crate) command: Vec<std::ffi::OsString>,
    // Last: each sets a help heading that holds for every argument after it.
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
}

/// Arguments of `sluice serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) proxy: ProxyArgs,
    /// Address to listen on; `127.0.0.1:0` picks a free port.
    #[arg(long)]
    pub(crate) listen: SocketAddr,
    /// Directory for ca.pem, proxy-url, placeholders.env and audit.jsonl (created 0700).
    #[arg(long)]
    pub(crate) run_dir: PathBuf,
    /// Write the audit log here instead of RUN_DIR/audit.jsonl.
    #[arg(long)]
    pub(crate) audit_log: Option<PathBuf>,
    /// Do not reload when the declaration file or a `file` source changes (they are looked
    /// at once a second otherwise); reload on SIGHUP or POST /reload only.
    #[arg(long)]
    pub(crate) no_watch: bool,
    /// Also take connections the platform redirected here (nftables/iptables `REDIRECT`
    /// in the sandbox's network namespace, e.g. a Kubernetes init container's rules; see
    /// docs/kubernetes.md): each is named by its TLS server name and served as a CONNECT.
    #[arg(long, value_name = "ADDR")]
    pub(crate) transparent: Option<SocketAddr>,
    /// The host a sandbox dials to reach this proxy, written into `proxy-url`. Default: the
    /// --listen address, or 127.0.0.1 (::1) when that is unspecified (0.0.0.0, ::), as a
    /// sidecar sharing the pod's loopback dials it.
    #[arg(long, value_name = "HOST")]
    pub(crate) advertise: Option<String>,
    // Last: each sets a help heading that holds for every argument after it.
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
}

/// What `run` and `serve` both take: the declaration, and how upstreams are reached.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// The declaration (YAML or JSON).
    #[arg(long)]
    pub(crate) policy: PathBuf,
    /// A PEM file of extra roots for verifying upstreams (repeatable).
    #[arg(long = "upstream-ca")]
    pub(crate) upstream_ca: Vec<PathBuf>,
    /// Pin HOST to IP instead of DNS, as curl's --resolve does (repeatable).
    #[arg(long, value_parser = parse_resolve)]
    pub(crate) resolve: Vec<Resolve>,
    /// Serve the admin endpoint on ADDR (e.g. 127.0.0.1:9090): /healthz, /readyz,
    /// /metrics, POST /reload, /v1/redact, /v1/secrets, behind credentials of its own
    /// written to admin-url (0600), never the proxy's and never in the command's environment.
    #[arg(long, value_name = "ADDR")]
    pub(crate) admin: Option<SocketAddr>,
    /// POST each use that starts waiting for approval (`approve:`) to URL (http://) as
    /// JSON; an answer {"decision": "allow"|"deny", "scope": "once"|"run"} decides it, 202
    /// leaves it to `sluice approve` and the admin API.
    #[arg(long, value_name = "URL", value_parser = sluice_proxy::Webhook::parse)]
    pub(crate) approval_webhook: Option<sluice_proxy::Webhook>,
    /// Send every upstream connection through this proxy (http://[USER:PASS@]HOST:PORT,
    /// CONNECT then TLS to the origin), or `none` to dial directly. Default: sluice's own
    /// HTTPS_PROXY (https_proxy, HTTP_PROXY, http_proxy) and NO_PROXY.
    #[arg(long, value_name = "URL")]
    pub(crate) upstream_proxy: Option<String>,
    /// How sluice's own log lines (stderr) are written: text, or one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

/// When the audit log rotates into numbered segments (docs/audit-log.md, Rotation).
#[derive(Debug, Args)]
#[command(next_help_heading = "Audit log rotation")]
pub(crate) struct RotationArgs {
    /// Rotate the audit log into a numbered segment (FILE.1, FILE.2, ...) once it holds
    /// this many bytes (at least 4096); each segment's first line chains to the last.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(sluice_audit::MIN_SEGMENT_BYTES..))]
    pub(crate) audit_max_bytes: Option<u64>,
    /// Rotate the audit log once its file has been written for this long (e.g. 1h, 1d; at
    /// least 1s).
    #[arg(long, value_name = "DURATION", value_parser = parse_rotation_age)]
    pub(crate) audit_max_age: Option<Duration>,
}

/// `--audit-max-age`: a duration of at least one second.
fn parse_rotation_age(text: &str) -> Result<Duration, String> {
    let age = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if age < Duration::from_secs(1) {
        return Err("expected at least 1s: a segment per line helps no reader".to_owned());
    }
    Ok(age)
}

impl RotationArgs {
    pub(crate) fn rotation(&self) -> sluice_audit::Rotation {
        sluice_audit::Rotation {
            max_bytes: self.audit_max_bytes,
            max_age: self.audit_max_age,
        }
    }
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For people: one line per event.
    Text,
    /// For log pipelines: one JSON object per line (tracing-subscriber's JSON layer).
    Json,
}

/// Every limit of the proxy, as a flag; each default is the proxy's own (`Limits`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Limits")]
pub(crate) struct LimitArgs {
    /// Concurrent client connections (tunnels count against their connection).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections)]
    pub(crate) max_connections: usize,
    /// Bytes of request head (431 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_header_bytes)]
    pub(crate) max_header_bytes: usize,
    /// Time a client has to send a request head.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub(crate) header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    #[arg(long, value_name = "N", default_value_t = Limits::default().h2_max_streams)]
    pub(crate) h2_max_streams: u32,
    /// Time for a client's TLS handshake.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) tls_handshake_timeout: Duration,
    /// Time in-flight requests get at shutdown.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) drain_timeout: Duration,
    /// The largest request body buffered to recompute its length after a swap (413 beyond),
    /// and the largest WebSocket message (closed with 1009 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_buffered_body)]
    pub(crate) max_buffered_body: usize,
    /// Time a client has to send a body that is buffered whole (408 beyond).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub(crate) body_read_timeout: Duration,
    /// The most bytes one compressed body may decode to (a decompression bomb gets 502).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_decoded_body)]
    pub(crate) max_decoded_body: u64,
    /// Time a use that needs approval (`approve:`) waits for a decision (403
    /// approval-timeout beyond).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub(crate) approval_timeout: Duration,
    /// Uses waiting for approval at once (503 approvals-full beyond).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_pending_approvals)]
    pub(crate) max_pending_approvals: usize,
}

impl LimitArgs {
    /// The limits the proxy is started with.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            max_header_bytes: self.max_header_bytes,
            header_read_timeout: self.header_read_timeout,
            h2_max_streams: self.h2_max_streams,
            tls_handshake_timeout: self.tls_handshake_timeout,
            drain_timeout: self.drain_timeout,
            max_buffered_body: self.max_buffered_body,
            body_read_timeout: self.body_read_timeout,
            max_decoded_body: self.max_decoded_body,
            approval_timeout: self.approval_timeout,
            max_pending_approvals: self.max_pending_approvals,
        }
    }
}

impl ProxyArgs {
    /// The `--resolve` pins, as the proxy takes them.
    pub(crate) fn pins(&self) -> Vec<(String, IpAddr)> {
        self.resolve
            .iter()
            .map(|r| (r.host.clone(), r.ip))
            .collect()
    }
}

/// The runtime `run` and `serve` serve on; `None` (said on stderr) if it cannot start.
pub(crate) fn runtime(command: &str) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            eprintln!("sluice {command}: cannot start the runtime: {error}");
            None
        }
    }
}

/// One `--resolve HOST=IP`.
#[derive(Debug, Clone)]
pub(crate) struct Resolve {
    pub(crate) host: String,
    pub(crate) ip: IpAddr,
}

fn parse_resolve(s: &str) -> Result<Resolve, String> {
    let (host, ip) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not HOST=IP"))?;
    let ip = ip
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("{ip:?} is not an IP address (in --resolve {s})"))?;
    if host.is_empty() {
        return Err(format!("{s:?} has an empty host"));
    }
    Ok(Resolve {
        host: host.to_owned(),
        ip,
    })
}

/// Arguments of `sluice demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Leave the run directory (token file, CAs, audit log) in place for inspection.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// Arguments of `sluice redact`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("guard").required(true).args(["policy", "run_dir", "admin_url_file"])))]
pub(crate) struct RedactArgs {
    /// The declaration whose secrets are redacted, with placeholders of this command's own
    /// (which no running proxy shares).
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
    /// A running `sluice serve --admin`'s run directory: redact through its admin endpoint
    /// (`admin-url`), with its guard and its placeholders, the ones the sandbox holds.
    #[arg(long, value_name = "DIR")]
    pub(crate) run_dir: Option<PathBuf>,
    /// As --run-dir, with the admin URL read from this file (`sluice run --admin-url-file`).
    #[arg(long, value_name = "FILE")]
    pub(crate) admin_url_file: Option<PathBuf>,
}

/// Arguments of `sluice approve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("endpoint").required(true).args(["run_dir", "admin_url_file"])))]
pub(crate) struct ApproveArgs {
    /// A running `sluice serve --admin`'s run directory (its `admin-url`).
    #[arg(long, value_name = "DIR")]
    pub(crate) run_dir: Option<PathBuf>,
    /// The admin URL's file (`sluice run --admin-url-file`).
    #[arg(long, value_name = "FILE", alias = "admin-url")]
    pub(crate) admin_url_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the logs' hash chains (every run, every segment): exit 0 when they hold, 1
    /// naming the first broken line or the missing segment.
    Verify(AuditFileArgs),
    /// Table what was swapped, refused and redacted, per secret and host.
    Summary(AuditSummaryArgs),
    /// Write the reviewers' report: one self-contained HTML page (or JSON) of what the
    /// logs hold, their verdict first.
    Report(AuditReportArgs),
    /// Print a declaration patch a person can review, from what the runs refused (hosts not
    /// allowed, placeholders missing a host or place grant) and the grants no run used.
    /// Changes no file; prints no value.
    Suggest(AuditFileArgs),
}

/// Arguments of `sluice completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// Arguments of `sluice audit verify`.
#[derive(Debug, Args)]
pub(crate) struct AuditFileArgs {
    /// The audit logs (JSON Lines): files, rotated segments in any order, or directories
    /// (their `*.jsonl` and `*.jsonl.N` files).
    #[arg(required = true, value_name = "LOG")]
    pub(crate) logs: Vec<PathBuf>,
}

/// Arguments of `sluice audit summary`.
#[derive(Debug, Args)]
pub(crate) struct AuditSummaryArgs {
    /// The audit logs, as `sluice audit verify` takes them.
    #[arg(required = true, value_name = "LOG")]
    pub(crate) logs: Vec<PathBuf>,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Arguments of `sluice audit report`.
#[derive(Debug, Args)]
pub(crate) struct AuditReportArgs {
    /// The audit logs, as `sluice audit verify` takes them.
    #[arg(required = true, value_name = "LOG")]
    pub(crate) logs: Vec<PathBuf>,
    /// Where to write the page (or the JSON); stdout when absent.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Write the report's aggregates as JSON instead of HTML, for dashboards.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Parses the process arguments and runs the chosen subcommand.
pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Redact(args) => redact::run(&args),
        Command::Approve(args) => approve::run(&args),
        Command::Audit(AuditCommand::Verify(args)) => audit::verify(&args),
        Command::Audit(AuditCommand::Summary(args)) => audit::summary(&args),
        Command::Audit(AuditCommand::Report(args)) => audit::report(&args),
        Command::Audit(AuditCommand::Suggest(args)) => audit::suggest(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Completions(args) => {
            let mut command = public_command();
            clap_complete::generate(args.shell, &mut command, "sluice", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man => {
            match clap_mangen::Man::new(public_command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                // `sluice man | head` closes the pipe early: quiet, as `cat` is.
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("sluice man: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::TerminalExec(args) => crate::launcher::terminal::exec(&args.command),
        Command::JailHelper(args) => crate::launcher::jail::helper_main(&args.socket),
        Command::JailInit => crate::launcher::jail::init_main(),
    }
}

/// The command line without its internal subcommands (the jail's and the terminal's own
/// steps): what completions and the man page offer.
fn public_command() -> clap::Command {
    let full = Cli::command();
    let public: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .cloned()
        .collect();
    let mut command = clap::Command::new("sluice")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .subcommands(public);
    if let Some(about) = full.get_about() {
        command = command.about(about.clone());
    }
    command
}

/// Logs go to stderr, filtered by `RUST_LOG` (default `info`). Never a secret value: the
/// proxy logs names, hosts and reasons only.
pub(crate) fn init_tracing_as(format: LogFormat) {
    init_tracing_at("info", format);
}

/// As [`init_tracing_as`], but `warn` by default: the launcher's output is the command's.
pub(crate) fn init_tracing_quiet(format: LogFormat) {
    init_tracing_at("warn", format);
}

fn init_tracing_at(default: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
        // AWS's signer traces the credentials it signs with (the real access key id
        // among them) at `trace`: off whatever RUST_LOG says.
        .add_directive("aws_sigv4=off".parse().expect("a valid directive"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Loads a declaration, printing its diagnostics to stderr; `None` when it has errors.
impl ProxyArgs {
    /// The egress proxy upstream connections go through: `--upstream-proxy`, else sluice's
    /// own environment (read before `sluice run` sets the command's to itself), said on
    /// stderr with its credentials elided. `Err` says why the URL cannot be used.
    pub(crate) fn upstream_proxy(
        &self,
        who: &str,
    ) -> Result<Option<sluice_proxy::UpstreamProxy>, String> {
        let env = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        };
        let (url, from) = match self.upstream_proxy.as_deref() {
            Some(url) if url.eq_ignore_ascii_case("none") => return Ok(None),
            Some(url) => (url.to_owned(), "--upstream-proxy"),
            None => match env(&["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]) {
                Some(url) => (url, "its environment (HTTPS_PROXY)"),
                None => return Ok(None),
            },
        };
        let no_proxy = env(&["NO_PROXY", "no_proxy"]).unwrap_or_default();
        let proxy = sluice_proxy::UpstreamProxy::parse(&url, &no_proxy)
            .map_err(|error| format!("{error} (from {from})"))?;
        eprintln!(
            "{who}: upstream connections go through {} (from {from})",
            proxy.describe()
        );
        Ok(Some(proxy))
    }
}

pub(crate) fn load_policy(path: &Path) -> Option<sluice_policies::Policy> {
    match sluice_policies::Policy::load(path) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("{warning}");
            }
            Some(loaded.policy)
        }
        Err(diagnostics) => {
            for diagnostic in &diagnostics.0 {
                eprintln!("{diagnostic}");
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_flags_default_to_the_proxys_own_limits_and_take_durations() {
        let parsed = Cli::try_parse_from([
            "sluice",
            "serve",
            "--policy",
            "p.yaml",
            "--listen",
            "127.0.0.1:0",
            "--run-dir",
            "run",
        ])
        .unwrap();
        let Command::Serve(args) = parsed.command else {
            panic!("serve");
        };
        assert_eq!(
            format!("{:?}", args.limits.limits()),
            format!("{:?}", Limits::default())
        );
        assert_eq!(args.proxy.log_format, LogFormat::Text);
        let parsed = Cli::try_parse_from([
            "sluice",
            "run",
            "--policy",
            "p.yaml",
            "--drain-timeout",
            "1m 30s",
            "--max-connections",
            "8",
            "--log-format",
            "json",
            "--",
            "true",
        ])
        .unwrap();
        let Command::Run(args) = parsed.command else {
            panic!("run");
        };
        let limits = args.limits.limits();
        assert_eq!(limits.drain_timeout, Duration::from_secs(90));
        assert_eq!(limits.max_connections, 8);
        assert_eq!(args.proxy.log_format, LogFormat::Json);
        assert!(
            Cli::try_parse_from([
                "sluice",
                "run",
                "--policy",
                "p.yaml",
                "--drain-timeout",
                "soon",
                "--",
                "true"
            ])
            .is_err()
        );
    }
}
