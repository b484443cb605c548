//! The outbound scan: plans per place and per request, refusals, header rewrites.

use sluice_guard::Plan;

use super::*;
use crate::refusal::Code;

#[test]
fn replace_nth_replaces_one_value_and_keeps_the_order_of_the_rest() {
    let name = HeaderName::from_static("x-token");
    let values = |headers: &http::HeaderMap| -> Vec<String> {
        headers
            .get_all(&name)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    };
    let mut one = http::HeaderMap::new();
    one.insert(&name, HeaderValue::from_static("a"));
    one.insert("x-other", HeaderValue::from_static("o"));
    replace_nth(&mut one, &name, 0, HeaderValue::from_static("A"));
    assert_eq!(values(&one), ["A"]);
    assert_eq!(one["x-other"], "o");
    for (index, expected) in [
        (0, ["A", "b", "c"]),
        (1, ["a", "B", "c"]),
        (2, ["a", "b", "C"]),
    ] {
        let mut three = http::HeaderMap::new();
        for v in ["a", "b", "c"] {
            three.append(&name, HeaderValue::from_static(v));
        }
        let upper = HeaderValue::from_str(expected[index]).unwrap();
        replace_nth(&mut three, &name, index, upper);
        assert_eq!(values(&three), expected);
    }
}

#[test]
fn request_rules_decide_per_request_and_never_poison_the_tunnels_plans() {
    let yaml = r#"
version: 1
secrets:
  gh:
    value: "Gh-Value-000000001"
    hosts: ["api.test", "model.test"]
    allow: [{ methods: [GET], paths: ["/repos/**"] }]
egress:
  verbatim: ["model.test"]
"#;
    let (policy, guard) = crate::testing::declared(yaml, "rules.yaml");
    let placeholder = guard
        .placeholder(guard.id("gh").unwrap())
        .as_str()
        .to_owned();
    let api = Target {
        host: "api.test".into(),
        port: 443,
    };
    // One cache per tunnel, as each tunnel has one target.
    let (api_tunnel, model_tunnel) = (PlanCache::default(), PlanCache::default());
    let send = |target: &Target, cache: &PlanCache, method: http::Method, path: &str| {
        let (mut parts, ()) = http::Request::builder()
            .method(method)
            .uri(format!("https://{}{path}", target.host))
            .header("authorization", format!("Bearer {placeholder}"))
            .body(())
            .unwrap()
            .into_parts();
        let outbound = Outbound::new(&guard, &policy, target)
            .with_cache(cache)
            .for_request(&parts.method, parts.uri.path());
        outbound.rewrite_head(&mut parts).map(|_| parts)
    };
    // One tunnel, three requests: admitted, refused, admitted again.
    let sent = send(&api, &api_tunnel, http::Method::GET, "/repos/a/../b").unwrap();
    assert_eq!(sent.headers["authorization"], "Bearer Gh-Value-000000001");
    assert_eq!(
        sent.uri.path(),
        "/repos/b",
        "the path the rule matched is sent"
    );
    let refused = send(&api, &api_tunnel, http::Method::DELETE, "/repos/b").unwrap_err();
    assert_eq!(refused.code, Code::RequestNotAllowed);
    assert!(
        refused.message.contains("add DELETE to its methods"),
        "{}",
        refused.message
    );
    let again = send(&api, &api_tunnel, http::Method::GET, "/repos/c").unwrap();
    assert_eq!(again.headers["authorization"], "Bearer Gh-Value-000000001");
    // Toward a verbatim host, a request the rules refuse keeps its placeholder.
    let model = Target {
        host: "model.test".into(),
        port: 443,
    };
    let kept = send(&model, &model_tunnel, http::Method::POST, "/v1/messages").unwrap();
    assert_eq!(
        kept.headers["authorization"],
        format!("Bearer {placeholder}").as_str()
    );
}

#[test]
fn a_header_name_holding_two_values_is_refused_for_the_one_the_host_may_not_get() {
    let yaml = r#"
version: 1
secrets:
  mine:
    value: "Mine-Value-0001"
    hosts: ["api.test"]
  theirs:
    value: "Theirs-Value-0002"
    hosts: ["other.test"]
"#;
    let (policy, guard) = crate::testing::declared(yaml, "two.yaml");
    let target = Target {
        host: "api.test".into(),
        port: 443,
    };
    let outbound = Outbound::new(&guard, &policy, &target);
    // What hyper hands over for `X-Mine-Value-0001-Theirs-Value-0002: 1`: `mine` may go
    // to api.test, `theirs` may not, and comes second.
    let (mut parts, ()) = http::Request::get("https://api.test/")
        .header("x-mine-value-0001-theirs-value-0002", "1")
        .body(())
        .unwrap()
        .into_parts();
    let refusal = outbound.rewrite_head(&mut parts).unwrap_err();
    assert_eq!(refusal.code, "secret-value-refused");
    assert_eq!(refusal.secret.as_deref(), Some("theirs"));
    assert!(
        !refusal
            .message
            .to_ascii_lowercase()
            .contains("theirs-value-0002"),
        "{}",
        refusal.message
    );
    // Alone, the value the host may get passes.
    let (mut parts, ()) = http::Request::get("https://api.test/")
        .header("x-mine-value-0001", "1")
        .body(())
        .unwrap()
        .into_parts();
    assert!(outbound.rewrite_head(&mut parts).is_ok());
}

#[test]
fn a_value_toward_a_verbatim_host_becomes_its_placeholder_where_it_can_be_rewritten() {
    let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test"]
egress:
  verbatim: ["model.test"]
  allow: ["other.test"]
"#;
    let (policy, guard) = crate::testing::declared(yaml, "verbatim.yaml");
    let placeholder = guard
        .placeholder(guard.id("tok").unwrap())
        .as_str()
        .to_owned();
    let target = |host: &str| Target {
        host: host.into(),
        port: 443,
    };
    let (model, other) = (target("model.test"), target("other.test"));
    let request = |uri: &str| {
        http::Request::get(uri)
            .header("x-quoted", "the user said Tok-Value-0001 earlier")
            .body(())
            .unwrap()
            .into_parts()
            .0
    };
    // Toward the model boundary: the header and the query carry the placeholder now.
    let mut parts = request("https://model.test/v1?q=Tok-Value-0001");
    let done = Outbound::new(&guard, &policy, &model)
        .rewrite_head(&mut parts)
        .unwrap();
    assert_eq!(
        parts.headers["x-quoted"],
        format!("the user said {placeholder} earlier").as_str()
    );
    assert_eq!(parts.uri.query(), Some(format!("q={placeholder}").as_str()));
    let redacted: u64 = done.iter().map(|d| d.tally.total().redacted).sum();
    assert_eq!(redacted, 2);
    // Where the request cannot be rewritten (the path), it is refused, never sent on.
    let mut parts = request("https://model.test/Tok-Value-0001");
    let refusal = Outbound::new(&guard, &policy, &model)
        .rewrite_head(&mut parts)
        .unwrap_err();
    assert_eq!(refusal.secret.as_deref(), Some("tok"));
    // Toward any other ungranted host the value is exfiltration: refused.
    let mut parts = request("https://other.test/v1");
    let refusal = Outbound::new(&guard, &policy, &other)
        .rewrite_head(&mut parts)
        .unwrap_err();
    assert_eq!(refusal.secret.as_deref(), Some("tok"));
    assert!(
        !refusal.message.contains("Tok-Value-0001"),
        "{}",
        refusal.message
    );
}

#[test]
fn a_placeholder_in_a_header_name_is_refused_whatever_its_letter_case() {
    let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test", "model.test"]
egress:
  verbatim: ["model.test"]
"#;
    let policy = Policy::parse(yaml, "name.yaml").unwrap().policy;
    let placeholders = policy.mint_placeholders();
    let guard = policy.build_guard(&placeholders).unwrap();
    let tok = guard.id("tok").unwrap();
    let placeholder = guard.placeholder(tok).as_str().to_owned();
    let api = Target {
        host: "api.test".into(),
        port: 443,
    };
    // Toward a host the secret grants, `X-SLUICE_TOK_…: 1` arrives lowercased (hyper's
    // header names always are) and is refused: a name is no place to swap into.
    let lower = format!("x-{}", placeholder.to_ascii_lowercase());
    let (mut parts, ()) = http::Request::get("https://api.test/")
        .header(format!("X-{placeholder}").as_str(), "1")
        .body(())
        .unwrap()
        .into_parts();
    assert!(parts.headers.contains_key(lower.as_str()));
    let refusal = Outbound::new(&guard, &policy, &api)
        .rewrite_head(&mut parts)
        .unwrap_err();
    assert_eq!(refusal.code, "placeholder-not-granted");
    assert_eq!(refusal.secret.as_deref(), Some("tok"));
    assert_eq!(refusal.location.as_deref(), Some("header-name"));
    assert!(refusal.message.contains("tok"), "{}", refusal.message);
    // An egress.verbatim host keeps placeholders where they are, names included.
    let model = Target {
        host: "model.test".into(),
        port: 443,
    };
    let (mut parts, ()) = http::Request::get("https://model.test/")
        .header(lower.as_str(), "1")
        .body(())
        .unwrap()
        .into_parts();
    assert!(
        Outbound::new(&guard, &policy, &model)
            .rewrite_head(&mut parts)
            .is_ok()
    );
}

#[test]
fn the_plan_cache_decides_once_and_stays_bounded() {
    let guard = Guard::builder().build().unwrap();
    let cache = PlanCache::default();
    let mut made = 0;
    for _ in 0..3 {
        cache.get_or_insert(&Place::Query, || {
            made += 1;
            Plan::refuse_all(&guard)
        });
    }
    assert_eq!(made, 1, "a cached place is decided once");
    for i in 0..(PlanCache::CAPACITY * 2) {
        let name = HeaderName::try_from(format!("x-{i}")).unwrap();
        cache.get_or_insert(&Place::Header(name), || Plan::refuse_all(&guard));
    }
    assert!(cache.plans.lock().unwrap().len() <= PlanCache::CAPACITY);
}
