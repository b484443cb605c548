//! `sluice demo`: runs [`crate::demo`] and turns its outcome into an exit code — 0 when
//! every step behaved, 1 naming each step that did not (or what kept the stage from being
//! set). The story goes to stdout, the verdict on failure to stderr.

use std::process::ExitCode;

use crate::demo::{self, DemoError, Options};

pub(crate) fn run(args: &super::DemoArgs) -> ExitCode {
    init_quiet_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sluice demo: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let outcome = runtime.block_on(demo::run(Options { keep: args.keep }, &mut stdout));
    drop(stdout);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(DemoError::Steps(failures)) => {
            eprintln!(
                "sluice demo failed: {} of {} steps did not behave as expected:",
                failures.len(),
                demo::Step::ALL.len()
            );
            for failure in &failures {
                eprintln!("  {}:", failure.step);
                for problem in &failure.problems {
                    eprintln!("    - {problem}");
                }
            }
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("sluice demo failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The proxy's own logs stay out of the story unless something is wrong (`warn`), or the
/// user asks for them with `RUST_LOG`.
fn init_quiet_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
