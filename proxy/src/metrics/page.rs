//! The `/metrics` page: one scrape's sums and gauges, written by `prometheus-client`'s
//! encoder (Prometheus text format 0.0.4), never by hand.
//!
//! Every series and its help text is named here, in one list a reader can check against
//! `docs/operations.md`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use super::{KINDS, Sum};
use sluice_audit::EventKind;

/// What a scrape reads from the parts that own it, at that moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauges {
    /// Client connections held open now (tunnels count against theirs).
    pub(crate) connections_open: u64,
    /// TCP connections dialled upstream.
    pub(crate) upstream_dials: u64,
    /// Idle keep-alive connections in the HTTP/1.1 upstream pools.
    pub(crate) upstream_idle: u64,
    /// Audit events waiting for the writer thread.
    pub(crate) audit_queue: u64,
    /// Audit writes that failed.
    pub(crate) audit_write_failures: u64,
    /// Leaves in the run CA's cache, and leaves minted so far.
    pub(crate) leaves_cached: u64,
    pub(crate) leaves_minted: u64,
    /// Secrets the declaration in force declares.
    pub(crate) secrets: u64,
    /// The guard in force: its patterns (every form of every value the run has known) and
    /// the bytes its tables take. It grows with each rotated value and minted token.
    pub(crate) guard_patterns: u64,
    pub(crate) guard_bytes: u64,
    /// Whether the audit log is healthy (1) or failed (0).
    pub(crate) audit_healthy: bool,
    /// Each budgeted secret of the declaration in force: its name, the requests its
    /// window has used, and its budget's requests per window.
    pub(crate) budgets: Vec<(String, u64, u64)>,
}

/// One scrape, as the registry's collector.
#[derive(Debug)]
struct Page {
    sum: Sum,
    gauges: Gauges,
}

pub(super) fn encode(sum: Sum, gauges: &Gauges) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Page {
        sum,
        gauges: gauges.clone(),
    }));
    let mut out = String::new();
    // Writing into a String cannot fail, and every label set here is well formed.
    if prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).is_err() {
        tracing::error!("the metrics page could not be encoded");
    }
    out
}

/// A counter with no labels.
fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A gauge with no labels.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for Page {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sum = &self.sum;
        {
            let mut family = encoder.encode_descriptor(
                "sluice_events",
                "Audit events recorded, by kind.",
                None,
                MetricType::Counter,
            )?;
            for (kind, count) in EventKind::ALL.iter().zip(sum.events) {
                // The log's own first and last lines are no events of the request path.
                if matches!(kind, EventKind::Start | EventKind::Stop) {
                    continue;
                }
                let labels = [("event", kind.as_str())];
                ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_secret_events",
                "Audit events naming a secret, by the secret's declared name and the kind.",
                None,
                MetricType::Counter,
            )?;
            for (secret, counts) in &sum.secret_events {
                for (kind, count) in EventKind::ALL.iter().zip(counts.iter().take(KINDS)) {
                    if *count == 0 {
                        continue;
                    }
                    let labels = [("secret", secret.as_str()), ("event", kind.as_str())];
                    ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_refusals",
                "Requests refused, by the code sent in sluice-error.",
                None,
                MetricType::Counter,
            )?;
            for (code, count) in &sum.refusals {
                let labels = [("reason", *code)];
                ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_approvals",
                "Uses of a secret that waited for approval (approve:), by how the wait ended: allowed, denied, timed-out, full.",
                None,
                MetricType::Counter,
            )?;
            for (result, count) in &sum.approvals {
                let labels = [("result", *result)];
                ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_reloads",
                "Reloads of the declaration, by result (ok: in force; refused: the old one stays).",
                None,
                MetricType::Counter,
            )?;
            for (result, count) in [("ok", sum.reloads_ok), ("refused", sum.reloads_refused)] {
                let labels = [("result", result)];
                ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "sluice_mints",
                "Token requests sluice made for a minted secret, by the secret's declared name and the result (ok, or why it failed).",
                None,
                MetricType::Counter,
            )?;
            for ((secret, result), count) in &sum.mints {
                let labels = [("secret", secret.as_str()), ("result", *result)];
                ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
            }
        }
        for (name, help, histogram) in [
            (
                "sluice_request_duration",
                "Time from a request's arrival to its response head (refusals included).",
                &sum.request_duration,
            ),
            (
                "sluice_mint_wait",
                "Time a request waited for a token request (a token in force, or refreshed ahead of its expiry, costs no wait and is not observed).",
                &sum.mint_wait,
            ),
        ] {
            encoder
                .encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    histogram.sum_nanos as f64 / 1e9,
                    histogram.count,
                    &histogram.cumulative(),
                    None,
                )?;
        }
        let g = &self.gauges;
        for (name, help, pick) in [
            (
                "sluice_budget_used",
                "Requests a budgeted secret was swapped into in its current window, by the secret's declared name.",
                (|used, _| used) as fn(u64, u64) -> u64,
            ),
            (
                "sluice_budget_limit",
                "Requests per window a budgeted secret's budget allows, by the secret's declared name.",
                |_, limit| limit,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (secret, used, limit) in &g.budgets {
                let value = i64::try_from(pick(*used, *limit)).unwrap_or(i64::MAX);
                let labels = [("secret", secret.as_str())];
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        counter(
            &mut encoder,
            "sluice_tls_handshakes",
            "Client TLS handshakes completed with a leaf of the run CA.",
            sum.tls_handshakes,
        )?;
        counter(
            &mut encoder,
            "sluice_tls_handshake_failures",
            "Client TLS handshakes that failed (SNI mismatch, timeout, a client that distrusts the CA).",
            sum.tls_failures,
        )?;
        counter(
            &mut encoder,
            "sluice_upstream_dials",
            "Upstream connections dialled (each a miss of the upstream pool).",
            g.upstream_dials,
        )?;
        counter(
            &mut encoder,
            "sluice_scanned_bytes",
            "Body bytes the guard scanned, requests and responses, as decoded (headers not counted).",
            sum.scanned,
        )?;
        counter(
            &mut encoder,
            "sluice_audit_write_failures",
            "Audit writes that failed, and events refused by a failed log; while it is failed, sluice refuses to proxy.",
            g.audit_write_failures + sum.audit_failures,
        )?;
        counter(
            &mut encoder,
            "sluice_leaves_minted",
            "Leaf certificates the run CA minted (cache misses and renewals).",
            g.leaves_minted,
        )?;
        gauge(
            &mut encoder,
            "sluice_connections_open",
            "Client connections open now.",
            g.connections_open,
        )?;
        gauge(
            &mut encoder,
            "sluice_upstream_idle_connections",
            "Idle keep-alive connections in the HTTP/1.1 upstream pools (HTTP/2's pool does not tell).",
            g.upstream_idle,
        )?;
        gauge(
            &mut encoder,
            "sluice_leaves_cached",
            "Leaf certificates in the run CA's cache.",
            g.leaves_cached,
        )?;
        gauge(
            &mut encoder,
            "sluice_audit_queue",
            "Audit events waiting for the writer thread.",
            g.audit_queue,
        )?;
        gauge(
            &mut encoder,
            "sluice_secrets",
            "Secrets the declaration in force declares.",
            g.secrets,
        )?;
        gauge(
            &mut encoder,
            "sluice_guard_patterns",
            "Patterns of the guard in force: every form of every value the run has known.",
            g.guard_patterns,
        )?;
        gauge(
            &mut encoder,
            "sluice_guard_bytes",
            "Bytes the guard in force's matching tables take.",
            g.guard_bytes,
        )?;
        gauge(
            &mut encoder,
            "sluice_audit_healthy",
            "1 while the audit log is writable, 0 while it is failed (sluice then refuses to proxy).",
            u64::from(g.audit_healthy),
        )?;
        Ok(())
    }
}
