//! A secret's `approve:` checked: `all`, or a non-empty list of HTTP methods, written in
//! upper case as in `allow:` rules (a method is case-sensitive on the wire), each kept once.

use serde_saphyr::Spanned;

use super::Ctx;
use crate::approve::Approve;
use crate::error::{ApproveProblem, Problem};
use crate::raw::RawApprove;

/// The methods a request to an upstream can carry (CONNECT is sluice's own).
const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
];

/// Compiles `secrets.<secret>.approve`; `None` when it has errors (then `cx` says why).
pub(super) fn approve(cx: &mut Ctx<'_>, raw: &Spanned<RawApprove>, base: &str) -> Option<Approve> {
    let at = format!("{base}.approve");
    let methods = match &raw.value {
        RawApprove::Word(word) if word == "all" => return Some(Approve::All),
        RawApprove::Word(word) => {
            let found = word.escape_debug().to_string();
            cx.at(
                raw,
                at,
                Problem::Approve(ApproveProblem::NotAList { found }),
            );
            return None;
        }
        RawApprove::Methods(methods) => methods,
    };
    if methods.is_empty() {
        cx.at(raw, at, Problem::Approve(ApproveProblem::Empty));
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(methods.len());
    let mut clean = true;
    for (i, method) in methods.iter().enumerate() {
        if !METHODS.contains(&method.as_str()) {
            let found = method.escape_debug().to_string();
            let problem = Problem::Approve(ApproveProblem::UnknownMethod { found });
            cx.at(raw, format!("{at}[{i}]"), problem);
            clean = false;
        } else if !out.contains(method) {
            out.push(method.clone());
        }
    }
    clean.then_some(Approve::Methods(out))
}
