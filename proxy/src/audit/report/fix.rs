//! The fix a refusal names, rebuilt for the report from what the log keeps of it: its
//! `sluice-error` code and the secret, host and place involved. (The log keeps no refusal
//! message, which may quote what the client sent.)

/// The grant or change that would allow refusals of `reason`, in one sentence, naming the
/// first refusal's secret, host and place where the reason needs them.
pub(super) fn for_refusal(
    reason: &str,
    secret: Option<&str>,
    host: Option<&str>,
    location: Option<&str>,
) -> String {
    let secret = secret.unwrap_or("SECRET");
    let host = host.unwrap_or("HOST");
    let place = location.unwrap_or("the place it was found");
    // Reasons are codes, some followed by `: detail`.
    let code = reason.split(':').next().unwrap_or(reason).trim();
    match code {
        "placeholder-not-granted" => format!(
            "if {secret} is meant for {host}: list {host} in secrets.{secret}.hosts and {place} in its in: (or header:); otherwise the sandbox sent a placeholder where it should not"
        ),
        "secret-value-refused" => format!(
            "a real value of {secret} was sent toward {host}, which it is not granted: the sandbox holds the value (it should hold only the placeholder); find where it came from"
        ),
        "signing-not-granted" => format!(
            "if {secret} is meant to sign for {host}: list {host} in secrets.{secret}.hosts, and the request's service and region in its services: and regions:"
        ),
        "signature-invalid" => "the request was signed with the placeholder key but its signature does not verify: the client changed the request after signing, or does not use the placeholders sluice gave it".to_owned(),
        "misdirected-request" => "the request named another host than its tunnel: the client must open a CONNECT tunnel to the host it names".to_owned(),
        "bad-request" => "the request was malformed or ambiguous; sluice does not repair requests: fix the client".to_owned(),
        "request-head-too-large" | "body-too-large" | "request-body-timeout" => {
            "over a limit: raise it with its flag on serve or run (sluice serve --help) if the traffic is legitimate".to_owned()
        }
        "upstream-failed" | "upstream-connect" | "upstream-timeout" | "dns-failure"
        | "upstream-tls" | "upstream-encoding" => {
            "the upstream failed; no grant changes that: check the upstream (and --upstream-ca for a private CA)".to_owned()
        }
        "sluice-unavailable" => "sluice refused everything while its audit log was failing (fail closed): check the disk".to_owned(),
        "host-not-allowed" => format!(
            "add {host} to egress.allow, or to the hosts of the secret meant for it"
        ),
        "address-blocked" => "the host resolved to a private, loopback or metadata address: list the range in egress.allow_ips only if it is meant to be reached".to_owned(),
        "upgrade" => "the connection was upgraded (WebSocket): frames after the handshake are not inspected".to_owned(),
        _ => "no fix is known for this reason: see docs/audit-log.md".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_refusal_names_the_grant_that_would_allow_it() {
        let fix = for_refusal(
            "placeholder-not-granted",
            Some("github_token"),
            Some("paste.example"),
            Some("body"),
        );
        assert!(
            fix.contains("list paste.example in secrets.github_token.hosts"),
            "{fix}"
        );
        assert!(fix.contains("body in its in:"), "{fix}");
        let fix = for_refusal("host-not-allowed: x", None, Some("evil.example"), None);
        assert!(fix.contains("add evil.example to egress.allow"), "{fix}");
        assert!(for_refusal("something-new", None, None, None).contains("no fix is known"));
    }
}
