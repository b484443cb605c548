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
    let host = host.map_or("HOST", without_port);
    let place = match location {
        Some(header) if header.starts_with("header:") => format!(
            "header in its in: (and {} in its header:)",
            &header["header:".len()..]
        ),
        Some(other) => format!("{other} in its in:"),
        None => "the place it was found in its in:".to_owned(),
    };
    // Reasons are codes, some followed by `: detail`.
    let code = reason.split(':').next().unwrap_or(reason).trim();
    match code {
        "placeholder-not-granted" => format!(
            "if {secret} is meant for {host}: list {host} in secrets.{secret}.hosts, and {place}; otherwise the sandbox sent a placeholder where it should not"
        ),
        "request-not-allowed" => format!(
            "if {secret} is meant for such requests: add a rule admitting their method and path to secrets.{secret}.allow (each refusal named the rule); otherwise the sandbox used {secret} beyond the requests its rules admit"
        ),
        "budget-exhausted" => format!(
            "if the traffic is legitimate: raise secrets.{secret}.budget (its requests: or per:); otherwise the sandbox used {secret} more often than its budget allows"
        ),
        "pin-mismatch" => format!(
            "{host}'s certificate verified but holds none of secrets.{secret}.pin: if {host} changed its key, add the new key's pin; otherwise something other than {host} answered for it"
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
        "dns-name-not-allowed" => format!(
            "add {host} to egress.allow, or to the hosts of the secret meant for it, if the sandbox is meant to reach it; the jail's resolver answers only names the declaration makes reachable"
        ),
        "no-target" => "a captured connection had no name to decide on (an address the jail's resolver never handed out, with no TLS server name): the client must resolve names through the jail's resolver, or use the proxy variables".to_owned(),
        "tls-handshake-refused" => "the client's TLS handshake was refused: its server name must name the host it opened the tunnel (or connection) for, and it must trust the run CA".to_owned(),
        "address-blocked" => "the host resolved to a private, loopback or metadata address: list the range in egress.allow_ips only if it is meant to be reached".to_owned(),
        "upgrade" => "the connection was upgraded (WebSocket): every message after the handshake is scanned as a body (swapped where body is granted, redacted back), and a refusal closes it with 1008".to_owned(),
        _ => "no fix is known for this reason: see docs/audit-log.md".to_owned(),
    }
}

/// `api.example:8443` → `api.example` (grants name hosts, not ports); `[::1]:443` → `[::1]`.
fn without_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!name.contains(':') || name.ends_with(']')) =>
        {
            name
        }
        _ => host,
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
        let fix = for_refusal(
            "placeholder-not-granted",
            Some("t"),
            Some("h"),
            Some("header:x-api-key"),
        );
        assert!(
            fix.contains("header in its in: (and x-api-key in its header:)"),
            "{fix}"
        );
        let fix = for_refusal("request-not-allowed", Some("gh"), Some("api.test"), None);
        assert!(fix.contains("secrets.gh.allow"), "{fix}");
        let fix = for_refusal("budget-exhausted", Some("gh"), Some("api.test"), None);
        assert!(fix.contains("raise secrets.gh.budget"), "{fix}");
        let fix = for_refusal("pin-mismatch", Some("gh"), Some("api.test:443"), None);
        assert!(
            fix.contains("api.test's certificate verified but holds none of secrets.gh.pin"),
            "{fix}"
        );
        let fix = for_refusal("dns-name-not-allowed", None, Some("evil.example"), None);
        assert!(fix.contains("add evil.example to egress.allow"), "{fix}");
        for code in ["no-target", "tls-handshake-refused"] {
            assert!(!for_refusal(code, None, None, None).contains("no fix is known"));
        }
        let fix = for_refusal("host-not-allowed: x", None, Some("evil.example"), None);
        assert!(fix.contains("add evil.example to egress.allow"), "{fix}");
        assert!(for_refusal("something-new", None, None, None).contains("no fix is known"));
        for (host, name) in [
            ("api.example:8443", "api.example"),
            ("[::1]:443", "[::1]"),
            ("::1", "::1"),
            ("api.example", "api.example"),
        ] {
            assert_eq!(without_port(host), name);
        }
    }
}
