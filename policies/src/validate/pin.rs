//! A secret's `pin:` checked: a non-empty list of `sha256/BASE64` SPKI pins.

use super::Ctx;
use crate::error::{PinProblem, Problem};
use crate::pin::{PinSyntax, SpkiPin};
use crate::raw::SpannedList;

/// Compiles `secrets.<secret>.pin`; every entry that parses, in order, without repeats
/// (`cx` says why of each that does not).
pub(super) fn pins(cx: &mut Ctx<'_>, raw: Option<&SpannedList>, base: &str) -> Vec<SpkiPin> {
    let Some(list) = raw else {
        return Vec::new();
    };
    let at = format!("{base}.pin");
    if list.value.is_empty() {
        cx.at(list, at, Problem::Pin(PinProblem::Empty));
        return Vec::new();
    }
    let mut pins = Vec::with_capacity(list.value.len());
    for (i, entry) in list.value.iter().enumerate() {
        let found = entry.value.escape_debug().to_string();
        match entry.value.parse::<SpkiPin>() {
            Ok(pin) if !pins.contains(&pin) => pins.push(pin),
            Ok(_) => {}
            Err(PinSyntax::Prefix) => {
                cx.at(
                    entry,
                    format!("{at}[{i}]"),
                    Problem::Pin(PinProblem::Prefix { found }),
                );
            }
            Err(PinSyntax::Hash) => {
                cx.at(
                    entry,
                    format!("{at}[{i}]"),
                    Problem::Pin(PinProblem::Hash { found }),
                );
            }
        }
    }
    pins
}
