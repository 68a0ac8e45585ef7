//! Fitness of a neuron version from the log of its calls (seed 000: the
//! trace is the source of the neurons' "darwinian" fitness): how often it is
//! called, how often it succeeds, how it fails, how long it takes.

use super::RetireBelow;
use serde::Serialize;
use std::collections::BTreeMap;

/// One logged call of a neuron.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// Whether the call succeeded (committed, even if later compensated).
    pub ok: bool,
    /// The error kind of a failed call (`invalid-args`, ...).
    pub error_kind: Option<String>,
    /// From BEGIN to its outcome, milliseconds (when both are known).
    pub latency_ms: Option<u64>,
    /// When the call began (the step's BEGIN), RFC 3339, when known.
    pub at: Option<String>,
}

/// The fitness of one neuron version.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Fitness {
    /// Calls logged (finished ones: committed or failed).
    pub calls: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// `ok / calls`, 0.0-1.0 (None without calls).
    pub success_rate: Option<f64>,
    /// Failures by error kind.
    pub error_kinds: BTreeMap<String, u64>,
    /// Median latency, milliseconds (nearest rank).
    pub p50_ms: Option<u64>,
    /// 95th percentile latency, milliseconds (nearest rank).
    pub p95_ms: Option<u64>,
}

/// Nearest-rank percentile `p` (0-100) of sorted `v`.
fn percentile(v: &[u64], p: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len()) - 1).copied()
}

/// Fold the calls of one version into its fitness.
pub fn fitness(calls: &[CallRecord]) -> Fitness {
    let mut f = Fitness::default();
    let mut lat: Vec<u64> = Vec::new();
    for c in calls {
        f.calls += 1;
        if c.ok {
            f.ok += 1;
        } else {
            let k = c.error_kind.clone().unwrap_or_else(|| "unknown".into());
            *f.error_kinds.entry(k).or_default() += 1;
        }
        lat.extend(c.latency_ms);
    }
    lat.sort_unstable();
    f.success_rate = (f.calls > 0).then(|| f.ok as f64 / f.calls as f64);
    f.p50_ms = percentile(&lat, 50.0);
    f.p95_ms = percentile(&lat, 95.0);
    f
}

/// The fitness of one UTC day (`YYYY-MM-DD`) of a version's calls.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct DayFitness {
    /// The day, `YYYY-MM-DD` (the first ten characters of the calls' `at`).
    pub day: String,
    /// That day's fitness.
    pub fitness: Fitness,
}

/// Fold the calls of one version into one fitness per day, oldest day
/// first; calls without a time (or whose time does not start with a
/// `YYYY-MM-DD` date) are left out.
pub fn fitness_by_day(calls: &[CallRecord]) -> Vec<DayFitness> {
    let mut days: BTreeMap<&str, Vec<CallRecord>> = BTreeMap::new();
    for c in calls {
        let Some(day) = c.at.as_deref().and_then(|a| a.get(..10)) else {
            continue;
        };
        let b = day.as_bytes();
        let date = b.len() == 10
            && b.iter().enumerate().all(|(i, ch)| match i {
                4 | 7 => *ch == b'-',
                _ => ch.is_ascii_digit(),
            });
        if date {
            days.entry(day).or_default().push(c.clone());
        }
    }
    days.into_iter()
        .map(|(day, cs)| DayFitness {
            day: day.to_string(),
            fitness: fitness(&cs),
        })
        .collect()
}

/// Whether `f` falls below the retirement threshold: at least `min_calls`
/// calls and a success rate under `success_rate`.
pub fn should_retire(f: &Fitness, below: &RetireBelow) -> bool {
    f.calls >= below.min_calls && f.success_rate.is_some_and(|r| r < below.success_rate)
}
