//! A secret's `budget:` checked: both keys, at least one request, a window of 1 s to 31
//! days written as people write durations (`30s`, `15m`, `1h`, `1d`).

use std::time::Duration;

use serde_saphyr::Spanned;

use super::Ctx;
use crate::error::BudgetProblem;
use crate::error::Problem;
use crate::model::Budget;
use crate::raw::RawBudget;

/// The longest window a budget may have.
const MAX_WINDOW: Duration = Duration::from_secs(31 * 24 * 3600);

/// Compiles `secrets.<secret>.budget`; `None` when it has errors (then `cx` says why).
pub(super) fn budget(cx: &mut Ctx<'_>, raw: &Spanned<RawBudget>, base: &str) -> Option<Budget> {
    let at = format!("{base}.budget");
    let (requests, per) = match (&raw.value.requests, &raw.value.per) {
        (Some(requests), Some(per)) => (requests, per),
        (requests, _) => {
            let missing = if requests.is_none() {
                "requests"
            } else {
                "per"
            };
            cx.at(
                raw,
                at,
                Problem::Budget(BudgetProblem::Incomplete { missing }),
            );
            return None;
        }
    };
    let mut clean = true;
    if requests.value == 0 {
        let problem = Problem::Budget(BudgetProblem::NoRequests);
        cx.at(requests, format!("{at}.requests"), problem);
        clean = false;
    }
    let window = match humantime::parse_duration(per.value.trim()) {
        Ok(window) if (Duration::from_secs(1)..=MAX_WINDOW).contains(&window) => Some(window),
        Ok(_) => {
            let found = per.value.clone();
            let problem = Problem::Budget(BudgetProblem::WindowOutOfRange { found });
            cx.at(per, format!("{at}.per"), problem);
            None
        }
        Err(_) => {
            let found = per.value.escape_debug().to_string();
            cx.at(
                per,
                format!("{at}.per"),
                Problem::Budget(BudgetProblem::BadDuration { found }),
            );
            None
        }
    };
    let per = window?;
    clean.then_some(Budget {
        requests: requests.value,
        per,
    })
}
