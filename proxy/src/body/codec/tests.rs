//! Tests of content-coding parsing, bounded decoding and encoding.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::{DeflateEncoder, GzEncoder};

use super::decode::DeflateLayer;

use super::*;

use ContentCoding::{Br, Deflate, Gzip, Zstd};

const ALL: [ContentCoding; 4] = [Gzip, Deflate, Br, Zstd];

/// A body with some structure (so that it compresses, but not to nothing).
fn sample(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_u32;
    (0..len)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            if i % 7 == 0 {
                b'a' + (state % 26) as u8
            } else {
                b"lorem ipsum "[i % 12]
            }
        })
        .collect()
}

fn encode(codings: &[ContentCoding], plain: &[u8]) -> Vec<u8> {
    let mut encoder = Encoder::new(codings).unwrap();
    let mut wire = Vec::new();
    for chunk in plain.chunks(10_000) {
        encoder.push(chunk, &mut wire).unwrap();
    }
    encoder.finish(&mut wire).unwrap();
    wire
}

fn decode_in(
    codings: &[ContentCoding],
    wire: &[u8],
    chunk: usize,
    limit: u64,
) -> Result<Vec<u8>, CodecError> {
    let mut decoder = Decoder::new(codings, limit)?;
    let mut plain = Vec::new();
    for piece in wire.chunks(chunk.max(1)) {
        decoder.push(piece, &mut plain)?;
    }
    decoder.finish(&mut plain)?;
    Ok(plain)
}

fn decode(codings: &[ContentCoding], wire: &[u8]) -> Result<Vec<u8>, CodecError> {
    decode_in(codings, wire, 64 * 1024, 1 << 30)
}

fn is_corrupt(result: Result<Vec<u8>, CodecError>) -> bool {
    matches!(result, Err(CodecError::Corrupt { .. }))
}

#[test]
fn round_trip_each_coding_at_one_byte_and_large_pushes() {
    let plain = sample(200_000);
    for coding in ALL {
        let wire = encode(&[coding], &plain);
        assert!(wire.len() < plain.len(), "{coding} did not compress");
        assert_eq!(
            decode_in(&[coding], &wire, 1, 1 << 30).unwrap(),
            plain,
            "{coding}, 1-byte pushes"
        );
        assert_eq!(
            decode_in(&[coding], &wire, 1 << 20, 1 << 30).unwrap(),
            plain,
            "{coding}, one push"
        );
        assert_eq!(
            decode_in(&[coding], &wire, 4093, 1 << 30).unwrap(),
            plain,
            "{coding}, odd pushes"
        );
    }
}

#[test]
fn round_trip_stacks() {
    let plain = sample(150_000);
    let stacks: [&[ContentCoding]; 4] = [
        &[Gzip, Br],
        &[Br, Gzip],
        &[Zstd, Deflate],
        &[Gzip, Deflate, Br, Zstd],
    ];
    for stack in stacks {
        let wire = encode(stack, &plain);
        assert_eq!(
            decode_in(stack, &wire, 1, 1 << 30).unwrap(),
            plain,
            "{stack:?}, 1-byte pushes"
        );
        assert_eq!(
            decode_in(stack, &wire, 1 << 20, 1 << 30).unwrap(),
            plain,
            "{stack:?}, one push"
        );
    }
}

#[test]
fn stack_is_applied_in_header_order() {
    // `Content-Encoding: gzip, br`: gzip first, then br; the outermost layer is brotli.
    let plain = sample(10_000);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let mut br = brotli::CompressorWriter::new(Vec::new(), 0, 5, 22);
    br.write_all(&gz).unwrap();
    let wire = br.into_inner();
    let codings = parse_content_encoding([&HeaderValue::from_static("gzip, br")]).unwrap();
    assert_eq!(codings, [Gzip, Br]);
    assert_eq!(decode(&codings, &wire).unwrap(), plain);
    assert!(decode(&[Br, Gzip], &wire).is_err());
}

#[test]
fn empty_bodies_decode_to_empty() {
    for coding in ALL {
        assert_eq!(decode(&[coding], b"").unwrap(), b"", "{coding}");
        assert_eq!(
            decode(&[coding], &encode(&[coding], b"")).unwrap(),
            b"",
            "{coding}"
        );
    }
    assert_eq!(decode(&[Gzip, Br], b"").unwrap(), b"");
}

#[test]
fn identity_and_empty_lists_pass_bytes_with_the_bound() {
    assert_eq!(decode(&[], b"plain text").unwrap(), b"plain text");
    assert_eq!(
        decode(&[ContentCoding::Identity], b"plain text").unwrap(),
        b"plain text"
    );
    assert_eq!(
        decode_in(&[], &[0; 100], 7, 99),
        Err(CodecError::TooLarge { limit: 99 })
    );
    let mut out = Vec::new();
    let mut encoder = Encoder::new(&[ContentCoding::Identity]).unwrap();
    encoder.push(b"as is", &mut out).unwrap();
    encoder.finish(&mut out).unwrap();
    assert_eq!(out, b"as is");
}

#[test]
fn concatenated_gzip_members_and_zstd_frames_decode_whole() {
    for coding in [Gzip, Zstd] {
        let mut wire = encode(&[coding], b"first part, ");
        wire.extend(encode(&[coding], b"second part"));
        assert_eq!(
            decode_in(&[coding], &wire, 1, 1 << 20).unwrap(),
            b"first part, second part",
            "{coding}"
        );
    }
}

#[test]
fn raw_deflate_is_accepted_as_deflate() {
    let plain = sample(50_000);
    let mut raw = DeflateEncoder::new(Vec::new(), Compression::default());
    raw.write_all(&plain).unwrap();
    let raw = raw.finish().unwrap();
    assert!(!DeflateLayer::is_zlib_header(raw[0], raw[1]));
    assert_eq!(decode_in(&[Deflate], &raw, 1, 1 << 30).unwrap(), plain);
    assert_eq!(decode(&[Deflate], &raw).unwrap(), plain);
}

#[test]
fn truncated_bodies_are_corrupt() {
    let plain = sample(30_000);
    for coding in ALL {
        let wire = encode(&[coding], &plain);
        for cut in [1, 4, wire.len() / 2, wire.len() - 1] {
            let result = decode_in(&[coding], &wire[..cut], 5, 1 << 30);
            assert!(
                is_corrupt(result),
                "{coding} cut to {cut} of {} bytes",
                wire.len()
            );
        }
    }
    let stacked = encode(&[Gzip, Br], &plain);
    assert!(is_corrupt(decode(
        &[Gzip, Br],
        &stacked[..stacked.len() - 3]
    )));
}

#[test]
fn corrupt_bodies_are_refused() {
    let plain = sample(30_000);
    for coding in ALL {
        let garbage = b"this is not compressed at all, not in any coding".repeat(10);
        assert!(is_corrupt(decode(&[coding], &garbage)), "{coding}: garbage");

        let mut trailing = encode(&[coding], &plain);
        trailing.extend_from_slice(b"tail after the end");
        assert!(
            is_corrupt(decode_in(&[coding], &trailing, 3, 1 << 30)),
            "{coding}: trailing data"
        );
    }
    // A flipped byte in gzip's CRC, and in the middle of the data, of each coding.
    let mut gz = encode(&[Gzip], &plain);
    let crc = gz.len() - 6;
    gz[crc] ^= 0x55;
    assert!(is_corrupt(decode(&[Gzip], &gz)));
    let mut zlib = encode(&[Deflate], &plain);
    let adler = zlib.len() - 2;
    zlib[adler] ^= 0x55;
    assert!(is_corrupt(decode(&[Deflate], &zlib)));
    for coding in [Br, Zstd] {
        let mut wire = encode(&[coding], &plain);
        let middle = wire.len() / 2;
        wire[middle] ^= 0xff;
        wire[middle + 1] ^= 0xff;
        let result = decode(&[coding], &wire);
        assert!(
            result.map_or(true, |out| out != plain),
            "{coding}: a flipped byte went unnoticed"
        );
    }
}

#[test]
fn a_decoder_that_failed_stays_failed() {
    let mut decoder = Decoder::new(&[Gzip], 1 << 20).unwrap();
    let mut out = Vec::new();
    let err = decoder
        .push(b"not gzip at all, not at all", &mut out)
        .unwrap_err();
    assert_eq!(
        decoder.push(&encode(&[Gzip], b"fine"), &mut out),
        Err(err.clone())
    );
    assert_eq!(decoder.finish(&mut out), Err(err));
}

/// A gzip body of `gib` GiB of zeros, built without holding it: one compressed MiB of zeros,
/// repeated (its back-references stay inside zeros wherever it is placed). No trailer: the
/// decoder must stop long before it would read one.
fn zero_bomb(mib: usize) -> Vec<u8> {
    let mut segment = DeflateEncoder::new(Vec::new(), Compression::best());
    segment.write_all(&vec![0; 1 << 20]).unwrap();
    segment.flush().unwrap();
    let segment = std::mem::take(segment.get_mut());
    let mut bomb = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for _ in 0..mib {
        bomb.extend_from_slice(&segment);
    }
    bomb
}

#[test]
fn a_gzip_bomb_stops_at_the_bound_with_little_memory() {
    let bomb = zero_bomb(1024);
    assert!(
        bomb.len() < 8 << 20,
        "1 GiB of zeros compresses to {} bytes",
        bomb.len()
    );
    let limit = 16 << 20;
    let mut decoder = Decoder::new(&[Gzip], limit).unwrap();
    let mut out = Vec::new();
    let mut fed = 0;
    let mut result = Ok(());
    'feed: for chunk in bomb.chunks(16 * 1024) {
        let mut rest = chunk;
        loop {
            out.clear();
            match decoder.decode_some(rest, &mut out, SLICE) {
                Ok(used) => rest = &rest[used..],
                Err(e) => {
                    result = Err(e);
                    break 'feed;
                }
            }
            assert!(out.len() <= SLICE && out.capacity() <= 2 * SLICE);
            assert!(
                decoder.buffered() <= 3 * SLICE,
                "{} bytes buffered",
                decoder.buffered()
            );
            if out.len() < SLICE {
                break;
            }
        }
        fed += chunk.len();
    }
    assert_eq!(result, Err(CodecError::TooLarge { limit }));
    assert!(decoder.decoded() <= limit + SLICE as u64);
    assert!(
        fed < bomb.len() / 8,
        "fed {fed} of {} bytes before stopping",
        bomb.len()
    );
}

#[test]
fn push_stops_a_bomb_at_the_bound_too() {
    let bomb = zero_bomb(64);
    let limit = 4 << 20;
    let mut decoder = Decoder::new(&[Gzip], limit).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        decoder.push(&bomb, &mut out),
        Err(CodecError::TooLarge { limit })
    );
    assert!(
        out.len() as u64 <= limit + SLICE as u64,
        "{} bytes decoded",
        out.len()
    );
}

#[test]
fn every_coding_stops_at_the_bound() {
    let zeros = vec![0; 4 << 20];
    for coding in ALL {
        let wire = encode(&[coding], &zeros);
        assert!(wire.len() < 64 * 1024, "{coding}: {} bytes", wire.len());
        assert_eq!(
            decode_in(&[coding], &wire, 1000, 1 << 20),
            Err(CodecError::TooLarge { limit: 1 << 20 }),
            "{coding}"
        );
        assert_eq!(
            decode_in(&[coding], &wire, 1000, 4 << 20).unwrap().len(),
            zeros.len(),
            "{coding}"
        );
    }
    // Inside a stack, the bound holds for every layer.
    let wire = encode(&[Gzip, Br], &zeros);
    assert_eq!(decode(&[Gzip, Br], &wire).unwrap().len(), zeros.len());
    assert_eq!(
        decode_in(&[Gzip, Br], &wire, 7, 1 << 20),
        Err(CodecError::TooLarge { limit: 1 << 20 })
    );
}

#[test]
fn decode_some_bounds_each_step_and_signals_more() {
    let plain = sample(300_000);
    for stack in [&[Gzip][..], &[Zstd, Br][..]] {
        let wire = encode(stack, &plain);
        let mut decoder = Decoder::new(stack, 1 << 30).unwrap();
        let mut whole = Vec::new();
        for chunk in wire.chunks(50_000) {
            let mut rest = chunk;
            loop {
                let mut out = Vec::new();
                let used = decoder.decode_some(rest, &mut out, 1000).unwrap();
                rest = &rest[used..];
                assert!(out.len() <= 1000);
                whole.extend_from_slice(&out);
                if out.len() < 1000 {
                    assert!(rest.is_empty(), "a short step left input behind");
                    break;
                }
            }
        }
        decoder.finish(&mut whole).unwrap();
        assert_eq!(whole, plain, "{stack:?}");
    }
}

#[test]
fn zstd_windows_over_8_mib_are_refused() {
    let mut encoder = zstd::stream::raw::Encoder::new(3).unwrap();
    encoder
        .set_parameter(zstd::stream::raw::CParameter::WindowLog(26))
        .unwrap();
    let mut writer = zstd::stream::zio::Writer::new(Vec::new(), encoder);
    writer.write_all(&sample(100_000)).unwrap();
    writer.finish().unwrap();
    let wire = writer.into_inner().0;
    assert!(is_corrupt(decode(&[Zstd], &wire)));
}

#[test]
fn header_parsing_table() {
    // (header values, expected codings)
    let cases: &[(&[&str], &[ContentCoding])] = &[
        (&["gzip"], &[Gzip]),
        (&["GZIP"], &[Gzip]),
        (&[" Gzip\t"], &[Gzip]),
        (&["x-gzip"], &[Gzip]),
        (&["deflate"], &[Deflate]),
        (&["Br"], &[Br]),
        (&["ZSTD"], &[Zstd]),
        (&["identity"], &[]),
        (&[""], &[]),
        (&["gzip, br"], &[Gzip, Br]),
        (&["gzip,br"], &[Gzip, Br]),
        (&["gzip ,  BR "], &[Gzip, Br]),
        (&["gzip,,br,"], &[Gzip, Br]),
        (&["identity, gzip"], &[Gzip]),
        (&["gzip", "br"], &[Gzip, Br]),
        (&["deflate", "zstd, gzip"], &[Deflate, Zstd, Gzip]),
    ];
    for (values, expected) in cases {
        let values: Vec<HeaderValue> = values
            .iter()
            .map(|v| HeaderValue::from_str(v).unwrap())
            .collect();
        assert_eq!(
            parse_content_encoding(&values).unwrap(),
            *expected,
            "{values:?}"
        );
    }
    let mut headers = HeaderMap::new();
    assert_eq!(content_codings(&headers).unwrap(), []);
    headers.append(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
    headers.append(header::CONTENT_ENCODING, HeaderValue::from_static("Zstd"));
    assert_eq!(content_codings(&headers).unwrap(), [Br, Zstd]);
}

#[test]
fn unknown_codings_are_refused_by_name() {
    // (header value, name in the error)
    let cases = [
        ("compress", "compress"),
        ("gzip, lzma", "lzma"),
        // Quoted only as a short token: anything else is described, never cut.
        ("gzip;q=1", "(a name of 8 bytes)"),
        ("  Snappy  ", "snappy"),
        ("aes128gcm", "aes128gcm"),
    ];
    for (value, name) in cases {
        let err = parse_content_encoding([&HeaderValue::from_static(value)]).unwrap_err();
        assert_eq!(
            err,
            CodecError::Unsupported { name: name.into() },
            "{value}"
        );
        assert!(
            err.to_string()
                .contains("expected gzip, deflate, br or zstd")
        );
    }
    // A long name (a token an upstream echoed there) is never cut to a prefix of itself,
    // which the guard, knowing whole values only, could not redact.
    let long = format!("github_pat_{}", "x".repeat(82));
    let err = parse_content_encoding([&HeaderValue::from_str(&long).unwrap()]).unwrap_err();
    assert_eq!(
        err,
        CodecError::Unsupported {
            name: "(a name of 93 bytes)".into()
        }
    );
    let binary = HeaderValue::from_bytes(b"gz\xffip").unwrap();
    assert!(matches!(
        parse_content_encoding([&binary]),
        Err(CodecError::Unsupported { .. })
    ));
}

#[test]
fn long_stacks_are_refused() {
    let value = HeaderValue::from_static("gzip, gzip, gzip, gzip, gzip");
    assert_eq!(
        parse_content_encoding([&value]),
        Err(CodecError::TooManyCodings {
            count: 5,
            max: MAX_STACK
        })
    );
    assert!(Decoder::new(&[Gzip; 5], 1).is_err());
    assert!(Encoder::new(&[Gzip; 5]).is_err());
    assert!(Decoder::new(&[Gzip; 4], 1).is_ok());
}

#[test]
fn accept_encoding_names_exactly_what_decodes() {
    let value = accept_encoding();
    let codings = parse_content_encoding([&value]).unwrap();
    assert_eq!(codings, ALL);
    for coding in codings {
        assert_eq!(ContentCoding::from_name(coding.as_str()).unwrap(), coding);
    }
}

/// (`Content-Encoding`, `Transfer-Encoding`, the codings the body is in).
type CodingCase = (
    &'static str,
    &'static str,
    Result<&'static [ContentCoding], CodecError>,
);

#[test]
fn transfer_codings_besides_a_final_chunked_are_codings_of_the_body() {
    let cases: &[CodingCase] = &[
        ("", "chunked", Ok(&[])),
        ("gzip", "chunked", Ok(&[Gzip])),
        ("", "gzip, chunked", Ok(&[Gzip])),
        ("br", "Deflate , CHUNKED", Ok(&[Br, Deflate])),
        ("", "gzip", Ok(&[Gzip])),
        ("", "identity, chunked", Ok(&[])),
        ("", "chunked, gzip", Err(CodecError::ChunkedNotLast)),
        ("", "chunked, chunked", Err(CodecError::ChunkedNotLast)),
        (
            "",
            "compress, chunked",
            Err(CodecError::Unsupported {
                name: "compress".into(),
            }),
        ),
        (
            "gzip, br",
            "zstd, deflate, gzip, chunked",
            Err(CodecError::TooManyCodings { count: 5, max: 4 }),
        ),
    ];
    for (content, transfer, want) in cases {
        let mut headers = HeaderMap::new();
        if !content.is_empty() {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(content));
        }
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static(transfer),
        );
        let got = body_codings(&headers);
        assert_eq!(
            got.as_deref(),
            want.as_ref().map(|w| *w),
            "{content} / {transfer}"
        );
    }
}

#[test]
fn example_a_gzipped_body_decodes_whatever_the_chunking() {
    let mut encoder = Encoder::new(&[ContentCoding::Gzip]).unwrap();
    let mut wire = Vec::new();
    encoder.push(b"hello, body", &mut wire).unwrap();
    encoder.finish(&mut wire).unwrap();
    let mut decoder = Decoder::new(&[ContentCoding::Gzip], 1 << 20).unwrap();
    let mut plain = Vec::new();
    for chunk in wire.chunks(3) {
        decoder.push(chunk, &mut plain).unwrap();
    }
    decoder.finish(&mut plain).unwrap();
    assert_eq!(plain, b"hello, body");
}

#[test]
fn example_transfer_codings_follow_content_codings() {
    let mut headers = http::HeaderMap::new();
    headers.insert("content-encoding", HeaderValue::from_static("br"));
    headers.insert(
        "transfer-encoding",
        HeaderValue::from_static("gzip, chunked"),
    );
    assert_eq!(
        body_codings(&headers).unwrap(),
        [ContentCoding::Br, ContentCoding::Gzip]
    );
}

#[test]
fn example_only_decodable_names_pass() {
    assert!(names_only_decodable(&HeaderValue::from_static("identity")));
    assert!(names_only_decodable(&HeaderValue::from_static(
        "gzip;q=1.0, br;q=0.5"
    )));
    assert!(!names_only_decodable(&HeaderValue::from_static(
        "gzip, compress"
    )));
    assert!(!names_only_decodable(&HeaderValue::from_static("*")));
}
