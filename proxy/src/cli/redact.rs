//! `sluice redact --policy FILE`: copies stdin to stdout through the guard, turning every
//! known secret value (and its encodings) into its placeholder, for launchers other than
//! sluice's own.
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
    let policy = match Policy::load(&args.policy) {
        Ok(loaded) => loaded.policy,
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            eprintln!(
                "sluice redact: {} is not a valid declaration; run `sluice check {}`",
                args.policy.display(),
                args.policy.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let placeholders = match policy.try_mint_placeholders() {
        Ok(p) => p,
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
