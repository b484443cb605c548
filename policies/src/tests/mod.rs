//! Declaration-level tests: every error and lint with its line and column, the examples,
//! unknown keys at every nesting level, the grant and egress decisions, placeholders,
//! sources, and that no message ever carries a secret value.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::*;

mod approve;
mod budget;
mod codes;
mod github;
mod minted;
mod pin;
mod rules;
mod signing;
mod truthful;

/// A value that must never appear in any message.
const SECRET: &str = "Zq8r2LmXv9TpW4nKc7HsBd3Fy6Qa1b2c3d4e";
/// A literal with a real credential's shape (refused).
const GITHUB_SHAPED: &str = "ghp_Zq8r2LmXv9TpW4nKc7HsBd3Fy6Qa1b2c3d4e";

fn errors(src: &str) -> Diagnostics {
    match Policy::parse(src, "t.yaml") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(d) => d,
    }
}

fn warnings(src: &str) -> Vec<Diagnostic> {
    match Policy::parse(src, "t.yaml") {
        Ok(l) => l.warnings,
        Err(d) => panic!("unexpected errors:\n{d}"),
    }
}

/// The one diagnostic matching `pred`, asserting its position.
fn expect_at(diags: &[Diagnostic], line: u64, column: u64, pred: impl Fn(&Problem) -> bool) {
    let hits: Vec<&Diagnostic> = diags.iter().filter(|d| pred(&d.problem)).collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one matching diagnostic in {diags:#?}"
    );
    let d = hits[0];
    assert_eq!((d.line, d.column), (line, column), "wrong position for {d}");
    let text = d.to_string();
    assert!(
        text.starts_with(&format!("t.yaml:{line}:{column}: ")),
        "{text}"
    );
    assert!(text.contains("\n  help: "), "{text}");
}

const HEAD: &str = "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n";

// ---- examples ----

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_loads_without_errors_or_warnings() {
    let all = examples();
    for name in ["github.yaml", "model-api.yaml", "redact-only.yaml"] {
        assert!(
            all.iter().any(|p| p.ends_with(name)),
            "missing example {name}"
        );
    }
    for path in all {
        let loaded = Policy::load(&path).unwrap_or_else(|d| panic!("{}:\n{d}", path.display()));
        assert!(
            loaded.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            loaded.warnings
        );
        assert_eq!(loaded.policy.sha256_hex().len(), 64);
    }
}

#[test]
fn an_unknown_key_at_every_nesting_level_of_every_example_is_named() {
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut injected = 0;
        for (i, line) in lines.iter().enumerate() {
            let indent = line.len() - line.trim_start().len();
            let trimmed = line.trim_start();
            let is_key = trimmed.split_once(':').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            // Block mapping keys: inject a sibling before the line, unless the parent is
            // `secrets:` (whose keys are free secret names, not fixed keys).
            if is_key && !trimmed.starts_with('#') {
                let parent = lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty() && l.len() - l.trim_start().len() < indent);
                if parent.is_none_or(|p| p.trim() != "secrets:") {
                    let mut doc: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                    doc.insert(i, format!("{}zz_unknown: 1", " ".repeat(indent)));
                    check_unknown(&doc.join("\n"), i as u64 + 1, indent as u64 + 1, &path);
                    injected += 1;
                }
            }
            // Flow mappings: inject as the first entry.
            if let Some(col) = line.find("{ ") {
                let mut doc: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                doc[i] = format!("{}{{ zz_unknown: 1, {}", &line[..col], &line[col + 2..]);
                check_unknown(&doc.join("\n"), i as u64 + 1, col as u64 + 3, &path);
                injected += 1;
            }
        }
        assert!(
            injected >= 4,
            "{}: only {injected} injections",
            path.display()
        );
    }
}

fn check_unknown(src: &str, line: u64, column: u64, path: &Path) {
    let d = errors(src);
    let [diag] = &d.0[..] else {
        panic!("{}: expected one diagnostic, got {d}", path.display());
    };
    assert!(
        matches!(&diag.problem, Problem::UnknownKey { key, .. } if key == "zz_unknown"),
        "{}: {diag}",
        path.display()
    );
    assert_eq!(
        (diag.line, diag.column),
        (line, column),
        "{}: {diag}\n{src}",
        path.display()
    );
}

#[test]
fn json_is_accepted() {
    let json = r#"{
  "version": 1,
  "secrets": {
    "gh": { "from": { "env": "GH" }, "hosts": ["api.github.com"], "sinks": ["egress"] }
  },
  "egress": { "allow": ["pypi.org"], "allow_ips": ["127.0.0.1/32"] }
}"#;
    let loaded = Policy::parse(json, "p.json").unwrap();
    assert_eq!(loaded.policy.secrets()[0].name(), "gh");
    assert!(loaded.policy.ip_allowed("127.0.0.1".parse().unwrap()));
    let bad = json.replace("\"sinks\"", "\"sink\"");
    let d = errors(&bad);
    assert!(matches!(&d.0[0].problem, Problem::UnknownKey { key, .. } if key == "sink"));
    assert_eq!((d.0[0].line, d.0[0].column), (4, 67));
}

// ---- parse errors ----

#[test]
fn unknown_key_names_the_key_the_allowed_keys_and_the_position() {
    let d = errors(&format!("{HEAD}    hostz: [a.example.com]\n"));
    expect_at(
        &d.0,
        5,
        5,
        |p| matches!(p, Problem::UnknownKey { key, expected } if key == "hostz" && expected.contains("hosts")),
    );
    let d = errors("version: 1\negres: {}\n");
    expect_at(
        &d.0,
        2,
        1,
        |p| matches!(p, Problem::UnknownKey { key, .. } if key == "egres"),
    );
}

#[test]
fn duplicate_keys_syntax_errors_and_empty_files_are_positioned() {
    let d = errors("version: 1\nversion: 1\n");
    expect_at(
        &d.0,
        2,
        1,
        |p| matches!(p, Problem::DuplicateKey { key } if key == "version"),
    );
    let d = errors("version: 1\nsecrets:\n  a:\n    hosts: [x, y\n");
    expect_at(&d.0, 4, 12, |p| matches!(p, Problem::Syntax { .. }));
    let d = errors("version: 1\nsecrets:\n  a:\n    hosts: x\n");
    expect_at(
        &d.0,
        4,
        12,
        |p| matches!(p, Problem::Syntax { message } if message.contains("sequence")),
    );
    let d = errors("");
    expect_at(&d.0, 1, 1, |p| matches!(p, Problem::Empty));
}

// ---- validation errors ----

#[test]
fn version_must_be_present_and_one() {
    let d = errors("version: 2\n");
    expect_at(&d.0, 1, 10, |p| {
        matches!(p, Problem::UnsupportedVersion { found: 2 })
    });
    let d = errors("egress: {}\n");
    expect_at(&d.0, 1, 1, |p| matches!(p, Problem::MissingVersion));
    let d = errors("# nothing but a comment\n");
    expect_at(&d.0, 1, 1, |p| matches!(p, Problem::Empty));
}

#[test]
fn unknown_sink_and_location_are_positioned() {
    let d = errors(&format!(
        "{HEAD}    hosts: [a.example.com]\n    sinks: [egress, network]\n    in: [header, cookie]\n"
    ));
    expect_at(
        &d.0,
        6,
        21,
        |p| matches!(p, Problem::UnknownSink { found } if found == "network"),
    );
    expect_at(
        &d.0,
        7,
        18,
        |p| matches!(p, Problem::UnknownLocation { found } if found == "cookie"),
    );
}

#[test]
fn too_broad_host_patterns_are_refused() {
    let src = format!(
        "{HEAD}    hosts: [\"*\", \"*.com\", \"*.co.uk\", ok.example.com]\n    sinks: [egress]\negress:\n  allow:\n    - \"*.github.io\"\n"
    );
    let d = errors(&src);
    let broad = |pattern: &'static str| move |p: &Problem| matches!(p, Problem::Host(HostError::TooBroad { pattern: x, .. }) if x == pattern);
    expect_at(&d.0, 5, 13, broad("*"));
    expect_at(&d.0, 5, 18, broad("*.com"));
    expect_at(&d.0, 5, 27, broad("*.co.uk"));
    expect_at(&d.0, 9, 7, broad("*.github.io"));
}

#[test]
fn malformed_ports_are_refused() {
    let d = errors(&format!(
        "{HEAD}    hosts: [a.example.com:99999, \"b.example.com:\"]\n    sinks: [egress]\n"
    ));
    expect_at(
        &d.0,
        5,
        13,
        |p| matches!(p, Problem::Host(HostError::BadPort { port, .. }) if port == "99999"),
    );
    expect_at(
        &d.0,
        5,
        34,
        |p| matches!(p, Problem::Host(HostError::BadPort { port, .. }) if port.is_empty()),
    );
}

#[test]
fn a_secret_with_no_source_or_two_sources_is_refused() {
    let d =
        errors("version: 1\nsecrets:\n  gh:\n    hosts: [a.example.com]\n    sinks: [egress]\n");
    expect_at(
        &d.0,
        3,
        3,
        |p| matches!(p, Problem::NoSource { secret } if secret == "gh"),
    );
    let d = errors("version: 1\nsecrets:\n  gh:\n    from: {}\n    sinks: []\n");
    expect_at(&d.0, 4, 11, |p| matches!(p, Problem::NoSource { .. }));
    let d = errors("version: 1\nsecrets:\n  gh:\n    from: { env: A, file: /b }\n    sinks: []\n");
    expect_at(&d.0, 4, 27, |p| {
        matches!(
            p,
            Problem::TwoSources {
                first: "env",
                second: "file",
                ..
            }
        )
    });
    let d = errors(&format!(
        "{HEAD}    value: \"long enough value\"\n    sinks: []\n"
    ));
    expect_at(&d.0, 5, 12, |p| {
        matches!(
            p,
            Problem::TwoSources {
                first: "from",
                second: "value",
                ..
            }
        )
    });
    let d = errors("version: 1\nsecrets:\n  gh:\n    from: { env: \"\" }\n    sinks: []\n");
    expect_at(&d.0, 4, 18, |p| {
        matches!(p, Problem::EmptySource { key: "env", .. })
    });
}

#[test]
fn a_command_source_is_a_program_and_its_arguments_and_one_source_only() {
    let ok = policy(
        "version: 1\nsecrets:\n  gh:\n    from: { command: [op, read, \"op://vault/gh/token\"] }\n    sinks: []\n",
    );
    assert!(matches!(
        &ok.secrets()[0].source,
        crate::model::Source::Command(argv) if argv == &["op", "read", "op://vault/gh/token"]
    ));
    let d = errors("version: 1\nsecrets:\n  gh:\n    from: { command: [] }\n    sinks: []\n");
    expect_at(&d.0, 4, 22, |p| {
        matches!(p, Problem::EmptySource { key: "command", .. })
    });
    let d =
        errors("version: 1\nsecrets:\n  gh:\n    from: { command: [\"\", x] }\n    sinks: []\n");
    expect_at(&d.0, 4, 23, |p| {
        matches!(p, Problem::EmptySource { key: "command", .. })
    });
    let d =
        errors("version: 1\nsecrets:\n  gh:\n    from: { env: A, command: [op] }\n    sinks: []\n");
    expect_at(&d.0, 4, 30, |p| {
        matches!(
            p,
            Problem::TwoSources {
                first: "env",
                second: "command",
                ..
            }
        )
    });
    // A command that fails at launch is named with its status, never its output.
    let failing = policy(
        "version: 1\nsecrets:\n  gh:\n    from: { command: [sh, -c, \"echo out-of-a-failing-command; exit 4\"] }\n    sinks: []\n",
    );
    let error = failing
        .resolve(&failing.mint_placeholders())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("secret gh") && error.contains("exit status: 4"),
        "{error}"
    );
    assert!(!error.contains("out-of-a-failing-command"), "{error}");
}

#[test]
fn shared_placeholders_are_refused() {
    let src = "version: 1
secrets:
  a:
    from: { env: A }
    sinks: []
    placeholder: SAME_PLACEHOLDER_0001
  b:
    from: { env: B }
    sinks: []
    placeholder: SAME_PLACEHOLDER_0001
  c:
    from: { env: C }
    sinks: []
    placeholder: SAME_PLACEHOLDER_0001_LONGER
";
    let d = errors(src);
    expect_at(
        &d.0,
        10,
        18,
        |p| matches!(p, Problem::SharedPlaceholder { secret, other, .. } if secret == "b" && other == "a"),
    );
    expect_at(
        &d.0,
        14,
        18,
        |p| matches!(p, Problem::PlaceholderContains { secret, .. } if secret == "c"),
    );
    // Minted placeholders: `my-key` and `my_key` both mint SLUICE_MY_KEY_<nonce>.
    let d = errors(
        "version: 1\nsecrets:\n  my-key:\n    from: { env: A }\n    sinks: []\n  my_key:\n    from: { env: B }\n    sinks: []\n",
    );
    expect_at(
        &d.0,
        6,
        3,
        |p| matches!(p, Problem::SharedPlaceholder { placeholder, .. } if placeholder.starts_with("SLUICE_MY_KEY_")),
    );
}

#[test]
fn placeholders_must_be_long_and_of_the_safe_alphabet() {
    let d = errors(&format!(
        "{HEAD}    sinks: []\n    placeholder: \"PLACEHOLDER.WITH.DOTS\"\n"
    ));
    expect_at(&d.0, 6, 18, |p| {
        matches!(p, Problem::PlaceholderAlphabet { found: '.', .. })
    });
    let d = errors(&format!(
        "{HEAD}    sinks: []\n    placeholder: SHORT_ONE\n"
    ));
    expect_at(&d.0, 6, 18, |p| {
        matches!(
            p,
            Problem::PlaceholderTooShort {
                len: 9,
                min: 16,
                ..
            }
        )
    });
}

#[test]
fn placeholder_forms_are_words_and_a_literal_may_hold_a_dash() {
    for (written, form) in [
        ("shaped", PlaceholderForm::Shaped),
        ("plain", PlaceholderForm::Plain),
        (
            "PLACEHOLDER-WITH-DASH",
            PlaceholderForm::Fixed("PLACEHOLDER-WITH-DASH".into()),
        ),
    ] {
        let yaml = format!("{HEAD}    sinks: []\n    placeholder: {written}\n");
        let policy = Policy::parse(&yaml, "p.yaml").unwrap().policy;
        assert_eq!(policy.secrets()[0].placeholder_form(), &form, "{written}");
    }
    let yaml = format!("{HEAD}    sinks: []\n");
    let policy = Policy::parse(&yaml, "p.yaml").unwrap().policy;
    assert_eq!(
        policy.secrets()[0].placeholder_form(),
        &PlaceholderForm::Default
    );
}

#[test]
fn a_well_known_value_gets_a_placeholder_of_its_shape_unless_plain() {
    let dir = temp_dir("shaped");
    std::fs::write(dir.join("gh"), "ghp_REALrealREALrealREALrealREALreal1234").unwrap();
    std::fs::write(
        dir.join("other"),
        "ghp_OTHERotherOTHERotherOTHERotherOTHER1",
    )
    .unwrap();
    std::fs::write(dir.join("any"), "acme_live_0123456789abcdefABCDEF").unwrap();
    let decl = dir.join("policy.yaml");
    std::fs::write(
        &decl,
        "version: 1\nsecrets:\n  gh:\n    from: { file: gh }\n    sinks: []\n  other:\n    from: { file: other }\n    sinks: []\n    placeholder: plain\n  any:\n    from: { file: any }\n    sinks: []\n    placeholder: shaped\n",
    )
    .unwrap();
    let policy = Policy::load(&decl).unwrap().policy;
    let earlier = Placeholders::from_iter([]);
    let (placeholders, resolved) = policy.resolve_minting(&earlier).unwrap();
    let gh = placeholders.get("gh").unwrap();
    assert!(gh.starts_with("ghp_") && gh.len() == 40, "{gh}");
    assert!(crate::shape::checksum_holds(gh), "{gh}");
    assert!(
        placeholders
            .get("other")
            .unwrap()
            .starts_with("SLUICE_OTHER_")
    );
    let any = placeholders.get("any").unwrap();
    assert!(any.starts_with("acme_live_") && any.len() == 32, "{any}");
    assert_eq!(resolved.len(), 3);
    // A placeholder the run handed out already is kept, shaped or not.
    let kept = Placeholders::from_iter([("gh".to_owned(), gh.to_owned())]);
    let (again, _) = policy.resolve_minting(&kept).unwrap();
    assert_eq!(again.get("gh"), Some(gh));
    assert_ne!(again.get("any"), Some(any));
    // Minted without the values (before any is read), nothing is shaped.
    let unread = policy.mint_placeholders();
    assert!(unread.get("gh").unwrap().starts_with("SLUICE_GH_"));
}

#[test]
fn a_literal_value_shorter_than_8_bytes_is_refused() {
    let d = errors("version: 1\nsecrets:\n  k:\n    value: short\n    sinks: []\n");
    expect_at(&d.0, 4, 12, |p| {
        matches!(p, Problem::ValueTooShort { len: 5, min: 8, .. })
    });
}

#[test]
fn a_literal_value_with_cr_lf_or_nul_cannot_go_in_a_header() {
    for (esc, byte) in [("\\r", "CR"), ("\\n", "LF"), ("\\0", "NUL")] {
        let src = format!(
            "version: 1\nsecrets:\n  k:\n    value: \"first-line{esc}second-line\"\n    hosts: [a.example.com]\n    sinks: [egress]\n"
        );
        let d = errors(&src);
        expect_at(
            &d.0,
            4,
            12,
            |p| matches!(p, Problem::ValueUnfitForHeader { byte: b, .. } if *b == byte),
        );
    }
    // The same value is fine in the body, or redact-only.
    let body = "version: 1\nsecrets:\n  k:\n    value: \"first-line\\nsecond-line\"\n    hosts: [a.example.com]\n    sinks: [egress]\n    in: [body]\n";
    assert!(Policy::parse(body, "t.yaml").is_ok());
    let redact_only =
        "version: 1\nsecrets:\n  k:\n    value: \"first-line\\nsecond-line\"\n    sinks: []\n";
    assert!(Policy::parse(redact_only, "t.yaml").is_ok());
}

#[test]
fn an_egress_grant_that_cannot_be_served_is_refused() {
    let src = format!(
        "{HEAD}    hosts: [a.example.com, \"*.b.example.com\"]\n    sinks: [egress]\negress:\n  passthrough: [a.example.com, \"*.example.com\"]\n"
    );
    let d = errors(&src);
    expect_at(
        &d.0,
        5,
        12,
        |p| matches!(p, Problem::Unservable { secret } if secret == "gh"),
    );
    let d = errors(&format!("{HEAD}    sinks: [egress]\n"));
    expect_at(&d.0, 3, 3, |p| {
        matches!(p, Problem::EgressWithoutHosts { .. })
    });
    let d = errors(&format!(
        "{HEAD}    hosts: [a.example.com]\n    sinks: [egress]\n    in: []\n"
    ));
    expect_at(&d.0, 7, 9, |p| matches!(p, Problem::NoLocations { .. }));
}

#[test]
fn header_names_need_a_header_location_and_must_be_tokens() {
    let d = errors(&format!(
        "{HEAD}    hosts: [a.example.com]\n    sinks: [egress]\n    in: [body]\n    header: [Authorization]\n"
    ));
    expect_at(&d.0, 8, 13, |p| {
        matches!(p, Problem::HeaderNamesWithoutHeader { .. })
    });
    let d = errors(&format!(
        "{HEAD}    hosts: [a.example.com]\n    sinks: [egress]\n    header: [\"X Key\"]\n"
    ));
    expect_at(
        &d.0,
        7,
        14,
        |p| matches!(p, Problem::BadHeaderName { found, .. } if found == "X Key"),
    );
}

#[test]
fn egress_lists_are_checked() {
    let src = "version: 1\negress:\n  allow_ips: [127.0.0.1/32, 10.0.0.0/33, not-an-ip]\n  verbatim: [api.example.com]\n  passthrough: [\"*.example.com\"]\n";
    let d = errors(src);
    expect_at(
        &d.0,
        3,
        29,
        |p| matches!(p, Problem::BadCidr { found } if found == "10.0.0.0/33"),
    );
    expect_at(
        &d.0,
        3,
        42,
        |p| matches!(p, Problem::BadCidr { found } if found == "not-an-ip"),
    );
    expect_at(&d.0, 4, 14, |p| {
        matches!(p, Problem::VerbatimPassthrough { .. })
    });
}

#[test]
fn every_error_is_collected_not_only_the_first() {
    let src = "version: 3
secrets:
  a:
    hosts: [\"*\"]
    sinks: [egres]
  b:
    value: tiny
    sinks: []
";
    let d = errors(src);
    let kinds: Vec<(u64, &Problem)> = d.0.iter().map(|d| (d.line, &d.problem)).collect();
    assert!(
        kinds
            .iter()
            .any(|(l, p)| *l == 1 && matches!(p, Problem::UnsupportedVersion { .. }))
    );
    assert!(
        kinds
            .iter()
            .any(|(l, p)| *l == 3 && matches!(p, Problem::NoSource { .. }))
    );
    assert!(
        kinds
            .iter()
            .any(|(l, p)| *l == 4 && matches!(p, Problem::Host(_)))
    );
    assert!(
        kinds
            .iter()
            .any(|(l, p)| *l == 5 && matches!(p, Problem::UnknownSink { .. }))
    );
    assert!(
        kinds
            .iter()
            .any(|(l, p)| *l == 7 && matches!(p, Problem::ValueTooShort { .. }))
    );
    let lines: Vec<u64> = d.0.iter().map(|d| d.line).collect();
    assert!(
        lines.windows(2).all(|w| w[0] <= w[1]),
        "not in file order: {lines:?}"
    );
    assert!(d.0.iter().any(|d| d.path == "secrets.a.sinks[0]"));
}

// ---- lints ----

#[test]
fn a_literal_is_refused_with_a_credentials_shape_warned_as_words_and_noted_otherwise() {
    let e = errors(&format!(
        "version: 1\nsecrets:\n  k:\n    value: {GITHUB_SHAPED}\n    sinks: []\n"
    ));
    expect_at(
        &e.0,
        4,
        12,
        |p| matches!(p, Problem::CredentialLiteral { shape, .. } if shape.contains("GitHub")),
    );
    assert!(!e.to_string().contains(GITHUB_SHAPED));
    let w = warnings(&format!(
        "version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: []\n"
    ));
    expect_at(
        &w,
        4,
        12,
        |p| matches!(p, Problem::LiteralValue { why, .. } if why.contains("entropy")),
    );
    assert_eq!(w[0].severity(), Severity::Note);
    let w = warnings("version: 1\nsecrets:\n  k:\n    value: just-a-test-value\n    sinks: []\n");
    expect_at(&w, 4, 12, |p| matches!(p, Problem::CommonWordValue { .. }));
    assert_eq!(w[0].severity(), Severity::Warning);
    let w = warnings("version: 1\nsecrets:\n  k:\n    value: fixture-7f3k2p9q\n    sinks: []\n");
    expect_at(
        &w,
        4,
        12,
        |p| matches!(p, Problem::LiteralValue { why, .. } if why.is_empty()),
    );
    assert_eq!(w[0].severity(), Severity::Note);
}

#[test]
fn a_secret_without_sinks_is_linted_and_gets_egress() {
    let loaded = Policy::parse(&format!("{HEAD}    hosts: [a.example.com]\n"), "t.yaml").unwrap();
    expect_at(
        &loaded.warnings,
        3,
        3,
        |p| matches!(p, Problem::NoSinks { secret } if secret == "gh"),
    );
    let gh = &loaded.policy.secrets()[0];
    assert_eq!(gh.sinks(), &[Sink::Egress]);
    assert!(!gh.sinks_explicit());
    assert_eq!(gh.locations(), &[Place::Header]);
}

#[test]
fn a_secret_only_a_host_engine_can_serve_is_linted_and_one_the_launcher_serves_is_not() {
    let w = warnings(&format!("{HEAD}    sinks: [prompt, agent]\n"));
    expect_at(
        &w,
        5,
        12,
        |p| matches!(p, Problem::HostEngineOnly { secret, sinks } if secret == "gh" && sinks == "prompt, agent"),
    );
    for sinks in ["[]", "[prompt, command]", "[file]", "[params, file]"] {
        let w = warnings(&format!("{HEAD}    sinks: {sinks}\n"));
        assert!(
            !w.iter()
                .any(|d| matches!(d.problem, Problem::HostEngineOnly { .. })),
            "{sinks}: {w:#?}"
        );
    }
    let loaded = Policy::parse(&format!("{HEAD}    sinks: [params]\n"), "t.yaml").unwrap();
    let gh = &loaded.policy.secrets()[0];
    assert!(gh.unserved_by(&Sink::LAUNCHER));
    assert!(!gh.unserved_by(&[Sink::Params]));
}

#[test]
fn a_wildcard_broader_than_the_named_hosts_is_linted() {
    let src = format!(
        "{HEAD}    hosts: [\"*.example.com\"]\n    sinks: [egress]\negress:\n  allow: [api.example.com]\n"
    );
    let w = warnings(&src);
    expect_at(
        &w,
        5,
        13,
        |p| matches!(p, Problem::BroadWildcard { named, .. } if named == "api.example.com"),
    );
    let quiet = format!(
        "{HEAD}    hosts: [\"*.example.com\"]\n    sinks: [egress]\negress:\n  allow: [api.example.org]\n"
    );
    assert!(warnings(&quiet).is_empty());
}

#[test]
fn a_partly_passthrough_grant_and_an_open_metadata_address_are_linted() {
    let src = format!(
        "{HEAD}    hosts: [a.example.com, b.example.com]\n    sinks: [egress]\negress:\n  passthrough: [b.example.com]\n  allow_ips: [169.254.0.0/16]\n"
    );
    let w = warnings(&src);
    expect_at(
        &w,
        5,
        28,
        |p| matches!(p, Problem::PassthroughHost { host, .. } if host == "b.example.com"),
    );
    expect_at(&w, 9, 15, |p| {
        matches!(p, Problem::MetadataReachable { .. })
    });
}

// ---- no secret value in any message ----

#[test]
fn no_error_or_lint_message_ever_contains_a_secret_value() {
    let cases = [
        format!("version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: []\n"),
        format!(
            "version: 1\nsecrets:\n  k:\n    value: \"{SECRET}\\r\"\n    hosts: [a.example.com]\n    sinks: [egress]\n"
        ),
        format!(
            "version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    from: {{ env: X }}\n    sinks: []\n"
        ),
        format!(
            "version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    hosts: [\"*\"]\n    sinks: [bogus]\n"
        ),
        format!("version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: egress\n"),
        format!("version: 1\nsecrets:\n  k:\n    value: [{SECRET}]\n"),
        format!("version: 1\nsecrets:\n  k:\n    value: {{ v: {SECRET} }}\n"),
        format!("version: {SECRET}\n"),
        format!("version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: [{SECRET}]\n"),
    ];
    for src in &cases {
        let text = match Policy::parse(src, "t.yaml") {
            Ok(l) => Diagnostics(l.warnings).to_string(),
            Err(d) => d.to_string(),
        };
        assert!(!text.is_empty(), "no diagnostic for {src}");
        // The sinks case echoes what was written in `sinks:`, which is not a value; every
        // other message must not hold the value.
        if !src.contains(&format!("sinks: [{SECRET}]")) {
            assert!(!text.contains(SECRET), "value leaked:\n{text}");
            assert!(!text.contains(&SECRET[4..]), "value leaked:\n{text}");
        }
    }
    // Debug of the compiled policy does not print a literal value either.
    let loaded = Policy::parse(&cases[0], "t.yaml").unwrap();
    assert!(!format!("{:?}", loaded.policy).contains(SECRET));
}

// ---- egress decision ----

fn policy(src: &str) -> Policy {
    Policy::parse(src, "t.yaml")
        .unwrap_or_else(|d| panic!("{d}"))
        .policy
}

const GRANTS: &str = "version: 1
secrets:
  gh:
    from: { env: GH }
    hosts: [api.github.com, \"*.githubusercontent.com\"]
    sinks: [egress, command]
    in: [header, body]
    header: [Authorization]
  sandbox_key:
    from: { env: SK }
    hosts: [api.example.com:8443]
    sinks: [egress]
    in: [query]
  quiet:
    from: { env: Q }
    sinks: []
egress:
  allow: [pypi.org]
  verbatim: [api.anthropic.com]
  passthrough: [pinned.example.org]
  allow_ips: [127.0.0.1/32, \"::1/128\"]
";

#[test]
fn reach_intercepts_granted_and_allowed_hosts_and_denies_the_rest() {
    let p = policy(GRANTS);
    assert_eq!(p.reach("API.GitHub.com.", 443), Reach::Intercept);
    assert_eq!(p.reach("raw.githubusercontent.com", 443), Reach::Intercept);
    assert_eq!(p.reach("pypi.org", 443), Reach::Intercept);
    assert_eq!(p.reach("api.anthropic.com", 443), Reach::Intercept);
    assert_eq!(p.reach("pinned.example.org", 443), Reach::Passthrough);
    assert_eq!(p.reach("api.example.com", 8443), Reach::Intercept);
    assert!(matches!(
        p.reach("api.example.com", 443),
        Reach::Denied(Denied::NotAllowed { .. })
    ));
    assert!(matches!(
        p.reach("githubusercontent.com", 443),
        Reach::Denied(_)
    ));
    assert!(matches!(p.reach("evil.com", 443), Reach::Denied(_)));
    assert!(matches!(
        p.reach("bad host", 443),
        Reach::Denied(Denied::InvalidHost { .. })
    ));
    assert!(p.is_verbatim("API.Anthropic.com.", 443));
    assert!(!p.is_verbatim("api.github.com", 443));
}

#[test]
fn ip_allow_list_uses_documentation_and_loopback_ranges() {
    let p = policy(GRANTS);
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert!(p.ip_allowed(ip("127.0.0.1")));
    assert!(!p.ip_allowed(ip("127.0.0.2")));
    assert!(p.ip_allowed(ip("::1")));
    assert!(!p.ip_allowed(ip("192.0.2.10")));
    assert!(!p.ip_allowed(ip("169.254.169.254")));
    assert_eq!(p.allow_ips().len(), 2);
}

#[test]
fn intercepted_hosts_leave_out_passthrough() {
    let p = policy(GRANTS);
    let names: Vec<String> = p
        .intercepted_hosts()
        .iter()
        .map(ToString::to_string)
        .collect();
    for want in [
        "api.github.com",
        "*.githubusercontent.com",
        "api.example.com:8443",
        "pypi.org",
        "api.anthropic.com",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    assert!(!names.iter().any(|n| n.contains("pinned")));
}

// ---- grant decision: every allow paired with a deny ----

#[test]
fn may_grants_the_declared_host_and_refuses_another() {
    let p = policy(GRANTS);
    let auth = Location::Header("authorization".into());
    assert!(
        p.may_place("gh", Sink::Egress, "API.GITHUB.COM.", 443, &auth)
            .is_ok()
    );
    let r = p
        .may_place("gh", Sink::Egress, "evil.com", 443, &auth)
        .unwrap_err();
    assert!(matches!(r, Ungranted::HostNotGranted { .. }));
    assert_eq!(
        r.to_string(),
        "secret gh is not granted to host evil.com (port 443); add it to secrets.gh.hosts"
    );
}

#[test]
fn may_checks_the_port_when_the_grant_names_one() {
    let p = policy(GRANTS);
    assert!(
        p.may_place(
            "sandbox_key",
            Sink::Egress,
            "api.example.com",
            8443,
            &Location::Query
        )
        .is_ok()
    );
    let r = p.may_place(
        "sandbox_key",
        Sink::Egress,
        "api.example.com",
        443,
        &Location::Query,
    );
    assert!(matches!(
        r,
        Err(Ungranted::HostNotGranted { port: 443, .. })
    ));
}

#[test]
fn may_checks_the_location() {
    let p = policy(GRANTS);
    assert!(
        p.may_place("gh", Sink::Egress, "api.github.com", 443, &Location::Body)
            .is_ok()
    );
    let r = p
        .may_place("gh", Sink::Egress, "api.github.com", 443, &Location::Query)
        .unwrap_err();
    assert!(matches!(
        r,
        Ungranted::PlaceNotGranted { place: "query", .. }
    ));
    assert!(r.to_string().contains("add query to secrets.gh.in"));
}

#[test]
fn may_checks_the_header_name() {
    let p = policy(GRANTS);
    let ok = Location::Header("Authorization".into());
    assert!(
        p.may_place("gh", Sink::Egress, "api.github.com", 443, &ok)
            .is_ok()
    );
    let other = Location::Header("x-forwarded-token".into());
    let r = p
        .may_place("gh", Sink::Egress, "api.github.com", 443, &other)
        .unwrap_err();
    assert_eq!(r.code(), "header_not_granted");
    assert!(
        r.to_string()
            .contains("add x-forwarded-token to secrets.gh.header")
    );
}

#[test]
fn may_checks_the_sink() {
    let p = policy(GRANTS);
    assert!(p.may_sink("gh", Sink::Command).is_ok());
    let r = p.may_sink("gh", Sink::File).unwrap_err();
    assert_eq!(
        r.to_string(),
        "secret gh is not granted the file sink; add file to secrets.gh.sinks"
    );
    assert!(
        p.may_place(
            "sandbox_key",
            Sink::Egress,
            "api.example.com",
            8443,
            &Location::Query
        )
        .is_ok()
    );
    assert!(matches!(
        p.may_place(
            "sandbox_key",
            Sink::Command,
            "api.example.com",
            8443,
            &Location::Query
        ),
        Err(Ungranted::SinkNotGranted { .. })
    ));
}

#[test]
fn may_refuses_redact_only_and_unknown_secrets() {
    let p = policy(GRANTS);
    assert!(p.may_sink("gh", Sink::Egress).is_ok());
    assert!(matches!(
        p.may_sink("quiet", Sink::Egress),
        Err(Ungranted::RedactOnly { .. })
    ));
    assert!(p.secret("quiet").unwrap().is_redact_only());
    assert!(matches!(
        p.may_sink("nope", Sink::Egress),
        Err(Ungranted::UnknownSecret { .. })
    ));
}

#[test]
fn may_refuses_a_granted_host_that_is_passthrough() {
    let src = format!(
        "{HEAD}    hosts: [a.example.com, b.example.com]\n    sinks: [egress]\negress:\n  passthrough: [b.example.com]\n"
    );
    let p = Policy::parse(&src, "t.yaml").unwrap().policy;
    let auth = Location::Header("authorization".into());
    assert!(
        p.may_place("gh", Sink::Egress, "a.example.com", 443, &auth)
            .is_ok()
    );
    assert!(matches!(
        p.may_place("gh", Sink::Egress, "b.example.com", 443, &auth),
        Err(Ungranted::Passthrough { .. })
    ));
    assert_eq!(p.reach("b.example.com", 443), Reach::Passthrough);
}

// ---- placeholders ----

#[test]
fn minted_placeholders_have_the_documented_form_and_differ_per_run() {
    let p = policy(
        "version: 1\nsecrets:\n  github-token.v2:\n    from: { env: A }\n    sinks: []\n  fixed:\n    from: { env: B }\n    sinks: []\n    placeholder: HOST_ENGINE_MINTED_1234\n",
    );
    let a = p.mint_placeholders();
    let b = p.mint_placeholders();
    let pa = a.get("github-token.v2").unwrap();
    let pb = b.get("github-token.v2").unwrap();
    let nonce = pa
        .strip_prefix("SLUICE_GITHUB_TOKEN_V2_")
        .expect("documented prefix");
    assert_eq!(nonce.len(), 2 * NONCE_BYTES);
    const { assert!(NONCE_BYTES * 8 >= 64) };
    assert!(nonce.bytes().all(|c| c.is_ascii_hexdigit()));
    assert!(pa.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
    assert!(pa.len() >= MIN_PLACEHOLDER_LEN);
    assert_ne!(pa, pb, "two runs minted the same placeholder");
    assert_eq!(a.get("fixed"), Some("HOST_ENGINE_MINTED_1234"));
    assert_eq!(b.get("fixed"), Some("HOST_ENGINE_MINTED_1234"));
    assert_eq!(a.len(), 2);
    assert_eq!(a.iter().next().unwrap().0, "github-token.v2");
}

#[test]
fn a_reloaded_declaration_keeps_each_placeholder_it_already_had() {
    let before = policy(
        "version: 1\nsecrets:\n  kept:\n    from: { env: A }\n    sinks: []\n  dropped:\n    from: { env: B }\n    sinks: []\n",
    );
    let after = policy(
        "version: 1\nsecrets:\n  kept:\n    from: { env: A }\n    sinks: []\n  added:\n    from: { env: C }\n    sinks: []\n  fixed:\n    from: { env: D }\n    sinks: []\n    placeholder: HOST_ENGINE_MINTED_1234\n",
    );
    let earlier = before.mint_placeholders();
    let now = after.try_mint_placeholders_after(&earlier).unwrap();
    assert_eq!(now.get("kept"), earlier.get("kept"));
    assert_eq!(now.get("dropped"), None);
    assert!(now.get("added").unwrap().starts_with("SLUICE_ADDED_"));
    assert_eq!(now.get("fixed"), Some("HOST_ENGINE_MINTED_1234"));
    // A fixed placeholder declared later wins over the one the run minted.
    let fixed_later = policy(
        "version: 1\nsecrets:\n  kept:\n    from: { env: A }\n    sinks: []\n    placeholder: HOST_ENGINE_MINTED_5678\n",
    );
    let again = fixed_later.try_mint_placeholders_after(&now).unwrap();
    assert_eq!(again.get("kept"), Some("HOST_ENGINE_MINTED_5678"));
}

// ---- sources ----

/// A scratch directory, removed with what it holds when dropped.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> Scratch {
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-policies-{tag}-{}", hex::encode(nonce)));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

#[test]
fn file_sources_trim_one_newline_and_resolve_relative_to_the_declaration() {
    let dir = temp_dir("file");
    std::fs::write(dir.join("token"), format!("{SECRET}\n")).unwrap();
    std::fs::write(dir.join("crlf"), format!("{SECRET}x\r\n")).unwrap();
    let decl = dir.join("policy.yaml");
    std::fs::write(
        &decl,
        "version: 1\nsecrets:\n  a:\n    from: { file: token }\n    sinks: []\n  b:\n    from: { file: crlf }\n    sinks: []\n",
    )
    .unwrap();
    let p = Policy::load(&decl).unwrap().policy;
    let resolved = p.resolve(&p.mint_placeholders()).unwrap();
    assert_eq!(&resolved[0].value[..], SECRET.as_bytes());
    assert_eq!(&resolved[1].value[..], format!("{SECRET}x").as_bytes());
    assert!(resolved[0].placeholder.starts_with("SLUICE_A_"));
    assert!(!format!("{resolved:?}").contains(SECRET));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn source_errors_name_the_secret_never_the_value() {
    let p = policy(
        "version: 1\nsecrets:\n  a:\n    from: { env: SLUICE_TEST_SURELY_UNSET_VAR }\n    sinks: []\n",
    );
    let e = p.resolve(&p.mint_placeholders()).unwrap_err();
    assert!(
        matches!(&e, SourceError::EnvMissing { secret, var } if secret == "a" && var == "SLUICE_TEST_SURELY_UNSET_VAR")
    );

    let p = policy(
        "version: 1\nsecrets:\n  a:\n    from: { file: /nonexistent/sluice/token }\n    sinks: []\n",
    );
    let e = p.resolve(&p.mint_placeholders()).unwrap_err();
    assert!(matches!(&e, SourceError::FileUnreadable { secret, .. } if secret == "a"));

    let dir = temp_dir("short");
    std::fs::write(dir.join("short"), "abc\n").unwrap();
    std::fs::write(dir.join("multi"), format!("{SECRET}\nsecond line\n")).unwrap();
    let decl = dir.join("p.yaml");
    std::fs::write(
        &decl,
        "version: 1\nsecrets:\n  a:\n    from: { file: short }\n    sinks: []\n",
    )
    .unwrap();
    let p = Policy::load(&decl).unwrap().policy;
    let e = p.resolve(&p.mint_placeholders()).unwrap_err();
    assert!(matches!(e, SourceError::TooShort { len: 3, min: 8, .. }));

    std::fs::write(&decl, "version: 1\nsecrets:\n  a:\n    from: { file: multi }\n    hosts: [a.example.com]\n    sinks: [egress]\n").unwrap();
    let p = Policy::load(&decl).unwrap().policy;
    let e = p.resolve(&p.mint_placeholders()).unwrap_err();
    assert!(matches!(e, SourceError::UnfitForHeader { byte: "LF", .. }));
    assert!(!e.to_string().contains(SECRET));
    assert!(!e.to_string().contains("second line"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_literal_value_resolves_to_itself() {
    let p = policy(&format!(
        "version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: []\n"
    ));
    let r = p.resolve(&p.mint_placeholders()).unwrap();
    assert_eq!(&r[0].value[..], SECRET.as_bytes());
}

#[test]
fn a_file_that_cannot_be_read_is_one_diagnostic() {
    let d = Policy::load(Path::new("/nonexistent/sluice/policy.yaml")).unwrap_err();
    assert_eq!(d.0.len(), 1);
    assert!(matches!(d.0[0].problem, Problem::Unreadable { .. }));
    assert!(
        d.to_string()
            .starts_with("/nonexistent/sluice/policy.yaml:1:1: error:")
    );
}

#[test]
fn the_guard_built_from_a_policy_redacts_its_values() {
    let p = policy(&format!(
        "version: 1\nsecrets:\n  k:\n    value: {SECRET}\n    sinks: []\n  m:\n    value: another-long-value-42\n    sinks: []\n"
    ));
    let placeholders = p.mint_placeholders();
    let guard = p.build_guard(&placeholders).unwrap();
    assert_eq!(guard.len(), 2);
    let out = guard.redact(format!("token={SECRET}&other=another-long-value-42").as_bytes());
    let text = String::from_utf8(out.bytes().to_vec()).unwrap();
    assert_eq!(
        text,
        format!(
            "token={}&other={}",
            placeholders.get("k").unwrap(),
            placeholders.get("m").unwrap()
        )
    );
}

#[test]
fn may_reach_asks_only_for_the_host_grant() {
    let p = policy(GRANTS);
    // Any location, any header: the host decides whether a real value may go there.
    assert!(p.may_reach("gh", "api.github.com", 443).is_ok());
    assert!(p.may_reach("gh", "RAW.githubusercontent.com.", 443).is_ok());
    let refused = p.may_reach("gh", "evil.com", 443).unwrap_err();
    assert_eq!(refused.code(), "host_not_granted");
    assert!(p.may_reach("sandbox_key", "api.example.com", 8443).is_ok());
    assert!(p.may_reach("sandbox_key", "api.example.com", 443).is_err());
    // Redact-only secrets reach no host at all.
    assert_eq!(
        p.may_reach("quiet", "api.github.com", 443)
            .unwrap_err()
            .code(),
        "redact_only"
    );
    assert!(p.may_reach("nobody", "api.github.com", 443).is_err());
}
