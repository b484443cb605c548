//! The claim's reading and the verifier's refusals, on requests signed by `aws-sigv4`
//! itself with a placeholder key. AWS's own vectors are in `tests/aws_signing_test_suite.rs`.

use super::*;

const PLACEHOLDER_KEY: &str = "SLUICE_AWS_AKID_0123456789abcdef";
const PLACEHOLDER_SECRET: &str = "SLUICE_SK_abcdefghijABCDEFGHIJ0123456789";
const REAL_KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const REAL_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

fn placeholder() -> Credentials {
    Credentials::new(PLACEHOLDER_KEY, PLACEHOLDER_SECRET, None)
}

fn real() -> Credentials {
    Credentials::new(REAL_KEY, REAL_SECRET, None)
}

/// An S3 GET as botocore shapes it, signed by `aws-sigv4` with `key`.
fn s3_get(key: &Credentials, path_and_query: &str) -> Vec<(String, String)> {
    let mut headers = vec![
        ("x-amz-date".to_owned(), "20261202T101500Z".to_owned()),
        (
            "x-amz-content-sha256".to_owned(),
            "UNSIGNED-PAYLOAD".to_owned(),
        ),
        ("user-agent".to_owned(), "aws-cli/1.45".to_owned()),
    ];
    let head = Head {
        method: "GET",
        host: "s3.eu-west-1.amazonaws.com",
        path_and_query,
        headers: headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect(),
    };
    // Sign through a claim with no signature yet: the same code path a re-sign takes.
    let claim = Claim {
        form: Form::Header,
        access_key_id: key.access_key_id().to_owned(),
        scope: Scope {
            date: "20261202".into(),
            region: "eu-west-1".into(),
            service: "s3".into(),
        },
        signed_headers: vec![
            "host".into(),
            "x-amz-content-sha256".into(),
            "x-amz-date".into(),
        ],
        signature: String::new(),
        date_time: "20261202T101500Z".into(),
        time: claim::parse_date_time("20261202T101500Z").unwrap(),
        expires: None,
        payload: Payload::Declared("UNSIGNED-PAYLOAD".into()),
        session_token: None,
        session_token_signed: false,
    };
    let signed = Verified(claim)
        .resign(
            &head,
            "UNSIGNED-PAYLOAD",
            key,
            Canonicalization::for_service("s3"),
        )
        .unwrap();
    for (name, value) in signed.headers {
        if name == "authorization" {
            headers.push(("Authorization".into(), value.to_string()));
        }
    }
    headers
}

fn head<'a>(headers: &'a [(String, String)], path_and_query: &'a str) -> Head<'a> {
    Head {
        method: "GET",
        host: "s3.eu-west-1.amazonaws.com",
        path_and_query,
        headers: headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect(),
    }
}

#[test]
fn a_request_signed_by_the_placeholder_key_verifies_and_is_re_signed_by_the_real_one() {
    let headers = s3_get(&placeholder(), "/bucket/key.txt?versionId=1");
    let head = head(&headers, "/bucket/key.txt?versionId=1");
    let claim = Claim::find(&head).unwrap().unwrap();
    assert_eq!(claim.form(), Form::Header);
    assert_eq!(claim.access_key_id(), PLACEHOLDER_KEY);
    assert_eq!(claim.scope().region, "eu-west-1");
    assert_eq!(claim.scope().service, "s3");
    let canon = Canonicalization::for_service("s3");
    let payload = claim.payload_hash(None).unwrap();
    let verified = claim
        .verify(&head, &payload, &placeholder(), canon)
        .unwrap();

    // The re-signed request is exactly what the real key would have signed.
    let signed = verified.resign(&head, &payload, &real(), canon).unwrap();
    let expected = s3_get(&real(), "/bucket/key.txt?versionId=1");
    let authorization = signed
        .headers
        .iter()
        .find(|(n, _)| *n == "authorization")
        .map(|(_, v)| v.as_str())
        .unwrap();
    assert_eq!(authorization, expected.last().unwrap().1);
    assert!(authorization.contains(REAL_KEY));
    assert!(
        !format!("{signed:?}").contains(REAL_KEY),
        "Debug prints no key"
    );
}

#[test]
fn any_change_to_what_was_signed_fails_verification() {
    let headers = s3_get(&placeholder(), "/bucket/key.txt");
    let canon = Canonicalization::for_service("s3");
    let verify = |head: &Head<'_>| {
        let claim = Claim::find(head).unwrap().unwrap();
        let payload = claim.payload_hash(None).unwrap().into_owned();
        claim
            .verify(head, &payload, &placeholder(), canon)
            .map(|_| ())
    };
    assert_eq!(verify(&head(&headers, "/bucket/key.txt")), Ok(()));
    assert_eq!(
        verify(&head(&headers, "/bucket/other.txt")),
        Err(Invalid::Mismatch)
    );
    let mut other_host = head(&headers, "/bucket/key.txt");
    other_host.host = "s3.us-east-1.amazonaws.com";
    assert_eq!(verify(&other_host), Err(Invalid::Mismatch));
    let mut put = head(&headers, "/bucket/key.txt");
    put.method = "PUT";
    assert_eq!(verify(&put), Err(Invalid::Mismatch));
    // Unsigned headers may change: the signature does not cover them.
    let mut agent = headers.clone();
    agent[2].1 = "something-else".into();
    assert_eq!(verify(&head(&agent, "/bucket/key.txt")), Ok(()));
    // The real key's secret does not verify a placeholder's signature, nor the reverse.
    let claim = Claim::find(&head(&headers, "/bucket/key.txt"))
        .unwrap()
        .unwrap();
    let wrong_secret = Credentials::new(PLACEHOLDER_KEY, REAL_SECRET, None);
    assert_eq!(
        claim
            .verify(
                &head(&headers, "/bucket/key.txt"),
                "UNSIGNED-PAYLOAD",
                &wrong_secret,
                canon
            )
            .map(|_| ()),
        Err(Invalid::Mismatch)
    );
    assert_eq!(
        claim
            .verify(
                &head(&headers, "/bucket/key.txt"),
                "UNSIGNED-PAYLOAD",
                &real(),
                canon
            )
            .map(|_| ()),
        Err(Invalid::AccessKeyId)
    );
}

#[test]
fn a_session_token_must_be_the_placeholders_own() {
    let mut headers = s3_get(&placeholder(), "/b");
    headers.push(("x-amz-security-token".into(), "someone-elses-token".into()));
    let head = head(&headers, "/b");
    let claim = Claim::find(&head).unwrap().unwrap();
    let with_token = Credentials::new(
        PLACEHOLDER_KEY,
        PLACEHOLDER_SECRET,
        Some("SLUICE_TOKEN_x".into()),
    );
    let canon = Canonicalization::for_service("s3");
    assert_eq!(
        claim
            .verify(&head, "UNSIGNED-PAYLOAD", &with_token, canon)
            .map(|_| ()),
        Err(Invalid::SessionToken)
    );
    assert_eq!(
        claim
            .verify(&head, "UNSIGNED-PAYLOAD", &placeholder(), canon)
            .map(|_| ()),
        Err(Invalid::SessionToken)
    );
}

#[test]
fn malformed_signatures_are_named() {
    let date = ("x-amz-date".to_owned(), "20261202T101500Z".to_owned());
    let find = |authorization: &str| {
        let headers = vec![
            date.clone(),
            ("authorization".to_owned(), authorization.to_owned()),
        ];
        Claim::find(&head(&headers, "/")).map(|c| c.map(|_| ()))
    };
    let good_sig = "a".repeat(64);
    let ok = format!(
        "AWS4-HMAC-SHA256 Credential=K/20261202/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={good_sig}"
    );
    assert_eq!(find(&ok), Ok(Some(())));
    // Other schemes are not ours to read.
    assert_eq!(find("Bearer xyz"), Ok(None));
    assert_eq!(find("AWS K:signature"), Ok(None));
    let cases = [
        (
            ok.replace(
                "Credential=K/20261202/eu-west-1/s3/aws4_request",
                "Credential=K/20261202/eu-west-1/aws4_request",
            ),
            Malformed::Credential,
        ),
        (
            ok.replace(
                "SignedHeaders=host;x-amz-date",
                "SignedHeaders=x-amz-date;host",
            ),
            Malformed::SignedHeaders,
        ),
        (
            ok.replace("SignedHeaders=host;x-amz-date", "SignedHeaders=x-amz-date"),
            Malformed::SignedHeaders,
        ),
        (
            ok.replace(
                "SignedHeaders=host;x-amz-date",
                "SignedHeaders=Host;x-amz-date",
            ),
            Malformed::SignedHeaders,
        ),
        (ok.replace(&good_sig, "abc"), Malformed::Signature),
        (
            format!("{ok}, Signature={good_sig}"),
            Malformed::Authorization,
        ),
        (format!("{ok}, Extra=1"), Malformed::Authorization),
        (
            ok.replace("AWS4-HMAC-SHA256 ", "AWS4-HMAC-SHA256"),
            Malformed::Authorization,
        ),
    ];
    for (authorization, expected) in cases {
        assert_eq!(find(&authorization), Err(expected), "{authorization}");
    }
    let no_date = vec![("authorization".to_owned(), ok.clone())];
    assert_eq!(
        Claim::find(&head(&no_date, "/")).err(),
        Some(Malformed::Date)
    );
    let twice = vec![
        date.clone(),
        ("authorization".to_owned(), ok.clone()),
        ("Authorization".to_owned(), ok),
    ];
    assert_eq!(
        Claim::find(&head(&twice, "/")).err(),
        Some(Malformed::Repeated("authorization"))
    );
}

#[test]
fn dates_are_read_exactly() {
    assert!(claim::parse_date_time("20261202T101500Z").is_ok());
    for bad in [
        "20261302T101500Z",
        "20261202T251500Z",
        "20261202 101500Z",
        "2026120T101500Z",
        "20260230T000000Z",
        "２0261202T101500Z",
    ] {
        assert_eq!(claim::parse_date_time(bad), Err(Malformed::Date), "{bad}");
    }
}

#[test]
fn a_presigned_url_keeps_its_other_parameters_and_gets_new_signing_ones() {
    let query = "response-content-type=text%2Fplain&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=K%2F20261202%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20261202T101500Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=00";
    assert_eq!(
        claim::without_signing_params(query),
        "response-content-type=text%2Fplain"
    );
}
