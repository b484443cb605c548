//! Events over time for the report: counted per minute as the log is read, then gathered
//! into at most [`MAX_BUCKETS`] buckets (a minute each for a run of hours, wider for a
//! week), so the page stays small however long the log.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

/// The most buckets a timeline has.
pub const MAX_BUCKETS: usize = 720;

/// Bucket widths tried, narrowest first, in seconds.
const WIDTHS: [u64; 10] = [
    60,
    300,
    600,
    900,
    1800,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
];

/// Events per bucket, from the first event's bucket to the last's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// How wide each bucket is, in seconds (60 = per minute).
    pub bucket_seconds: u64,
    /// The buckets, in time order; empty buckets included.
    pub buckets: Vec<Bucket>,
    /// The busiest bucket's events (the scale of a chart).
    pub peak: u64,
}

/// One bucket of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    /// Its start, RFC 3339 UTC to the second.
    pub at: String,
    /// Events in it.
    pub events: u64,
    /// `refuse` events among them.
    pub refusals: u64,
}

/// Counts per minute since the epoch.
#[derive(Default)]
pub(super) struct Minutes {
    counts: BTreeMap<u64, (u64, u64)>,
    /// The last timestamp's minute text and number: most lines share the line before's.
    last: Option<(String, u64)>,
}

/// Whether `rest` is what sluice writes after a timestamp's minute: `:SS.mmmZ`.
fn is_seconds(rest: &str) -> bool {
    let b = rest.as_bytes();
    b.len() == 8
        && b[0] == b':'
        && matches!(b[1], b'0'..=b'5')
        && b[2].is_ascii_digit()
        && b[3] == b'.'
        && b[4..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'Z'
}

impl Minutes {
    /// Counts one line at `ts` (a line whose time cannot be read is not on the timeline).
    pub(super) fn add(&mut self, ts: &str, refusal: bool) {
        let prefix = ts.get(..16).unwrap_or(ts);
        let minute = match &self.last {
            // The minute is known from the line before; the rest must still be a time.
            Some((text, minute)) if text == prefix && is_seconds(&ts[prefix.len()..]) => *minute,
            _ => {
                let Ok(at) = humantime::parse_rfc3339(ts) else {
                    return;
                };
                let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
                let minute = secs / 60;
                self.last = Some((prefix.to_owned(), minute));
                minute
            }
        };
        let slot = self.counts.entry(minute).or_default();
        slot.0 += 1;
        slot.1 += u64::from(refusal);
    }

    pub(super) fn into_timeline(self) -> Timeline {
        let (Some((&first, _)), Some((&last, _))) =
            (self.counts.first_key_value(), self.counts.last_key_value())
        else {
            return Timeline::default();
        };
        let span = (last - first + 1) * 60;
        let width = WIDTHS
            .into_iter()
            // One bucket of room for aligning the first bucket's start.
            .find(|w| span.div_ceil(*w) < MAX_BUCKETS as u64)
            .unwrap_or_else(|| span.div_ceil(MAX_BUCKETS as u64).max(86_400));
        let start = first * 60 / width * width;
        let n = usize::try_from(((last * 60 - start) / width) + 1).unwrap_or(MAX_BUCKETS);
        let mut buckets: Vec<Bucket> = (0..n as u64)
            .map(|i| Bucket {
                at: humantime::format_rfc3339_seconds(
                    UNIX_EPOCH + Duration::from_secs(start + i * width),
                )
                .to_string(),
                events: 0,
                refusals: 0,
            })
            .collect();
        for (minute, (events, refusals)) in self.counts {
            let i = usize::try_from((minute * 60 - start) / width).unwrap_or(0);
            if let Some(bucket) = buckets.get_mut(i) {
                bucket.events += events;
                bucket.refusals += refusals;
            }
        }
        let peak = buckets.iter().map(|b| b.events).max().unwrap_or(0);
        Timeline {
            bucket_seconds: width,
            buckets,
            peak,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_is_counted_per_minute() {
        let mut minutes = Minutes::default();
        minutes.add("2026-12-02T10:00:01.000Z", false);
        minutes.add("2026-12-02T10:00:59.999Z", true);
        minutes.add("2026-12-02T10:02:00.000Z", false);
        let timeline = minutes.into_timeline();
        assert_eq!(timeline.bucket_seconds, 60);
        let counts: Vec<(u64, u64)> = timeline
            .buckets
            .iter()
            .map(|b| (b.events, b.refusals))
            .collect();
        assert_eq!(counts, [(2, 1), (0, 0), (1, 0)]);
        assert_eq!(timeline.buckets[0].at, "2026-12-02T10:00:00Z");
        assert_eq!(timeline.peak, 2);
    }

    #[test]
    fn a_week_fits_in_the_bucket_bound() {
        let mut minutes = Minutes::default();
        for day in 1..=7 {
            minutes.add(&format!("2026-12-0{day}T00:00:00.000Z"), false);
            minutes.add(&format!("2026-12-0{day}T23:59:00.000Z"), true);
        }
        let timeline = minutes.into_timeline();
        assert!(
            timeline.buckets.len() <= MAX_BUCKETS,
            "{}",
            timeline.buckets.len()
        );
        assert_eq!(timeline.bucket_seconds, 900);
        assert_eq!(timeline.buckets.iter().map(|b| b.events).sum::<u64>(), 14);
        assert_eq!(timeline.buckets.iter().map(|b| b.refusals).sum::<u64>(), 7);
    }

    #[test]
    fn unreadable_times_are_left_off() {
        let mut minutes = Minutes::default();
        minutes.add("yesterday", false);
        // A line sharing the line before's minute but no time after it is not counted.
        minutes.add("2026-12-02T10:00:01.000Z", false);
        for bad in [
            "2026-12-02T10:00",
            "2026-12-02T10:00:99.000Z",
            "2026-12-02T10:00:<b>",
        ] {
            minutes.add(bad, true);
        }
        let timeline = minutes.into_timeline();
        assert_eq!(timeline.buckets.iter().map(|b| b.events).sum::<u64>(), 1);
        assert_eq!(timeline.buckets.iter().map(|b| b.refusals).sum::<u64>(), 0);
    }
}
