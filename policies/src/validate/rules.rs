//! A secret's `allow:` checked and compiled: each method a capitalised HTTP token, each
//! path pattern one that could match a normalised request path, no rule or list empty.
//!
//! It owns the diagnostics of request rules; what a pattern means is `crate::rules`. It
//! must never accept a rule that could never match: the writer would believe it grants
//! something.

use serde_saphyr::Spanned;

use super::Ctx;
use crate::error::Problem;
use crate::raw::{RawRule, SpannedList};
use crate::rules::{PathPattern, RequestRules, Rule, RuleProblem};

/// Compiles `secrets.<secret>.allow`, reporting every bad entry. `None` when there is no
/// `allow:` (every request is admitted) or when it had errors (then `cx` says why).
pub(super) fn request_rules(
    cx: &mut Ctx<'_>,
    secret: &str,
    allow: Option<&Spanned<Vec<Spanned<RawRule>>>>,
    base: &str,
) -> Option<RequestRules> {
    let allow = allow?;
    let path = format!("{base}.allow");
    if allow.value.is_empty() {
        let problem = RuleProblem::EmptyAllow {
            secret: secret.to_owned(),
        };
        cx.at(allow, path, Problem::Rule(problem));
        return None;
    }
    let mut rules = Vec::new();
    let mut clean = true;
    for (i, raw) in allow.value.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match rule(cx, raw, &at) {
            Some(rule) => rules.push(rule),
            None => clean = false,
        }
    }
    clean.then(|| RequestRules::new(rules))
}

fn rule(cx: &mut Ctx<'_>, raw: &Spanned<RawRule>, at: &str) -> Option<Rule> {
    let RawRule { methods, paths } = &raw.value;
    if methods.is_none() && paths.is_none() {
        cx.at(raw, at.to_owned(), Problem::Rule(RuleProblem::EmptyRule));
        return None;
    }
    // Both lists are checked before either error returns: every bad entry is reported.
    let methods = methods
        .as_ref()
        .map(|list| entries(cx, list, &format!("{at}.methods"), "methods", method));
    let paths = paths.as_ref().map(|list| {
        entries(
            cx,
            list,
            &format!("{at}.paths"),
            "paths",
            PathPattern::parse,
        )
    });
    let methods = methods.map_or(Some(None), |m| m.map(Some))?;
    let paths = paths.map_or(Some(None), |p| p.map(Some))?;
    Some(Rule { methods, paths })
}

/// Every entry of `list` through `parse`, each bad one reported; `None` if any was bad or
/// the list is empty. Repeats are kept once.
fn entries<T: PartialEq>(
    cx: &mut Ctx<'_>,
    list: &SpannedList,
    at: &str,
    key: &'static str,
    parse: impl Fn(&str) -> Result<T, RuleProblem>,
) -> Option<Vec<T>> {
    if list.value.is_empty() {
        cx.at(
            list,
            at.to_owned(),
            Problem::Rule(RuleProblem::EmptyList { key }),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut clean = true;
    for (i, entry) in list.value.iter().enumerate() {
        match parse(&entry.value) {
            Ok(parsed) if !out.contains(&parsed) => out.push(parsed),
            Ok(_) => {}
            Err(problem) => {
                cx.at(entry, format!("{at}[{i}]"), Problem::Rule(problem));
                clean = false;
            }
        }
    }
    clean.then_some(out)
}

/// A method: an HTTP token (RFC 9110 §9.1) in capitals, and not CONNECT.
fn method(found: &str) -> Result<Box<str>, RuleProblem> {
    let token = !found.is_empty()
        && found
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(RuleProblem::BadMethod {
            found: found.escape_debug().to_string(),
        });
    }
    let upper = found.to_ascii_uppercase();
    if upper != found {
        return Err(RuleProblem::LowercaseMethod {
            found: found.to_owned(),
            upper,
        });
    }
    if found == "CONNECT" {
        return Err(RuleProblem::ConnectMethod);
    }
    Ok(found.into())
}
