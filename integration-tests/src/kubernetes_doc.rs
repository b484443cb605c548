//! docs/kubernetes.md's blocks, as a reader would copy them: the tests that run the
//! deployment take its parts from the page, so the page cannot drift from what is tested.

use crate::launch::workspace_root;

fn page() -> String {
    std::fs::read_to_string(workspace_root().join("docs/kubernetes.md"))
        .expect("docs/kubernetes.md")
}

/// The text of the first fenced block that opens with `fence` (e.g. "```nft\n"), with the
/// list indentation the page puts around it taken off.
fn block(fence: &str) -> String {
    let doc = page();
    let start = doc
        .find(fence)
        .unwrap_or_else(|| panic!("docs/kubernetes.md has no {fence:?} block"))
        + fence.len();
    let len = doc[start..].find("```").expect("a closed block");
    doc[start..start + len]
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("   ").unwrap_or(line)))
        .collect()
}

/// Step 4's nftables rules (`capture.nft`).
pub fn capture_rules() -> String {
    let rules = block("```nft\n");
    assert!(rules.contains("meta skgid 1337 return"), "{rules}");
    assert!(rules.contains("redirect to :15001"), "{rules}");
    rules
}

/// Step 3's sandbox entrypoint (`sandbox-env.sh`).
pub fn sandbox_entrypoint() -> String {
    let doc = page();
    let start = doc
        .find("```sh\n#!/bin/sh")
        .expect("docs/kubernetes.md shows the sandbox entrypoint")
        + "```sh\n".len();
    let len = doc[start..].find("```").expect("a closed block");
    doc[start..start + len].to_owned()
}

/// Step 2's `args:` of the sluice sidecar, as the pod spec lists them (`serve`, then each
/// `--flag=value`), comments dropped.
pub fn sidecar_args() -> Vec<String> {
    let pod = block("```yaml\napiVersion: v1\nkind: Pod\n");
    let mut lines = pod
        .lines()
        .skip_while(|line| line.trim() != "args:")
        .skip(1);
    let mut args = Vec::new();
    for line in lines.by_ref() {
        let Some(item) = line.trim().strip_prefix("- ") else {
            break;
        };
        let item = item.split(" #").next().unwrap_or(item).trim();
        args.push(item.to_owned());
    }
    assert_eq!(
        args.first().map(String::as_str),
        Some("serve"),
        "the sidecar's args in docs/kubernetes.md: {args:?}"
    );
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidecar_args_are_read_from_the_pod_spec() {
        let args = sidecar_args();
        assert!(
            args.iter().any(|arg| arg == "--listen=127.0.0.1:3128"),
            "{args:?}"
        );
        assert!(
            args.iter().any(|arg| arg == "--run-dir=/run/sluice/run"),
            "{args:?}"
        );
        assert!(args.iter().all(|arg| !arg.contains('#')), "{args:?}");
    }
}
