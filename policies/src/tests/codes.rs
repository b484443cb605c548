//! Every diagnostic's `code` is unique and listed in docs/declaration.md (tools rely on the
//! list): read off the `code()` of each problem enum, as written.

const SOURCES: [&str; 7] = [
    include_str!("../error/mod.rs"),
    include_str!("../error/code.rs"),
    include_str!("../error/mint.rs"),
    include_str!("../error/budget.rs"),
    include_str!("../error/approve.rs"),
    include_str!("../error/pin.rs"),
    include_str!("../rules/problem.rs"),
];
const DOCS: &str = include_str!("../../../docs/declaration.md");

/// The codes each `code()` returns: the string after `=> "` on its lines.
fn codes() -> Vec<&'static str> {
    SOURCES
        .iter()
        .flat_map(|source| {
            // Each `code()` of the file, up to the end of its `impl`.
            source.split("pub fn code(&self)").skip(1).flat_map(|body| {
                body.lines()
                    .take_while(|line| *line != "}")
                    .filter_map(|line| line.split("=> \"").nth(1)?.split('"').next())
                    .collect::<Vec<_>>()
            })
        })
        .collect()
}

#[test]
fn every_code_is_unique_kebab_case_and_documented() {
    let codes = codes();
    assert!(codes.len() > 80, "{codes:?}");
    let mut seen = std::collections::BTreeSet::new();
    for code in &codes {
        assert!(seen.insert(code), "code {code} given twice");
        assert!(
            code.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{code}"
        );
        assert!(
            DOCS.contains(&format!("`{code}`")),
            "{code} is not in docs/declaration.md"
        );
    }
}

#[test]
fn a_diagnostic_carries_the_code_of_its_kind() {
    use crate::Policy;
    let cases = [
        ("version: 1\nsecrets:\n  x:\n    frm: 1\n", "unknown-key"),
        (
            "version: 1\nsecrets:\n  x:\n    from: { env: X }\n    sinks: [net]\n",
            "unknown-sink",
        ),
        (
            "version: 1\negress:\n  allow: [\"*.com\"]\n",
            "host-too-broad",
        ),
    ];
    for (yaml, code) in cases {
        let diagnostics = Policy::parse(yaml, "p.yaml").unwrap_err().0;
        assert_eq!(diagnostics[0].problem.code(), code, "{yaml}");
    }
}

#[test]
fn one_mistake_in_sinks_is_one_diagnostic() {
    use crate::Policy;
    // An unknown sink: not also "hosts needs egress" on the line below.
    let unknown = "version: 1\nsecrets:\n  x:\n    from: { env: X }\n    sinks: [Egress]\n    hosts: [a.test]\n";
    let diagnostics = Policy::parse(unknown, "p.yaml").unwrap_err().0;
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(
        (
            diagnostics[0].problem.code(),
            diagnostics[0].line,
            diagnostics[0].column
        ),
        ("unknown-sink", 5, 13)
    );
    // `sinks:` written empty: not also the "no sinks" warning.
    let empty =
        "version: 1\nsecrets:\n  x:\n    from: { env: X }\n    sinks:\n    hosts: [a.test]\n";
    let diagnostics = Policy::parse(empty, "p.yaml").unwrap_err().0;
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].problem.code(), "no-value");
}

#[test]
fn the_preview_says_which_of_command_and_file_the_launcher_serves() {
    use crate::Policy;
    let both = "version: 1\nsecrets:\n  x:\n    from: { env: X }\n    sinks: [command, file]\n";
    let policy = Policy::parse(both, "p.yaml").unwrap().policy;
    assert_eq!(
        policy.secrets()[0].grant_line(),
        "command, file; `sluice run` serves command (the value in the variable), not file"
    );
}
