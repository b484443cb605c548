//! AWS's SigV4 test vectors (`testdata/aws-signing-test-suite`, Apache-2.0): every signed
//! request verifies with the vector's key, in the header and the presigned form, and
//! re-signing it reproduces the vector's signature.

use std::fs;
use std::path::{Path, PathBuf};

use sluice_sign::aws_sigv4::{Canonicalization, Claim, Credentials, Form, Head, sha256_hex};

/// One vector's signed request, as a client would put it on the wire.
struct Wire {
    method: String,
    /// Whether the target was sent as the vector writes it; a vector's target is what the
    /// signer encodes, and one holding bytes no URI can carry (a space, UTF-8) goes on the
    /// wire encoded already, so the signer must encode it only once more than it was.
    target_as_written: bool,
    path_and_query: String,
    host: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Wire {
    /// Reads `name: value` lines (a line that starts with white space continues the last
    /// value, joined by one space, as RFC 9112 §5.2 has a recipient read it), then the body.
    fn read(path: &Path) -> Wire {
        let text = fs::read_to_string(path).unwrap();
        let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let request_line = lines.next().unwrap();
        let (method, rest) = request_line.split_once(' ').unwrap();
        let target = rest.strip_suffix(" HTTP/1.1").unwrap();
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in lines {
            if line.starts_with([' ', '\t']) {
                let last = headers.last_mut().unwrap();
                last.1.push(' ');
                last.1.push_str(line.trim());
            } else {
                let (name, value) = line.split_once(':').unwrap();
                headers.push((name.to_owned(), value.to_owned()));
            }
        }
        let host = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.clone())
            .unwrap();
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case("host"));
        let path_and_query = encode_target(target);
        Wire {
            method: method.to_owned(),
            target_as_written: path_and_query == target,
            path_and_query,
            host,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    fn head(&self) -> Head<'_> {
        Head {
            method: &self.method,
            host: &self.host,
            path_and_query: &self.path_and_query,
            headers: self
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect(),
        }
    }
}

/// The target as a client sends it: spaces and non-ASCII bytes percent-encoded.
fn encode_target(target: &str) -> String {
    let mut out = String::new();
    for byte in target.bytes() {
        if byte.is_ascii_graphic() {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn vectors() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/aws-signing-test-suite/v4");
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn credentials(context: &serde_json::Value) -> Credentials {
    let c = &context["credentials"];
    Credentials::new(
        c["access_key_id"].as_str().unwrap(),
        c["secret_access_key"].as_str().unwrap(),
        c["token"].as_str().map(str::to_owned),
    )
}

fn check(dir: &Path, form: Form) {
    let name = dir.file_name().unwrap().to_string_lossy();
    let context: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("context.json")).unwrap()).unwrap();
    let prefix = match form {
        Form::Header => "header",
        Form::Query => "query",
    };
    let wire = Wire::read(&dir.join(format!("{prefix}-signed-request.txt")));
    let expected = fs::read_to_string(dir.join(format!("{prefix}-signature.txt"))).unwrap();
    let head = wire.head();
    let claim = Claim::find(&head)
        .unwrap_or_else(|e| panic!("{name} ({prefix}): {e}"))
        .unwrap_or_else(|| panic!("{name} ({prefix}): no signature found"));
    assert_eq!(claim.form(), form, "{name}");
    assert_eq!(claim.signature(), expected.trim(), "{name}");
    let canon = Canonicalization {
        normalize_path: context["normalize"].as_bool().unwrap(),
        double_encode: wire.target_as_written,
    };
    let body_hash = sha256_hex(&wire.body);
    let payload = claim.payload_hash(Some(&body_hash)).unwrap();
    let key = credentials(&context);
    let verified = claim
        .verify(&head, &payload, &key, canon)
        .unwrap_or_else(|e| panic!("{name} ({prefix}) does not verify: {e}"));
    let signed = verified
        .resign(&head, &payload, &key, canon)
        .unwrap_or_else(|e| panic!("{name} ({prefix}) cannot be re-signed: {e}"));
    assert_eq!(signed.signature, expected.trim(), "{name} ({prefix})");
    // And the signature written into the request is that one.
    match form {
        Form::Header => {
            let authorization = signed
                .headers
                .iter()
                .find(|(n, _)| *n == "authorization")
                .unwrap();
            let sent = head
                .headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
                .unwrap();
            assert_eq!(authorization.1.as_str(), sent.1, "{name}");
        }
        Form::Query => {
            let path_and_query = signed.path_and_query.unwrap();
            assert!(
                path_and_query.ends_with(&format!("X-Amz-Signature={}", expected.trim()))
                    || path_and_query.contains(&format!("X-Amz-Signature={}&", expected.trim())),
                "{name}: {}",
                path_and_query.as_str()
            );
        }
    }
}

#[test]
fn every_vector_verifies_and_re_signs_to_its_signature_in_the_header_form() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 38, "the suite is whole");
    for dir in vectors {
        check(&dir, Form::Header);
    }
}

#[test]
fn every_vector_verifies_and_re_signs_to_its_signature_in_the_presigned_form() {
    for dir in vectors() {
        check(&dir, Form::Query);
    }
}

#[test]
fn no_vector_verifies_with_another_secret() {
    for dir in vectors() {
        let context: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("context.json")).unwrap()).unwrap();
        let wire = Wire::read(&dir.join("header-signed-request.txt"));
        let head = wire.head();
        let claim = Claim::find(&head).unwrap().unwrap();
        let body_hash = sha256_hex(&wire.body);
        let payload = claim.payload_hash(Some(&body_hash)).unwrap();
        let c = &context["credentials"];
        let other = Credentials::new(
            c["access_key_id"].as_str().unwrap(),
            "another-secret-access-key-of-forty-chars",
            c["token"].as_str().map(str::to_owned),
        );
        let canon = Canonicalization {
            normalize_path: context["normalize"].as_bool().unwrap(),
            double_encode: wire.target_as_written,
        };
        assert!(claim.verify(&head, &payload, &other, canon).is_err());
    }
}
