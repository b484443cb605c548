//! The uploads of `sluice-bench signing`, made before the clock starts: the same data as an
//! `UNSIGNED-PAYLOAD` PUT, as signed aws-chunks, and as signed aws-chunks with a signed CRC32
//! trailer; and the PUT that sends one through its own tunnel.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request};
use http_body_util::BodyExt;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use sluice_sign::aws_sigv4::chunked::ChunkChain;
use sluice_sign::aws_sigv4::{Claim, Credentials, Head, Scope, sign_as_client};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{CHUNK, DATE};
use crate::error::BenchError;
use crate::load::{Route, send_connect};
use crate::pki::{Proto, UPSTREAM_HOST};

/// The trailer a signed-trailer upload announces and sends.
const TRAILER: &str = "x-amz-checksum-crc32";

/// `sign_as_client` over `method path` toward `authority` with `headers` (all signed).
pub(super) fn sign(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    payload: &str,
    key: &Credentials,
) -> Result<(HeaderValue, sluice_sign::aws_sigv4::Claim), BenchError> {
    let head = Head {
        method,
        host: authority,
        path_and_query: path,
        headers: headers.to_vec(),
    };
    let mut names: Vec<&str> = headers.iter().map(|(n, _)| *n).chain(["host"]).collect();
    names.sort_unstable();
    let scope = Scope {
        date: DATE[..8].to_owned(),
        region: "us-east-1".to_owned(),
        service: "s3".to_owned(),
    };
    let (authorization, claim) = sign_as_client(&head, scope, &names, payload, key)
        .map_err(|e| BenchError::peer("signer", e))?;
    let authorization =
        HeaderValue::from_str(&authorization).map_err(|e| BenchError::peer("signer", e))?;
    Ok((authorization, claim))
}

/// Deterministic, incompressible-looking bytes (xorshift).
pub(super) fn data(len: usize) -> Bytes {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

/// One upload, made before it is timed: its head and the frames of its body.
pub(super) struct Prepared {
    headers: Vec<(HeaderName, HeaderValue)>,
    frames: Vec<Bytes>,
    length: u64,
    /// The upstream is asked for the digest of what it received (a signed-trailer upload,
    /// checked byte for byte against the real key's framing).
    digest: bool,
    /// What the signature says (its scope and date: a chain by another key follows them).
    pub(super) claim: Claim,
}

pub(super) fn unsigned(
    authority: &str,
    key: &Credentials,
    data: &Bytes,
) -> Result<Prepared, BenchError> {
    let length = data.len().to_string();
    let fixed = [
        ("content-length", length.as_str()),
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-date", DATE),
    ];
    let (authorization, claim) =
        sign(authority, "PUT", "/upload", &fixed, "UNSIGNED-PAYLOAD", key)?;
    Ok(Prepared {
        headers: head_of(&fixed, authorization)?,
        frames: (0..data.len())
            .step_by(CHUNK)
            .map(|at| data.slice(at..(at + CHUNK).min(data.len())))
            .collect(),
        length: data.len() as u64,
        digest: false,
        claim,
    })
}

/// `data` as signed aws-chunks of 64 KiB by `key`, with a signed CRC32 trailer when
/// `trailer` (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`).
pub(super) fn chunked(
    authority: &str,
    key: &Credentials,
    data: &Bytes,
    trailer: bool,
) -> Result<Prepared, BenchError> {
    let checksum = {
        use base64::Engine;
        let crc = crc32fast::hash(data);
        base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes())
    };
    let trailer_line = format!("{TRAILER}:{checksum}");
    let marker = if trailer {
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    } else {
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    };
    // Each chunk line is `HEX;chunk-signature=` and 64 hex digits, CRLF; data; CRLF. The
    // last line is followed by the trailer, its signature line, and the empty line.
    let line = |size: usize| format!("{size:x}").len() + 17 + 64 + 2;
    let chunks = data.len().div_ceil(CHUNK);
    let last_size = data.len() - chunks.saturating_sub(1) * CHUNK;
    let trailer_part = if trailer {
        trailer_line.len() + 2 + "x-amz-trailer-signature:".len() + 64 + 2
    } else {
        0
    };
    let encoded = chunks.saturating_sub(1) * (line(CHUNK) + CHUNK + 2)
        + if chunks > 0 {
            line(last_size) + last_size + 2
        } else {
            0
        }
        + line(0)
        + trailer_part
        + 2;
    let (length, decoded) = (encoded.to_string(), data.len().to_string());
    let mut fixed = vec![
        ("content-encoding", "aws-chunked"),
        ("content-length", length.as_str()),
        ("x-amz-content-sha256", marker),
        ("x-amz-date", DATE),
        ("x-amz-decoded-content-length", decoded.as_str()),
    ];
    if trailer {
        fixed.push(("x-amz-trailer", TRAILER));
    }
    // The upstream is asked for the digest of what it receives (signed: part of the target).
    let path = if trailer { "/upload?digest" } else { "/upload" };
    let (authorization, claim) = sign(authority, "PUT", path, &fixed, marker, key)?;
    let mut chain = ChunkChain::new(key, &claim, claim.signature());
    let frames = frame(data, &mut chain, trailer.then_some(trailer_line.as_str()));
    debug_assert_eq!(frames.iter().map(Bytes::len).sum::<usize>(), encoded);
    Ok(Prepared {
        headers: head_of(&fixed, authorization)?,
        frames,
        length: encoded as u64,
        digest: trailer,
        claim,
    })
}

/// `data` framed in 64 KiB chunks signed by `chain`, then the last chunk, then `trailer`
/// (a `name:value` line) and its signature when there is one.
pub(super) fn frame(data: &Bytes, chain: &mut ChunkChain, trailer: Option<&str>) -> Vec<Bytes> {
    let mut frames = Vec::with_capacity(data.len() / CHUNK + 2);
    let mut at = 0;
    loop {
        let chunk = data.slice(at..(at + CHUNK).min(data.len()));
        at += chunk.len();
        let signature = chain.sign(&chunk);
        let mut frame = format!("{:x};chunk-signature={signature}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(&chunk);
        if chunk.is_empty() {
            if let Some(line) = trailer {
                let trailer_signature = chain.sign_trailer(&[line.to_owned()]).unwrap_or_default();
                frame.extend_from_slice(
                    format!("{line}\r\nx-amz-trailer-signature:{trailer_signature}\r\n").as_bytes(),
                );
            }
            frame.extend_from_slice(b"\r\n");
            frames.push(Bytes::from(frame));
            return frames;
        }
        frame.extend_from_slice(b"\r\n");
        frames.push(Bytes::from(frame));
    }
}

/// The SHA-256 the upstream should report for a signed-trailer upload of `data` once sluice
/// has signed it again with `real` (the request's signature by it: `seed`).
pub(super) fn expected_digest(
    data: &Bytes,
    real: &Credentials,
    claim: &Claim,
    seed: &str,
) -> String {
    let checksum = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(crc32fast::hash(data).to_be_bytes())
    };
    let line = format!("{TRAILER}:{checksum}");
    let mut hasher = sluice_sign::aws_sigv4::chunked::ChunkHasher::new();
    for frame in frame(data, &mut ChunkChain::new(real, claim, seed), Some(&line)) {
        hasher.update(&frame);
    }
    hex::encode(hasher.finish())
}

pub(super) fn head_of(
    fixed: &[(&str, &str)],
    authorization: HeaderValue,
) -> Result<Vec<(HeaderName, HeaderValue)>, BenchError> {
    let mut headers = Vec::with_capacity(fixed.len() + 1);
    for (name, value) in fixed {
        headers.push((
            HeaderName::from_bytes(name.as_bytes()).map_err(|e| BenchError::peer("signer", e))?,
            HeaderValue::from_str(value).map_err(|e| BenchError::peer("signer", e))?,
        ));
    }
    headers.push((http::header::AUTHORIZATION, authorization));
    Ok(headers)
}

/// Sends `upload` through a tunnel of its own and waits for the upstream's count; the time
/// from the first byte sent to the answer, and the answer (`COUNT`, or `COUNT DIGEST SEED`
/// when the upstream was asked for the digest of what it received).
pub(super) async fn put(
    route: &Route,
    upload: &Prepared,
) -> Result<(Duration, String), BenchError> {
    let proxy = route
        .proxy
        .as_ref()
        .ok_or_else(|| BenchError::peer("harness", "the upload goes through sluice"))?;
    let mut tcp = TcpStream::connect(proxy.addr)
        .await
        .map_err(|e| BenchError::Request(format!("connect: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let authority = route.authority();
    let status = send_connect(&mut tcp, &authority, proxy.authorization.as_deref())
        .await
        .map_err(BenchError::Request)?;
    if status != 200 {
        return Err(BenchError::Request(format!("CONNECT answered {status}")));
    }
    let name = ServerName::try_from(UPSTREAM_HOST).map_err(|e| BenchError::Tls(e.to_string()))?;
    let mut tls = TlsConnector::from(route.tls.config(Proto::H1))
        .connect(name, tcp)
        .await
        .map_err(|e| BenchError::Request(format!("TLS inside the tunnel: {e}")))?;
    // Each frame in one write, as sluice's upstream leg writes them: rustls's default 64 KiB
    // bound would send a 64 KiB chunk and its size line in two.
    tls.get_mut().1.set_buffer_limit(Some(256 * 1024));
    let (mut send, conn) = http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| BenchError::Request(format!("HTTP/1.1 handshake: {e}")))?;
    tokio::spawn(conn);
    let body = Frames(upload.frames.iter().cloned().collect());
    let mut request = Request::put(if upload.digest {
        "/upload?digest"
    } else {
        "/upload"
    })
    .header(http::header::HOST, &authority)
    .body(body)
    .map_err(|e| BenchError::Request(e.to_string()))?;
    for (name, value) in &upload.headers {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let started = Instant::now();
    let response = send
        .send_request(request)
        .await
        .map_err(|e| BenchError::Request(format!("PUT /upload: {e}")))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| BenchError::Request(format!("PUT /upload answer: {e}")))?
        .to_bytes();
    let took = started.elapsed();
    // The upstream counts what arrived: the whole body, as framed.
    let answer = String::from_utf8_lossy(&body).trim().to_owned();
    let counted = answer
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<u64>().ok());
    if !status.is_success() || counted != Some(upload.length) {
        return Err(BenchError::Request(format!(
            "PUT /upload answered {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok((took, answer))
}

/// A body of frames made beforehand, sent as they are.
struct Frames(std::collections::VecDeque<Bytes>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use sluice_sign::aws_sigv4::chunked::{Mode, Piece, Unframer, announced_trailers};

    use super::*;

    /// What the benchmark sends is what a verifier accepts: every chunk signature, the
    /// trailer's, the announced trailer, and the length it signs.
    #[test]
    fn a_signed_trailer_upload_verifies_chunk_by_chunk() {
        let key = Credentials::new("AKIDPLACEHOLDER00001", "placeholder-secret", None);
        let data = data(3 * CHUNK + 17);
        let upload = chunked("localhost:443", &key, &data, true).unwrap();
        let body: Vec<u8> = upload.frames.iter().flat_map(|f| f.to_vec()).collect();
        assert_eq!(body.len() as u64, upload.length);
        let mut unframer = Unframer::new(Mode::SignedTrailer, 1 << 20);
        let mut pieces = Vec::new();
        unframer.push(&Bytes::from(body), &mut pieces).unwrap();
        unframer.finish().unwrap();
        let claim = &upload.claim;
        let mut chain = ChunkChain::new(&key, claim, claim.signature());
        let (mut chunk, mut claimed, mut trailers) = (Vec::new(), None, Vec::new());
        for piece in pieces {
            match piece {
                Piece::Chunk { signature, .. } => claimed = signature,
                Piece::Data(d) => chunk.extend_from_slice(&d),
                Piece::ChunkEnd => {
                    chain.check(&chunk, claimed.as_deref().unwrap()).unwrap();
                    chunk.clear();
                }
                Piece::Trailer(line) => trailers.push(line),
                Piece::TrailerSignature(s) => chain.check_trailer(&trailers, &s).unwrap(),
            }
        }
        announced_trailers(Some(TRAILER), &trailers).unwrap();
    }
}
