//! Streaming equals one-shot, and the guard's prefiltered search equals a plain automaton.
//!
//! The input derives the secrets, a text built from pieces of their patterns (whole, cut,
//! glued to another, or raw bytes), the points where the stream is cut, and the plan. Then:
//!
//! 1. `Guard::find_iter` (q-gram prefilter, then the automaton in regions) reports exactly the
//!    spans of a plain leftmost-longest aho-corasick automaton over the same patterns;
//! 2. a `Rewriter` fed the text in the derived chunks gives the one-shot `Guard::rewrite`
//!    result: the same bytes, or the same refusal.
//!
//! The secrets here are random fuzz bytes, so deriving `Debug` (to print a failing input) is
//! fine in this crate and nowhere else.
#![no_main]

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sluice_guard::{
    Encoding, Guard, GuardError, NONCE_LEN, OnPlaceholder, OnValue, Placeholder, Plan, Rewriter,
    SecretValue, SwapForm,
};

#[derive(Debug, Arbitrary)]
enum Piece {
    /// A whole pattern.
    Whole(u8),
    /// The pattern's first `cut` bytes (modulo its length).
    Prefix(u8, u8),
    /// The pattern from byte `cut` on.
    Suffix(u8, u8),
    /// A prefix of one pattern, then a whole other pattern.
    Glued(u8, u8, u8),
    /// Bytes of the fuzzer's own.
    Bytes(Vec<u8>),
    /// A pattern's prefix, repeated: near-misses dense enough to reach the search's fallback.
    Burst(u8, u8, u16),
}

#[derive(Debug, Arbitrary)]
enum Mode {
    /// Every value redacted (responses).
    Redact,
    /// Every placeholder swapped, values kept, swaps written in this form.
    SwapAll(u8),
    /// Placeholders of secrets whose bit is set swapped, others refused; values refused.
    Granted(u64),
}

#[derive(Debug, Arbitrary)]
struct Case {
    values: Vec<Vec<u8>>,
    pieces: Vec<Piece>,
    cuts: Vec<u16>,
    mode: Mode,
}

/// The guard, and every pattern it holds (each placeholder and every distinct encoding of
/// each value, as the guard builds them).
fn build(values: &[Vec<u8>]) -> Option<(Arc<Guard>, Vec<Vec<u8>>)> {
    let mut builder = Guard::builder();
    let mut patterns = Vec::new();
    for (i, value) in values.iter().take(6).enumerate() {
        let mut value = value.clone();
        value.truncate(64);
        let name = format!("s{i}");
        let placeholder = Placeholder::mint(&name, &[i as u8; NONCE_LEN]);
        let value = SecretValue::new(value);
        let first = patterns.len();
        patterns.push(placeholder.as_bytes().to_vec());
        for encoding in Encoding::ALL {
            if let Some(text) = encoding.encode(&value)
                && !text.is_empty()
                && !patterns[first..].iter().any(|p| **p == *text)
            {
                patterns.push(text.to_vec());
            }
        }
        builder.add(name, placeholder, value).ok()?;
    }
    // Values that are too short, shared, or overlap a placeholder are refused by design.
    let guard = builder.build().ok()?;
    Some((Arc::new(guard), patterns))
}

fn render(patterns: &[Vec<u8>], pieces: &[Piece]) -> Vec<u8> {
    let pick = |i: u8| &patterns[usize::from(i) % patterns.len()];
    let mut text = Vec::new();
    for piece in pieces.iter().take(64) {
        if text.len() > 64 * 1024 {
            break;
        }
        // A guard with no secret has no pattern to pick: only the fuzzer's bytes remain.
        if patterns.is_empty() && !matches!(piece, Piece::Bytes(_)) {
            continue;
        }
        match piece {
            Piece::Whole(i) => text.extend_from_slice(pick(*i)),
            Piece::Prefix(i, cut) => {
                let p = pick(*i);
                text.extend_from_slice(&p[..usize::from(*cut) % p.len()]);
            }
            Piece::Suffix(i, cut) => {
                let p = pick(*i);
                text.extend_from_slice(&p[usize::from(*cut) % p.len()..]);
            }
            Piece::Glued(a, cut, b) => {
                let p = pick(*a);
                text.extend_from_slice(&p[..usize::from(*cut) % p.len()]);
                text.extend_from_slice(pick(*b));
            }
            Piece::Bytes(bytes) => text.extend(bytes.iter().take(256)),
            Piece::Burst(i, cut, times) => {
                let p = pick(*i);
                let prefix = &p[..usize::from(*cut) % p.len()];
                for _ in 0..usize::from(*times % 512) {
                    text.extend_from_slice(prefix);
                }
            }
        }
    }
    text
}

fn plan(guard: &Guard, mode: &Mode) -> Plan {
    match mode {
        Mode::Redact => Plan::redact_all(guard),
        Mode::SwapAll(form) => {
            let form = [
                SwapForm::Raw,
                SwapForm::Percent,
                SwapForm::Form,
                SwapForm::Json,
            ][usize::from(*form) % 4];
            let mut plan = Plan::refuse_all(guard).with_swap_form(form);
            for id in guard.ids() {
                plan.set(id, OnPlaceholder::Swap, OnValue::Keep);
            }
            plan
        }
        Mode::Granted(bits) => {
            let mut plan = Plan::refuse_all(guard);
            for id in guard.ids().filter(|id| bits >> (id.index() % 64) & 1 == 1) {
                plan.set(id, OnPlaceholder::Swap, OnValue::Refuse);
            }
            plan
        }
    }
}

fn stream(
    guard: &Arc<Guard>,
    plan: &Plan,
    text: &[u8],
    cuts: &[u16],
) -> Result<Vec<u8>, GuardError> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .take(32)
        .map(|&c| usize::from(c) % (text.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut rewriter = Rewriter::new(Arc::clone(guard), plan.clone());
    let mut out = Vec::new();
    let mut at = 0;
    for cut in cuts {
        rewriter.push(&text[at..cut], &mut out)?;
        at = cut;
    }
    rewriter.push(&text[at..], &mut out)?;
    rewriter.finish(&mut out)?;
    Ok(out)
}

fuzz_target!(|case: Case| {
    let Some((guard, patterns)) = build(&case.values) else {
        return;
    };
    let text = render(&patterns, &case.pieces);

    // 1. The prefiltered search is the plain automaton's.
    let plain = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&patterns)
        .expect("the guard built these patterns");
    let want: Vec<(usize, usize)> = plain
        .find_iter(&text)
        .map(|m| (m.start(), m.end()))
        .collect();
    let got: Vec<(usize, usize)> = guard.find_iter(&text).map(|h| (h.start, h.end)).collect();
    assert_eq!(
        got, want,
        "prefiltered search differs from the plain automaton"
    );

    // 2. Streaming is one-shot, whatever the chunking.
    let plan = plan(&guard, &case.mode);
    let one_shot = guard.rewrite(&text, &plan).map(|r| r.bytes().to_vec());
    let streamed = stream(&guard, &plan, &text, &case.cuts);
    match (one_shot, streamed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "streamed output differs from one-shot"),
        (Err(GuardError::Refused(a)), Err(GuardError::Refused(b))) => assert_eq!(a, b),
        (a, b) => panic!(
            "one-shot and streamed disagree: {:?} vs {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    }
});
