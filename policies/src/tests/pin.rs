//! `pin:` in a declaration: what it compiles to, and each error at its position.

use super::{errors, expect_at};
use crate::*;

const EMPTY_SPKI_PIN: &str = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

fn with_pin(pin: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  gh:\n    from: {{ env: GH }}\n    hosts: [api.github.com]\n    pin: {pin}\n"
    )
}

fn pin_problem(p: &Problem, pred: impl Fn(&PinProblem) -> bool) -> bool {
    matches!(p, Problem::Pin(pin) if pred(pin))
}

#[test]
fn pins_compile_in_order_without_repeats() {
    let other = SpkiPin::of_spki(b"another key").to_string();
    let src = with_pin(&format!(
        "[\"{EMPTY_SPKI_PIN}\", \"{other}\", \"{EMPTY_SPKI_PIN}\"]"
    ));
    let p = Policy::parse(&src, "t.yaml").unwrap().policy;
    let pins: Vec<String> = p.secrets()[0]
        .pins()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(pins, [EMPTY_SPKI_PIN, other.as_str()]);
    assert!(p.has_pins());
    assert_eq!(
        p.secrets()[0].grant_line(),
        "egress → api.github.com; header; pinned to 2 keys"
    );
    // Without `pin:`, no secret is pinned and the run asks nothing of chains.
    let plain = "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    hosts: [api.github.com]\n";
    let p = Policy::parse(plain, "t.yaml").unwrap().policy;
    assert!(p.secrets()[0].pins().is_empty());
    assert!(!p.has_pins());
}

#[test]
fn bad_pins_are_positioned_with_their_fix() {
    let d = errors(&with_pin("[]")).0;
    expect_at(&d, 6, 10, |p| {
        pin_problem(p, |pin| *pin == PinProblem::Empty)
    });
    let src = with_pin(&format!(
        "[\"{EMPTY_SPKI_PIN}\", \"sha1/AAAA\", \"sha256/AAAA\"]"
    ));
    let d = errors(&src).0;
    expect_at(&d, 6, 66, |p| {
        pin_problem(
            p,
            |pin| matches!(pin, PinProblem::Prefix { found } if found == "sha1/AAAA"),
        )
    });
    expect_at(&d, 6, 79, |p| {
        pin_problem(
            p,
            |pin| matches!(pin, PinProblem::Hash { found } if found == "sha256/AAAA"),
        )
    });
    let shown = errors(&src).to_string();
    assert!(shown.contains("secrets.gh.pin[1]"), "{shown}");
    assert!(
        shown.contains("openssl dgst -sha256 -binary | base64"),
        "{shown}"
    );
    // A pin is a list of strings: one bare string is a type error, named.
    let single = errors(&with_pin(&format!("\"{EMPTY_SPKI_PIN}\""))).to_string();
    assert!(
        single.contains("t.yaml:6:10: error: expected sequence"),
        "{single}"
    );
}

#[test]
fn a_pin_needs_egress_and_is_refused_on_a_signing_secret() {
    let no_egress = format!(
        "version: 1\nsecrets:\n  k:\n    from: {{ env: K }}\n    sinks: [command]\n    pin: [\"{EMPTY_SPKI_PIN}\"]\n"
    );
    let d = errors(&no_egress).0;
    expect_at(&d, 6, 10, |p| {
        matches!(p, Problem::NeedsEgress { key: "pin", .. })
    });
    let signing = format!(
        "version: 1\nsecrets:\n  aws:\n    sign: aws-sigv4\n    from:\n      access_key_id: {{ env: A }}\n      secret_access_key: {{ env: B }}\n    hosts: [\"*.amazonaws.com\"]\n    pin: [\"{EMPTY_SPKI_PIN}\"]\n"
    );
    let d = errors(&signing).0;
    expect_at(&d, 9, 10, |p| {
        pin_problem(p, |pin| matches!(pin, PinProblem::OnSigningSecret { .. }))
    });
}
