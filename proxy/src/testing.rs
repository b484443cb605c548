//! Fixtures for the crate's unit tests: a declaration from YAML text, and its guard.

use sluice_guard::Guard;
use sluice_policies::Policy;

/// The declaration `yaml` (named `file` in its diagnostics) and the guard of its secrets,
/// placeholders minted as a run mints them. Panics on a declaration that does not check:
/// a test's fixture must be valid.
pub(crate) fn declared(yaml: &str, file: &str) -> (Policy, Guard) {
    let policy = Policy::parse(yaml, file)
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .policy;
    let guard = policy
        .build_guard(&policy.mint_placeholders())
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    (policy, guard)
}
