//! A fixed-bucket latency histogram of atomics: one per worker, added up at scrape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The upper bounds of the buckets, in seconds: from half a millisecond (a swap on a warm
/// tunnel) to ten seconds (a slow upstream). `+Inf` follows implicitly.
pub(crate) const BOUNDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Observations per bucket (not cumulative; the page makes them so) and their sum.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Adds one observation.
    pub(crate) fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BOUNDS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Several histograms added up.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) buckets: [u64; BOUNDS.len() + 1],
    pub(crate) sum_nanos: u64,
    pub(crate) count: u64,
}

impl Snapshot {
    /// Adds what `histogram` holds now.
    pub(crate) fn add(&mut self, histogram: &Histogram) {
        for (total, bucket) in self.buckets.iter_mut().zip(&histogram.buckets) {
            *total += bucket.load(Ordering::Relaxed);
        }
        self.sum_nanos += histogram.sum_nanos.load(Ordering::Relaxed);
        // The count is the buckets' sum, so that a scrape racing an observation never
        // shows a count the buckets do not add up to.
        self.count = self.buckets.iter().sum();
    }

    /// `(upper bound, cumulative count)` pairs, `+Inf` last, as the exposition format has them.
    pub(crate) fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut running = 0;
        BOUNDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.buckets)
            .map(|(bound, count)| {
                running += count;
                (bound, running)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them_and_add_up() {
        let a = Histogram::default();
        let b = Histogram::default();
        a.observe(Duration::from_micros(300));
        a.observe(Duration::from_millis(1));
        b.observe(Duration::from_secs(60));
        let mut sum = Snapshot::default();
        sum.add(&a);
        sum.add(&b);
        assert_eq!(sum.count, 3);
        assert_eq!(sum.sum_nanos, 60_001_300_000);
        let cumulative = sum.cumulative();
        assert_eq!(cumulative[0], (0.0005, 1));
        assert_eq!(cumulative[1], (0.001, 2));
        assert_eq!(cumulative[BOUNDS.len() - 1], (10.0, 2));
        assert_eq!(cumulative[BOUNDS.len()], (f64::INFINITY, 3));
    }
}
