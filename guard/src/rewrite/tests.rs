//! Tests of one-shot and streaming rewriting.

use std::sync::Arc;

use base64::Engine as _;
use proptest::prelude::*;

use super::*;
use crate::{Encoding, NONCE_LEN, Placeholder, SecretValue, SwapForm};

struct Fixture {
    guard: Arc<Guard>,
    gh: SecretId,
    aws: SecretId,
}

fn fixture() -> Fixture {
    let mut b = Guard::builder();
    let gh = b
        .add(
            "github_token",
            Placeholder::mint("github_token", &[1; NONCE_LEN]),
            SecretValue::from("ghp_AAAAbbbbCCCCdddd1234"),
        )
        .unwrap();
    let aws = b
        .add(
            "aws_secret",
            Placeholder::mint("aws_secret", &[2; NONCE_LEN]),
            SecretValue::from("wJalr/K7MDENG+bPxRfi\"CY"),
        )
        .unwrap();
    Fixture {
        guard: Arc::new(b.build().unwrap()),
        gh,
        aws,
    }
}

fn ph(f: &Fixture, id: SecretId) -> String {
    f.guard.placeholder(id).to_string()
}

#[test]
fn swap_table() {
    let f = fixture();
    let gh = ph(&f, f.gh);
    let aws = ph(&f, f.aws);
    // (name, input, swap form, expected output)
    let cases: Vec<(&str, String, SwapForm, String)> = vec![
        (
            "bearer header",
            format!("Bearer {gh}"),
            SwapForm::Raw,
            "Bearer ghp_AAAAbbbbCCCCdddd1234".into(),
        ),
        (
            "twice, adjacent",
            format!("{gh}{gh}"),
            SwapForm::Raw,
            "ghp_AAAAbbbbCCCCdddd1234ghp_AAAAbbbbCCCCdddd1234".into(),
        ),
        (
            "query, percent-encoded",
            format!("?key={aws}&x=1"),
            SwapForm::Percent,
            "?key=wJalr%2FK7MDENG%2BbPxRfi%22CY&x=1".into(),
        ),
        (
            "json body",
            format!("{{\"secret\":\"{aws}\"}}"),
            SwapForm::Json,
            r#"{"secret":"wJalr/K7MDENG+bPxRfi\"CY"}"#.into(),
        ),
        (
            "nothing",
            "plain text".into(),
            SwapForm::Raw,
            "plain text".into(),
        ),
    ];
    for (name, input, form, want) in cases {
        let mut plan = Plan::refuse_all(&f.guard).with_swap_form(form);
        plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
        plan.set(f.aws, OnPlaceholder::Swap, OnValue::Keep);
        let out = f.guard.rewrite(input.as_bytes(), &plan).unwrap();
        assert_eq!(String::from_utf8_lossy(out.bytes()), want, "{name}");
        assert_eq!(out.is_changed(), input != want, "{name}");
    }
}

#[test]
fn ungranted_placeholder_and_exfiltrated_value_are_refused() {
    let f = fixture();
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
    // The other secret's placeholder is refused, naming it.
    let input = format!("a={} b={}", ph(&f, f.gh), ph(&f, f.aws));
    let err = f.guard.rewrite(input.as_bytes(), &plan).unwrap_err();
    let GuardError::Refused(refusal) = &err else {
        panic!("expected a refusal, got {err:?}");
    };
    assert_eq!(refusal.secret, f.aws);
    assert_eq!(refusal.form, Form::Placeholder);
    assert_eq!(refusal.offset, input.find("b=").unwrap() as u64 + 2);
    assert!(err.to_string().contains("aws_secret"));
    // The real value, even base64-encoded inside something larger, is refused too.
    let smuggled = base64::engine::general_purpose::STANDARD.encode("x:wJalr/K7MDENG+bPxRfi\"CY");
    let err = f.guard.rewrite(smuggled.as_bytes(), &plan).unwrap_err();
    assert!(
        matches!(&err, GuardError::Refused(r) if r.secret == f.aws && r.form.is_value()),
        "{err:?}"
    );
    assert!(!err.to_string().contains("wJalr"));
    // The granted secret's own value passes toward its host, and is counted.
    let out = f.guard.rewrite(b"ghp_AAAAbbbbCCCCdddd1234", &plan).unwrap();
    assert_eq!(out.tally().get(f.gh).kept_values, 1);
    assert!(!out.is_changed());
}

#[test]
fn verbatim_keeps_placeholders() {
    let f = fixture();
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.aws, OnPlaceholder::Keep, OnValue::Refuse);
    let input = format!("conversation mentions {}", ph(&f, f.aws));
    let out = f.guard.rewrite(input.as_bytes(), &plan).unwrap();
    assert_eq!(out.bytes(), input.as_bytes());
    assert_eq!(out.tally().get(f.aws).kept_placeholders, 1);
}

#[test]
fn redaction_covers_every_encoding() {
    let f = fixture();
    let aws = ph(&f, f.aws);
    let value = "wJalr/K7MDENG+bPxRfi\"CY";
    let b64 = base64::engine::general_purpose::STANDARD.encode(value);
    let inputs = [
        value.to_string(),
        "wJalr%2FK7MDENG%2BbPxRfi%22CY".into(),
        "wJalr%2fK7MDENG%2bbPxRfi%22CY".into(),
        "wJalr/K7MDENG%2BbPxRfi%22CY".into(),
        r#"wJalr/K7MDENG+bPxRfi\"CY"#.into(),
        r#"wJalr\/K7MDENG+bPxRfi\"CY"#.into(),
        hex::encode(value),
        hex::encode_upper(value),
    ];
    for input in inputs {
        let text = format!("<{input}>");
        let out = f.guard.redact_str(&text);
        assert_eq!(out, format!("<{aws}>"), "{input}");
    }
    // Base64 keeps the edge characters that mix in neighbouring bits; the value's own
    // characters are gone.
    for prefix in ["", "a", "ab"] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{value}"));
        let out = f.guard.redact_str(&encoded);
        assert!(out.contains(&aws), "prefix {prefix:?}: {out}");
        assert!(out.len() < encoded.len() + aws.len(), "prefix {prefix:?}");
    }
    assert!(f.guard.redact_str(&b64).contains(&aws));
}

#[test]
fn redaction_leaves_placeholders_and_other_text() {
    let f = fixture();
    let text = format!("{} and words", ph(&f, f.gh));
    let out = f.guard.redact(text.as_bytes());
    assert_eq!(out.bytes(), text.as_bytes());
    assert_eq!(out.tally().get(f.gh).kept_placeholders, 1);
    assert!(!out.is_changed());
}

#[test]
fn owned_text_comes_back_untouched_when_clean_and_redacted_when_not() {
    let f = fixture();
    let clean = String::from("GET /v1/repos on api.github.com");
    let at = clean.as_ptr();
    let back = f.guard.redact_string(clean);
    assert_eq!(back, "GET /v1/repos on api.github.com");
    assert_eq!(back.as_ptr(), at, "clean text is handed back, not copied");
    let leaky = String::from("token=ghp_AAAAbbbbCCCCdddd1234");
    let redacted = f.guard.redact_string(leaky);
    assert_eq!(redacted, format!("token={}", ph(&f, f.gh)));
    assert_eq!(
        f.guard.redact_str("token=ghp_AAAAbbbbCCCCdddd1234"),
        redacted
    );
}

#[test]
fn streaming_holds_back_only_what_may_grow_into_a_match() {
    let f = fixture();
    let mut r = Rewriter::redactor(Arc::clone(&f.guard));
    let mut out = Vec::new();
    r.push(b"hello, world\n", &mut out).unwrap();
    assert_eq!(out, b"hello, world\n");
    assert_eq!(r.held_back(), 0);
    r.push(b"token ghp_AAAA", &mut out).unwrap();
    assert_eq!(out, b"hello, world\ntoken ");
    assert_eq!(r.held_back(), 8);
    r.push(b"bbbbCCCCdddd1234 done", &mut out).unwrap();
    let tally = r.finish(&mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("hello, world\ntoken {} done", ph(&f, f.gh))
    );
    assert_eq!(tally.get(f.gh).redacted, 1);
    assert_eq!(tally.total().redacted, 1);
    assert_eq!(tally.iter().count(), 1);
}

#[test]
fn streaming_refusal_poisons_and_writes_nothing_of_the_chunk() {
    let f = fixture();
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
    let mut r = Rewriter::new(Arc::clone(&f.guard), plan);
    let mut out = Vec::new();
    r.push(format!("ok {} ", ph(&f, f.gh)).as_bytes(), &mut out)
        .unwrap();
    let before = out.clone();
    assert!(String::from_utf8_lossy(&before).contains("ghp_AAAA"));
    let chunk = format!("{} then {}", ph(&f, f.gh), ph(&f, f.aws));
    let err = r.push(chunk.as_bytes(), &mut out).unwrap_err();
    assert!(matches!(err, GuardError::Refused(ref x) if x.secret == f.aws));
    assert_eq!(out, before);
    assert_eq!(r.push(b"more", &mut out), Err(GuardError::Poisoned));
    assert_eq!(r.finish(&mut out), Err(GuardError::Poisoned));
}

#[test]
fn refusal_offsets_count_from_the_stream_start() {
    let f = fixture();
    let mut r = Rewriter::new(Arc::clone(&f.guard), Plan::refuse_all(&f.guard));
    let mut out = Vec::new();
    r.push(&[b'.'; 1000], &mut out).unwrap();
    let err = r.push(ph(&f, f.gh).as_bytes(), &mut out);
    let err = err.and_then(|()| r.finish(&mut out).map(|_| ()));
    assert!(
        matches!(err, Err(GuardError::Refused(ref x)) if x.offset == 1000),
        "{err:?}"
    );
}

#[test]
fn debug_output_holds_no_value() {
    let f = fixture();
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
    let out = f.guard.rewrite(ph(&f, f.gh).as_bytes(), &plan).unwrap();
    assert!(!format!("{out:?}").contains("ghp_"));
    let mut r = Rewriter::new(Arc::clone(&f.guard), plan);
    let mut sink = Vec::new();
    r.push(b"ghp_AAAAbbbb", &mut sink).unwrap();
    assert!(!format!("{r:?}").contains("ghp_"));
}

#[test]
fn encodings_listed_are_distinct() {
    for (i, a) in Encoding::ALL.iter().enumerate() {
        for b in &Encoding::ALL[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn multi_line_key_is_redacted_in_a_json_response_streamed_in_small_chunks() {
    let key: String = (0..40)
        .map(|i| format!("MIIEv{i:03}QIBADANBgkqhkiG9w0BAQEFAASC\n"))
        .collect::<String>();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{key}-----END PRIVATE KEY-----\n");
    let mut b = Guard::builder();
    let id = b
        .add(
            "signing_key",
            Placeholder::mint("signing_key", &[3; NONCE_LEN]),
            SecretValue::from(pem.as_str()),
        )
        .unwrap();
    let guard = Arc::new(b.build().unwrap());
    let escaped = pem.replace('\n', "\\n");
    let response = format!("{{\"key\":\"{escaped}\",\"raw\":\"{pem}\"}}");
    let mut r = Rewriter::redactor(Arc::clone(&guard));
    let mut out = Vec::new();
    for chunk in response.as_bytes().chunks(7) {
        r.push(chunk, &mut out).unwrap();
        assert!(r.held_back() < guard.max_pattern_len());
    }
    let tally = r.finish(&mut out).unwrap();
    let p = guard.placeholder(id);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("{{\"key\":\"{p}\",\"raw\":\"{p}\"}}")
    );
    assert_eq!(tally.get(id).redacted, 2);
}

/// Rewrites `input` split at `cuts` through a streaming rewriter.
fn stream(
    guard: &Arc<Guard>,
    plan: &Plan,
    input: &[u8],
    cuts: &[usize],
) -> Result<Vec<u8>, GuardError> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut r = Rewriter::new(Arc::clone(guard), plan.clone());
    let mut out = Vec::new();
    let mut at = 0;
    for cut in cuts {
        r.push(&input[at..cut], &mut out)?;
        at = cut;
    }
    r.push(&input[at..], &mut out)?;
    r.finish(&mut out)?;
    Ok(out)
}

/// Pieces a test stream is made of: filler, placeholders, values and their encodings,
/// and fragments of them.
fn pieces(f: &Fixture) -> Vec<Vec<u8>> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let mut v: Vec<Vec<u8>> = vec![
        b"x".to_vec(),
        b" ".to_vec(),
        b"\"".to_vec(),
        b"SLUICE_".to_vec(),
        b"ghp_AAAA".to_vec(),
        b"ghp_AAAAbbbbCCCCdddd1234".to_vec(),
        b"wJalr/K7MDENG+bPxRfi\"CY".to_vec(),
        b"wJalr%2FK7MDENG%2BbPxRfi%22CY".to_vec(),
        b64.encode("ghp_AAAAbbbbCCCCdddd1234").into_bytes(),
        b64.encode("a:wJalr/K7MDENG+bPxRfi\"CY").into_bytes(),
    ];
    for id in [f.gh, f.aws] {
        let p = ph(f, id).into_bytes();
        v.push(p[..p.len() / 2].to_vec());
        v.push(p);
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streaming_equals_one_shot_whatever_the_chunking(
        picks in proptest::collection::vec(0usize..14, 0..24),
        cuts in proptest::collection::vec(0usize..10_000, 0..12),
        mode in 0u8..3,
    ) {
        let f = fixture();
        let parts = pieces(&f);
        let input: Vec<u8> = picks.iter().flat_map(|&i| parts[i % parts.len()].clone()).collect();
        let plan = match mode {
            0 => Plan::redact_all(&f.guard),
            1 => {
                let mut p = Plan::refuse_all(&f.guard).with_swap_form(SwapForm::Json);
                p.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
                p.set(f.aws, OnPlaceholder::Keep, OnValue::Redact);
                p
            }
            _ => Plan::refuse_all(&f.guard),
        };
        let one_shot = f.guard.rewrite(&input, &plan).map(|r| r.bytes().to_vec());
        let streamed = stream(&f.guard, &plan, &input, &cuts);
        match (one_shot, streamed) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(GuardError::Refused(a)), Err(GuardError::Refused(b))) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "one-shot {:?} vs streamed {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }

    #[test]
    fn redacted_output_never_holds_a_raw_value(
        filler in "[A-Z0-9 .,:\n]{0,40}",
        value in "[g-z]{8,24}",
        cut in 0usize..200,
    ) {
        let mut b = Guard::builder();
        let id = b.add("s", Placeholder::mint("s", &[9; NONCE_LEN]), SecretValue::from(value.as_str())).unwrap();
        let guard = Arc::new(b.build().unwrap());
        let input = format!("{filler}{value}{filler}{value}");
        let out = stream(&guard, &Plan::redact_all(&guard), input.as_bytes(), &[cut]).unwrap();
        let text = String::from_utf8(out).unwrap();
        prop_assert!(!text.contains(&value));
        prop_assert_eq!(text.matches(guard.placeholder(id).as_str()).count(), 2);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Streaming equals one-shot with the prefilter in play: short values (the shortest
    /// stride), texts dense with near-misses, and the search's fallback forced on or off.
    #[test]
    fn streaming_equals_one_shot_over_near_misses(
        values in proptest::collection::vec("[ab01/+ ]{8,20}", 1..5),
        pieces in proptest::collection::vec(crate::search::tests::piece(), 0..60),
        cuts in proptest::collection::vec(0usize..10_000, 0..12),
        fallback in proptest::sample::select(vec![0usize, 64, usize::MAX]),
        mode in 0u8..3,
    ) {
        let values: Vec<Vec<u8>> = values.into_iter().map(String::into_bytes).collect();
        let built = crate::search::tests::guard(&values);
        // Two random values may share an encoding; such guards are refused, by design.
        prop_assume!(built.is_ok());
        let mut g = built.unwrap();
        g.set_fallback_min(fallback);
        let patterns: Vec<Vec<u8>> = g.pattern_texts().map(<[u8]>::to_vec).collect();
        let input = crate::search::tests::render(&patterns, &pieces);
        let guard = Arc::new(g);
        let plan = match mode {
            0 => Plan::redact_all(&guard),
            1 => {
                let mut p = Plan::refuse_all(&guard).with_swap_form(SwapForm::Percent);
                for id in guard.ids() {
                    p.set(id, OnPlaceholder::Swap, OnValue::Keep);
                }
                p
            }
            _ => {
                let mut p = Plan::refuse_all(&guard);
                p.set(SecretId(0), OnPlaceholder::Swap, OnValue::Redact);
                p
            }
        };
        let one_shot = guard.rewrite(&input, &plan).map(|r| r.bytes().to_vec());
        let streamed = stream(&guard, &plan, &input, &cuts);
        match (one_shot, streamed) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(GuardError::Refused(a)), Err(GuardError::Refused(b))) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "one-shot {:?} vs streamed {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }

    /// Swapping every placeholder in, then redacting, gives back the text with its
    /// placeholders, and counts one redaction per swap.
    #[test]
    fn redact_after_swap_gives_back_the_placeholders(
        values in proptest::collection::btree_set("[g-z]{8,24}", 1..5),
        picks in proptest::collection::vec((0usize..8, "[ .,:\n]{1,3}"), 0..16),
        cuts in proptest::collection::vec(0usize..2_000, 0..6),
    ) {
        let mut b = Guard::builder();
        let mut ids = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let name = format!("s{i}");
            ids.push(b.add(name.as_str(), Placeholder::mint(&name, &[i as u8; NONCE_LEN]), SecretValue::from(v.as_str())).unwrap());
        }
        let guard = Arc::new(b.build().unwrap());
        let text: String = picks
            .iter()
            .map(|(i, gap)| format!("{gap}{}", guard.placeholder(ids[i % ids.len()])))
            .collect();
        let mut all = Plan::refuse_all(&guard);
        for &id in &ids {
            all.set(id, OnPlaceholder::Swap, OnValue::Keep);
        }
        let swapped = guard.rewrite(text.as_bytes(), &all).unwrap();
        let redacted = stream(&guard, &Plan::redact_all(&guard), swapped.bytes(), &cuts).unwrap();
        prop_assert_eq!(String::from_utf8(redacted).unwrap(), text.clone());
        let back = guard.redact(swapped.bytes());
        prop_assert_eq!(back.bytes(), text.as_bytes());
        prop_assert_eq!(back.tally().total().redacted, swapped.tally().total().swapped);
        prop_assert_eq!(swapped.tally().total().swapped, picks.len() as u64);
    }
}

#[test]
fn rewritten_is_cleared_on_drop_when_it_may_hold_a_value() {
    let f = fixture();
    let value = b"x ghp_AAAAbbbbCCCCdddd1234 y";
    let placeholder = ph(&f, f.gh);
    // Redacted output holds placeholders and the caller's text only.
    assert!(!f.guard.redact(value).holds_value());
    // A swap writes the value in; a kept value stays in.
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
    assert!(
        f.guard
            .rewrite(placeholder.as_bytes(), &plan)
            .unwrap()
            .holds_value()
    );
    assert!(f.guard.rewrite(value, &plan).unwrap().holds_value());
    // A part the caller decoded and rewrote on its own: absorbing its tally makes the outer
    // bytes (spliced with the caller's encoding of it) cleared too.
    let outer = format!("Basic [{placeholder}]");
    let mut out = f
        .guard
        .rewrite(outer.as_bytes(), &Plan::redact_all(&f.guard))
        .unwrap();
    assert!(!out.holds_value());
    let inner = f.guard.rewrite(placeholder.as_bytes(), &plan).unwrap();
    out.absorb(inner.tally());
    let at = outer.find('[').unwrap() + 1;
    let out = out.splice(at..at + placeholder.len(), inner.bytes());
    assert!(out.holds_value());
    assert_eq!(out.bytes(), b"Basic [ghp_AAAAbbbbCCCCdddd1234]");
    assert_eq!(out.tally().get(f.gh).swapped, 1);
}

#[test]
fn rewrite_into_appends_and_leaves_nothing_on_refusal() {
    let f = fixture();
    let mut plan = Plan::refuse_all(&f.guard);
    plan.set(f.gh, OnPlaceholder::Swap, OnValue::Keep);
    let mut out = b"kept> ".to_vec();
    let tally = f
        .guard
        .rewrite_into(format!("a {}", ph(&f, f.gh)).as_bytes(), &plan, &mut out)
        .unwrap();
    assert_eq!(out, b"kept> a ghp_AAAAbbbbCCCCdddd1234");
    assert_eq!(tally.get(f.gh).swapped, 1);
    let refused = format!("{} {}", ph(&f, f.gh), ph(&f, f.aws));
    let err = f.guard.rewrite_into(refused.as_bytes(), &plan, &mut out);
    assert!(matches!(err, Err(GuardError::Refused(ref r)) if r.secret == f.aws));
    assert_eq!(out, b"kept> a ghp_AAAAbbbbCCCCdddd1234");
    let mut shown = Vec::new();
    let tally = f
        .guard
        .redact_into(b"x ghp_AAAAbbbbCCCCdddd1234", &mut shown);
    assert_eq!(shown, format!("x {}", ph(&f, f.gh)).into_bytes());
    assert_eq!(tally.get(f.gh).redacted, 1);
}

/// A rotated value stays known: redacted into its secret's placeholder in every encoding,
/// refused where the plan refuses values, and never what a swap writes.
#[test]
fn a_retired_value_is_redacted_and_refused_but_never_swapped_in() {
    let mut b = Guard::builder();
    let id = b
        .add(
            "github_token",
            Placeholder::mint("github_token", &[1; NONCE_LEN]),
            SecretValue::from("ghp_NEWnewNEWnew5678"),
        )
        .unwrap();
    b.add_retired(id, SecretValue::from("ghp_OLDoldOLDold1234"))
        .unwrap();
    // The current value given again as retired is not a second pattern.
    b.add_retired(id, SecretValue::from("ghp_NEWnewNEWnew5678"))
        .unwrap();
    let guard = b.build().unwrap();
    let placeholder = guard.placeholder(id).as_str().to_owned();
    let old_b64 = base64::engine::general_purpose::STANDARD.encode("ghp_OLDoldOLDold1234");
    let shown = guard.redact_str(&format!("a ghp_OLDoldOLDold1234 b {old_b64} c"));
    assert!(!shown.contains("OLDold"), "{shown}");
    assert!(shown.starts_with(&format!("a {placeholder} b ")), "{shown}");

    let mut plan = Plan::refuse_all(&guard);
    plan.set(id, OnPlaceholder::Swap, OnValue::Refuse);
    let swapped = guard
        .rewrite(format!("Bearer {placeholder}").as_bytes(), &plan)
        .unwrap();
    assert_eq!(swapped.bytes(), b"Bearer ghp_NEWnewNEWnew5678");
    let refused = guard.rewrite(b"Bearer ghp_OLDoldOLDold1234", &plan);
    assert!(matches!(refused, Err(GuardError::Refused(ref r)) if r.secret == id));
}

#[test]
fn a_retired_value_must_fit_the_guard_and_name_a_secret_it_has() {
    let mut b = Guard::builder();
    let id = b
        .add(
            "github_token",
            Placeholder::mint("github_token", &[1; NONCE_LEN]),
            SecretValue::from("ghp_NEWnewNEWnew5678"),
        )
        .unwrap();
    assert!(matches!(
        b.add_retired(id, SecretValue::from("short")),
        Err(GuardError::ValueTooShort { .. })
    ));
    let mut other = Guard::builder();
    assert!(matches!(
        other.add_retired(id, SecretValue::from("ghp_OLDoldOLDold1234")),
        Err(GuardError::UnknownSecret { id: 0 })
    ));
    // Another secret's value, once retired here, would redact two ways: refused at build.
    let second = b
        .add(
            "other",
            Placeholder::mint("other", &[2; NONCE_LEN]),
            SecretValue::from("shared-value-0000"),
        )
        .unwrap();
    b.add_retired(id, SecretValue::from("shared-value-0000"))
        .unwrap();
    assert_ne!(id, second);
    assert!(matches!(b.build(), Err(GuardError::SharedValue { .. })));
}
