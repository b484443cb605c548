//! The `sluice` command line: argument definitions and dispatch to one handler per
//! subcommand. Handlers live beside this file, one per subcommand; each returns the
//! process exit code and prints its own diagnostics.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod audit;
mod check;
mod redact;

/// sluice: a TLS-inspecting egress proxy that swaps placeholders for secrets only toward the
/// hosts a declaration grants, and turns every secret that comes back into its placeholder.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a declaration: exit 0 when clean (warnings allowed), 1 with errors.
    Check(CheckArgs),
    /// Copy stdin to stdout, turning every known secret value into its placeholder.
    Redact(RedactArgs),
    /// Verify or summarise an audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
}

/// Arguments of `sluice check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The declaration to validate (YAML or JSON).
    pub(crate) file: PathBuf,
}

/// Arguments of `sluice redact`.
#[derive(Debug, Args)]
pub(crate) struct RedactArgs {
    /// The declaration whose secrets are redacted.
    #[arg(long)]
    pub(crate) policy: PathBuf,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the log's hash chain: exit 0 when it holds, 1 naming the first broken line.
    Verify(AuditFileArgs),
    /// Table what was swapped, refused and redacted, per secret and host.
    Summary(AuditSummaryArgs),
}

/// Arguments of `sluice audit verify`.
#[derive(Debug, Args)]
pub(crate) struct AuditFileArgs {
    /// The audit log (JSON Lines).
    pub(crate) file: PathBuf,
}

/// Arguments of `sluice audit summary`.
#[derive(Debug, Args)]
pub(crate) struct AuditSummaryArgs {
    /// The audit log (JSON Lines).
    pub(crate) file: PathBuf,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Parses the process arguments and runs the chosen subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Redact(args) => redact::run(&args),
        Command::Audit(AuditCommand::Verify(args)) => audit::verify(&args),
        Command::Audit(AuditCommand::Summary(args)) => audit::summary(&args),
    }
}
