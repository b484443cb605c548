//! HTTP `Basic` credentials in a header value: git and pip put a token in the password of
//! `Authorization: Basic <base64>`, where a plain scan of the header sees only base64. The
//! credentials are decoded, rewritten by the guard under the header's own plan (a swap, a
//! refusal), and encoded again.
//!
//! HTTP's knowledge lives here, not in the guard: the guard rewrites bytes, and
//! [`Rewritten::absorb`] and [`Rewritten::splice`] let this module put the decoded part's
//! rewrite back. Decoded and re-encoded credentials live in zeroized memory only.
//!
//! ```text
//! Authorization: Basic Z2l0OlNMVUlDRV9HSF8uLi4=   ("git:SLUICE_GH_...")
//!             -> Basic Z2l0OmdocF9yZWFsLi4u       ("git:ghp_real...")
//! ```

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use sluice_guard::{Guard, GuardError, Plan, Rewritten};
use zeroize::Zeroizing;

/// Whether [`rewrite_header_value`] could find anything in `value`: a match as it stands,
/// or `Basic` credentials to look inside. Cheap; lets a caller skip the rewrite (and its
/// allocation) for the headers that can hold nothing.
pub(crate) fn may_match(guard: &Guard, value: &[u8]) -> bool {
    guard.is_match(value) || token_span(value).is_some()
}

/// Rewrites one header value under `plan`, looking inside `Basic` credentials too: the
/// value is rewritten as it stands, then, when it reads `Basic <base64>`, the decoded
/// credentials are rewritten and encoded again.
///
/// # Errors
/// [`GuardError::Refused`] at the first match the plan refuses, outside or inside the
/// credentials.
pub(crate) fn rewrite_header_value(
    guard: &Guard,
    value: &[u8],
    plan: &Plan,
) -> Result<Rewritten, GuardError> {
    let mut outer = guard.rewrite(value, plan)?;
    let Some((start, end)) = token_span(outer.bytes()) else {
        return Ok(outer);
    };
    let Some(decoded) = decode(&outer.bytes()[start..end]) else {
        return Ok(outer);
    };
    let inner = guard.rewrite(&decoded, plan)?;
    outer.absorb(inner.tally());
    if !inner.is_changed() {
        return Ok(outer);
    }
    // One allocation of the exact length, cleared on drop: it holds a swapped value.
    let encoded = Zeroizing::new(STANDARD.encode(inner.bytes()));
    Ok(outer.splice(start..end, encoded.as_bytes()))
}

/// The span of the base64 token in `Basic <token>` (scheme case-insensitive, optional
/// surrounding whitespace), if `value` has that shape.
fn token_span(value: &[u8]) -> Option<(usize, usize)> {
    let is_ws = |b: &u8| *b == b' ' || *b == b'\t';
    let lead = value.iter().take_while(|b| is_ws(b)).count();
    let rest = &value[lead..];
    if rest.len() < 6 || !rest[..5].eq_ignore_ascii_case(b"basic") || !is_ws(&rest[5]) {
        return None;
    }
    let gap = rest[5..].iter().take_while(|b| is_ws(b)).count();
    let start = lead + 5 + gap;
    let trail = value[start..].iter().rev().take_while(|b| is_ws(b)).count();
    let end = value.len() - trail;
    let token = &value[start..end];
    let base64_char = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    (!token.is_empty() && token.iter().all(base64_char)).then_some((start, end))
}

/// The token decoded, padded or not (clients differ), into zeroized memory.
fn decode(token: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let mut out = Zeroizing::new(vec![0u8; token.len() / 4 * 3 + 3]);
    let n = LENIENT.decode_slice(token, &mut out[..]).ok()?;
    out.truncate(n);
    Some(out)
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose;
    use sluice_guard::{OnPlaceholder, OnValue, Placeholder, SecretId, SecretValue};

    use super::*;

    const VALUE: &str = "ghp_AAAAbbbbCCCCdddd1234";

    /// A guard of two secrets, and the plan that swaps the first and refuses the second.
    fn fixture() -> (Guard, Plan, [String; 2], SecretId) {
        let mut builder = Guard::builder();
        let gh = builder
            .add(
                "gh",
                Placeholder::mint("gh", &[1; 12]),
                SecretValue::from(VALUE),
            )
            .unwrap();
        let other = builder
            .add(
                "other",
                Placeholder::mint("other", &[2; 12]),
                SecretValue::from("other-value-0123"),
            )
            .unwrap();
        let guard = builder.build().unwrap();
        let names = [gh, other].map(|id| guard.placeholder(id).to_string());
        let mut plan = Plan::refuse_all(&guard);
        plan.set(gh, OnPlaceholder::Swap, OnValue::Keep);
        (guard, plan, names, other)
    }

    #[test]
    fn basic_credentials_are_decoded_swapped_and_encoded_again() {
        let (guard, plan, [gh, _], _) = fixture();
        for scheme in ["Basic", "basic", "  BASIC"] {
            let header = format!("{scheme} {}", STANDARD.encode(format!("git:{gh}")));
            let out = rewrite_header_value(&guard, header.as_bytes(), &plan).unwrap();
            let want = format!("{scheme} {}", STANDARD.encode(format!("git:{VALUE}")));
            assert_eq!(String::from_utf8_lossy(out.bytes()), want, "{scheme}");
            assert_eq!(out.tally().total().swapped, 1);
        }
        // Unpadded tokens are read too.
        let unpadded = format!(
            "Basic {}",
            general_purpose::STANDARD_NO_PAD.encode(format!("u:{gh}"))
        );
        let out = rewrite_header_value(&guard, unpadded.as_bytes(), &plan).unwrap();
        assert!(out.is_changed());
    }

    #[test]
    fn an_ungranted_placeholder_inside_credentials_is_refused() {
        let (guard, plan, [_, other], other_id) = fixture();
        let header = format!("Basic {}", STANDARD.encode(format!("u:{other}")));
        let err = rewrite_header_value(&guard, header.as_bytes(), &plan).unwrap_err();
        assert!(matches!(err, GuardError::Refused(r) if r.secret == other_id));
    }

    #[test]
    fn what_is_not_credentials_is_left_alone() {
        let (guard, plan, _, _) = fixture();
        for other in ["Basic", "Basic not*base64", "Bearer abc", "Basicfoo"] {
            let out = rewrite_header_value(&guard, other.as_bytes(), &plan).unwrap();
            assert_eq!(out.bytes(), other.as_bytes());
        }
    }

    #[test]
    fn a_header_value_may_match_when_it_holds_a_match_or_basic_credentials() {
        let (guard, _, [gh, _], _) = fixture();
        let hidden = format!("Basic {}", STANDARD.encode(format!("git:{gh}")));
        assert!(
            !guard.is_match(hidden.as_bytes()),
            "hidden from a plain scan"
        );
        assert!(may_match(&guard, hidden.as_bytes()));
        assert!(may_match(&guard, format!("Bearer {gh}").as_bytes()));
        assert!(!may_match(&guard, b"Bearer nothing-here"));
        assert!(!may_match(&guard, b"text/html; charset=utf-8"));
    }
}
