//! The console's data beyond the queue and the sagas (`serve/console.rs`
//! implements the trait with these): memory proposals with their source
//! episodes and the operator's decision on them (the functions
//! `/v1/memory/proposals` runs, [`super::rest_memory::list`] and
//! [`super::rest_memory::decide_one`]), the spend per day for the budget
//! chart, a neuron version's fitness per day, and the unified diff of an
//! `fs_write` approval's preview.

use crate::memory::HostMemory;
use crate::store::Store;
use capsaga_console::{BackendError, Decided, EpisodeView, FitnessDay, ProposalView, SpendDay};
use capsaga_core::neuron::fitness::fitness_by_day;
use serde_json::Value;
use std::sync::Arc;

fn internal(e: impl std::fmt::Display) -> BackendError {
    BackendError::Internal(e.to_string())
}

/// The proposals (pending, or every one when `all`), oldest first, each
/// with its source episodes.
///
/// # Errors
/// The memory store's.
pub async fn proposals(hm: Arc<HostMemory>, all: bool) -> Result<Vec<ProposalView>, BackendError> {
    let rows = tokio::task::spawn_blocking(move || {
        let mut rows = super::rest_memory::list(&hm.memory, all)?;
        rows.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let store = hm.memory.store();
        let mut out = Vec::with_capacity(rows.len());
        for p in rows {
            let ids: Vec<&str> = p.episode_ids.iter().map(String::as_str).collect();
            let found = store.episodes_by_id(&ids)?;
            let missing = p
                .episode_ids
                .iter()
                .filter(|id| !found.iter().any(|e| &e.episode_id == *id))
                .cloned()
                .collect();
            out.push(ProposalView {
                id: p.proposal_id,
                namespace: p.namespace,
                text: p.text,
                origin: p.origin,
                created_at: p.created_at,
                status: p.status,
                decided_by: p.decided_by,
                episodes: found
                    .into_iter()
                    .map(|e| EpisodeView {
                        id: e.episode_id,
                        started_at: e.started_at,
                        sender: e.sender,
                        user_message: e.user_message,
                        final_response: e.final_response,
                        outcome: e.outcome,
                    })
                    .collect(),
                missing_episodes: missing,
            });
        }
        Ok::<_, capsaga_memory::MemoryError>(out)
    })
    .await
    .map_err(internal)?;
    rows.map_err(internal)
}

/// Approve or discard `ids` for `by` (the operator's principal, as the
/// REST route records it), one by one through
/// [`super::rest_memory::decide_one`]; the message says what became of
/// each.
///
/// # Errors
/// [`BackendError::NotFound`] for an unknown id (those before it are
/// decided), the memory store's.
pub async fn decide(
    hm: Arc<HostMemory>,
    ids: Vec<String>,
    approve: bool,
    by: String,
) -> Result<Decided, BackendError> {
    tokio::task::spawn_blocking(move || {
        let mut done = 0usize;
        let mut skipped = Vec::new();
        for id in &ids {
            match super::rest_memory::decide_one(&hm.memory, id, approve, &by) {
                Ok(Ok(_)) => done += 1,
                Ok(Err(status)) => skipped.push(format!("{id} was already {status}")),
                Err(capsaga_memory::MemoryError::NotFound { .. }) => {
                    return Err(BackendError::NotFound(format!(
                        "proposal {id} ({done} decided before it)"
                    )));
                }
                Err(e) => return Err(internal(e)),
            }
        }
        let verb = if approve { "approved" } else { "discarded" };
        let mut message = format!("{done} proposal(s) {verb} by {by}");
        if !skipped.is_empty() {
            message.push_str("; ");
            message.push_str(&skipped.join("; "));
        }
        Ok(Decided { message })
    })
    .await
    .map_err(internal)?
}

/// The spend of the `days` UTC days up to `today` (`YYYY-MM-DD`), oldest
/// first, one entry per day (0 on days the store has no counters for).
///
/// # Errors
/// The store's.
pub async fn spend_history(
    store: &dyn Store,
    today: &str,
    days: u32,
) -> Result<Vec<SpendDay>, BackendError> {
    let rows = store.budget_days(days as usize).await.map_err(internal)?;
    let mut out = Vec::with_capacity(days as usize);
    let mut day = today.parse::<jiff::civil::Date>().ok();
    for _ in 0..days {
        let Some(d) = day else { break };
        let name = d.strftime("%Y-%m-%d").to_string();
        let row = rows.iter().find(|r| r.day == name);
        out.push(SpendDay {
            spent_usd: row.map_or(0.0, |r| r.spent_usd),
            calls: row.map_or(0, |r| r.calls),
            day: name,
        });
        day = d.yesterday().ok();
    }
    out.reverse();
    Ok(out)
}

/// Most days of a neuron's fitness chart (the newest days with calls).
pub const FITNESS_DAYS: usize = 30;

/// The fitness per UTC day of the tool identity `identity` (its logged
/// calls), the newest [`FITNESS_DAYS`] days with calls, oldest first.
///
/// # Errors
/// The store's.
pub async fn fitness(store: &dyn Store, identity: &str) -> Result<Vec<FitnessDay>, BackendError> {
    let calls = store.calls_of(identity).await.map_err(internal)?;
    let days = fitness_by_day(&calls);
    let skip = days.len().saturating_sub(FITNESS_DAYS);
    Ok(days
        .into_iter()
        .skip(skip)
        .map(|d| FitnessDay {
            day: d.day,
            calls: d.fitness.calls,
            ok: d.fitness.ok,
            success_rate: d.fitness.success_rate,
            p50_ms: d.fitness.p50_ms,
            p95_ms: d.fitness.p95_ms,
        })
        .collect())
}

/// Most bytes of old plus new content a diff is computed for.
pub const MAX_DIFF_INPUT: usize = 2 << 20;

/// A unified diff of what an `fs_write` call would change, from its
/// arguments (`content`, the new text) and its dry-run output (`data.previous`:
/// the file's current text, or that it does not exist). `None` for other
/// tools, a file that is not UTF-8 text (base64 pre-image), or content
/// over [`MAX_DIFF_INPUT`].
pub fn fs_write_diff(tool: &str, args: &Value, preview: Option<&Value>) -> Option<String> {
    if tool != "fs_write" {
        return None;
    }
    let new = args.get("content")?.as_str()?;
    let data = preview?.get("data")?;
    let prev = data.get("previous")?;
    let old = match prev.get("existed").and_then(Value::as_bool)? {
        false => "",
        true if prev.get("encoding").and_then(Value::as_str) == Some("utf8") => {
            prev.get("content")?.as_str()?
        }
        true => return None,
    };
    if old.len().saturating_add(new.len()) > MAX_DIFF_INPUT {
        return None;
    }
    let path = data
        .get("resolved_path")
        .and_then(Value::as_str)
        .or_else(|| data.get("path").and_then(Value::as_str))
        .or_else(|| args.get("path").and_then(Value::as_str))
        .unwrap_or("file");
    let before = if old.is_empty() && !prev["existed"].as_bool().unwrap_or(true) {
        "/dev/null".to_string()
    } else {
        format!("{path} (now)")
    };
    let text = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&before, &format!("{path} (after the write)"))
        .to_string();
    Some(if text.is_empty() {
        "(no change: the file already holds this content)".to_string()
    } else {
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_fs_write_preview_becomes_a_unified_diff() {
        let args = json!({"path": "/w/a.txt", "content": "one\ntwo!\nthree\n"});
        let preview = json!({"data": {"path": "/w/a.txt", "resolved_path": "/w/a.txt",
            "previous": {"existed": true, "content": "one\ntwo\nthree\n", "encoding": "utf8"}}});
        let d = fs_write_diff("fs_write", &args, Some(&preview)).unwrap_or_default();
        assert!(d.contains("--- /w/a.txt (now)"), "{d}");
        assert!(d.contains("-two\n") && d.contains("+two!\n"), "{d}");
        let created = json!({"data": {"path": "/w/b.txt", "previous": {"existed": false}}});
        let d = fs_write_diff("fs_write", &args, Some(&created)).unwrap_or_default();
        assert!(d.contains("--- /dev/null") && d.contains("+one\n"), "{d}");
        let binary = json!({"data": {"previous": {"existed": true, "content": "AAE=", "encoding": "base64"}}});
        assert_eq!(fs_write_diff("fs_write", &args, Some(&binary)), None);
        assert_eq!(fs_write_diff("http_request", &args, Some(&preview)), None);
        assert_eq!(fs_write_diff("fs_write", &args, None), None);
    }
}
