//! The worked examples of AWS's S3 SigV4 documentation ("Signature calculations for the
//! Authorization header", "Transferring payload in multiple chunks", "Including trailing
//! headers"): a GET with a range, a presigned URL, a chunked upload whose seed and three
//! chunk signatures the documentation gives, and the same upload with a signed CRC32C
//! trailer; and aws-c-auth's vector for several trailers signed together.

use bytes::Bytes;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode, Piece, Unframer, announced_trailers};
use sluice_sign::aws_sigv4::{Canonicalization, Claim, Credentials, Head};

fn key() -> Credentials {
    Credentials::new(
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        None,
    )
}

fn verifies(head: &Head<'_>) -> bool {
    let claim = Claim::find(head).unwrap().unwrap();
    let payload = claim.payload_hash(None).unwrap();
    claim
        .verify(head, &payload, &key(), Canonicalization::for_service("s3"))
        .is_ok()
}

#[test]
fn the_documented_get_and_presigned_url_verify() {
    let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let get = Head {
        method: "GET",
        host: "examplebucket.s3.amazonaws.com",
        path_and_query: "/test.txt",
        headers: vec![
            ("Range", "bytes=0-9"),
            ("x-amz-content-sha256", empty),
            ("x-amz-date", "20130524T000000Z"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
            ),
        ],
    };
    assert!(verifies(&get));
    let presigned = Head {
        method: "GET",
        host: "examplebucket.s3.amazonaws.com",
        path_and_query: "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
        headers: vec![],
    };
    assert!(verifies(&presigned));
}

#[test]
fn the_documented_chunked_upload_verifies_chunk_by_chunk() {
    let signatures = [
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ];
    let head = Head {
        method: "PUT",
        host: "s3.amazonaws.com",
        path_and_query: "/examplebucket/chunkObject.txt",
        headers: vec![
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("Content-Encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("Content-Length", "66824"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
            ),
        ],
    };
    assert!(verifies(&head));
    let claim = Claim::find(&head).unwrap().unwrap();
    assert!(claim.payload().signed_chunks());

    let mut body = Vec::new();
    for (size, signature) in [65536, 1024, 0].into_iter().zip(signatures) {
        body.extend_from_slice(format!("{size:x};chunk-signature={signature}\r\n").as_bytes());
        body.extend(std::iter::repeat_n(b'a', size));
        body.extend_from_slice(b"\r\n");
    }
    assert_eq!(body.len(), 66824, "the documented Content-Length");

    let mut unframer = Unframer::new(Mode::Signed, 1 << 20);
    let mut pieces = Vec::new();
    unframer.push(&Bytes::from(body), &mut pieces).unwrap();
    unframer.finish().unwrap();
    let mut chain = ChunkChain::new(&key(), &claim, claim.signature());
    let (mut data, mut claimed) = (Vec::new(), None);
    let mut checked = 0;
    for piece in pieces {
        match piece {
            Piece::Chunk { signature, .. } => claimed = signature,
            Piece::Data(d) => data.extend_from_slice(&d),
            Piece::ChunkEnd => {
                let chunk = Bytes::from(std::mem::take(&mut data));
                chain.check(&chunk, claimed.as_deref().unwrap()).unwrap();
                checked += 1;
            }
            Piece::Trailer(_) | Piece::TrailerSignature(_) => {
                unreachable!("signed chunks carry no trailer")
            }
        }
    }
    assert_eq!(checked, 3);

    // One byte changed in the second chunk breaks the chain there.
    let mut chain = ChunkChain::new(&key(), &claim, claim.signature());
    chain
        .check(&Bytes::from(vec![b'a'; 65536]), signatures[0])
        .unwrap();
    let mut altered = vec![b'a'; 1024];
    altered[1023] = b'b';
    assert!(chain.check(&Bytes::from(altered), signatures[1]).is_err());
}

/// AWS's signed-trailer example ("Signature calculation: including trailing headers"): the
/// seed, three chunk signatures over 64 KiB and 1 KiB of `a` and the empty last chunk, and
/// the CRC32C trailer's signature, each recomputed here from the one before.
#[test]
fn the_documented_signed_trailer_upload_verifies_chunk_by_chunk_and_its_trailer() {
    let signatures = [
        "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
        "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
        "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
    ];
    let trailer_signature = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435";
    let head = Head {
        method: "PUT",
        host: "s3.amazonaws.com",
        path_and_query: "/examplebucket/chunkObject.txt",
        headers: vec![
            ("x-amz-date", "20130524T000000Z"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            (
                "x-amz-content-sha256",
                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
            ),
            ("Content-Encoding", "aws-chunked"),
            ("x-amz-decoded-content-length", "66560"),
            ("x-amz-trailer", "x-amz-checksum-crc32c"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer,Signature=106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
            ),
        ],
    };
    assert!(verifies(&head));
    let claim = Claim::find(&head).unwrap().unwrap();

    let mut body = Vec::new();
    for (size, signature) in [65536, 1024].into_iter().zip(signatures) {
        body.extend_from_slice(format!("{size:x};chunk-signature={signature}\r\n").as_bytes());
        body.extend(std::iter::repeat_n(b'a', size));
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(
        format!(
            "0;chunk-signature={}\r\nx-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:{trailer_signature}\r\n\r\n",
            signatures[2]
        )
        .as_bytes(),
    );
    assert_eq!(body.len(), 66946, "the documented body's length");

    let mut unframer = Unframer::new(Mode::SignedTrailer, 1 << 20);
    let mut pieces = Vec::new();
    unframer.push(&Bytes::from(body), &mut pieces).unwrap();
    unframer.finish().unwrap();
    let mut chain = ChunkChain::new(&key(), &claim, claim.signature());
    let (mut data, mut claimed, mut trailers, mut checked) = (Vec::new(), None, Vec::new(), 0);
    for piece in pieces {
        match piece {
            Piece::Chunk { signature, .. } => claimed = signature,
            Piece::Data(d) => data.extend_from_slice(&d),
            Piece::ChunkEnd => {
                chain.check(&data, claimed.as_deref().unwrap()).unwrap();
                data.clear();
                checked += 1;
            }
            Piece::Trailer(line) => trailers.push(line),
            Piece::TrailerSignature(signature) => {
                announced_trailers(Some("x-amz-checksum-crc32c"), &trailers).unwrap();
                chain.check_trailer(&trailers, &signature).unwrap();
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4);
}

/// aws-c-auth's trailing-headers vector: three trailers signed on from the last chunk
/// signature of AWS's chunked example, sorted by name, each `name:value\n`.
#[test]
fn several_trailers_are_signed_as_aws_c_auth_signs_them() {
    let head = Head {
        method: "PUT",
        host: "s3.amazonaws.com",
        path_and_query: "/examplebucket/chunkObject.txt",
        headers: vec![
            ("x-amz-date", "20130524T000000Z"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-date,Signature=0000000000000000000000000000000000000000000000000000000000000000",
            ),
        ],
    };
    let claim = Claim::find(&head).unwrap().unwrap();
    let last_chunk = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9";
    let mut chain = ChunkChain::new(&key(), &claim, last_chunk);
    let trailers = ["third:3rd", "first:1st", "second:2nd"].map(str::to_owned);
    assert_eq!(
        chain.sign_trailer(&trailers).unwrap(),
        "df5735bd9f3295cd9386572292562fefc93ba94e80a0a1ddcbd652c4e0a75e6c"
    );
}
