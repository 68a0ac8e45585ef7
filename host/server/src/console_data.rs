//! The console's data beyond the queue and the sagas (`serve/console.rs`
//! implements the trait with these): memory proposals with their source
//! episodes and the operator's decision on them (the functions
//! `/v1/memory/proposals` runs, [`super::rest_memory::list`] and
//! [`super::rest_memory::decide_one`]), the spend per day for the budget
//! chart, a neuron version's fitness per day, and the unified diff of an
//! `fs_write` approval's preview.

use capsaga_console::{BackendError, Decided, EpisodeView, FitnessDay, ProposalView, SpendDay};
use capsaga_core::neuron::fitness::fitness_by_day;
use capsaga_door::memory::HostMemory;
use capsaga_store::Store;
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
/// the file's current text, or that it does not exist). When the dry run
/// gives no text of the current file (no preview, a preview without
/// `previous`, or a binary file: a base64 pre-image), every line of the new
/// content is shown as added, under a header saying why the current content
/// is not shown; content over [`MAX_DIFF_INPUT`] bytes (old plus new) is
/// named by size, not diffed. `None` for other tools and for arguments
/// without a text `content` (the call is refused at validation anyway).
pub fn fs_write_diff(tool: &str, args: &Value, preview: Option<&Value>) -> Option<String> {
    if tool != "fs_write" {
        return None;
    }
    let new = args.get("content")?.as_str()?;
    let data = preview.and_then(|p| p.get("data"));
    let prev = data.and_then(|d| d.get("previous"));
    let path = data
        .and_then(|d| d.get("resolved_path").and_then(Value::as_str))
        .or_else(|| data.and_then(|d| d.get("path").and_then(Value::as_str)))
        .or_else(|| args.get("path").and_then(Value::as_str))
        .unwrap_or("file");
    let existed = prev.and_then(|p| p.get("existed")).and_then(Value::as_bool);
    let text = prev
        .filter(|p| p.get("encoding").and_then(Value::as_str) == Some("utf8"))
        .and_then(|p| p.get("content"))
        .and_then(Value::as_str);
    let (old, before) = match (existed, text) {
        (Some(false), _) => ("", "/dev/null".to_string()),
        (Some(true), Some(old)) => (old, format!("{path} (now)")),
        (Some(true), None) => ("", format!("{path} (now: binary content, not shown)")),
        (None, _) => (
            "",
            format!("{path} (now: the dry run did not report the current content)"),
        ),
    };
    if old.len().saturating_add(new.len()) > MAX_DIFF_INPUT {
        return Some(format!(
            "(too large to diff here: {} bytes now, {} bytes after the write)",
            old.len(),
            new.len()
        ));
    }
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

/// What an operator checks first in an approval of `http_request` or
/// `code_run`, from its arguments and dry-run preview: `(title, text)`.
/// - `http_request`: the method and URL, each extra header, the body's size
///   and kind, what the URL answers now (the dry run's GET) and the undo
///   request the dry run planned.
/// - `code_run`: the SHA-256 of the code and its purpose, each input with
///   its path, SHA-256 and size (as read at dry-run time), the output
///   directory and the file kinds it may write.
///
/// `None` for other tools (`fs_write` has its diff) or when neither the
/// arguments nor the preview have the fields. The text is untrusted (the
/// model wrote the arguments): the page escapes it.
pub fn request_essentials(
    tool: &str,
    args: &Value,
    preview: Option<&Value>,
) -> Option<(String, String)> {
    let data = preview.and_then(|p| p.get("data"));
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let mut out = Vec::new();
    match tool {
        "http_request" => {
            let method = s(args.get("method")).unwrap_or_else(|| "?".into());
            let url = s(args.get("url"))?;
            out.push(format!("{} {url}", method.to_ascii_uppercase()));
            if let Some(h) = args.get("headers").and_then(Value::as_object) {
                for (k, v) in h {
                    out.push(format!("{k}: {}", v.as_str().unwrap_or("(not text)")));
                }
            }
            match (args.get("json"), s(args.get("body"))) {
                (Some(j), _) if !j.is_null() => {
                    out.push(format!("body: JSON, {} bytes", j.to_string().len()));
                }
                (_, Some(b)) => out.push(format!("body: text, {} bytes", b.len())),
                _ => out.push("body: none".into()),
            }
            if let Some(st) = data
                .and_then(|d| d.get("current_status"))
                .and_then(Value::as_u64)
            {
                out.push(format!("the URL answers GET with {st} now"));
            }
            if let Some(u) = data.and_then(|d| d.get("undo")).filter(|u| !u.is_null()) {
                out.push(format!(
                    "undo if rolled back: {} {}",
                    s(u.get("method")).unwrap_or_default(),
                    s(u.get("url")).unwrap_or_default()
                ));
            }
            Some(("Request".into(), out.join("\n")))
        }
        "code_run" => {
            let sha = s(data.and_then(|d| d.get("code_sha256")))?;
            out.push(format!("code sha256:{sha}"));
            if let Some(p) = s(data.and_then(|d| d.get("purpose"))) {
                out.push(format!("purpose: {p}"));
            }
            let inputs = data
                .and_then(|d| d.get("inputs"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if inputs.is_empty() {
                out.push("inputs: none".into());
            }
            for i in &inputs {
                out.push(format!(
                    "input {} = {} sha256:{} ({} bytes)",
                    s(i.get("name")).unwrap_or_default(),
                    s(i.get("path")).unwrap_or_default(),
                    s(i.get("sha256")).unwrap_or_default(),
                    i.get("bytes").and_then(Value::as_u64).unwrap_or(0)
                ));
            }
            match s(data.and_then(|d| d.get("output_dir"))) {
                Some(dir) => {
                    let kinds: Vec<String> = data
                        .and_then(|d| d.get("output_extensions"))
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|e| s(Some(e))).collect())
                        .unwrap_or_default();
                    out.push(format!("writes into {dir} ({})", kinds.join(", ")));
                }
                None => out.push("writes no file".into()),
            }
            Some(("Code and inputs".into(), out.join("\n")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn http_and_code_run_approvals_show_their_essentials() {
        let args = json!({"method": "put", "url": "https://api.example.com/x",
            "headers": {"X-Trace": "1"}, "json": {"a": 1}});
        let preview = json!({"data": {"current_status": 200,
            "undo": {"method": "PUT", "url": "https://api.example.com/x"}}});
        let (title, text) = request_essentials("http_request", &args, Some(&preview)).unwrap();
        assert_eq!(title, "Request");
        assert_eq!(
            text,
            "PUT https://api.example.com/x\nX-Trace: 1\nbody: JSON, 7 bytes\nthe URL answers GET with 200 now\nundo if rolled back: PUT https://api.example.com/x"
        );
        let preview = json!({"data": {"code_sha256": "ab12", "purpose": "sum",
            "inputs": [{"name": "s.csv", "path": "/w/s.csv", "sha256": "cd34", "bytes": 9}],
            "output_dir": "/w/out", "output_extensions": ["csv", "json"]}});
        let (title, text) = request_essentials("code_run", &json!({}), Some(&preview)).unwrap();
        assert_eq!(title, "Code and inputs");
        assert_eq!(
            text,
            "code sha256:ab12\npurpose: sum\ninput s.csv = /w/s.csv sha256:cd34 (9 bytes)\nwrites into /w/out (csv, json)"
        );
        assert_eq!(request_essentials("code_run", &json!({}), None), None);
        assert_eq!(request_essentials("fs_write", &args, Some(&preview)), None);
    }

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
        assert_eq!(fs_write_diff("http_request", &args, Some(&preview)), None);
        assert_eq!(
            fs_write_diff("fs_write", &json!({"path": "/w/a.txt"}), None),
            None
        );
    }

    #[test]
    fn without_the_current_text_the_new_content_is_shown_whole_and_says_why() {
        let args = json!({"path": "/w/a.txt", "content": "one\ntwo\n"});
        let binary = json!({"data": {"previous": {"existed": true, "content": "AAE=", "encoding": "base64"}}});
        let d = fs_write_diff("fs_write", &args, Some(&binary)).unwrap_or_default();
        assert!(
            d.contains("--- /w/a.txt (now: binary content, not shown)"),
            "{d}"
        );
        assert!(d.contains("+one\n+two\n") && !d.contains("AAE="), "{d}");
        for preview in [
            None,
            Some(json!({"data": {"path": "/w/a.txt"}})),
            Some(json!("refused")),
        ] {
            let d = fs_write_diff("fs_write", &args, preview.as_ref()).unwrap_or_default();
            assert!(d.contains("did not report the current content"), "{d}");
            assert!(
                d.contains("+++ /w/a.txt (after the write)") && d.contains("+two\n"),
                "{d}"
            );
        }
        let big = "x".repeat(MAX_DIFF_INPUT + 1);
        let d = fs_write_diff("fs_write", &json!({"path": "/w/a", "content": big}), None);
        assert!(d.is_some_and(|d| d.starts_with("(too large to diff here")));
    }
}
