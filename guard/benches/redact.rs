//! Throughput of the guard: one-shot and streaming redaction, and an outbound rewrite, over a
//! body of text with secrets sprinkled in.
//!
//! `cargo bench -p sluice-guard` prints MiB/s for each case. Under `cargo test --benches` (no
//! `--bench` argument) it runs each case once on a small body, as a smoke test.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_guard::{
    Guard, NONCE_LEN, OnPlaceholder, OnValue, Placeholder, Plan, Rewriter, SecretValue,
};

/// A deterministic pseudo-random generator (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn build(secrets: usize) -> (Arc<Guard>, Vec<String>) {
    let mut rng = Rng(0x5eed);
    let mut builder = Guard::builder();
    let mut values = Vec::new();
    for i in 0..secrets {
        let value: String = (0..40)
            .map(|_| {
                char::from(
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                        [(rng.next() % 64) as usize],
                )
            })
            .collect();
        let nonce = [i as u8; NONCE_LEN];
        builder
            .add(
                format!("secret_{i}"),
                Placeholder::mint(&format!("secret_{i}"), &nonce),
                SecretValue::from(value.as_str()),
            )
            .expect("bench secrets are valid");
        values.push(value);
    }
    (
        Arc::new(builder.build().expect("bench guard builds")),
        values,
    )
}

/// JSON-ish text with a secret value about every 64 KiB.
fn body(len: usize, values: &[String]) -> Vec<u8> {
    let mut rng = Rng(0xb0d1);
    let words = [
        "{\"id\":",
        "\"name\":\"",
        "lorem",
        "ipsum",
        "dolor",
        "sit",
        "amet",
        "\",",
        "}\n",
        " ",
        "12345",
        "true",
    ];
    let mut out = Vec::with_capacity(len + 256);
    while out.len() < len {
        if rng.next().is_multiple_of(4096) {
            out.extend_from_slice(values[(rng.next() as usize) % values.len()].as_bytes());
        } else {
            out.extend_from_slice(words[(rng.next() as usize) % words.len()].as_bytes());
        }
    }
    out.truncate(len);
    out
}

fn measure(name: &str, bytes: usize, quick: bool, mut f: impl FnMut()) {
    f();
    if quick {
        println!("{name}: ok");
        return;
    }
    let mut runs = 0u32;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        f();
        runs += 1;
    }
    let secs = start.elapsed().as_secs_f64() / f64::from(runs);
    println!(
        "{name:<44} {:>8.1} MiB/s  ({runs} runs)",
        bytes as f64 / secs / (1024.0 * 1024.0)
    );
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let len = if quick { 64 * 1024 } else { 8 * 1024 * 1024 };
    let counts: &[usize] = if quick { &[1, 16] } else { &[1, 16, 128, 1024] };
    for &secrets in counts {
        let (guard, values) = build(secrets);
        let input = body(len, &values);
        let label = format!("{secrets} secrets, {} patterns", guard.pattern_count());
        println!(
            "{label}: automaton uses {} KiB",
            guard.memory_usage() / 1024
        );

        measure(&format!("redact one-shot ({label})"), len, quick, || {
            black_box(guard.redact(black_box(&input)));
        });

        measure(
            &format!("redact streaming 16 KiB ({label})"),
            len,
            quick,
            || {
                let mut r = Rewriter::redactor(Arc::clone(&guard));
                let mut out = Vec::with_capacity(input.len());
                for chunk in input.chunks(16 * 1024) {
                    r.push(chunk, &mut out).expect("redaction never refuses");
                }
                black_box(r.finish(&mut out).expect("redaction never refuses"));
                black_box(out);
            },
        );

        let mut plan = Plan::refuse_all(&guard);
        for id in guard.ids() {
            plan.set(id, OnPlaceholder::Swap, OnValue::Keep);
        }
        measure(
            &format!("outbound rewrite one-shot ({label})"),
            len,
            quick,
            || {
                black_box(
                    guard
                        .rewrite(black_box(&input), &plan)
                        .expect("all granted"),
                );
            },
        );
    }
}
