//! Throughput of the guard against a plain Aho-Corasick baseline, when nothing matches.
//!
//! `cargo bench -p sluice-guard` builds a 64 MiB buffer of alphanumeric-heavy text (random
//! alphanumeric words between a little punctuation: the hardest case for prefilters, which
//! look for bytes that are rare in the text) and guards with 1, 10 and 100 secrets, each with
//! every encoded form. For each it prints, in MB/s (10^6 bytes per second, best of several
//! runs):
//!
//! - `baseline`: one aho-corasick DFA, `MatchKind::LeftmostLongest`, `find_iter` over the same
//!   patterns and buffer (counting matches);
//! - `scan`: [`Guard::find_iter`] (counting matches), the guard's search alone;
//! - `one-shot`: [`Guard::redact_into`] the whole buffer, into one output buffer reused from
//!   run to run (as a proxy reuses its buffers);
//! - `stream`: a [`Rewriter::redactor`] fed 16 KiB chunks, into the same reused buffer (the
//!   same output as one-shot, but written 16 KiB at a time: with ordinary stores, where one
//!   64 MiB copy uses non-temporal ones, so a fast row pays for output memory traffic);
//! - `chunked`: the same rewriter, each chunk's output written to one small reused buffer and
//!   dropped (as a proxy forwards each chunk);
//! - `owned`: [`Guard::redact`], which returns a fresh 64 MiB buffer, and `copy`: copying the
//!   input into a fresh `Vec`, the floor under `owned` (on this kind of machine, the kernel's
//!   first touch of 16 384 fresh pages costs more than the search);
//!
//! and the ratios scan / baseline, one-shot / baseline, stream / one-shot and chunked /
//! one-shot. Rows with
//! 8-byte values (the shortest a guard accepts, so the prefilter's shortest stride) show its
//! worst case on ordinary text; the `hostile` row, text made of near-misses (every pattern but
//! its last byte, repeated), shows its worst case overall, where it falls back to its
//! automaton. Rows are named like `10x40` (secrets x value bytes); name some after `--` to run
//! only those.
//!
//! Under `cargo test --benches` (no `--bench` argument) it runs every case once on 256 KiB, as a
//! smoke test that also checks the guard and the baseline agree on a text with secrets in it.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use sluice_guard::{Encoding, Guard, NONCE_LEN, Placeholder, Rewriter, SecretValue};

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

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A guard over `secrets` random token-like values of `value_len` bytes, and the same patterns
/// the guard holds (each placeholder and every distinct encoding of each value).
fn build(secrets: usize, value_len: usize) -> (Arc<Guard>, Vec<Vec<u8>>) {
    let mut rng = Rng(0x5eed ^ (secrets as u64) << 8 ^ value_len as u64);
    let mut builder = Guard::builder();
    let mut patterns = Vec::new();
    for i in 0..secrets {
        let value: Vec<u8> = (0..value_len)
            .map(|_| {
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"[rng.below(66)]
            })
            .collect();
        let value = SecretValue::new(value);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.iter_mut().for_each(|b| *b = rng.next() as u8);
        let placeholder = Placeholder::mint(&format!("secret_{i}"), &nonce);
        let first = patterns.len();
        patterns.push(placeholder.as_bytes().to_vec());
        for encoding in Encoding::ALL {
            if let Some(text) = encoding.encode(&value)
                && !patterns[first..].iter().any(|p| **p == *text)
            {
                patterns.push(text.to_vec());
            }
        }
        builder
            .add(format!("secret_{i}"), placeholder, value)
            .expect("bench secrets are valid");
    }
    let guard = builder.build().expect("bench guard builds");
    assert_eq!(guard.pattern_count(), patterns.len(), "same patterns");
    (Arc::new(guard), patterns)
}

/// Alphanumeric words of 1 to 16 characters between single punctuation or space bytes.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        for _ in 0..=rng.below(16) {
            out.push(ALNUM[rng.below(ALNUM.len())]);
        }
        out.push(b" ,.:\"\n=&"[rng.below(8)]);
    }
    out.truncate(len);
    out
}

/// The hostile case: every pattern but its last byte, over and over, so that every probe of
/// the prefilter passes and the guard falls back to its automaton.
fn near_misses(len: usize, patterns: &[Vec<u8>]) -> Vec<u8> {
    let mut rng = Rng(0x0bad);
    let mut out = Vec::with_capacity(len + 1024);
    while out.len() < len {
        let p = &patterns[rng.below(patterns.len())];
        out.extend_from_slice(&p[..p.len() - 1]);
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Best bytes per second of `f` over `bytes`: several runs, at least about one second.
fn measure(bytes: usize, quick: bool, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 1 || (!quick && (runs < 3 || start.elapsed() < Duration::from_secs(1))) {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    bytes as f64 / best
}

/// `input` through a redactor in 16 KiB chunks, each chunk's output cleared once written.
fn chunked(guard: &Arc<Guard>, input: &[u8], out: &mut Vec<u8>) {
    let mut r = Rewriter::redactor(Arc::clone(guard));
    for chunk in input.chunks(16 * 1024) {
        out.clear();
        r.push(chunk, out).expect("redaction never refuses");
        black_box(&out);
    }
    out.clear();
    black_box(r.finish(out).expect("redaction never refuses"));
}

/// `input` through a redactor in 16 KiB chunks, into `out`.
fn stream(guard: &Arc<Guard>, input: &[u8], out: &mut Vec<u8>) {
    let mut r = Rewriter::redactor(Arc::clone(guard));
    for chunk in input.chunks(16 * 1024) {
        r.push(chunk, out).expect("redaction never refuses");
    }
    black_box(r.finish(out).expect("redaction never refuses"));
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    // `cargo bench -p sluice-guard -- 10x40` runs only the rows named so.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let len = if quick { 256 * 1024 } else { 64 * 1024 * 1024 };
    let input = text(len, 0xb0d1);
    println!(
        "{} KiB of alphanumeric-heavy text with no secret in it (the hostile row: near-misses); \
         MB/s = 10^6 bytes/s, best of runs",
        len / 1024
    );
    let header = [
        "secrets x bytes",
        "patterns",
        "memory",
        "baseline",
        "scan",
        "scan/base",
        "one-shot",
        "one-shot/base",
        "stream",
        "stream/one-shot",
        "chunked",
        "chunked/one-shot",
        "owned",
        "copy",
    ];
    row(&header.map(String::from));
    let rows = [
        (1, 40, false),
        (10, 40, false),
        (100, 40, false),
        (1, 8, false),
        (10, 8, false),
        (100, 8, false),
        (1, 40, true),
        (10, 40, true),
        (30, 40, true),
    ];
    for (secrets, value_len, hostile) in rows {
        let name = format!(
            "{secrets}x{value_len}{}",
            if hostile { "-hostile" } else { "" }
        );
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let (guard, patterns) = build(secrets, value_len);
        let hostile_text;
        let (input, matches) = if hostile {
            hostile_text = near_misses(len, &patterns);
            let matches = guard.find_iter(&hostile_text).count();
            (&hostile_text, matches)
        } else {
            (&input, 0)
        };
        let baseline = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .expect("baseline builds");

        // Both agree where secrets do occur (every pattern planted between words).
        let mut planted = text(64 * 1024, 7);
        for p in &patterns {
            planted.extend_from_slice(b" ");
            planted.extend_from_slice(p);
        }
        let mine: Vec<_> = guard
            .find_iter(&planted)
            .map(|h| (h.start, h.end))
            .collect();
        let theirs: Vec<_> = baseline
            .find_iter(&planted)
            .map(|m| (m.start(), m.end()))
            .collect();
        assert_eq!(mine, theirs, "guard and baseline disagree");
        assert_eq!(mine.len(), patterns.len());
        let mut streamed = Vec::new();
        stream(&guard, &planted, &mut streamed);
        assert_eq!(streamed, guard.redact(&planted).bytes());

        let base = measure(len, quick, || {
            assert_eq!(baseline.find_iter(black_box(input)).count(), matches);
        });
        let scan = measure(len, quick, || {
            assert_eq!(guard.find_iter(black_box(input)).count(), matches);
        });
        // One output buffer for one-shot and stream, touched once before timing.
        let mut out = input.clone();
        let one_shot = measure(len, quick, || {
            out.clear();
            black_box(guard.redact_into(black_box(input), &mut out));
        });
        let streamed = measure(len, quick, || {
            out.clear();
            stream(&guard, black_box(input), &mut out);
        });
        let mut small = Vec::with_capacity(64 * 1024);
        let chunked = measure(len, quick, || {
            chunked(&guard, black_box(input), &mut small);
        });
        let owned = measure(len, quick, || {
            black_box(guard.redact(black_box(input)));
        });
        let copy = measure(len, quick, || {
            black_box(black_box(input).to_vec());
        });
        let mb = |x: f64| format!("{:.0}", x / 1e6);
        let ratio = |a: f64, b: f64| format!("{:.2}", a / b);
        row(&[
            name,
            patterns.len().to_string(),
            format!("{} KiB", guard.memory_usage() / 1024),
            mb(base),
            mb(scan),
            ratio(scan, base),
            mb(one_shot),
            ratio(one_shot, base),
            mb(streamed),
            ratio(streamed, one_shot),
            mb(chunked),
            ratio(chunked, one_shot),
            mb(owned),
            mb(copy),
        ]);
    }
}

/// One table row, markdown-style, so it pastes into the README.
fn row(cells: &[String]) {
    println!("| {} |", cells.join(" | "));
}
