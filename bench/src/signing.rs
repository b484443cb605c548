//! `sluice-bench signing`: what re-signing costs, each figure against a baseline measured in
//! the same run, through one sluice.
//!
//! - **Header-signed GET against a header swap**: small GETs over HTTP/1.1 at 16 kept-alive
//!   connections, alternately carrying a bearer placeholder that sluice swaps, and a SigV4
//!   `Authorization` by the placeholder key that sluice verifies and signs again with the real
//!   key. sluice's CPU per request (from its process's CPU time), the median round's.
//! - **A signed aws-chunked upload against an unsigned one**: one PUT of the same data,
//!   alternately `x-amz-content-sha256: UNSIGNED-PAYLOAD` (the body streams through the scan)
//!   and `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` in 64 KiB chunks (every chunk's placeholder
//!   signature checked and a real one written). The client's bytes, signatures included,
//!   are made before the clock starts, so the figure is sluice's. Throughput, the median
//!   round's.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http::{HeaderName, HeaderValue, Request};
use http_body_util::BodyExt;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use sluice_sign::aws_sigv4::chunked::ChunkChain;
use sluice_sign::aws_sigv4::{Credentials, Head, Scope, sign_as_client};
use tokio::net::TcpStream;

use tokio_rustls::TlsConnector;

use crate::child;
use crate::error::BenchError;
use crate::harness::{basic_auth, stand_in_value};
use crate::load::{self, ProxyAccess, Route, send_connect};
use crate::pki::{ClientTls, Proto, UPSTREAM_HOST};
use crate::sluice_peer::SECRET;
use crate::upstream::TOKEN_VAR;

/// The signing secret's name, and the variables its parts are read from.
const SIGNER: &str = "aws_bench";
const KEY_ID_VAR: &str = "SLUICE_BENCH_AWS_KEY_ID";
const SECRET_KEY_VAR: &str = "SLUICE_BENCH_AWS_SECRET";
/// The date every signature names: sluice re-signs with the request's own.
const DATE: &str = "20261202T120000Z";
/// Bytes per aws-chunked chunk, as SDKs send them.
const CHUNK: usize = 64 * 1024;

/// What `sluice-bench signing` takes.
#[derive(Debug, Args)]
pub(crate) struct SigningArgs {
    /// Rounds of each phase; the median round is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds per GET phase.
    #[arg(long, default_value_t = 3.0)]
    phase_secs: f64,
    /// The upload's size in MiB.
    #[arg(long, default_value_t = 256)]
    upload_mib: usize,
    /// A quick check that the benchmark works (one short round, a 4 MiB upload); the
    /// targets are not judged.
    #[arg(long)]
    smoke: bool,
}

/// One GET path's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Gets {
    requests_per_s: f64,
    cpu_us_per_request: f64,
    errors: u64,
}

/// One upload's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Upload {
    mib_per_s: f64,
    cpu_s: f64,
}

/// The declaration: the bench token swapped in `Authorization`, and a signing secret, both
/// toward the upstream.
fn declaration() -> String {
    format!(
        "version: 1\n\
         secrets:\n  \
           {SECRET}:\n    \
             from: {{ env: {TOKEN_VAR} }}\n    \
             hosts: [\"{UPSTREAM_HOST}\"]\n    \
             sinks: [egress]\n    \
             header: [Authorization]\n  \
           {SIGNER}:\n    \
             sign: aws-sigv4\n    \
             from:\n      \
               access_key_id: {{ env: {KEY_ID_VAR} }}\n      \
               secret_access_key: {{ env: {SECRET_KEY_VAR} }}\n    \
             hosts: [\"{UPSTREAM_HOST}\"]\n\
         egress:\n  \
           allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

/// Runs the benchmark and prints the report; exit 2 when a target is missed.
pub(crate) fn run(args: &SigningArgs) -> Result<ExitCode, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BenchError::peer("harness", e))?;
    let (rounds, phase, mib) = if args.smoke {
        (1, Duration::from_millis(250), 4)
    } else {
        (
            args.rounds.max(1),
            Duration::from_secs_f64(args.phase_secs),
            args.upload_mib,
        )
    };
    let (swap, signed, unsigned, chunked) = runtime.block_on(measure(rounds, phase, mib))?;
    println!("{}", render(swap, signed, unsigned, chunked, mib));
    if args.smoke {
        return Ok(ExitCode::SUCCESS);
    }
    let met = signed.cpu_us_per_request - swap.cpu_us_per_request <= 15.0
        && chunked.mib_per_s >= 0.8 * unsigned.mib_per_s;
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn render(swap: Gets, signed: Gets, unsigned: Upload, chunked: Upload, mib: usize) -> String {
    let more = signed.cpu_us_per_request - swap.cpu_us_per_request;
    let ratio = chunked.mib_per_s / unsigned.mib_per_s;
    let judge = |ok: bool| if ok { "met" } else { "MISSED" };
    format!(
        "| GET /small, HTTP/1.1, 16 connections | requests/s | sluice CPU µs/request | errors |\n\
         |---|---:|---:|---:|\n\
         | header swap (bearer placeholder) | {:.0} | {:.1} | {} |\n\
         | SigV4 header, verified and re-signed | {:.0} | {:.1} | {} |\n\
         \n\
         | PUT {mib} MiB, one connection | MiB/s | sluice CPU s |\n\
         |---|---:|---:|\n\
         | `UNSIGNED-PAYLOAD` | {:.1} | {:.2} |\n\
         | signed aws-chunked, 64 KiB chunks | {:.1} | {:.2} |\n\
         \n\
         | target | measured | |\n\
         |---|---:|---|\n\
         | re-signing ≤ 15 µs more CPU per request | {more:+.1} µs | {} |\n\
         | signed aws-chunked ≥ 0.8× unsigned | {ratio:.3}× | {} |",
        swap.requests_per_s,
        swap.cpu_us_per_request,
        swap.errors,
        signed.requests_per_s,
        signed.cpu_us_per_request,
        signed.errors,
        unsigned.mib_per_s,
        unsigned.cpu_s,
        chunked.mib_per_s,
        chunked.cpu_s,
        judge(more <= 15.0),
        judge(ratio >= 0.8),
    )
}

async fn measure(
    rounds: usize,
    phase: Duration,
    mib: usize,
) -> Result<(Gets, Gets, Upload, Upload), BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    let policy = dir.join("signing.yaml");
    std::fs::write(&policy, declaration()).map_err(BenchError::file(&policy))?;
    let sluice = crate::sluice_peer::spawn(&exe, dir, &value, |sluice| {
        sluice
            .arg("--policy")
            .arg(&policy)
            .env(KEY_ID_VAR, "AKIABENCHREALKEY0001")
            .env(SECRET_KEY_VAR, "bench/real/secret/access/key/0123456789ab");
    })
    .await?;
    let read = |name: &str| crate::harness::read_trimmed(dir, name);
    let placeholders = read("placeholders")?;
    let part = |name: &str| {
        placeholders
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{SIGNER}.{name}=")))
            .map(str::to_owned)
            .ok_or_else(|| BenchError::peer("sluice", format!("no placeholder for {name}")))
    };
    let key = Credentials::new(part("access_key_id")?, part("secret_access_key")?, None);
    let proxy = || ProxyAccess {
        addr: sluice.addr(),
        authorization: read("proxy-url").ok().map(|url| basic_auth(&url)),
    };
    let tls = ClientTls::trusting(&dir.join("ca.pem"))?;
    let swap = Arc::new(Route {
        proxy: Some(proxy()),
        tls: tls.clone(),
        upstream: upstream.addr(),
        authorization: HeaderValue::from_str(&format!("Bearer {}", read("placeholder")?))
            .map_err(|e| BenchError::peer("sluice", e))?,
        headers: Vec::new(),
    });
    let mut signed = Route {
        proxy: Some(proxy()),
        tls: tls.clone(),
        upstream: upstream.addr(),
        authorization: HeaderValue::from_static("-"),
        headers: Vec::new(),
    };
    let (authorization, headers) = signed_get(&signed.authority(), &key)?;
    signed.authorization = authorization;
    signed.headers = headers;
    let signed = Arc::new(signed);

    let pid = sluice
        .pid()
        .ok_or_else(|| BenchError::peer("sluice", "no process id"))?;
    let ticks_per_second = child::clock_ticks_per_second() as f64;
    let cpu = || child::cpu_ticks(pid).unwrap_or(0) as f64 / ticks_per_second;
    let (mut swaps, mut signs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (route, figures) in [(&swap, &mut swaps), (&signed, &mut signs)] {
            let before = cpu();
            let tally = load::small(route.clone(), Proto::H1, 16, 1, phase).await;
            let spent = cpu() - before;
            let requests = tally.latencies_ns.len().max(1) as f64;
            if tally.latencies_ns.is_empty() {
                return Err(BenchError::peer(
                    "sluice",
                    format!(
                        "no request answered: {}; sluice: {}",
                        tally.first_error.unwrap_or_default(),
                        sluice.stderr_tail()
                    ),
                ));
            }
            figures.push(Gets {
                requests_per_s: requests / tally.elapsed.as_secs_f64().max(1e-9),
                cpu_us_per_request: spent * 1e6 / requests,
                errors: tally.errors,
            });
        }
    }

    let upload_route = Route {
        proxy: Some(proxy()),
        tls,
        upstream: upstream.addr(),
        authorization: HeaderValue::from_static("-"),
        headers: Vec::new(),
    };
    let data = data(mib << 20);
    let unsigned_upload = unsigned(&upload_route.authority(), &key, &data)?;
    let chunked_upload = chunked(&upload_route.authority(), &key, &data)?;
    let (mut plain, mut framed) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (upload, figures) in [
            (&unsigned_upload, &mut plain),
            (&chunked_upload, &mut framed),
        ] {
            let before = cpu();
            let took = put(&upload_route, upload).await?;
            figures.push(Upload {
                mib_per_s: mib as f64 / took.as_secs_f64().max(1e-9),
                cpu_s: cpu() - before,
            });
        }
    }
    sluice.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    Ok((
        median_by(&mut swaps, |g| g.requests_per_s),
        median_by(&mut signs, |g| g.requests_per_s),
        median_by(&mut plain, |u| u.mib_per_s),
        median_by(&mut framed, |u| u.mib_per_s),
    ))
}

fn median_by<T: Copy>(rounds: &mut [T], key: impl Fn(&T) -> f64) -> T {
    rounds.sort_by(|a, b| key(a).total_cmp(&key(b)));
    rounds[rounds.len() / 2]
}

/// The SigV4 headers of `GET /small` toward `authority`, signed by `key` as an S3 client
/// signs (an unsigned payload).
fn signed_get(
    authority: &str,
    key: &Credentials,
) -> Result<(HeaderValue, Vec<(HeaderName, HeaderValue)>), BenchError> {
    let fixed = [
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-date", DATE),
    ];
    let (authorization, _) = sign(authority, "GET", "/small", &fixed, "UNSIGNED-PAYLOAD", key)?;
    let headers = fixed
        .iter()
        .map(|(n, v)| (HeaderName::from_static(n), HeaderValue::from_static(v)))
        .collect();
    Ok((authorization, headers))
}

/// `sign_as_client` over `method path` toward `authority` with `headers` (all signed).
fn sign(
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
fn data(len: usize) -> Bytes {
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
struct Prepared {
    headers: Vec<(HeaderName, HeaderValue)>,
    frames: Vec<Bytes>,
    length: u64,
}

fn unsigned(authority: &str, key: &Credentials, data: &Bytes) -> Result<Prepared, BenchError> {
    let length = data.len().to_string();
    let fixed = [
        ("content-length", length.as_str()),
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-date", DATE),
    ];
    let (authorization, _) = sign(authority, "PUT", "/upload", &fixed, "UNSIGNED-PAYLOAD", key)?;
    Ok(Prepared {
        headers: head_of(&fixed, authorization)?,
        frames: (0..data.len())
            .step_by(CHUNK)
            .map(|at| data.slice(at..(at + CHUNK).min(data.len())))
            .collect(),
        length: data.len() as u64,
    })
}

fn chunked(authority: &str, key: &Credentials, data: &Bytes) -> Result<Prepared, BenchError> {
    let chunks = data.len().div_ceil(CHUNK);
    // Each chunk line is `HEX;chunk-signature=` and 64 hex digits, CRLF; data; CRLF.
    let line = |size: usize| format!("{size:x}").len() + 17 + 64 + 2;
    let full = line(CHUNK) + CHUNK + 2;
    let last_size = data.len() - (chunks - 1) * CHUNK;
    let encoded = (chunks - 1) * full + line(last_size) + last_size + 2 + line(0) + 2;
    let (length, decoded) = (encoded.to_string(), data.len().to_string());
    let fixed = [
        ("content-encoding", "aws-chunked"),
        ("content-length", length.as_str()),
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        ("x-amz-date", DATE),
        ("x-amz-decoded-content-length", decoded.as_str()),
    ];
    let marker = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
    let (authorization, claim) = sign(authority, "PUT", "/upload", &fixed, marker, key)?;
    let mut chain = ChunkChain::new(key, &claim, claim.signature());
    let mut frames = Vec::with_capacity(chunks + 1);
    let mut at = 0;
    loop {
        let chunk = data.slice(at..(at + CHUNK).min(data.len()));
        at += chunk.len();
        let signature = chain.sign(&chunk);
        let mut frame = format!("{:x};chunk-signature={signature}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(&chunk);
        frame.extend_from_slice(b"\r\n");
        frames.push(Bytes::from(frame));
        if chunk.is_empty() {
            break;
        }
    }
    debug_assert_eq!(frames.iter().map(Bytes::len).sum::<usize>(), encoded);
    Ok(Prepared {
        headers: head_of(&fixed, authorization)?,
        frames,
        length: encoded as u64,
    })
}

fn head_of(
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
/// from the first byte sent to the answer.
async fn put(route: &Route, upload: &Prepared) -> Result<Duration, BenchError> {
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
    let tls = TlsConnector::from(route.tls.config(Proto::H1))
        .connect(name, tcp)
        .await
        .map_err(|e| BenchError::Request(format!("TLS inside the tunnel: {e}")))?;
    let (mut send, conn) = http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| BenchError::Request(format!("HTTP/1.1 handshake: {e}")))?;
    tokio::spawn(conn);
    let body = Frames(upload.frames.iter().cloned().collect());
    let mut request = Request::put("/upload")
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
    let counted = String::from_utf8_lossy(&body).trim().parse::<u64>().ok();
    if !status.is_success() || counted != Some(upload.length) {
        return Err(BenchError::Request(format!(
            "PUT /upload answered {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(took)
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
