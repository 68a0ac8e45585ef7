//! Charts as inline SVG, rendered on the server by maud like the rest of
//! a page: no JavaScript, no inline script or style (colours come from
//! classes in `console.css`, so the strict CSP is unchanged), every label
//! escaped. Each chart is a `<figure>` with its SVG and, for readers and
//! tests, the same numbers in a `<table>` under `<details>`.
//!
//! Used by the budget page (spend per day against the day's soft and hard
//! caps) and the neurons page (calls, success rate and latency per day).

use crate::backend::{FitnessDay, HealthView, NeuronView};
use maud::{Markup, html};

/// Most days of the spend chart.
pub const MAX_CHART_DAYS: u32 = 366;

/// A horizontal reference line across a chart (a cap).
#[derive(Debug, Clone, Copy)]
pub struct Rule<'a> {
    /// Its label (`soft cap`).
    pub label: &'a str,
    /// Its value, in the chart's unit.
    pub value: f64,
    /// Its CSS class (`soft`, `hard`).
    pub class: &'a str,
}

/// A bar chart's data: one bar per `(label, value)`, `None` drawing no
/// bar (a day without data).
#[derive(Debug, Clone, Copy)]
pub struct Bars<'a> {
    /// The figure's id (`spend-chart`).
    pub id: &'a str,
    /// Its caption.
    pub caption: &'a str,
    /// The values' unit (`USD`, `%`, `ms`).
    pub unit: &'a str,
    /// The bars, left to right.
    pub points: &'a [(String, Option<f64>)],
    /// Reference lines.
    pub rules: &'a [Rule<'a>],
    /// A fixed top of the scale (`100` for percentages); otherwise the
    /// largest value or rule.
    pub max: Option<f64>,
    /// Decimals shown for values.
    pub decimals: usize,
}

const W: f64 = 640.0;
const H: f64 = 170.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

/// A finite, non-negative value (anything else is 0).
fn clean(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

fn num(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// Render `b` as a `<figure>` holding an inline SVG bar chart and a table
/// of the same numbers.
pub fn bars(b: &Bars<'_>) -> Markup {
    let values = b.points.iter().filter_map(|(_, v)| v.map(clean));
    let rules = b.rules.iter().map(|r| clean(r.value));
    let top = b
        .max
        .map(clean)
        .unwrap_or_else(|| values.chain(rules).fold(0.0, f64::max));
    let top = if top > 0.0 { top } else { 1.0 };
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| TOP + plot_h * (1.0 - (clean(v) / top).min(1.0));
    let n = b.points.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    let bar_w = (slot * 0.8).max(1.0);
    let first = b.points.first().map(|(l, _)| l.as_str()).unwrap_or("");
    let last = b.points.last().map(|(l, _)| l.as_str()).unwrap_or("");
    html! {
        figure .chart id=(b.id) {
            figcaption { (b.caption) }
            svg viewBox={"0 0 " (W) " " (H)} width=(W) height=(H) role="img" aria-label=(b.caption) {
                line .axis x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(H - BOTTOM) {}
                line .axis x1=(LEFT) y1=(H - BOTTOM) x2=(W - RIGHT) y2=(H - BOTTOM) {}
                text .tick x=(LEFT - 4.0) y=(TOP + 4.0) text-anchor="end" { (num(top, b.decimals)) " " (b.unit) }
                text .tick x=(LEFT - 4.0) y=(H - BOTTOM) text-anchor="end" { "0" }
                @for (i, (label, v)) in b.points.iter().enumerate() {
                    @if let Some(v) = v {
                        rect .bar x=(num(LEFT + slot * i as f64 + (slot - bar_w) / 2.0, 1)) y=(num(y(*v), 1))
                            width=(num(bar_w, 1)) height=(num(H - BOTTOM - y(*v), 1)) {
                            title { (label) ": " (num(clean(*v), b.decimals)) " " (b.unit) }
                        }
                    }
                }
                @for r in b.rules {
                    line class={"rule " (r.class)} x1=(LEFT) y1=(num(y(r.value), 1)) x2=(W - RIGHT) y2=(num(y(r.value), 1)) {
                        title { (r.label) ": " (num(clean(r.value), b.decimals)) " " (b.unit) }
                    }
                    text class={"rule-label " (r.class)} x=(W - RIGHT - 2.0) y=(num(y(r.value) - 3.0, 1)) text-anchor="end" {
                        (r.label) " " (num(clean(r.value), b.decimals))
                    }
                }
                text .tick x=(LEFT) y=(H - 6.0) { (first) }
                @if b.points.len() > 1 {
                    text .tick x=(W - RIGHT) y=(H - 6.0) text-anchor="end" { (last) }
                }
            }
            details {
                summary { "the numbers" }
                table .chart-data {
                    thead { tr { th { "day" } th { (b.unit) } } }
                    tbody {
                        @for (label, v) in b.points {
                            tr { td { (label) } td { (v.map(|v| num(clean(v), b.decimals)).unwrap_or_else(|| "-".into())) } }
                        }
                    }
                }
            }
        }
    }
}

/// The budget page's chart: spend per day against the day's caps.
pub fn spend(h: &HealthView) -> Markup {
    let points: Vec<(String, Option<f64>)> = h
        .history
        .iter()
        .map(|d| (d.day.clone(), Some(d.spent_usd)))
        .collect();
    let mut rules = Vec::new();
    if let Some(s) = h.soft_cap_usd {
        rules.push(Rule {
            label: "soft cap",
            value: s,
            class: "soft",
        });
    }
    if let Some(c) = h.hard_cap_usd {
        rules.push(Rule {
            label: "hard cap",
            value: c,
            class: "hard",
        });
    }
    let caption = format!("Spend per UTC day, last {} days", h.history.len());
    bars(&Bars {
        id: "spend-chart",
        caption: &caption,
        unit: "USD",
        points: &points,
        rules: &rules,
        max: None,
        decimals: 2,
    })
}

/// The neurons page's charts of one version: calls, success rate and
/// median latency per day (empty when it has no logged call).
pub fn fitness(n: &NeuronView) -> Markup {
    if n.fitness.is_empty() {
        return html! { p .empty { "No logged call yet: no fitness to chart." } };
    }
    let series = |f: &dyn Fn(&FitnessDay) -> Option<f64>| -> Vec<(String, Option<f64>)> {
        n.fitness.iter().map(|d| (d.day.clone(), f(d))).collect()
    };
    let calls = series(&|d| Some(d.calls as f64));
    let rate = series(&|d| d.success_rate.map(|r| r * 100.0));
    let p50 = series(&|d| d.p50_ms.map(|m| m as f64));
    let id = |what: &str| format!("fitness-{what}-{}-{}", n.name, n.version);
    html! {
        div .fitness {
            (bars(&Bars { id: &id("calls"), caption: "Calls per day", unit: "calls", points: &calls, rules: &[], max: None, decimals: 0 }))
            (bars(&Bars { id: &id("success"), caption: "Success rate per day", unit: "%", points: &rate, rules: &[], max: Some(100.0), decimals: 1 }))
            (bars(&Bars { id: &id("latency"), caption: "Median latency per day", unit: "ms", points: &p50, rules: &[], max: None, decimals: 0 }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::SpendDay;

    #[test]
    fn a_chart_is_svg_without_script_and_escapes_labels() {
        let points = vec![
            ("<script>x()</script>".to_string(), Some(2.0)),
            ("2026-01-02".to_string(), None),
            ("2026-01-03".to_string(), Some(f64::NAN)),
            ("2026-01-04".to_string(), Some(4.0)),
        ];
        let rules = [Rule {
            label: "hard \"cap\"",
            value: 8.0,
            class: "hard",
        }];
        let html = bars(&Bars {
            id: "c",
            caption: "<b>spend</b>",
            unit: "USD",
            points: &points,
            rules: &rules,
            max: None,
            decimals: 2,
        })
        .into_string();
        assert!(html.contains("<svg"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;script&gt;x()"));
        assert!(
            !html.contains("style="),
            "no inline style: the CSP has no 'unsafe-inline'"
        );
        // Three bars (the day without data has none), one rule.
        assert_eq!(html.matches("<rect").count(), 3, "{html}");
        assert_eq!(html.matches("class=\"rule hard\"").count(), 1);
        // The rule (8) is the top of the scale: 4 USD is half the plot.
        assert!(html.contains("8.00 USD"), "{html}");
        assert!(!html.contains("NaN"), "{html}");
    }

    #[test]
    fn a_neurons_fitness_is_three_charts_of_its_days() {
        let day = |d: u32, calls: u64, ok: u64, p50: Option<u64>| FitnessDay {
            day: format!("2026-01-0{d}"),
            calls,
            ok,
            success_rate: (calls > 0).then(|| ok as f64 / calls as f64),
            p50_ms: p50,
            p95_ms: p50,
        };
        let mut n = NeuronView {
            name: "csv_stats".into(),
            version: 2,
            status: "active".into(),
            description: String::new(),
            source: String::new(),
            examples: String::new(),
            report: None,
            requested: Vec::new(),
            granted: Vec::new(),
            withheld: Vec::new(),
            decided_by: None,
            created_at: String::new(),
            fitness: Vec::new(),
        };
        assert!(fitness(&n).into_string().contains("No logged call yet"));
        n.fitness = vec![
            day(1, 4, 3, Some(12)),
            day(2, 2, 2, None),
            day(3, 1, 0, Some(40)),
        ];
        let html = fitness(&n).into_string();
        for what in ["calls", "success", "latency"] {
            assert!(
                html.contains(&format!("id=\"fitness-{what}-csv_stats-2\"")),
                "{html}"
            );
        }
        // 3 call bars, 3 success bars, 2 latency bars (day 2 has no median).
        assert_eq!(html.matches("<rect").count(), 8, "{html}");
        // The success rate is on a 0-100 % scale: 75 % of the first day.
        assert!(
            html.contains("75.0 %") && html.contains("100.0 %"),
            "{html}"
        );
        assert!(html.contains("40 ms"), "{html}");
    }

    #[test]
    fn the_spend_chart_draws_both_caps() {
        let h = HealthView {
            day: "2026-01-03".into(),
            spent_today_usd: 1.5,
            soft_cap_usd: Some(2.0),
            hard_cap_usd: Some(5.0),
            switch: "normal".into(),
            audit: "ok".into(),
            healthz: "{}".into(),
            providers: vec!["scripted".into()],
            default_provider: Some("scripted".into()),
            mode: "simulation".into(),
            store: "sqlite".into(),
            policy_sha256: "ab".repeat(32),
            hosts: Vec::new(),
            history: (1..=3)
                .map(|d| SpendDay {
                    day: format!("2026-01-0{d}"),
                    spent_usd: d as f64 / 2.0,
                    calls: d,
                })
                .collect(),
        };
        let html = spend(&h).into_string();
        assert!(html.contains("id=\"spend-chart\""));
        assert!(html.contains("soft cap 2.00") && html.contains("hard cap 5.00"));
        assert_eq!(html.matches("<rect").count(), 3);
        assert!(html.contains("last 3 days"));
    }
}
