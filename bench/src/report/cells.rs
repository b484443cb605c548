//! How one figure is written in a report's table cell: ratios, latencies, sizes, verdicts.

use super::Status;

pub(super) fn met(ok: bool) -> String {
    if ok { "met" } else { "**missed**" }.to_owned()
}

pub(super) fn status_cell(status: &Status) -> String {
    match status {
        Status::Measured => "—".to_owned(),
        Status::Missing(why) => format!("MISSING: {}", why.replace('|', "/")),
        Status::Failed(why) => format!("FAILED: {}", why.replace('|', "/")),
    }
}

/// `a / b` as `0.52×`, or `—` when either is absent or `b` is zero.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => {
            let r = a / b;
            if r >= 10.0 {
                format!("{r:.0}×")
            } else if r >= 0.1 {
                format!("{r:.2}×")
            } else {
                format!("{r:.3}×")
            }
        }
        _ => "—".to_owned(),
    }
}

/// A latency in µs, as `412 µs` or `12.3 ms`.
pub(crate) fn latency(us: Option<f64>) -> String {
    match us {
        Some(us) if us >= 10_000.0 => format!("{:.1} ms", us / 1000.0),
        Some(us) => format!("{us:.0} µs"),
        None => "—".to_owned(),
    }
}

pub(super) fn per(total: Option<f64>, count: f64, unit: &str) -> String {
    match total {
        Some(total) if count > 0.0 => format!("{:.1} {unit}", total / count),
        _ => "—".to_owned(),
    }
}

/// KiB as `12.3 MiB`.
pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}
