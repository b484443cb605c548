//! The trailers a request announces (`x-amz-trailer`, a signed header) against the ones
//! its body carries: the same names, each once. A trailer the signed head did not announce
//! is refused before its signature is even checked: the upstream would read a checksum
//! the client never said it would send.

use super::ChunkError;

/// Checks that `trailers` (`name:value` lines, as read) are exactly the ones `announced`
/// (the `x-amz-trailer` value: names separated by commas) names.
///
/// ```
/// use sluice_sign::aws_sigv4::chunked::announced_trailers;
///
/// let sent = ["x-amz-checksum-crc32:NhCmhg==".to_owned()];
/// assert!(announced_trailers(Some("x-amz-checksum-crc32"), &sent).is_ok());
/// assert!(announced_trailers(Some("x-amz-checksum-sha256"), &sent).is_err());
/// assert!(announced_trailers(None, &sent).is_err());
/// ```
///
/// # Errors
///
/// [`ChunkError::Unannounced`] when a name is missing, extra or repeated.
pub fn announced_trailers(announced: Option<&str>, trailers: &[String]) -> Result<(), ChunkError> {
    let mut expected: Vec<String> = announced
        .unwrap_or_default()
        .split(',')
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let mut sent: Vec<String> = trailers
        .iter()
        .map(|line| {
            line.split_once(':')
                .map_or(line.as_str(), |(name, _)| name)
                .to_ascii_lowercase()
        })
        .collect();
    expected.sort_unstable();
    sent.sort_unstable();
    let repeated = sent.windows(2).any(|pair| pair[0] == pair[1]);
    if expected == sent && !repeated {
        Ok(())
    } else {
        Err(ChunkError::Unannounced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_as_sets_without_case_and_never_repeated() {
        let line = |s: &str| s.to_owned();
        let two = [line("X-Amz-Checksum-CRC32:a"), line("x-amz-meta-x:b")];
        assert!(announced_trailers(Some("x-amz-meta-x, x-amz-checksum-crc32"), &two).is_ok());
        assert!(announced_trailers(Some("x-amz-checksum-crc32"), &two).is_err());
        let twice = [
            line("x-amz-checksum-crc32:a"),
            line("x-amz-checksum-crc32:b"),
        ];
        assert!(
            announced_trailers(Some("x-amz-checksum-crc32,x-amz-checksum-crc32"), &twice).is_err()
        );
        assert!(announced_trailers(Some("x-amz-checksum-crc32"), &[]).is_err());
        assert!(announced_trailers(None, &[]).is_ok());
    }
}
