//! Request rules: the methods and paths a secret may be swapped into (`allow:`).
//!
//! ```
//! use sluice_policies::{Location, Policy, RequestLine, Sink};
//!
//! let yaml = r#"version: 1
//! secrets:
//!   github_token:
//!     from: { env: GITHUB_TOKEN }
//!     hosts: [api.github.com]
//!     sinks: [egress]
//!     allow:
//!       - { methods: [GET, HEAD], paths: ["/repos/acme/**", "/user"] }
//! "#;
//! let policy = Policy::parse(yaml, "policy.yaml").unwrap().policy;
//! let auth = Location::Header("authorization".into());
//! let may = |method, path| {
//!     let line = RequestLine::new(method, path);
//!     policy.may("github_token", Sink::Egress, "api.github.com", 443, &auth, &line)
//! };
//! assert!(may("GET", "/repos/acme/widgets/pulls").is_ok());
//! assert!(may("GET", "/repos/acme/../other").is_err());
//! let refused = may("POST", "/user").unwrap_err();
//! assert!(refused.to_string().contains("add POST to its methods"));
//! ```
//!
//! This module owns the matching; [`crate::Policy::may`] asks it after every other grant.
//! It never looks at the query, and never at a path as it came: only at its normal form
//! ([`normalize_path`]), which is also the path the proxy sends on.

mod path;
mod pattern;
mod problem;

use std::borrow::Cow;

pub use path::normalize_path;
pub(crate) use pattern::PathPattern;
pub use problem::RuleProblem;

use path::Segments;

/// One rule: a request matches when its method is among `methods` and its path matches
/// one of `paths` (a key left out admits every one).
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub(crate) methods: Option<Vec<Box<str>>>,
    pub(crate) paths: Option<Vec<PathPattern>>,
}

impl Rule {
    fn admits_method(&self, method: &str) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|methods| methods.iter().any(|m| **m == *method))
    }

    fn admits_path(&self, line: &RequestLine<'_>) -> bool {
        match (&self.paths, &line.segments) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(paths), Some(segments)) => paths.iter().any(|p| p.matches(&line.path, segments)),
        }
    }
}

/// A secret's `allow:`, compiled: a request is admitted when one rule matches it.
#[derive(Clone, Debug)]
pub struct RequestRules {
    rules: Vec<Rule>,
}

impl RequestRules {
    pub(crate) fn new(rules: Vec<Rule>) -> RequestRules {
        RequestRules { rules }
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none (never, for a validated declaration).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a rule matches the request.
    pub fn admits(&self, line: &RequestLine<'_>) -> bool {
        self.rules
            .iter()
            .any(|rule| rule.admits_method(line.method) && rule.admits_path(line))
    }

    /// The change to `secrets.<secret>.allow` that would admit the request: the method
    /// added to a rule whose paths already match, else a rule of its own.
    pub(crate) fn fix(&self, secret: &str, line: &RequestLine<'_>) -> String {
        let method = line.method;
        if let Some((i, rule)) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, rule)| rule.paths.is_some() && rule.admits_path(line))
        {
            let methods = rule.methods.as_deref().unwrap_or_default().join(", ");
            return format!(
                "secrets.{secret}.allow[{i}] admits this path for {methods} only; add {method} to its methods"
            );
        }
        format!(
            "no rule of secrets.{secret}.allow admits it; add {{ methods: [{method}], paths: [\"{}\"] }} to secrets.{secret}.allow",
            line.path()
        )
    }
}

/// The method and path of one request, its path normalised and cut into segments once,
/// for every secret's rules to read.
///
/// ```
/// use sluice_policies::RequestLine;
///
/// let line = RequestLine::new("GET", "/repos//acme/./x");
/// assert_eq!(line.path(), "/repos/acme/x");
/// assert!(line.was_changed());
/// assert!(!RequestLine::new("GET", "/repos/acme/x").was_changed());
/// ```
#[derive(Debug)]
pub struct RequestLine<'a> {
    method: &'a str,
    raw: &'a str,
    path: Cow<'a, str>,
    segments: Option<Segments>,
}

impl<'a> RequestLine<'a> {
    /// A request's method (as sent, case and all) and path (without the query).
    pub fn new(method: &'a str, path: &'a str) -> RequestLine<'a> {
        let normal = normalize_path(path);
        let segments = Segments::of(&normal);
        RequestLine {
            method,
            raw: path,
            path: normal,
            segments,
        }
    }

    /// The method.
    pub fn method(&self) -> &str {
        self.method
    }

    /// The normalised path: what rules match, and what the proxy sends on when a rule
    /// admitted a swap.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether normalising changed the path.
    pub fn was_changed(&self) -> bool {
        self.path != self.raw
    }
}
