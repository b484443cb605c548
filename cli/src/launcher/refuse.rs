//! The launches refused before anything starts: a secret whose sinks this launcher cannot
//! serve, a real value in CMD's argv, and the value of a variable withheld from CMD in its
//! argv. Each names the secret or variable (and the argument's index), never a value; none
//! starts the proxy or the command.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use sluice_guard::Guard;
use sluice_policies::credentials::Suspicion;
use sluice_policies::{Policy, Sink};

use super::LaunchError;

/// Refuses a declaration with secrets whose sinks the launcher does not serve (`prompt`,
/// `agent`, `params` alone): the command would get a placeholder that nothing resolves.
pub(super) fn refuse_unserved(policy: &Policy) -> Result<(), LaunchError> {
    let unserved = policy.unserved(&Sink::LAUNCHER);
    if unserved.is_empty() {
        Ok(())
    } else {
        Err(LaunchError::Unserved {
            secrets: unserved.join("; "),
        })
    }
}

/// Refuses a command whose argv holds a known value (in any encoding the guard knows, in
/// any letter case) of a secret not granted `command`. argv is never rewritten: a changed
/// argument would change what the command does.
pub(super) fn refuse_values_in_argv(
    policy: &Policy,
    guard: &Guard,
    argv: &[OsString],
) -> Result<(), LaunchError> {
    let mut found = Vec::new();
    for (index, argument) in argv.iter().enumerate() {
        for id in guard.values_in_name(argument.as_bytes()) {
            let secret = guard.name(id);
            if policy.may_sink(secret, Sink::Command).is_err() {
                found.push(format!(
                    "argument {index} of the command (the program is 0) holds the value of secret {secret}"
                ));
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(LaunchError::ValueInArgv {
            arguments: found.join("; "),
        })
    }
}

/// The shortest withheld value looked for in argv: shorter ones (`1`, `true`, a port) would
/// match arguments that merely contain them.
const MIN_WITHHELD_LEN: usize = 8;

/// Refuses a command whose argv holds the value of a variable withheld from its environment
/// (a credential-like variable of the operator's shell that no declaration names): withheld
/// from the environment, it must not arrive in argv instead. `--pass-env NAME` passes it on
/// purpose (it is then not withheld).
pub(super) fn refuse_withheld_in_argv(
    withheld: &[(OsString, Suspicion)],
    argv: &[OsString],
) -> Result<(), LaunchError> {
    let mut found = Vec::new();
    for (name, _) in withheld {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let value = value.as_bytes();
        if value.len() < MIN_WITHHELD_LEN {
            continue;
        }
        for (index, argument) in argv.iter().enumerate() {
            let holds = argument
                .as_bytes()
                .windows(value.len())
                .any(|window| window == value);
            if holds {
                found.push(format!(
                    "argument {index} of the command (the program is 0) holds the value of {}, which is withheld from the command",
                    name.to_string_lossy()
                ));
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(LaunchError::WithheldInArgv {
            arguments: found.join("; "),
        })
    }
}
