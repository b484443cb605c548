//! Shaped placeholders against plain ones, in the guard: building it, and scanning with it.
//!
//! `cargo bench -p sluice-policies --bench placeholders` makes 1,000 secrets whose values
//! are GitHub-token-shaped (`ghp_` and 36 base62 characters), and two guards over the same
//! values: one with shaped placeholders (`ghp_…` with GitHub's checksum, minted by
//! `Shape::known`, as a run mints them), one with plain ones (`SLUICE_<NAME>_<nonce>`). For
//! each it prints the guard's build time and its scan throughput (`Guard::find_iter` over
//! 16 MiB of token-like words with each of its 1,000 placeholders in it), best of several
//! runs, and the ratios shaped / plain. A shaped placeholder is an exact string to the
//! automaton like any other, so the target is no difference beyond noise.
//!
//! Under `cargo test --benches` (no `--bench` argument) it runs once on 100 secrets and
//! 256 KiB, as a smoke test that also checks both guards find every placeholder.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_guard::{Guard, NONCE_LEN, Placeholder, SecretValue};
use sluice_policies::shape::Shape;

/// A deterministic pseudo-random generator (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `count` GitHub-token-shaped values.
fn values(count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5eed_1000);
    (0..count)
        .map(|_| {
            let mut value = b"ghp_".to_vec();
            value.extend((0..36).map(|_| BASE62[rng.below(62)]));
            value
        })
        .collect()
}

/// The placeholders of one form for `values`.
fn placeholders(values: &[Vec<u8>], shaped: bool) -> Vec<String> {
    let mut rng = Rng(0xface);
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            if shaped {
                let shape = Shape::known(value).expect("a GitHub token's shape");
                shape.mint().expect("the random source")
            } else {
                let mut nonce = [0u8; NONCE_LEN];
                nonce.iter_mut().for_each(|b| *b = rng.next() as u8);
                Placeholder::mint(&format!("secret_{i}"), &nonce)
                    .as_str()
                    .to_owned()
            }
        })
        .collect()
}

fn guard(values: &[Vec<u8>], placeholders: &[String]) -> Guard {
    let mut builder = Guard::builder();
    for (i, (value, placeholder)) in values.iter().zip(placeholders).enumerate() {
        builder
            .add(
                format!("secret_{i}"),
                Placeholder::parse(placeholder).expect("a valid placeholder"),
                SecretValue::new(value.clone()),
            )
            .expect("distinct secrets");
    }
    builder.build().expect("a guard")
}

/// `len` bytes of token-like words, each of `placeholders` placed once, spread evenly.
fn text(len: usize, placeholders: &[String]) -> Vec<u8> {
    let mut rng = Rng(0xbeef);
    let mut text = Vec::with_capacity(len + 64);
    let every = (len / (placeholders.len() + 1)).max(1);
    let mut next = 0;
    while text.len() < len {
        if text.len() / every > next && next < placeholders.len() {
            text.extend_from_slice(placeholders[next].as_bytes());
            text.push(b' ');
            next += 1;
        }
        let word = 3 + rng.below(12);
        text.extend((0..word).map(|_| BASE62[rng.below(62)]));
        text.push(if rng.below(8) == 0 { b'\n' } else { b' ' });
    }
    text
}

fn best(runs: usize, mut run: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| run()).min().unwrap_or_default()
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (count, len, runs) = if quick {
        (100, 256 << 10, 1)
    } else {
        (1000, 16 << 20, 7)
    };
    let values = values(count);
    let mut rows = Vec::new();
    for shaped in [false, true] {
        let placeholders = placeholders(&values, shaped);
        let built = best(runs.min(5), || {
            let start = Instant::now();
            black_box(guard(&values, &placeholders));
            start.elapsed()
        });
        let guard = guard(&values, &placeholders);
        let text = text(len, &placeholders);
        let hits = guard.find_iter(&text).count();
        assert!(hits >= count, "{hits} hits for {count} placeholders");
        let scanned = best(runs, || {
            let start = Instant::now();
            black_box(guard.find_iter(&text).count());
            start.elapsed()
        });
        let throughput = text.len() as f64 / scanned.as_secs_f64() / 1e6;
        let form = if shaped {
            "shaped ghp_"
        } else {
            "plain SLUICE_"
        };
        println!(
            "{form:>14}: {count} secrets, build {:>8.2} ms, scan {throughput:>8.1} MB/s ({hits} hits in {} KiB)",
            built.as_secs_f64() * 1e3,
            text.len() >> 10
        );
        rows.push((built, throughput));
    }
    let (plain, shaped) = (rows[0], rows[1]);
    println!(
        "shaped / plain: build {:.3}, scan throughput {:.3}",
        shaped.0.as_secs_f64() / plain.0.as_secs_f64(),
        shaped.1 / plain.1
    );
}
