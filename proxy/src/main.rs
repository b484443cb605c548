//! The `sluice` command.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    sluice_proxy::cli::main()
}
