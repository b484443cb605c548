//! `sluice completions SHELL` and `sluice man`: made from the CLI definition itself, so every
//! subcommand and flag is in them, and none of the internal ones.

use std::process::Command;

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");

fn stdout(args: &[&str]) -> String {
    let out = Command::new(SLUICE).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_for_every_shell_name_the_subcommands_and_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        for word in [
            "serve",
            "check",
            "redact",
            "admin",
            "no-watch",
            "max-connections",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        assert!(
            !script.contains("__jail-helper"),
            "{shell} offers an internal command"
        );
    }
    let refused = Command::new(SLUICE)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let page = stdout(&["man"]);
    assert!(page.contains(".TH sluice 1"), "{page}");
    for subcommand in [
        "run",
        "serve",
        "check",
        "redact",
        "audit",
        "demo",
        "completions",
    ] {
        assert!(
            page.contains(&format!("sluice\\-{subcommand}")) || page.contains(subcommand),
            "no {subcommand}"
        );
    }
    assert!(!page.contains("jail\\-helper") && !page.contains("jail-helper"));
}
