//! What each kind of request in the soak's mix must get back, and the search of every
//! answer for a value the client must never hold (the secret's, current or rotated, and
//! every token the minted credential's endpoint issued).

use http::{HeaderMap, HeaderValue};

use super::body;
use super::load::{Client, Kind, UPLOAD_BYTES};
use super::minted::TOKEN_PREFIX;
use super::upstream::{OK_BODY, STREAM_BYTES};

/// What came back.
pub(super) struct Seen {
    pub(super) status: u16,
    pub(super) headers: HeaderMap,
    /// The body, or where reading it broke off.
    pub(super) body: Result<Vec<u8>, String>,
}

pub(super) fn describe(seen: &Result<Seen, String>) -> String {
    match seen {
        Ok(seen) => match &seen.body {
            Ok(body) => format!("{} with {} body bytes", seen.status, body.len()),
            Err(why) => format!("{} then {why}", seen.status),
        },
        Err(why) => why.clone(),
    }
}

/// Notes every place the answer holds a value the client must never see.
pub(super) fn check_leaks(client: &Client, kind: Kind, seen: &Seen, leaks: &mut Vec<String>) {
    let values = client.values.all();
    let any = |bytes: &[u8]| {
        values.iter().any(|v| body::contains(bytes, v))
            || body::contains(bytes, TOKEN_PREFIX.as_bytes())
    };
    for (name, header) in &seen.headers {
        if any(header.as_bytes()) {
            leaks.push(format!(
                "{}: the real value in response header {name}",
                kind.name()
            ));
        }
    }
    if let Ok(body) = &seen.body
        && any(body)
    {
        leaks.push(format!(
            "{}: the real value in the response body",
            kind.name()
        ));
    }
}

/// Whether the answer is what `kind` must get.
pub(super) fn judge(client: &Client, kind: Kind, seen: &Seen) -> Result<(), String> {
    let status = seen.status;
    let header = |name: &str| seen.headers.get(name).map(HeaderValue::as_bytes);
    let body = seen
        .body
        .as_deref()
        .map_err(|why| format!("{status}, {why}"));
    let want = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{status} with {} body bytes: expected {what}",
                seen.body.as_ref().map_or(0, Vec::len)
            ))
        }
    };
    match kind {
        Kind::Ok | Kind::StallHead => {
            let body = body?;
            want(
                status == 200 && body == OK_BODY && header("x-soak-auth") == Some(b"real"),
                "200, the /ok body, and the upstream seeing the real value",
            )
        }
        Kind::Stream => want(
            status == 200 && body?.len() == STREAM_BYTES,
            "200 and 256 KiB",
        ),
        Kind::StallBody => want(status == 200 && body?.len() == 32 * 1024, "200 and 32 KiB"),
        Kind::Upload => want(
            status == 200 && body? == format!("received {UPLOAD_BYTES}\n").as_bytes(),
            "200 and the whole upload received",
        ),
        Kind::Echo => {
            let body = body?;
            let placeholder = client.placeholder.as_bytes();
            let times = body
                .windows(placeholder.len())
                .filter(|w| *w == placeholder)
                .count();
            want(
                status == 200 && times == 3 && header("x-soak-echo") == Some(placeholder),
                "200 with the value redacted to its placeholder, three times in the body and in x-soak-echo",
            )
        }
        Kind::Reset => match &seen.body {
            // A body that ends cleanly would pass a truncated response off as whole.
            Ok(_) if status < 500 => Err(format!(
                "{status} ended cleanly: a reset upstream body must reach the client as an error"
            )),
            _ => Ok(()),
        },
        Kind::WrongHeader | Kind::Ungranted => want(
            status == 403 && header("sluice-error").is_some(),
            "403 with a sluice-error header",
        ),
        Kind::BadTls => want(status == 502, "502"),
        Kind::Minted => {
            let placeholder = client.minted_placeholder.as_deref().unwrap_or_default();
            want(
                status == 200 && body? == format!("token={placeholder}\n").as_bytes(),
                "200 with the minted token echoed back as its placeholder",
            )
        }
        Kind::StallHeadAbandoned | Kind::StallBodyAbandoned => Ok(()),
    }
}
