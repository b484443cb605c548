//! The worked examples of AWS's S3 SigV4 documentation ("Signature calculations for the
//! Authorization header", "Transferring payload in multiple chunks"): a GET with a range, a
//! presigned URL, and a chunked upload whose seed and three chunk signatures the
//! documentation gives.

use bytes::Bytes;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode, Piece, Unframer};
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
