//! Credentials that sign: a request the sandbox signed with a placeholder key is checked
//! against that placeholder key, then signed again with the real one.
//!
//! Some credentials never cross the wire: an AWS secret access key only signs. Swapping a
//! placeholder cannot help there (the client signed with the placeholder, and the upstream
//! checks the signature), so sluice verifies the client's signature with the placeholder
//! secret and, only when it verifies, re-signs the same request with the real secret.
//!
//! Pure code: no I/O, no clock, no environment. The proxy reads the request and decides the
//! grants; this crate only answers "did the placeholder key sign this?" and "what does the
//! real key's signature over it look like?". Each `sign:` kind is a module of its own; today
//! [`aws_sigv4`], on AWS's own `aws-sigv4` signer (never a hand-written one). Beside it,
//! [`jwt`]: the JWTs minted credentials sign with a key sluice holds (the `jwt_bearer`
//! grant's assertion), on the `jsonwebtoken` crate.
//!
//! # Example
//!
//! ```
//! use sluice_sign::aws_sigv4::{Canonicalization, Claim, Credentials, Head, sha256_hex};
//!
//! // What the sandbox sent, signed with its placeholder key (AWS's get-vanilla vector).
//! let head = Head {
//!     method: "GET",
//!     host: "example.amazonaws.com",
//!     path_and_query: "/",
//!     headers: vec![
//!         ("X-Amz-Date", "20150830T123600Z"),
//!         ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
//!     ],
//! };
//! let placeholder = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None);
//! let real = Credentials::new("AKIAREALKEY000000000", "the-real-secret-access-key-0123456789abcd", None);
//!
//! let claim = Claim::find(&head).unwrap().expect("a SigV4 signature");
//! assert_eq!(claim.scope().service, "service");
//! // No x-amz-content-sha256: the signature covers the (empty) body's own hash.
//! let body_hash = sha256_hex(b"");
//! let payload = claim.payload_hash(Some(&body_hash)).unwrap();
//! let canon = Canonicalization::for_service(&claim.scope().service);
//! let verified = claim.verify(&head, &payload, &placeholder, canon).unwrap();
//!
//! let signed = verified.resign(&head, &payload, &real, canon).unwrap();
//! let (name, authorization) = &signed.headers[1];
//! assert_eq!(*name, "authorization");
//! assert!(authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIAREALKEY000000000/20150830/"));
//! ```

#![forbid(unsafe_code)]

pub mod aws_sigv4;
pub mod jwt;
