//! The guard's builder and queries: refusals, every form found, what a stream holds back.

use super::builder::PACKED_MAX_PATTERNS;
use super::*;
use crate::NONCE_LEN;
use crate::{GuardError, MAX_VALUE_LEN, MIN_VALUE_LEN};

fn ph(name: &str, n: u8) -> Placeholder {
    Placeholder::mint(name, &[n; NONCE_LEN])
}

fn guard(secrets: &[(&str, &str)]) -> Result<Guard, GuardError> {
    let mut b = Guard::builder();
    for (i, (name, value)) in secrets.iter().enumerate() {
        b.add(*name, ph(name, i as u8), SecretValue::from(*value))?;
    }
    b.build()
}

#[test]
fn builder_refuses_bad_secrets() {
    let mut b = Guard::builder();
    assert_eq!(
        b.add("", ph("x", 1), SecretValue::from("longenough")),
        Err(GuardError::EmptyName)
    );
    assert_eq!(
        b.add("short", ph("short", 1), SecretValue::from("1234567")),
        Err(GuardError::ValueTooShort {
            name: "short".into(),
            len: 7,
            min: MIN_VALUE_LEN
        })
    );
    assert!(
        b.add("ok", ph("ok", 1), SecretValue::from("12345678"))
            .is_ok()
    );
    assert_eq!(
        b.add("ok", ph("ok", 2), SecretValue::from("abcdefgh")),
        Err(GuardError::DuplicateName { name: "ok".into() })
    );
    assert!(matches!(
        b.add(
            "big",
            ph("big", 3),
            SecretValue::new(vec![b'a'; MAX_VALUE_LEN + 1])
        ),
        Err(GuardError::ValueTooLong { .. })
    ));
}

#[test]
fn shared_values_are_refused_naming_both_secrets() {
    let err = guard(&[("one", "same-value-123"), ("two", "same-value-123")]).unwrap_err();
    assert_eq!(
        err,
        GuardError::SharedValue {
            first: "one".into(),
            second: "two".into()
        }
    );
    assert!(!err.to_string().contains("same-value-123"));
}

#[test]
fn a_value_inside_another_value_is_allowed() {
    let g = guard(&[("short", "abcdefgh12"), ("long", "abcdefgh1234")]).unwrap();
    let hits: Vec<_> = g.find_iter(b"x abcdefgh1234 abcdefgh12 y").collect();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].secret, g.id("long").unwrap());
    assert_eq!(hits[1].secret, g.id("short").unwrap());
}

#[test]
fn placeholder_overlap_is_refused() {
    let mut b = Guard::builder();
    b.add(
        "a",
        Placeholder::parse("SLUICE_FIXED_PLACEHOLDER").unwrap(),
        SecretValue::from("value-one-1"),
    )
    .unwrap();
    b.add(
        "b",
        ph("b", 2),
        SecretValue::from("xxSLUICE_FIXED_PLACEHOLDERxx"),
    )
    .unwrap();
    let err = b.build().unwrap_err();
    assert!(matches!(err, GuardError::Overlap { .. }), "{err:?}");
    assert!(!err.to_string().contains("xxSLUICE"));
}

#[test]
fn finds_placeholders_and_every_encoding() {
    let value = "tok/en+with spaces\"";
    let g = guard(&[("api", value)]).unwrap();
    let id = g.id("api").unwrap();
    let p = g.placeholder(id).to_string();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{value}"));
    let haystacks = [
        (p.clone(), Form::Placeholder),
        (value.to_string(), Form::Value(Encoding::Raw)),
        (
            "tok%2Fen%2Bwith%20spaces%22".into(),
            Form::Value(Encoding::ALL[1]),
        ),
        (
            "tok%2fen%2bwith%20spaces%22".into(),
            Form::Value(Encoding::ALL[2]),
        ),
        (
            "tok%2Fen%2Bwith+spaces%22".into(),
            Form::Value(Encoding::ALL[7]),
        ),
        (
            r#"tok/en+with spaces\""#.into(),
            Form::Value(Encoding::Json {
                style: crate::JsonStyle::Minimal,
            }),
        ),
        (
            hex::encode(value),
            Form::Value(Encoding::Hex { lowercase: true }),
        ),
    ];
    for (hay, form) in haystacks {
        let text = format!("before {hay} after");
        let hits: Vec<_> = g.find_iter(text.as_bytes()).collect();
        assert_eq!(hits.len(), 1, "{form:?}");
        assert_eq!(hits[0].form, form);
        assert_eq!(&text[hits[0].start..hits[0].end], hay);
    }
    let hits: Vec<_> = g.find_iter(b64.as_bytes()).collect();
    assert_eq!(hits.len(), 1);
    assert!(matches!(hits[0].form, Form::Value(Encoding::Base64 { .. })));
    assert!(!g.is_match(b"nothing to see here"));
}

#[test]
fn empty_guard_matches_nothing() {
    let g = Guard::builder().build().unwrap();
    assert!(g.is_empty());
    assert_eq!(g.find_iter(b"anything").count(), 0);
    assert_eq!(g.hold_from(b"anything"), 8);
}

#[test]
fn hold_from_keeps_only_a_tail_that_can_grow_into_a_match() {
    let g = guard(&[("k", "zzzzqqqq99")]).unwrap();
    let p = g.placeholder(g.id("k").unwrap()).to_string();
    assert_eq!(g.hold_from(b"hello world"), 11);
    assert_eq!(g.hold_from(b"hello zzzzq"), 6);
    let partial = format!("x {}", &p[..10]);
    assert_eq!(g.hold_from(partial.as_bytes()), 2);
    // A complete value that no longer pattern extends is not held.
    assert_eq!(g.hold_from(b"a zzzzqqqq99"), 12);
}

#[test]
fn prefilter_is_used_unless_the_packed_searcher_is_faster() {
    // Few patterns and a short stride: aho-corasick's packed searcher alone.
    let few_short = guard(&[("k", "12345678")]).unwrap();
    assert!(few_short.active_filter().is_none());
    // Few patterns, long stride (the placeholder, 33 bytes, is the shortest): the prefilter.
    let few_long = guard(&[("k", "a-forty-byte-long-token-0123456789abcdef")]).unwrap();
    assert_eq!(
        few_long.active_filter().map(QgramFilter::stride),
        Some(33 - 8 + 1)
    );
    // Many patterns: the prefilter, whatever the stride.
    let names: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    let values: Vec<String> = (0..10).map(|i| format!("v{i}__wxyz")).collect();
    let many: Vec<(&str, &str)> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let many = guard(&many).unwrap();
    assert!(many.pattern_count() > PACKED_MAX_PATTERNS);
    assert_eq!(many.active_filter().map(QgramFilter::stride), Some(5));
    let mut forced = few_short;
    forced.force_prefilter();
    assert!(forced.active_filter().is_some());
}

#[test]
fn a_value_json_escaped_in_upper_case_hex_is_redacted_and_refused() {
    // A base64-shaped key, as Jackson (`ESCAPE_NON_ASCII`) and .NET's System.Text.Json
    // write it: `+` as `\u002B`, `é` as `\u00E9`.
    let g = guard(&[("k", "AbC+dEf/gHé==")]).unwrap();
    for escaped in [
        r#"{"key":"AbC\u002BdEf/gH\u00E9=="}"#,
        r#"{"key":"AbC+dEf/gH\u00E9=="}"#,
    ] {
        let redacted = g.redact(escaped.as_bytes());
        assert_eq!(redacted.tally().total().redacted, 1, "{escaped}");
        assert!(
            !String::from_utf8_lossy(redacted.bytes()).contains("dEf"),
            "{escaped}"
        );
        let refused = g.rewrite(escaped.as_bytes(), &crate::Plan::refuse_all(&g));
        assert!(matches!(refused, Err(GuardError::Refused(_))), "{escaped}");
    }
}

#[test]
fn text_is_redacted_in_any_letter_case() {
    let g = guard(&[("k", "Secret-Value-0001"), ("l", "Other-Value-0002")]).unwrap();
    let k = g.placeholder(g.id("k").unwrap()).as_str().to_owned();
    let l = g.placeholder(g.id("l").unwrap()).as_str().to_owned();
    let cases = [
        ("sni secret-value-0001.test", format!("sni {k}.test")),
        (
            "SECRET-VALUE-0001 and other-value-0002",
            format!("{k} and {l}"),
        ),
        ("exact Secret-Value-0001", format!("exact {k}")),
        ("nothing here", "nothing here".to_owned()),
    ];
    for (text, want) in cases {
        assert_eq!(g.redact_string(text.to_owned()), want, "{text}");
    }
}

#[test]
fn value_in_name_skips_only_names_too_short_to_hold_a_value() {
    let g = guard(&[("k", "12345678"), ("l", "Longer-Value-0123")]).unwrap();
    let name = b"x-12345678-longer-value-0123-MTIzNDU2Nzg-trailing";
    for end in 0..=name.len() {
        for start in 0..end {
            let part = &name[start..end];
            // The name automaton is searched over lowercased text.
            let searched = g
                .names
                .find_overlapping_iter(part.to_ascii_lowercase().as_slice())
                .map(|m| g.name_secrets[m.pattern().as_usize()])
                .find(|&(_, is_placeholder)| !is_placeholder)
                .map(|(secret, _)| secret);
            assert_eq!(g.value_in_name(part), searched, "{part:?}");
        }
    }
    assert_eq!(g.value_in_name(b"12345678"), g.id("k"));
    assert_eq!(g.value_in_name(b"1234567"), None);
    let empty = Guard::builder().build().unwrap();
    assert_eq!(empty.value_in_name(b"anything-at-all"), None);
}

#[test]
fn values_in_name_reports_every_secret_once_overlapping_ones_too() {
    let g = guard(&[("a", "Abcdefgh12"), ("b", "gh12345678")]).unwrap();
    let (a, b) = (g.id("a").unwrap(), g.id("b").unwrap());
    // The two values overlap: a leftmost search would report `a` alone.
    assert_eq!(g.values_in_name(b"x-abcdefgh12345678"), [a, b]);
    assert_eq!(
        g.values_in_name(b"x-gh12345678-abcdefgh12-gh12345678"),
        [b, a]
    );
    assert_eq!(g.values_in_name(b"x-short"), []);
}

#[test]
fn debug_shows_names_not_values() {
    let g = guard(&[("name_here", "value-that-is-secret")]).unwrap();
    let shown = format!("{g:?}");
    assert!(shown.contains("name_here"));
    assert!(!shown.contains("value-that-is-secret"));
}

/// A run keeps every value it has known (each rotation and each minted token adds one),
/// so the guard grows with the run: by kilobytes per value, never by the hundred kilobytes
/// a DFA's tables took (115 KB per value, 12 MB at 100 retired values, which made the
/// 30-minute soak's memory rise). Each retired 40-byte value here adds six patterns of some
/// 290 bytes in all; the guard stays under 12 KB per value plus 32 KB.
#[test]
fn the_guards_tables_grow_by_kilobytes_per_retired_value() {
    let mut sizes = Vec::new();
    for retired in [0usize, 10, 30, 60, 100, 200, 400] {
        let mut builder = Guard::builder();
        let id = builder
            .add(
                "token",
                Placeholder::parse("SLUICE_TOKEN_0123456789abcdef").unwrap(),
                SecretValue::new(b"tok-current-0123456789abcdef0123456789".to_vec()),
            )
            .unwrap();
        for n in 0..retired {
            let value = format!("tok-retired-{n:06}-0123456789abcdef012345");
            builder
                .add_retired(id, SecretValue::new(value.into_bytes()))
                .unwrap();
        }
        let guard = builder.build().unwrap();
        sizes.push((retired, guard.pattern_count(), guard.memory_usage()));
    }
    eprintln!("retired values, patterns, bytes: {sizes:?}");
    for (retired, _, bytes) in &sizes {
        assert!(
            *bytes <= 32 * 1024 + retired * 12 * 1024,
            "{retired} retired values: {bytes} bytes ({sizes:?})"
        );
    }
}
