//! `sluice redact`: copies stdin to stdout through the guard, turning every known secret
//! value (and its encodings) into its placeholder, for launchers other than sluice's own.
//! With `--run-dir DIR` (or `--admin-url-file FILE`) through a running proxy's admin
//! endpoint (`POST /v1/redact`), so that its guard and its placeholders are used: the one
//! choke point; with `--policy FILE` with a guard of its own.
//!
//! It streams: each chunk is written as soon as the guard has decided it, holding back at
//! most the longest pattern minus one byte; the input is never buffered whole. It never
//! prints a value: errors name secrets and files only.

use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use sluice_guard::Rewriter;
use sluice_policies::Policy;

/// Bytes read from stdin at a time.
const CHUNK: usize = 64 * 1024;

/// Exit 0 when the whole input was copied; 1 when the declaration, a secret source or
/// an I/O operation failed.
pub(crate) fn run(args: &super::RedactArgs) -> ExitCode {
    let url_file = crate::admin::url_file(args.run_dir.as_deref(), args.admin_url_file.as_deref());
    if let Some(file) = url_file {
        return match through_admin(&file) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice redact: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(policy_path) = &args.policy else {
        eprintln!("sluice redact: give --policy FILE, --run-dir DIR or --admin-url-file FILE");
        return ExitCode::FAILURE;
    };
    let policy = match Policy::load(policy_path) {
        Ok(loaded) => loaded.policy,
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            eprintln!(
                "sluice redact: {} is not a valid declaration; run `sluice check {}`",
                policy_path.display(),
                policy_path.display()
            );
            return ExitCode::FAILURE;
        }
    };
    // Minted as a run mints them: shaped like their values where the form says so, so that
    // a value is redacted into the same form of placeholder a run's sandbox would see.
    let placeholders = match policy.resolve_minting(&sluice_policies::Placeholders::from_iter([])) {
        Ok((placeholders, _)) => placeholders,
        Err(e) => {
            eprintln!("sluice redact: {e}");
            return ExitCode::FAILURE;
        }
    };
    let guard = match policy.build_guard(&placeholders) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("sluice redact: {e}");
            return ExitCode::FAILURE;
        }
    };
    match stream(Rewriter::redactor(guard)) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed stdout (e.g. `| head`) ends the copy quietly, as cat does.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice redact: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Copies stdin to stdout through `redactor`, flushing after every chunk.
fn stream(mut redactor: Rewriter) -> io::Result<()> {
    let mut stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    let mut input = vec![0u8; CHUNK];
    let mut output = Vec::with_capacity(CHUNK);
    loop {
        let n = match stdin.read(&mut input) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        output.clear();
        redactor
            .push(&input[..n], &mut output)
            .map_err(io::Error::other)?;
        stdout.write_all(&output)?;
        stdout.flush()?;
    }
    output.clear();
    redactor.finish(&mut output).map_err(io::Error::other)?;
    stdout.write_all(&output)?;
    stdout.flush()
}

/// Streams stdin to the admin endpoint named in `url_file` (`http://USER:TOKEN@HOST:PORT`)
/// and its answer to stdout, as it comes.
fn through_admin(url_file: &std::path::Path) -> io::Result<()> {
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let crate::admin::Admin {
        addr,
        authorization,
    } = crate::admin::Admin::from_file(url_file)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("the admin endpoint at {addr}: {e}")))?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(io::Error::other)?;
        tokio::spawn(conn);
        let (mut input, body) = http_body_util::channel::Channel::<bytes::Bytes, io::Error>::new(4);
        tokio::spawn(async move {
            let mut stdin = tokio::io::stdin();
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stdin.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => {
                        if input
                            .send_data(bytes::Bytes::copy_from_slice(&buf[..n]))
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(e) => {
                        input.abort(e);
                        break;
                    }
                }
            }
        });
        let request = http::Request::post("/v1/redact")
            .header(http::header::HOST, addr.as_str())
            .header(http::header::AUTHORIZATION, authorization)
            .body(body)
            .map_err(io::Error::other)?;
        let response = send.send_request(request).await.map_err(io::Error::other)?;
        if !response.status().is_success() {
            return Err(io::Error::other(format!(
                "the admin endpoint answered {}",
                response.status()
            )));
        }
        let mut body = response.into_body();
        let mut stdout = tokio::io::stdout();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(io::Error::other)?;
            if let Some(data) = frame.data_ref() {
                stdout.write_all(data).await?;
                stdout.flush().await?;
            }
        }
        Ok(())
    })
}
