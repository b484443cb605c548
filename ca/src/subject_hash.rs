//! OpenSSL's subject hash (`openssl x509 -hash`): the name under which OpenSSL's hashed
//! directory lookup (`SSL_CERT_DIR`, `-CApath`, `c_rehash`) looks a CA up, as `<hash>.0`.
//!
//! The hash is the first four bytes, little-endian, of the SHA-1 of the subject's canonical
//! encoding: each relative distinguished name as a DER `SET` of one
//! `SEQUENCE { type, UTF8String }`, its text with ASCII letters lowercased, leading and
//! trailing spaces dropped and inner runs of spaces made one; the sets concatenated, with no
//! outer `SEQUENCE`. It names a file; no trust decision rests on it.

use yasna::models::ObjectIdentifier;

/// `id-at-commonName`.
pub(crate) const COMMON_NAME: &[u64] = &[2, 5, 4, 3];
/// `id-at-organizationName`.
pub(crate) const ORGANIZATION: &[u64] = &[2, 5, 4, 10];

/// The hash of a subject made of `rdns` (attribute type, text), in order, as eight
/// lowercase hex digits.
pub(crate) fn subject_hash(rdns: &[(&[u64], &str)]) -> String {
    let mut canonical = Vec::new();
    for (oid, text) in rdns {
        canonical.extend(yasna::construct_der(|writer| {
            writer.write_set(|set| {
                set.next().write_sequence(|sequence| {
                    sequence
                        .next()
                        .write_oid(&ObjectIdentifier::from_slice(oid));
                    sequence.next().write_utf8_string(&canonical_text(text));
                });
            });
        }));
    }
    let digest =
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &canonical);
    let bytes = digest.as_ref();
    format!(
        "{:08x}",
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    )
}

/// The text as OpenSSL compares it: ASCII lowercased, outer spaces dropped, inner runs of
/// spaces made one.
fn canonical_text(text: &str) -> String {
    text.split_ascii_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_compared_lowercased_with_its_spaces_collapsed() {
        assert_eq!(
            canonical_text("  Sluice   run CA 01ab "),
            "sluice run ca 01ab"
        );
    }

    #[test]
    fn letter_case_and_spacing_do_not_change_the_hash_and_the_text_does() {
        let a = subject_hash(&[(COMMON_NAME, "sluice run CA 1"), (ORGANIZATION, "sluice")]);
        let b = subject_hash(&[(COMMON_NAME, "SLUICE  run ca 1"), (ORGANIZATION, "Sluice")]);
        let c = subject_hash(&[(COMMON_NAME, "sluice run CA 2"), (ORGANIZATION, "sluice")]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 8);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
