//! A secret's `approve:` as compiled: which of its uses wait for a person's decision
//! (docs/approvals.md). Checked in `validate::approve`; the proxy holds such a use until it
//! is decided. What a decision on it is made about is `approval_basis`'s.

use std::fmt;

/// A secret's `approve:`: which of its uses wait for a person's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approve {
    /// `approve: all`: every use.
    All,
    /// `approve: [POST, DELETE]`: uses with these methods (upper case, each once).
    Methods(Vec<String>),
}

impl Approve {
    /// Whether a use with `method` waits.
    ///
    /// ```
    /// use sluice_policies::Approve;
    /// let writes = Approve::Methods(vec!["POST".into(), "DELETE".into()]);
    /// assert!(writes.covers("DELETE"));
    /// assert!(writes.covers("delete"));
    /// assert!(!writes.covers("GET"));
    /// assert!(Approve::All.covers("GET"));
    /// ```
    pub fn covers(&self, method: &str) -> bool {
        match self {
            Approve::All => true,
            // Methods are case-sensitive on the wire, yet some servers read `delete` as
            // DELETE: a use is covered in any letter case.
            Approve::Methods(methods) => methods.iter().any(|m| m.eq_ignore_ascii_case(method)),
        }
    }
}

impl fmt::Display for Approve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Approve::All => f.write_str("all uses"),
            Approve::Methods(methods) => write!(f, "{}", methods.join(", ")),
        }
    }
}
