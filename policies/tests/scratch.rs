#![allow(missing_docs)]
use serde::Deserialize;
use serde_saphyr::Spanned;
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc { version: Spanned<u32>, secrets: Option<std::collections::BTreeMap<String, Sec>> }
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sec { hosts: Option<Spanned<Vec<Spanned<String>>>>, from: Option<Spanned<From>> }
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct From { env: Option<Spanned<String>> }
#[test]
fn scratch() {
    for src in [
        "version: 1\nsecrets:\n  a:\n    hosts: [x, y]\n    bogus: 1\n",
        "version: x\n",
        "version: 1\nsecrets:\n  a:\n    hosts: [x, y\n",
        "version: 1\nsecrets:\n  a:\n    hosts: x\n",
        "version: 1\nsecrets:\n  a: {}\n  a: {}\n",
        "{\"version\": 1, \"secrets\": {\"a\": {\"hosts\": [\"x\"], \"from\": {\"env\": \"E\"}}}}",
        "{\n\t\"version\": 1\n}",
        "version: 1\nsecrets:\n  a:\n    from: {env: E, file: f}\n",
        "version: 1\nsecrets:\n  a:\n    hosts:\n      - x\n      - yy\n",
        "",
        "version: 1\nversion: 2\n",
        "x: &a 1\n",
    ] {
        match serde_saphyr::from_str::<Doc>(src) {
            Ok(d) => println!("OK {d:?}"),
            Err(e) => {
                let w = e.without_snippet();
                println!("ERR loc={:?}\n  display={}\n  nosnip={}", e.location().map(|l| (l.line(), l.column())), e, w);
            }
        }
        println!("---");
    }
}
