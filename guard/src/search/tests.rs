//! The prefiltered search must report exactly the automaton's own full scan.

use aho_corasick::MatchKind;
use proptest::prelude::*;

use super::*;
use crate::{Guard, NONCE_LEN, Placeholder, SecretValue};

/// A guard over `values` (placeholders from a nonce of `"` bytes, so hex `22`: no value or
/// encoding drawn from the test alphabets can overlap one).
pub(crate) fn guard(values: &[Vec<u8>]) -> Result<Guard, crate::GuardError> {
    let mut b = Guard::builder();
    for (i, v) in values.iter().enumerate() {
        let name = format!("s{i}");
        b.add(
            name.as_str(),
            Placeholder::mint(&name, &[b'"'; NONCE_LEN]),
            SecretValue::new(v.clone()),
        )?;
    }
    let mut g = b.build()?;
    g.force_prefilter();
    Ok(g)
}

type Found = Vec<(usize, usize, usize)>;

/// What the prefiltered search reports, whether it fell back, and what the plain scan reports.
fn both(guard: &Guard, text: &[u8]) -> (Found, bool, Found) {
    let mut fast = guard.matches(text);
    let found: Found = fast
        .by_ref()
        .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
        .collect();
    let plain: Found = guard
        .plain_matches(text)
        .map(|m| (m.start(), m.end(), m.pattern().as_usize()))
        .collect();
    (found, fast.fell_back, plain)
}

#[test]
fn edges_short_texts_and_adjacent_matches() {
    let g = guard(&[b"abcdefgh".to_vec(), b"0123456789abcdef".to_vec()]).unwrap();
    let cases: &[&[u8]] = &[
        b"",
        b"abc",
        b"abcdefg",
        b"abcdefgh",
        b"xabcdefgh",
        b"abcdefghabcdefgh",
        b"0123456789abcdefgh",
        b"0123456789abcdefabcdefgh..........................abcdefgh",
        b"abcdefgabcdefgabcdefgabcdefg",
    ];
    for text in cases {
        let (fast, _, plain) = both(&g, text);
        assert_eq!(fast, plain, "{:?}", String::from_utf8_lossy(text));
    }
    let (fast, _, _) = both(&g, b"0123456789abcdefgh");
    assert_eq!(fast.len(), 1, "the longer value wins at the leftmost start");
}

#[test]
fn dense_near_misses_fall_back_and_agree() {
    let mut g = guard(&[b"near-miss-value".to_vec(), b"another/value+1".to_vec()]).unwrap();
    // Prefixes of a value, one byte short: every probe passes, nothing matches, until the end.
    let mut text: Vec<u8> = b"near-miss-valu ".repeat(2000);
    text.extend_from_slice(b"near-miss-value");
    let (fast, fell_back, plain) = both(&g, &text);
    assert!(fell_back, "a text made of near-misses falls back");
    assert_eq!(fast, plain);
    assert_eq!(fast.len(), 1);

    // The same burst in a long quiet text is searched region by region.
    let mut long = vec![b'.'; 200_000];
    long.extend_from_slice(&text);
    long.extend(std::iter::repeat_n(b'.', 200_000));
    let (fast, fell_back, plain) = both(&g, &long);
    assert!(!fell_back);
    assert_eq!(fast, plain);

    // With the threshold at zero, a region half the rest of the text falls back at once.
    g.set_fallback_min(0);
    let (fast, fell_back, plain) = both(&g, b"..near-miss-value..");
    assert!(fell_back);
    assert_eq!(fast, plain);
}

#[test]
fn no_filter_means_the_automaton_alone() {
    let g = Guard::builder().build().unwrap();
    assert_eq!(both(&g, b"anything at all").0, vec![]);
}

/// One piece of a test text, resolved against the guard's patterns: a whole pattern, a prefix,
/// a suffix, a 4-byte gram from inside one, a filler byte, or a prefix of one pattern glued to
/// another (overlapping near-misses).
#[derive(Debug, Clone)]
pub(crate) enum Piece {
    Whole(usize),
    Prefix(usize, usize),
    Suffix(usize, usize),
    Gram(usize, usize),
    Filler(u8),
    Glued(usize, usize, usize),
}

pub(crate) fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        2 => any::<usize>().prop_map(Piece::Whole),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(p, c)| Piece::Prefix(p, c)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(p, c)| Piece::Suffix(p, c)),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(p, c)| Piece::Gram(p, c)),
        2 => prop::sample::select(b"ab01/+ %.\"".to_vec()).prop_map(Piece::Filler),
        2 => (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, c, b)| Piece::Glued(a, c, b)),
    ]
}

pub(crate) fn render(patterns: &[Vec<u8>], pieces: &[Piece]) -> Vec<u8> {
    let mut out = Vec::new();
    let pick = |i: usize| &patterns[i % patterns.len()];
    for p in pieces {
        match *p {
            Piece::Whole(i) => out.extend_from_slice(pick(i)),
            Piece::Prefix(i, c) => {
                let p = pick(i);
                out.extend_from_slice(&p[..c % p.len()]);
            }
            Piece::Suffix(i, c) => {
                let p = pick(i);
                out.extend_from_slice(&p[1 + c % (p.len() - 1)..]);
            }
            Piece::Gram(i, c) => {
                let p = pick(i);
                let at = c % (p.len() - 3);
                out.extend_from_slice(&p[at..at + 4]);
            }
            Piece::Filler(b) => out.push(b),
            Piece::Glued(a, c, b) => {
                let p = pick(a);
                out.extend_from_slice(&p[..c % p.len()]);
                out.extend_from_slice(pick(b));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn prefiltered_search_equals_the_full_scan(
        values in prop::collection::vec("[ab01/+ ]{8,20}", 1..5),
        pieces in prop::collection::vec(piece(), 0..60),
        fallback in prop::sample::select(vec![0usize, 64, FALLBACK_MIN_REGION, usize::MAX]),
    ) {
        let values: Vec<Vec<u8>> = values.into_iter().map(String::into_bytes).collect();
        let built = guard(&values);
        // Two random values may share an encoding; such guards are refused, by design.
        prop_assume!(built.is_ok());
        let mut g = built.unwrap();
        g.set_fallback_min(fallback);
        let patterns: Vec<Vec<u8>> = g.pattern_texts().map(<[u8]>::to_vec).collect();
        let text = render(&patterns, &pieces);
        let (fast, _, plain) = both(&g, &text);
        prop_assert_eq!(fast, plain);
    }
}

/// Matches straight over raw patterns (no guard, so lengths close together and no hex forms
/// doubling them): the windows' edges must be exact, not merely covered by a second probe.
fn raw_both(patterns: &[Vec<u8>], text: &[u8], fallback: usize) -> (Found, Found) {
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(patterns)
        .unwrap();
    let filter = QgramFilter::new(patterns).unwrap();
    let max_len = patterns.iter().map(Vec::len).max().unwrap();
    let key = |m: Match| (m.start(), m.end(), m.pattern().as_usize());
    let fast = Matches::new(&automaton, Some(&filter), text, max_len, fallback)
        .map(key)
        .collect();
    let plain = automaton.find_iter(text).map(key).collect();
    (fast, plain)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn region_edges_are_exact_over_raw_patterns(
        patterns in prop::collection::vec("[ab]{8,10}|[abc]{24,26}", 1..4),
        pieces in prop::collection::vec(piece(), 0..40),
        fallback in prop::sample::select(vec![0usize, usize::MAX]),
    ) {
        let patterns: Vec<Vec<u8>> = patterns.into_iter().map(String::into_bytes).collect();
        let text = render(&patterns, &pieces);
        let (fast, plain) = raw_both(&patterns, &text, fallback);
        prop_assert_eq!(fast, plain);
    }
}
