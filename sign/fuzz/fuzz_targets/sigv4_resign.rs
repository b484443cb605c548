//! The SigV4 verifier and re-signer, and the aws-chunked framing, on any input (README.md).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode, Piece, Unframer, announced_trailers};
use sluice_sign::aws_sigv4::{Canonicalization, Claim, Credentials, Head, sha256_hex};

/// AWS's post-x-www-form-urlencoded vector, header form, signed by this key.
const KEY_ID: &str = "AKIDEXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const HOST: &str = "example.amazonaws.com";
const SIGNED: [(&str, &str); 5] = [
    ("Content-Type", "application/x-www-form-urlencoded"),
    ("Content-Length", "13"),
    ("X-Amz-Date", "20150830T123600Z"),
    ("x-amz-content-sha256", "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"),
    ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, Signature=d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"),
];
/// AWS's get-vanilla vector, presigned form.
const PRESIGNED: &str = "/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-Signature=e93c787ed7f371d5c6b165c1b38ede9550f4dce4144713e844b25b7192d3865d";

#[derive(Arbitrary, Debug)]
enum Change {
    Method(String),
    Target(String),
    Host(String),
    HeaderValue(u8, String),
    HeaderName(u8, String),
    Remove(u8),
    Add(String, String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Any signature at all.
    authorization: String,
    date: String,
    target: String,
    /// Changes to a signed request.
    presigned: bool,
    changes: Vec<Change>,
    /// Any bytes as an aws-chunked body.
    chunked: Vec<u8>,
    split: u16,
    /// Any `x-amz-trailer`.
    announced: Option<String>,
}

fn placeholder() -> Credentials {
    Credentials::new(KEY_ID, SECRET, None)
}

fn real() -> Credentials {
    Credentials::new("AKIAREALKEYREALKEY00", "the-real-secret-key-of-the-operator-0000", None)
}

/// The real key's signature over `head` when the placeholder key's on it verifies.
fn resigned(head: &Head<'_>, body: &[u8]) -> Option<(String, Option<String>)> {
    let claim = Claim::find(head).ok()??;
    let hash = sha256_hex(body);
    let payload = claim.payload_hash(Some(&hash)).ok()?;
    let canon = Canonicalization { normalize_path: true, double_encode: true };
    let verified = claim.verify(head, &payload, &placeholder(), canon).ok()?;
    let signed = verified.resign(head, &payload, &real(), canon).ok()?;
    let query = signed.path_and_query.map(|q| q.to_string());
    Some((signed.signature, query))
}

fuzz_target!(|input: Input| {
    // Any signature: read without a panic, and never verified by a key that did not sign.
    let headers = vec![("x-amz-date", input.date.as_str()), ("authorization", input.authorization.as_str())];
    let head = Head { method: "GET", host: HOST, path_and_query: &input.target, headers };
    if let Ok(Some(claim)) = Claim::find(&head) {
        let payload = claim.payload_hash(Some(&sha256_hex(b""))).map(|p| p.into_owned());
        if let Ok(payload) = payload {
            let canon = Canonicalization::for_service(&claim.scope().service);
            assert!(claim.verify(&head, &payload, &placeholder(), canon).is_err());
        }
    }

    // A signed request, changed: verified only if the real key signs exactly the original.
    let (mut method, mut target, mut host) = ("POST".to_owned(), "/".to_owned(), HOST.to_owned());
    let mut headers: Vec<(String, String)> = SIGNED.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    if input.presigned {
        method = "GET".into();
        target = PRESIGNED.into();
        headers.clear();
    }
    let body: &[u8] = if input.presigned { b"" } else { b"Param1=value1" };
    let original = {
        let head = Head {
            method: &method,
            host: &host,
            path_and_query: &target,
            headers: headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect(),
        };
        resigned(&head, body).expect("the vector verifies")
    };
    for change in input.changes.into_iter().take(8) {
        let at = |i: u8, len: usize| usize::from(i) % len.max(1);
        match change {
            Change::Method(m) => method = m,
            Change::Target(t) => target = t,
            Change::Host(h) => host = h,
            Change::HeaderValue(i, v) if !headers.is_empty() => {
                let i = at(i, headers.len());
                headers[i].1 = v;
            }
            Change::HeaderName(i, n) if !headers.is_empty() => {
                let i = at(i, headers.len());
                headers[i].0 = n;
            }
            Change::Remove(i) if !headers.is_empty() => {
                headers.remove(at(i, headers.len()));
            }
            Change::Add(n, v) => headers.push((n, v)),
            _ => {}
        }
    }
    let head = Head {
        method: &method,
        host: &host,
        path_and_query: &target,
        headers: headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect(),
    };
    if let Some(changed) = resigned(&head, body) {
        assert_eq!(changed.0, original.0, "the real key signed what the placeholder key did not");
    }

    // Any bytes as aws-chunked framing, in any split.
    for mode in [Mode::Signed, Mode::SignedTrailer, Mode::Unsigned] {
        let mut unframer = Unframer::new(mode, 1 << 16);
        let mut pieces = Vec::new();
        let split = usize::from(input.split).max(1);
        let read = input
            .chunked
            .chunks(split)
            .try_for_each(|part| unframer.push(&bytes::Bytes::copy_from_slice(part), &mut pieces));
        if read.is_ok() && unframer.finish().is_ok() {
            // What was read frames back to exactly the bytes that came.
            let mut framed = Vec::new();
            for piece in &pieces {
                match piece {
                    Piece::Chunk { size_text, signature, .. } => {
                        framed.extend_from_slice(size_text.as_bytes());
                        if let Some(s) = signature {
                            framed.extend_from_slice(b";chunk-signature=");
                            framed.extend_from_slice(s.as_bytes());
                        }
                        framed.extend_from_slice(b"\r\n");
                    }
                    Piece::Data(d) => framed.extend_from_slice(d),
                    Piece::ChunkEnd => {}
                    Piece::Trailer(line) => {
                        framed.extend_from_slice(line.as_bytes());
                        framed.extend_from_slice(b"\r\n");
                    }
                    Piece::TrailerSignature(s) => {
                        framed.extend_from_slice(b"x-amz-trailer-signature:");
                        framed.extend_from_slice(s.as_bytes());
                        framed.extend_from_slice(b"\r\n");
                    }
                }
            }
            // Signed trailers, whatever they hold: checked against any announcement and
            // signed without a panic, and a signature the key did not make never verifies.
            if mode == Mode::SignedTrailer {
                let trailers: Vec<String> = pieces
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Trailer(line) => Some(line.clone()),
                        _ => None,
                    })
                    .collect();
                let _ = announced_trailers(input.announced.as_deref(), &trailers);
                let claimed = pieces.iter().find_map(|p| match p {
                    Piece::TrailerSignature(s) => Some(s.clone()),
                    _ => None,
                });
                let head = Head { method: "PUT", host: HOST, path_and_query: "/", headers: SIGNED.to_vec() };
                let claim = Claim::find(&head).expect("the vector reads").expect("a claim");
                let mut chain = ChunkChain::new(&placeholder(), &claim, claim.signature());
                if let Some(claimed) = claimed {
                    assert!(chain.check_trailer(&trailers, &claimed).is_err(), "a made-up trailer signature verified");
                }
            }
            // Each data chunk's CRLF, and the closing empty line, are the framing's own.
            let crlfs = pieces.iter().filter(|p| matches!(p, Piece::ChunkEnd)).count() - 1;
            assert_eq!(framed.len() + 2 * crlfs + 2, input.chunked.len(), "{mode:?}");
        }
    }
});
