//! How long the run CA takes to mint a leaf, and to serve one from its cache.
//!
//! Run with `cargo bench -p sluice-ca --bench mint`. Plain `std::time::Instant`, no harness:
//! the figures are printed, with their ratio, for the crate's README.

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_ca::{CaConfig, RunCa};

/// Distinct names minted (each a cache miss).
const MINTS: usize = 500;
/// Cached look-ups timed.
const HITS: usize = 200_000;

fn per_op(total: Duration, ops: usize) -> Duration {
    total / u32::try_from(ops).expect("op count fits u32")
}

fn main() {
    let mut config = CaConfig::new("bench", ["*.bench.example"]);
    config.cache_capacity = MINTS + 1;

    // The first CA also pays for the crypto library's one-time start-up; the second does not.
    let started = Instant::now();
    let first = RunCa::mint(config.clone()).expect("the CA mints");
    let first_ca = started.elapsed();
    drop(black_box(first));
    let started = Instant::now();
    let ca = RunCa::mint(config).expect("the CA mints");
    let ca_mint = started.elapsed();

    let names: Vec<String> = (0..MINTS).map(|i| format!("h{i}.bench.example")).collect();
    let started = Instant::now();
    for name in &names {
        black_box(ca.leaf(name).expect("a permitted name mints"));
    }
    let mint = per_op(started.elapsed(), MINTS);
    assert_eq!(ca.minted_count(), MINTS);

    let started = Instant::now();
    for i in 0..HITS {
        black_box(ca.leaf(&names[i % MINTS]).expect("a cached name is served"));
    }
    let hit = per_op(started.elapsed(), HITS);
    assert_eq!(
        ca.minted_count(),
        MINTS,
        "the timed look-ups were all cache hits"
    );

    println!("mint the first run CA:  {first_ca:>12.2?}  (includes aws-lc start-up)");
    println!("mint another run CA:    {ca_mint:>12.2?}");
    println!("mint a leaf (miss):     {mint:>12.2?}  ({MINTS} names)");
    println!("serve a cached leaf:    {hit:>12.2?}  ({HITS} look-ups)");
    println!(
        "ratio mint / cached:    {:>12.0}x",
        mint.as_secs_f64() / hit.as_secs_f64()
    );
}
