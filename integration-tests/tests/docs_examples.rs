//! Every declaration shown in the docs parses: each ```yaml block holding a `version: 1`
//! line (unindented: a declaration's top level) in README.md and docs/*.md goes through `sluice_policies::Policy::parse` and must
//! load without errors. (Parsing does not resolve `env:`/`file:` sources, so examples may
//! name secrets this machine does not have.)

use std::path::{Path, PathBuf};

use sluice_integration_tests::launch::workspace_root;
use sluice_policies::Policy;

/// One fenced example: where it starts and its text.
struct Example {
    file: PathBuf,
    line: usize,
    text: String,
}

/// The ```yaml blocks of `markdown` that declare `version: 1`.
fn yaml_declarations(file: &Path, markdown: &str) -> Vec<Example> {
    let mut examples = Vec::new();
    let mut current: Option<Example> = None;
    for (number, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match current.as_mut() {
            None if fence.starts_with("```yaml") || fence.starts_with("```yml") => {
                current = Some(Example {
                    file: file.to_owned(),
                    line: number + 2,
                    text: String::new(),
                });
            }
            Some(_) if fence.starts_with("```") => {
                let example = current.take().expect("open block");
                if example.text.lines().any(|l| l.trim_end() == "version: 1") {
                    examples.push(example);
                }
            }
            Some(example) => {
                example.text.push_str(line);
                example.text.push('\n');
            }
            None => {}
        }
    }
    examples
}

fn documents() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_declaration_in_the_docs_parses() {
    let mut checked = 0;
    let mut files_checked: Vec<PathBuf> = Vec::new();
    let mut failures = Vec::new();
    for file in documents() {
        let markdown = std::fs::read_to_string(&file).expect("read markdown");
        for example in yaml_declarations(&file, &markdown) {
            let name = format!("{}:{}", example.file.display(), example.line);
            if let Err(diagnostics) = Policy::parse(&example.text, &name) {
                failures.push(format!("{name}: {diagnostics:?}"));
            }
            checked += 1;
            files_checked.push(example.file.clone());
        }
    }
    assert!(
        failures.is_empty(),
        "declarations in the docs that do not parse:\n{}",
        failures.join("\n")
    );
    // README.md, the guide and the Kubernetes page each show at least one.
    for name in ["README.md", "guide.md", "kubernetes.md"] {
        assert!(
            files_checked.iter().any(|f| f.ends_with(name)),
            "no declaration found in {name} ({checked} checked in all)"
        );
    }
}

#[test]
fn the_extractor_finds_declarations_and_skips_other_yaml() {
    let markdown = "text\n```yaml\nversion: 1\nsecrets: {}\n```\n\n```yaml\napiVersion: v1\n```\n\n```sh\nversion: 1\n```\n";
    let found = yaml_declarations(Path::new("x.md"), markdown);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, 3);
    assert_eq!(found[0].text, "version: 1\nsecrets: {}\n");
}

#[test]
fn a_broken_declaration_would_be_caught() {
    // The check is only worth having if parse rejects what the docs could get wrong.
    let broken = "version: 1\nsecrets:\n  t:\n    from: { env: T }\n    hostz: [a.test]\n";
    assert!(Policy::parse(broken, "broken.yaml").is_err());
}
