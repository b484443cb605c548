//! The report as one self-contained HTML page: inline CSS and SVG, no script, nothing
//! fetched. The template (`audit/templates/report.html`) escapes every text it is given;
//! this module hands it only text made visible ([`shown`]: control characters as their
//! Unicode pictures, so an ANSI escape in a host name reads as text) and SVG geometry made
//! of numbers it computed itself. Nothing from the log reaches the page unescaped.

use std::collections::HashMap;

use askama::Template;

use super::{Flow, Named, Report, count_rows};

/// The page's template and what it shows.
#[derive(Template)]
#[template(path = "report.html")]
struct Page {
    report: Report,
    intact: bool,
    verdict: String,
    counts: Vec<(&'static str, u64)>,
    flows: FlowPicture,
    timeline: TimelineChart,
}

impl Report {
    /// The page, ready to write to a `.html` file.
    ///
    /// # Errors
    ///
    /// When the template cannot render (a bug: the template is compiled in).
    pub fn to_html(&self) -> Result<String, askama::Error> {
        let report = visible(self.clone());
        let broken = report.logs.iter().filter(|log| !log.intact).count();
        let verdict = if broken == 0 {
            format!(
                "Every chain verified: {} log(s), {} run(s), {} line(s).",
                report.logs.len(),
                report.totals.runs,
                report.totals.lines
            )
        } else {
            format!(
                "{broken} of {} log(s) do not verify: their events are counted only up to the break.",
                report.logs.len()
            )
        };
        let page = Page {
            counts: count_rows(&report.totals.counts),
            flows: FlowPicture::draw(&report.flows),
            timeline: TimelineChart::draw(&report.timeline),
            intact: broken == 0,
            verdict,
            report,
        };
        page.render()
    }
}

/// Text from the log made safe to show: control characters become their Unicode control
/// pictures (ESC → `␛`), so nothing drives a terminal or hides in the page. (HTML escaping
/// is the template's.)
pub(super) fn shown(text: &str) -> String {
    text.chars()
        .map(|c| match u32::from(c) {
            code @ 0..=0x1f => char::from_u32(0x2400 + code).unwrap_or('\u{fffd}'),
            0x7f => '\u{2421}',
            // C1 controls, and the bidirectional and line controls that can make a host
            // name read as another.
            0x80..=0x9f
            | 0x061c
            | 0x200e
            | 0x200f
            | 0x2028
            | 0x2029
            | 0x202a..=0x202e
            | 0x2066..=0x2069 => '\u{fffd}',
            _ => c,
        })
        .collect()
}

/// Every text of the report through [`shown`].
fn visible(mut report: Report) -> Report {
    let fix = |s: &mut String| *s = shown(s);
    let fix_named = |list: &mut Vec<Named>| {
        for named in list {
            *named = Named {
                name: shown(&named.name),
                detail: shown(&named.detail),
                count: named.count,
            };
        }
    };
    for log in &mut report.logs {
        log.files.iter_mut().for_each(fix);
        if let Some(broken) = &mut log.broken {
            fix(&mut broken.file);
            fix(&mut broken.why);
        }
        for run in &mut log.runs {
            for s in [
                &mut run.run_id,
                &mut run.version,
                &mut run.policy_sha256,
                &mut run.ca_sha256,
                &mut run.started,
                &mut run.ended,
            ] {
                fix(s);
            }
            for (setting, value) in &mut run.settings {
                fix(setting);
                fix(value);
            }
        }
    }
    for flow in &mut report.flows {
        fix(&mut flow.secret);
        fix(&mut flow.host);
    }
    for group in &mut report.refusals {
        fix(&mut group.reason);
        fix(&mut group.fix);
        fix_named(&mut group.secrets);
        fix_named(&mut group.hosts);
        fix_named(&mut group.paths);
    }
    fix_named(&mut report.denied);
    fix_named(&mut report.auth_failures);
    fix_named(&mut report.materialized);
    fix_named(&mut report.mints);
    fix_named(&mut report.approvals);
    fix_named(&mut report.unused_grants);
    report.withheld.iter_mut().for_each(fix);
    for reload in &mut report.reloads {
        for s in [
            &mut reload.ts,
            &mut reload.run_id,
            &mut reload.result,
            &mut reload.policy_sha256,
        ] {
            fix(s);
        }
    }
    report
}

/// The flows as SVG: secrets on the left, hosts on the right, one band per pair and kind,
/// its thickness the events'.
pub(super) struct FlowPicture {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) left: Vec<Node>,
    pub(super) right: Vec<Node>,
    pub(super) bands: Vec<Band>,
}

/// A secret or a host: a bar and its label.
pub(super) struct Node {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) h: f64,
    pub(super) label: String,
    pub(super) label_y: f64,
    pub(super) count: u64,
}

/// One pair's events of one kind.
pub(super) struct Band {
    /// The path's geometry: numbers only.
    pub(super) d: String,
    /// The CSS class, one of four fixed names.
    pub(super) class: &'static str,
    pub(super) title: String,
}

const WIDTH: u32 = 960;
const LEFT_X: f64 = 230.0;
const RIGHT_X: f64 = 718.0;
const NODE_W: f64 = 12.0;
const GAP: f64 = 10.0;
const TOP: f64 = 10.0;
/// Height given to the events (before gaps).
const FLOW_HEIGHT: f64 = 420.0;

impl FlowPicture {
    fn draw(flows: &[Flow]) -> FlowPicture {
        const KINDS: [&str; 4] = ["swap", "verbatim", "refused", "redacted"];
        let total = flows
            .iter()
            .map(Flow::total)
            .fold(0u64, u64::saturating_add);
        let scale = if total == 0 {
            0.0
        } else {
            FLOW_HEIGHT / total as f64
        };
        // Each band's thickness, then each node's height as the sum of its bands'.
        let mut bands = Vec::new();
        for flow in flows {
            let counts = [flow.swap, flow.verbatim, flow.refused, flow.redacted];
            for (kind, count) in KINDS.into_iter().zip(counts) {
                if count > 0 {
                    bands.push((flow, kind, count, (count as f64 * scale).max(1.5)));
                }
            }
        }
        let secrets = first_seen(flows.iter().map(|f| f.secret.as_str()));
        let hosts = first_seen(flows.iter().map(|f| f.host.as_str()));
        let size = |names: &[&str], side: fn(&Flow) -> &str| -> Vec<(f64, u64)> {
            names
                .iter()
                .map(|name| {
                    bands
                        .iter()
                        .filter(|(flow, ..)| side(flow) == *name)
                        .fold((0.0, 0u64), |(h, n), (_, _, count, t)| {
                            (h + t, n.saturating_add(*count))
                        })
                })
                .collect()
        };
        let left_sizes = size(&secrets, |f| f.secret.as_str());
        let right_sizes = size(&hosts, |f| f.host.as_str());
        let stack = |names: &[&str], sizes: &[(f64, u64)], x: f64| -> Vec<Node> {
            let mut y = TOP;
            names
                .iter()
                .zip(sizes)
                .map(|(name, &(h, count))| {
                    let node = Node {
                        x,
                        y,
                        h,
                        label: if name.is_empty() {
                            "(none)".to_owned()
                        } else {
                            (*name).to_owned()
                        },
                        label_y: y + h / 2.0 + 4.0,
                        count,
                    };
                    y += h + GAP;
                    node
                })
                .collect()
        };
        let left = stack(&secrets, &left_sizes, LEFT_X);
        let right = stack(&hosts, &right_sizes, RIGHT_X);
        let mut left_cursor: HashMap<&str, f64> = secrets
            .iter()
            .zip(&left)
            .map(|(n, node)| (*n, node.y))
            .collect();
        let mut right_cursor: HashMap<&str, f64> = hosts
            .iter()
            .zip(&right)
            .map(|(n, node)| (*n, node.y))
            .collect();
        let (x1, x2) = (LEFT_X + NODE_W, RIGHT_X);
        let mid = f64::midpoint(x1, x2);
        let paths = bands
            .iter()
            .map(|(flow, kind, count, t)| {
                let y1 = left_cursor.get(flow.secret.as_str()).copied().unwrap_or(TOP);
                let y2 = right_cursor.get(flow.host.as_str()).copied().unwrap_or(TOP);
                left_cursor.insert(flow.secret.as_str(), y1 + t);
                right_cursor.insert(flow.host.as_str(), y2 + t);
                Band {
                    d: format!(
                        "M{x1:.1} {y1:.1} C{mid:.1} {y1:.1} {mid:.1} {y2:.1} {x2:.1} {y2:.1} L{x2:.1} {b2:.1} C{mid:.1} {b2:.1} {mid:.1} {b1:.1} {x1:.1} {b1:.1} Z",
                        b1 = y1 + t,
                        b2 = y2 + t,
                    ),
                    class: kind,
                    title: format!("{} → {}: {count} {kind}", flow.secret, flow.host),
                }
            })
            .collect();
        let bottom = |nodes: &[Node]| nodes.last().map_or(TOP, |n| n.y + n.h);
        let height = (bottom(&left).max(bottom(&right)) + TOP).ceil() as u32;
        FlowPicture {
            width: WIDTH,
            height: height.max(40),
            left,
            right,
            bands: paths,
        }
    }
}

/// Each name once, in the order first seen.
fn first_seen<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for name in names {
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}

/// The timeline as SVG bars: events in grey, refusals over them in red.
pub(super) struct TimelineChart {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) bars: Vec<Bar>,
    pub(super) first: String,
    pub(super) last: String,
    pub(super) per: String,
}

/// One bucket's bars.
pub(super) struct Bar {
    pub(super) x: f64,
    pub(super) w: f64,
    pub(super) y: f64,
    pub(super) h: f64,
    pub(super) ry: f64,
    pub(super) rh: f64,
    pub(super) title: String,
}

const CHART_H: f64 = 140.0;

impl TimelineChart {
    fn draw(timeline: &super::Timeline) -> TimelineChart {
        let n = timeline.buckets.len().max(1) as f64;
        // A short run has few buckets: bars stay bars, not a wall.
        let w = (f64::from(WIDTH) / n).min(24.0);
        let peak = timeline.peak.max(1) as f64;
        let bars = timeline
            .buckets
            .iter()
            .enumerate()
            .map(|(i, bucket)| {
                let h = bucket.events as f64 / peak * CHART_H;
                let rh = bucket.refusals as f64 / peak * CHART_H;
                Bar {
                    x: i as f64 * w,
                    w: (w - 0.5).max(0.5),
                    y: 10.0 + CHART_H - h,
                    h,
                    ry: 10.0 + CHART_H - rh,
                    rh,
                    title: format!(
                        "{}: {} events, {} refused",
                        bucket.at, bucket.events, bucket.refusals
                    ),
                }
            })
            .collect();
        let per = match timeline.bucket_seconds {
            60 => "minute".to_owned(),
            s if s % 3600 == 0 => format!("{} h", s / 3600),
            s => format!("{} min", s / 60),
        };
        TimelineChart {
            width: WIDTH,
            height: (CHART_H + 20.0) as u32,
            bars,
            first: timeline
                .buckets
                .first()
                .map(|b| b.at.clone())
                .unwrap_or_default(),
            last: timeline
                .buckets
                .last()
                .map(|b| b.at.clone())
                .unwrap_or_default(),
            per,
        }
    }
}
