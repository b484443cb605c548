//! `sluice demo`: the whole story of sluice, offline, on 127.0.0.1, in a few seconds.
//!
//! It sets a stage — a stand-in TLS API (`api.demo.test`, with its own test CA), a random
//! token in a 0600 file, a declaration granting that token to that host only, and a real
//! sluice started in-process — then a scripted sandbox client that holds only the
//! placeholder walks through four steps, each checked and told in plain words:
//!
//! 1. **swap**: the placeholder sent to `api.demo.test` arrives there as the real token;
//! 2. **redact**: the API echoes the real token back, and the sandbox gets the placeholder;
//! 3. **refuse**: the placeholder sent to `other.demo.test` is refused with `403` and a
//!    one-line reason, and nothing reaches the API;
//! 4. **audit**: the audit log, line by line, its hash chain verified, and its summary.
//!
//! A step that does not behave is reported by name ([`StepFailure`]); the story goes on so
//! that every broken promise shows, and [`run`] fails at the end.
//!
//! # What it must never do
//!
//! - Show the real value, or any part of it: only its length. Every line it writes goes
//!   through one narrator that withholds the value should it ever appear.
//! - Reach beyond 127.0.0.1: the demo's hosts are pinned to loopback, DNS is never asked.
//! - Leave the token on disk: the run directory is removed at the end unless asked to keep it.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_policies::Policy;
use zeroize::Zeroizing;

use sluice_proxy::audit;
use sluice_proxy::{Proxy, ProxyConfig, start};

mod api;
mod client;
mod narrate;

#[cfg(test)]
mod tests;

use api::{Api, ApiPki, Received};
use client::Sandbox;
use narrate::Narrator;

/// The host the demo's secret is granted to.
pub(crate) const API_HOST: &str = "api.demo.test";
/// A reachable host the secret is not granted to.
pub(crate) const OTHER_HOST: &str = "other.demo.test";
/// The demo secret's name in the declaration.
pub(crate) const SECRET: &str = "demo_token";
/// The file in the run directory that holds the real token (0600).
pub(crate) const TOKEN_FILE: &str = "demo_token";
/// The line that names the run directory, so a reader (or a test) can find it.
pub(crate) const RUN_DIR_LINE: &str = "Run directory: ";

/// Random bytes in the demo token (hex: twice as many characters).
const TOKEN_BYTES: usize = 18;

/// How to run the demo.
///
/// # Defaults
/// - `keep`: false — the run directory is removed at the end.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Leave the run directory (token file, CAs, declaration, audit log) for inspection.
    pub keep: bool,
}

/// A step of the story.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A placeholder swapped for the real value toward the granted host.
    Swap,
    /// A value echoed back by the API, redacted into its placeholder.
    Redact,
    /// A placeholder toward a host it is not granted to, refused.
    Refuse,
    /// The audit log: every event on record, chain intact.
    Audit,
}

impl Step {
    /// Every step, in the order told.
    pub(crate) const ALL: [Step; 4] = [Step::Swap, Step::Redact, Step::Refuse, Step::Audit];

    /// Its number in the story, from 1.
    pub(crate) fn number(self) -> u8 {
        match self {
            Step::Swap => 1,
            Step::Redact => 2,
            Step::Refuse => 3,
            Step::Audit => 4,
        }
    }

    /// Its title, as printed.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Step::Swap => "a placeholder swapped toward the granted host",
            Step::Redact => "a secret echoed back, redacted",
            Step::Refuse => "the placeholder toward another host, refused",
            Step::Audit => "the audit log",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}, {}", self.number(), self.title())
    }
}

/// A step that did not behave as sluice promises: which, and what happened instead. Never
/// holds the real value (it is withheld before the failure is built).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StepFailure {
    /// The step.
    pub step: Step,
    /// Each broken expectation: what was expected and what happened instead.
    pub problems: Vec<String>,
}

impl fmt::Display for StepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.problems.join("; "))
    }
}

/// Why the demo failed. Never holds the real value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// The stage could not be set: the run directory, the token, the API's test CA or
    /// listener, the declaration, or sluice itself. A bug or a broken machine, not sluice
    /// misbehaving.
    #[error("setting the stage: {what}: {why}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// What went wrong.
        why: String,
    },
    /// One or more steps did not behave as sluice promises.
    #[error("{} of {} steps did not behave as expected: {}", .0.len(), Step::ALL.len(), list(.0))]
    Steps(Vec<StepFailure>),
    /// The story could not be written (stdout closed).
    #[error("cannot write the demo's output: {0}")]
    Output(#[from] io::Error),
}

fn list(failures: &[StepFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn setup(what: &'static str) -> impl FnOnce(String) -> DemoError {
    move |why| DemoError::Setup { what, why }
}

/// Runs the demo, writing the story to `out`.
///
/// # Errors
///
/// [`DemoError::Steps`] naming every step that did not behave; [`DemoError::Setup`] when
/// the stage could not be set; [`DemoError::Output`] when `out` fails.
pub(crate) async fn run(options: Options, out: &mut dyn Write) -> Result<(), DemoError> {
    let run_dir = RunDir::create(options.keep)?;
    let token = Arc::new(mint_token()?);
    let mut say = Narrator::new(out, token.clone());
    say.line("sluice demo: the whole story, offline, on 127.0.0.1.")?;
    say.line(format!("{RUN_DIR_LINE}{}", run_dir.path().display()))?;
    let stage = Stage::set(run_dir.path(), token, &mut say).await?;

    let mut failures = Vec::new();
    let mut conclude = |say: &mut Narrator<'_>, step: Step, problems: Vec<String>, ok: &str| {
        if problems.is_empty() {
            return say.wrapped("ok: ", ok);
        }
        let mut shown = Vec::with_capacity(problems.len());
        for problem in problems {
            let what = say.shown(&problem);
            say.wrapped("NOT AS EXPECTED: ", &what)?;
            shown.push(what);
        }
        failures.push(StepFailure {
            step,
            problems: shown,
        });
        Ok(())
    };

    let problems = stage.swap(&mut say).await?;
    conclude(
        &mut say,
        Step::Swap,
        problems,
        &format!(
            "the API got the real token although the sandbox only ever held the placeholder: \
             sluice swapped it in the Authorization header, because {SECRET} grants {API_HOST}, \
             in: [header]."
        ),
    )?;

    let problems = stage.redact(&mut say).await?;
    conclude(
        &mut say,
        Step::Redact,
        problems,
        "sluice turned the real value back into its placeholder on the way in: the sandbox \
         cannot learn the secret, not even from an API that leaks it.",
    )?;

    let problems = stage.refuse(&mut say).await?;
    conclude(
        &mut say,
        Step::Refuse,
        problems,
        &format!(
            "{SECRET} is granted to {API_HOST} only, so sluice refused to send it to \
             {OTHER_HOST} and forwarded nothing. The reason names the secret, the host and \
             the missing grant, so an agent reading it knows what to ask for."
        ),
    )?;

    let audit_path = stage.audit_path.clone();
    let problems = stage.finish(&audit_path, &mut say).await?;
    conclude(
        &mut say,
        Step::Audit,
        problems,
        "every swap, redaction and refusal is on record, without a secret value, and an \
         edited, dropped or reordered line would break the chain.",
    )?;

    say.heading("The end")?;
    if failures.is_empty() {
        say.wrapped(
            "",
            "All four steps behaved as sluice promises: the sandbox used a secret it never \
             held, only where the declaration grants it, could not read it back, and every \
             step is on a record a reviewer can verify.",
        )?;
    } else {
        let names: Vec<String> = failures.iter().map(|f| f.step.to_string()).collect();
        say.wrapped(
            "",
            &format!(
                "{} of {} steps did not behave as sluice promises: {} (see NOT AS EXPECTED above).",
                failures.len(),
                Step::ALL.len(),
                names.join("; ")
            ),
        )?;
    }
    run_dir.close(&mut say)?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(DemoError::Steps(failures))
    }
}

/// The run directory: a private temporary directory, removed at the end unless kept.
struct RunDir {
    temp: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl RunDir {
    fn create(keep: bool) -> Result<RunDir, DemoError> {
        // Private from its creation; removed on drop, even when the demo fails midway.
        let temp = tempfile::Builder::new()
            .prefix("sluice-demo-")
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| setup("run directory")(e.to_string()))?;
        if keep {
            let path = temp.keep();
            Ok(RunDir { temp: None, path })
        } else {
            let path = temp.path().to_owned();
            Ok(RunDir {
                temp: Some(temp),
                path,
            })
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn close(self, say: &mut Narrator<'_>) -> Result<(), DemoError> {
        match self.temp {
            None => {
                say.line(format!(
                    "The run directory stays for you to look at: {}",
                    self.path.display()
                ))?;
                say.line(format!(
                    "  (it holds the real token in {TOKEN_FILE}: remove the directory when done)"
                ))?;
                say.line(format!(
                    "  try: sluice check {0}/demo.yaml; sluice audit verify {0}/audit.jsonl",
                    self.path.display()
                ))?;
            }
            Some(temp) => {
                temp.close()
                    .map_err(|e| setup("removing the run directory")(e.to_string()))?;
                say.line(
                    "The run directory, token file included, is removed (`--keep` leaves it).",
                )?;
            }
        }
        Ok(())
    }
}

/// A random token, hex, in memory that is wiped when dropped.
fn mint_token() -> Result<Zeroizing<String>, DemoError> {
    let mut raw = Zeroizing::new([0u8; TOKEN_BYTES]);
    getrandom::fill(raw.as_mut()).map_err(|e| setup("token")(e.to_string()))?;
    Ok(Zeroizing::new(hex::encode(raw.as_ref())))
}

/// Writes a new file created with `mode` from the start (never readable more widely).
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), String> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The declaration the demo loads, reading the token from `token_file`.
pub(crate) fn declaration(token_file: &Path) -> String {
    // A JSON string is a valid YAML double-quoted scalar, whatever the path holds.
    let file = serde_json::Value::from(token_file.to_string_lossy()).to_string();
    format!(
        "version: 1\n\
         secrets:\n\
         \x20 {SECRET}:\n\
         \x20   from: {{ file: {file} }}\n\
         \x20   hosts: [{API_HOST}]\n\
         \x20   sinks: [egress]\n\
         \x20   in: [header]\n\
         egress:\n\
         \x20 allow: [{OTHER_HOST}]\n\
         \x20 allow_ips: [127.0.0.1/32]   # the demo's hosts live on loopback\n"
    )
}

/// Everything the steps use: the API, sluice, and the sandbox client.
struct Stage {
    api: Api,
    proxy: Proxy,
    sandbox: Sandbox,
    placeholder: String,
    token_len: usize,
    audit_path: PathBuf,
}

impl Stage {
    async fn set(
        dir: &Path,
        token: Arc<Zeroizing<String>>,
        say: &mut Narrator<'_>,
    ) -> Result<Stage, DemoError> {
        let token_len = token.len();
        // The API and its test CA, standing in for a real service and the web PKI.
        let pki = ApiPki::mint(&[API_HOST, OTHER_HOST]).map_err(setup("the API's test CA"))?;
        let api_ca = dir.join("api-ca.pem");
        write_new(&api_ca, pki.ca_pem().as_bytes(), 0o644).map_err(setup("the API's test CA"))?;
        let api = Api::start(&pki, token.clone())
            .await
            .map_err(|e| setup("the API's listener")(e.to_string()))?;
        say.heading("The stage")?;
        say.wrapped(
            "",
            &format!(
                "A stand-in API, {API_HOST}, listens on {} over TLS (HTTP/1.1 and HTTP/2). Its \
                 certificate comes from a test CA made for this demo (api-ca.pem); sluice is given \
                 that CA as an upstream root, the way it trusts the web PKI for real APIs.",
                api.addr()
            ),
        )?;

        // The real token, where a platform team would keep it: a private file.
        let token_file = dir.join(TOKEN_FILE);
        write_new(&token_file, token.as_bytes(), 0o600).map_err(setup("the token file"))?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "The real token is {token_len} random characters in {TOKEN_FILE} (mode 0600). \
                 The API accepts it and sluice reads it; the sandbox never sees it, and neither \
                 will you: this demo prints only its length."
            ),
        )?;

        // The declaration: the token, granted to one host, in headers only.
        let yaml = declaration(&token_file);
        write_new(&dir.join("demo.yaml"), yaml.as_bytes(), 0o644).map_err(setup("demo.yaml"))?;
        let loaded = Policy::parse(&yaml, "demo.yaml").map_err(|diagnostics| {
            let text: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
            setup("the declaration")(text.join("; "))
        })?;
        say.line("")?;
        say.line("The declaration sluice loads (demo.yaml):")?;
        say.block(&yaml)?;
        for warning in &loaded.warnings {
            say.line(format!("  lint: {warning}"))?;
        }
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "It grants {SECRET} to {API_HOST} only, in request headers, on the egress sink; \
                 {OTHER_HOST} is reachable but granted nothing; every other host is refused."
            ),
        )?;

        // A real sluice, in-process: the same `start` that `sluice serve` uses.
        let audit_path = dir.join("audit.jsonl");
        let mut config = ProxyConfig::new(
            loaded.policy,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            audit_path.clone(),
        );
        config.upstream_ca = vec![api_ca];
        config.resolve = [API_HOST, OTHER_HOST]
            .iter()
            .map(|host| ((*host).to_owned(), IpAddr::V4(Ipv4Addr::LOCALHOST)))
            .collect();
        let proxy = start(config)
            .await
            .map_err(|e| setup("sluice")(e.to_string()))?;
        write_new(&dir.join("ca.pem"), proxy.ca_pem().as_bytes(), 0o644)
            .map_err(setup("the run CA file"))?;
        let placeholder = proxy
            .placeholders()
            .get(SECRET)
            .ok_or_else(|| setup("the placeholder")(format!("sluice minted none for {SECRET}")))?
            .to_owned();
        let sandbox = Sandbox::new(proxy.local_addr(), &proxy.proxy_url(), &proxy.ca_pem())
            .map_err(setup("the sandbox client"))?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "sluice listens on {} (the sandbox must present this run's proxy credentials), \
                 with a CA minted for this run alone (ca.pem), name-constrained to {API_HOST} and \
                 {OTHER_HOST}. The sandbox trusts that CA and nothing else.",
                proxy.proxy_url_without_token()
            ),
        )?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "The sandbox holds only the placeholder {placeholder}, minted for this run: it \
                 means nothing to another run, and nothing at all outside sluice."
            ),
        )?;
        Ok(Stage {
            api,
            proxy,
            sandbox,
            placeholder,
            token_len,
            audit_path,
        })
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.placeholder)
    }

    /// Step 1: the placeholder toward the granted host arrives as the real token.
    async fn swap(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
        say.step(Step::Swap)?;
        let path = "/v1/whoami";
        say.line("The sandbox sends:")?;
        say.line(format!(
            "    GET https://{API_HOST}:{}{path}",
            self.api.port()
        ))?;
        say.line(format!("    Authorization: {}", self.bearer()))?;
        let before = self.api.seen().len();
        let answer = self
            .sandbox
            .get(API_HOST, self.api.port(), path, Some(&self.bearer()))
            .await;
        let mut problems = Vec::new();
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                problems.push(format!("the request failed: {e}"));
                return Ok(problems);
            }
        };
        let seen: Vec<_> = self.api.seen().into_iter().skip(before).collect();
        match seen.iter().find(|s| s.host == API_HOST && s.path == path) {
            Some(request) => {
                say.line(format!(
                    "What reached the API in Authorization: {}",
                    request.authorization.describe(self.token_len)
                ))?;
                match &request.authorization {
                    Received::RealToken => {}
                    Received::Other(text) if text.contains(&self.placeholder) => problems.push(
                        "the API received the placeholder, not the real token: sluice forwarded it without swapping"
                            .to_owned(),
                    ),
                    other => problems.push(format!(
                        "the API received {}: expected `Bearer` and the real token",
                        other.describe(self.token_len)
                    )),
                }
            }
            None => problems.push(format!("no request reached the API for {API_HOST}{path}")),
        }
        say.line(format!(
            "The sandbox got {}: {}",
            answer.status,
            answer.text().trim()
        ))?;
        if answer.status != http::StatusCode::OK {
            problems.push(format!(
                "the sandbox got {}: expected 200 from the API",
                answer.status
            ));
        }
        if say.holds_token(&answer.body) {
            problems.push("the real value reached the sandbox in the answer".to_owned());
        }
        Ok(problems)
    }

    /// Step 2: the API leaks the real token back; the sandbox gets the placeholder.
    async fn redact(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
        say.step(Step::Redact)?;
        let path = "/v1/token";
        say.line("The sandbox sends:")?;
        say.line(format!(
            "    GET https://{API_HOST}:{}{path}",
            self.api.port()
        ))?;
        say.wrapped(
            "",
            "The API answers with the real token in its JSON body, as an API that hands a \
             credential back would. What reached the sandbox:",
        )?;
        let mut problems = Vec::new();
        let answer = match self
            .sandbox
            .get(API_HOST, self.api.port(), path, None)
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                problems.push(format!("the request failed: {e}"));
                return Ok(problems);
            }
        };
        say.line(format!("    {} {}", answer.status, answer.text().trim()))?;
        if say.holds_token(&answer.body) {
            problems.push(
                "the body that reached the sandbox held the real value (withheld above): expected its placeholder"
                    .to_owned(),
            );
        } else if !answer.text().contains(&self.placeholder) {
            problems.push(
                "the body that reached the sandbox did not hold the placeholder: expected the real value turned into it"
                    .to_owned(),
            );
        }
        if answer.status != http::StatusCode::OK {
            problems.push(format!(
                "the sandbox got {}: expected 200 from the API",
                answer.status
            ));
        }
        Ok(problems)
    }

    /// Step 3: the placeholder toward a host it is not granted to is refused, and nothing
    /// reaches the API; the same host without the placeholder is served.
    async fn refuse(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
        say.step(Step::Refuse)?;
        let path = "/v1/whoami";
        let port = self.api.port();
        let mut problems = Vec::new();
        say.line(format!(
            "{OTHER_HOST} is reachable (egress.allow). Without the placeholder, a request goes through:"
        ))?;
        let before = self.api.seen().len();
        match self.sandbox.get(OTHER_HOST, port, path, None).await {
            Ok(answer) => {
                say.line(format!(
                    "    GET https://{OTHER_HOST}:{port}{path}  ->  {} from the API: {}",
                    answer.status,
                    answer.text().trim()
                ))?;
                let arrived = self.api.seen().iter().skip(before).any(|s| s.host == OTHER_HOST);
                if !arrived {
                    problems.push(format!(
                        "a request to {OTHER_HOST} without the placeholder did not reach the API: expected it forwarded (the host is in egress.allow)"
                    ));
                }
            }
            Err(e) => problems.push(format!(
                "a request to {OTHER_HOST} without the placeholder failed: {e}; expected it forwarded (the host is in egress.allow)"
            )),
        }
        say.line("With the placeholder:")?;
        say.line(format!("    GET https://{OTHER_HOST}:{port}{path}"))?;
        say.line(format!("    Authorization: {}", self.bearer()))?;
        let before = self.api.seen().len();
        let answer = match self
            .sandbox
            .get(OTHER_HOST, port, path, Some(&self.bearer()))
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                problems.push(format!("the request failed: {e}"));
                return Ok(problems);
            }
        };
        let code = answer
            .headers
            .get("sluice-error")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        say.line(format!(
            "sluice answered {}{}:",
            answer.status,
            code.as_deref()
                .map(|c| format!(", sluice-error: {c}"))
                .unwrap_or_default()
        ))?;
        say.wrapped("    ", answer.text().trim())?;
        let leaked: Vec<_> = self
            .api
            .seen()
            .into_iter()
            .skip(before)
            .filter(|s| s.host == OTHER_HOST)
            .collect();
        if leaked.is_empty() {
            say.line(format!("Nothing from this request reached {OTHER_HOST}."))?;
        } else {
            for request in &leaked {
                problems.push(format!(
                    "{OTHER_HOST} received the request, with {} in Authorization: expected nothing forwarded",
                    request.authorization.describe(self.token_len)
                ));
            }
        }
        if answer.status != http::StatusCode::FORBIDDEN {
            problems.push(format!(
                "the sandbox got {}: expected 403 from sluice",
                answer.status
            ));
        }
        if code.is_none() {
            problems.push(
                "the answer has no sluice-error header: expected sluice's refusal code".to_owned(),
            );
        }
        let reason = answer.text();
        if answer.status == http::StatusCode::FORBIDDEN
            && !(reason.contains(SECRET) && reason.contains(OTHER_HOST))
        {
            problems.push(format!(
                "the refusal's reason does not name both {SECRET} and {OTHER_HOST}: expected a reason an agent can act on"
            ));
        }
        if say.holds_token(&answer.body) {
            problems.push("the real value reached the sandbox in the refusal".to_owned());
        }
        Ok(problems)
    }

    /// Step 4: stop sluice (drain, flush), show the log, verify its chain, summarise it.
    async fn finish(
        self,
        audit_path: &Path,
        say: &mut Narrator<'_>,
    ) -> Result<Vec<String>, DemoError> {
        say.step(Step::Audit)?;
        let mut problems = Vec::new();
        if let Err(e) = self.proxy.shutdown().await {
            problems.push(format!("sluice did not stop cleanly: {e}"));
        }
        drop(self.api);
        let text = match fs::read_to_string(audit_path) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("cannot read {}: {e}", audit_path.display()));
                return Ok(problems);
            }
        };
        say.wrapped(
            "",
            &format!(
                "sluice stopped (in-flight requests drained, log flushed). audit.jsonl holds {} \
                 lines, one event each, each carrying the SHA-256 of the line before it (prev):",
                text.lines().count()
            ),
        )?;
        for line in text.lines() {
            say.line(format!("  {}", narrate::audit_line(line)))?;
        }
        if say.holds_token(text.as_bytes()) {
            problems.push(
                "the audit log holds the real value: expected names, hosts and reasons only"
                    .to_owned(),
            );
        }
        match audit::verify(audit_path) {
            Ok(verified) => {
                say.line(format!(
                    "Chain verification (sluice audit verify): ok, {} events, run {}, chain intact, head sha256:{}",
                    verified.lines, verified.run_id, verified.head
                ))?;
                if !verified.complete {
                    problems
                        .push("the log has no stop record: expected sluice to close it".to_owned());
                }
                let counts = verified.counts;
                for (kind, n) in [
                    ("swap", counts.swap),
                    ("redact", counts.redact),
                    ("refuse", counts.refuse),
                ] {
                    if n == 0 {
                        problems.push(format!(
                            "the log holds no `{kind}` event: expected at least one"
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("the chain does not verify: {e}")),
        }
        match audit::summarize(audit_path) {
            Ok(summary) => {
                say.line("Summary (sluice audit summary):")?;
                say.block(&summary.to_table())?;
            }
            Err(e) => problems.push(format!("the log cannot be summarised: {e}")),
        }
        Ok(problems)
    }
}
