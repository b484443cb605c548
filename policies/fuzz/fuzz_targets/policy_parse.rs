//! `Policy::parse` on any text: it never panics, and every diagnostic it returns points
//! inside the text it was given.
//!
//! The input is the fuzzer's bytes, read as UTF-8 with invalid sequences replaced (so that
//! every input reaches the parser; `Policy::load` refuses non-UTF-8 files before parsing).
//! Then, for errors and warnings alike:
//!
//! - the line is one of the text's lines (1-based; YAML ends a line at LF, CRLF or CR), and
//!   the column is within that line, or just past its last character (1-based, counted in
//!   characters);
//! - the diagnostic renders as `fuzz.yaml:LINE:COL: error|warning: ...` with a `help:` line.
//!
//! A declaration that loads is then asked the questions the proxy asks of it, none of
//! which may panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_policies::{Diagnostic, Location, Policy, RequestLine, Severity, Sink};

const FILE: &str = "fuzz.yaml";

/// The length in characters of each line, as YAML counts lines.
fn line_lengths(text: &str) -> Vec<u64> {
    let mut lengths = vec![0u64];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lengths.push(0);
            }
            '\n' => lengths.push(0),
            _ => *lengths.last_mut().expect("never empty") += 1,
        }
    }
    lengths
}

fn check_position(diagnostic: &Diagnostic, lines: &[u64]) {
    assert_eq!(diagnostic.file, FILE);
    let line = diagnostic.line;
    let column = diagnostic.column;
    assert!(
        line >= 1 && line <= lines.len() as u64,
        "line {line} outside the text's {} lines: {diagnostic}",
        lines.len()
    );
    let width = lines[(line - 1) as usize];
    assert!(
        column >= 1 && column <= width + 1,
        "column {column} outside line {line} of {width} characters: {diagnostic}"
    );
    let shown = diagnostic.to_string();
    // Errors, warnings and notes each say which they are, in the same place.
    let severity = match diagnostic.severity() {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    };
    assert!(
        shown.starts_with(&format!("{FILE}:{line}:{column}: {severity}: ")),
        "{shown}"
    );
    assert!(shown.contains("\n  help: "), "{shown}");
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = line_lengths(&text);
    match Policy::parse(&text, FILE) {
        Err(diagnostics) => {
            assert!(
                diagnostics.has_errors(),
                "a refused declaration names at least one error: {diagnostics}"
            );
            for diagnostic in &diagnostics.0 {
                check_position(diagnostic, &lines);
            }
        }
        Ok(loaded) => {
            for warning in &loaded.warnings {
                assert!(
                    !warning.is_error(),
                    "an error in a loaded declaration: {warning}"
                );
                check_position(warning, &lines);
            }
            let policy = loaded.policy;
            let _ = policy.intercepted_hosts();
            for host in [
                "api.example.com",
                "Api.Example.COM.",
                "127.0.0.1",
                "[::1]",
                "xn--e1a",
            ] {
                let _ = policy.reach(host, 443);
                let _ = policy.is_verbatim(host, 443);
                // Request lines from the input's own lines (each from its first `/`):
                // paths the rules must weigh without panicking, however they are spelled.
                let lines_of_input: Vec<RequestLine<'_>> = text
                    .lines()
                    .filter_map(|line| line.find('/').map(|at| &line[at..]))
                    .take(4)
                    .map(|path| RequestLine::new("GET", path))
                    .collect();
                for secret in policy.secrets() {
                    let header = Location::Header("authorization".into());
                    for location in [header, Location::Query, Location::Body] {
                        for line in &lines_of_input {
                            let _ = policy.may(secret.name(), Sink::Egress, host, 443, &location, line);
                        }
                    }
                    let line = RequestLine::new("POST", "/");
                    let _ = policy.may(secret.name(), Sink::Command, host, 443, &Location::Body, &line);
                }
            }
        }
    }
});
