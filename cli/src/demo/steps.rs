//! The demo's four steps, each checked and told: swap, redact, refuse, and the audit log.
//! A step reports what did not behave; it never stops the story.

use super::*;

impl Stage {
    /// Step 1: the placeholder toward the granted host arrives as the real token.
    pub(super) async fn swap(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
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
    pub(super) async fn redact(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
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
    pub(super) async fn refuse(&self, say: &mut Narrator<'_>) -> Result<Vec<String>, DemoError> {
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
    pub(super) async fn finish(
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
        match audit::summarize(&[audit_path.to_owned()]) {
            Ok(summary) => {
                say.line("Summary (sluice audit summary):")?;
                say.block(&summary.to_table())?;
            }
            Err(e) => problems.push(format!("the log cannot be summarised: {e}")),
        }
        Ok(problems)
    }
}
