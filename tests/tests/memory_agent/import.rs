//! Past conversations imported (issue 49) through the real binary and the
//! REST API: `capsaga memory import` twice adds nothing, a bad line is
//! skipped with its number or refuses the whole file, an export imports
//! back as nothing new; an import killed mid-way (a real child process,
//! SIGKILL) leaves only whole sessions and running it again completes it;
//! `POST /v1/memory/import` is an operator's; `memory_fetch` fits its
//! answer to the agent's cap on a tool result.

use super::*;
use crate::tools::TOOLS_POLICY;

/// `n` sessions of alternately 5 to 9 exchanges for two senders, one line
/// each; returns the file's text and each session's exchange count.
fn sessions(n: usize) -> (String, Vec<(String, usize)>) {
    let mut text = String::new();
    let mut sizes = Vec::new();
    for s in 0..n {
        let k = 5 + s % 5;
        let turns: Vec<serde_json::Value> = (0..k)
            .flat_map(|t| {
                [
                    serde_json::json!({"role": "user", "content": format!("Session {s} turn {t}: what should I cook with {} tomatoes?", t + s)}),
                    serde_json::json!({"role": "assistant", "content": format!("A sauce for {} people.", t + 2)}),
                ]
            })
            .collect();
        let id = format!("imp-{s:03}");
        let line = serde_json::json!({
            "sender": format!("token:user{}", s % 2),
            "session_id": id,
            "started_at": format!("2025-{:02}-{:02}T09:00:00Z", 1 + s % 12, 1 + s % 28),
            "turns": turns,
        });
        text.push_str(&format!("{line}\n"));
        sizes.push((id, k));
    }
    (text, sizes)
}

fn db(ws: &TestWorkspace) -> std::path::PathBuf {
    ws.root.join(".capsaga/memory/episodes.db")
}

/// Episodes in the memory database so far, 0 while its schema is not
/// there yet (read beside a writer that is creating it).
fn landed_so_far(ws: &TestWorkspace) -> usize {
    let Ok(c) =
        rusqlite::Connection::open_with_flags(db(ws), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    c.query_row("SELECT count(*) FROM episodes", [], |r| r.get::<_, i64>(0))
        .map_or(0, |n| n as usize)
}

/// Episodes per session in the memory database (read beside a writer).
fn per_session(ws: &TestWorkspace) -> std::collections::BTreeMap<String, usize> {
    let c =
        rusqlite::Connection::open_with_flags(db(ws), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let mut st = c
        .prepare("SELECT session_id, count(*) FROM episodes GROUP BY session_id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn capsaga_memory_import_is_idempotent_skips_or_refuses_bad_lines_and_exports_back() {
    if !model_installed(
        "capsaga_memory_import_is_idempotent_skips_or_refuses_bad_lines_and_exports_back",
    ) {
        return;
    }
    let ws = workspace(&[], "");
    let (good, _) = sessions(4);
    let file = ws.root.join("past.jsonl");
    let bad_file = ws.root.join("bad.jsonl");
    std::fs::write(&file, &good).unwrap();
    std::fs::write(&bad_file, format!("{good}{{\"sender\": 1}}\n")).unwrap();
    let import = |f: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["--json", "memory", "import", f.to_str().unwrap()];
        args.extend_from_slice(extra);
        ws.capsaga(&args).output().unwrap()
    };
    // Refused whole: nothing imported, the bad line named.
    let out = import(&bad_file, &["--on-error", "refuse"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["bad"][0]["line"], 5, "{r}");
    assert_eq!(r["exit_code"], 2, "{r}");
    assert!(per_session(&ws).is_empty());
    // Skipped: the rest imported, the bad line reported.
    let r = json_of(&import(&bad_file, &[]));
    assert_eq!(
        (r["added"].as_u64(), r["bad_lines"].as_u64()),
        (Some(26), Some(1)),
        "{r}"
    );
    assert_eq!(r["bad"][0]["line"], 5);
    // The good file again: nothing added.
    let r = json_of(&import(&file, &[]));
    assert_eq!(
        (r["added"].as_u64(), r["already"].as_u64()),
        (Some(0), Some(26)),
        "{r}"
    );
    // Exported and imported back: nothing added; the file holds each
    // session once, its exchanges with their dates.
    let exported = ws.root.join("export.jsonl");
    let out = ws
        .capsaga(&["memory", "export", "--out", exported.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&exported).unwrap();
    assert_eq!(text.lines().count(), 4);
    let r = json_of(&import(&exported, &[]));
    assert_eq!(r["added"].as_u64(), Some(0), "{r}");
    // Dates are the conversations': `memory episodes` shows 2025's.
    let eps = json_of(
        &ws.capsaga(&["--json", "memory", "episodes", "--limit", "100"])
            .output()
            .unwrap(),
    );
    assert!(
        eps.as_array()
            .unwrap()
            .iter()
            .all(|e| e["started_at"].as_str().unwrap().starts_with("2025-"))
    );
}

#[test]
fn an_import_killed_mid_way_leaves_whole_sessions_and_a_second_run_completes_it() {
    if !model_installed(
        "an_import_killed_mid_way_leaves_whole_sessions_and_a_second_run_completes_it",
    ) {
        return;
    }
    let ws = workspace(&[], "");
    let (text, sizes) = sessions(120);
    let total: usize = sizes.iter().map(|s| s.1).sum();
    let file = ws.root.join("past.jsonl");
    std::fs::write(&file, text).unwrap();
    let mut child = ws
        .capsaga(&["memory", "import", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed (SIGKILL: no clean-up) as soon as a first batch is in.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let mut seen = 0;
    while seen == 0 {
        assert!(std::time::Instant::now() < deadline, "no batch landed");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before it was killed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        // The file may exist before its schema does: nothing landed yet.
        if db(&ws).exists() {
            seen = landed_so_far(&ws);
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let after_kill = per_session(&ws);
    let landed: usize = after_kill.values().sum();
    assert!(landed > 0 && landed < total, "{landed} of {total}");
    // Only whole sessions.
    for (id, n) in &after_kill {
        let want = sizes.iter().find(|s| &s.0 == id).unwrap().1;
        assert_eq!(*n, want, "session {id} half imported");
    }
    // Run again: completed, what was there counted as already there.
    let out = ws
        .capsaga(&["--json", "memory", "import", file.to_str().unwrap()])
        .output()
        .unwrap();
    let r = json_of(&out);
    assert_eq!(r["already"].as_u64(), Some(landed as u64), "{r}");
    assert_eq!(r["added"].as_u64(), Some((total - landed) as u64), "{r}");
    let done = per_session(&ws);
    assert_eq!(done.len(), sizes.len());
    for (id, n) in &sizes {
        assert_eq!(done.get(id), Some(n), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_memory_import_is_an_operators_and_refuses_a_bad_session_whole() {
    if !model_installed("rest_memory_import_is_an_operators_and_refuses_a_bad_session_whole") {
        return;
    }
    let ws = workspace(&[], TOOLS_POLICY);
    let (host, srv) = super::rest::memory_server(&ws, r#"{"turns":[]}"#).await;
    let hm = host.memory.clone().unwrap();
    let c = capsaga_tests::mcp_rig::http();
    let (text, _) = sessions(2);
    let good: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let post = |token: &'static str, body: serde_json::Value| {
        let c = c.clone();
        let url = srv.url("/v1/memory/import");
        async move {
            c.post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    // A client may not.
    let r = post(
        super::rest::ALICE_TOKEN,
        serde_json::json!({"sessions": good}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 403);
    // Refused whole with a bad session: nothing imported.
    let mut with_bad = good.clone();
    with_bad.push(
        serde_json::json!({"sender": "x", "session_id": "y", "started_at": "never", "turns": []}),
    );
    let r = post(
        super::rest::OPERATOR_TOKEN,
        serde_json::json!({"sessions": with_bad, "on_error": "refuse"}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 422);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["bad"][0]["line"], 3, "{v}");
    assert_eq!(hm.memory.store().counts().unwrap().0, 0);
    // Imported, then again: nothing new.
    for added in [11, 0] {
        let r = post(
            super::rest::OPERATOR_TOKEN,
            serde_json::json!({"sessions": good}),
        )
        .await;
        assert_eq!(r.status().as_u16(), 200);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["report"]["added"], added, "{v}");
    }
    // Unknown fields are refused by the door's rule.
    let r = post(
        super::rest::OPERATOR_TOKEN,
        serde_json::json!({"sessions": good, "sender": "token:alice"}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_fetch_shortens_excerpts_to_fit_the_agents_cap_instead_of_being_cut() {
    if !model_installed("memory_fetch_shortens_excerpts_to_fit_the_agents_cap_instead_of_being_cut")
    {
        return;
    }
    use capsaga_agent::runner::MAX_RESULT_BYTES;
    use capsaga_door::memory::capsaga_memory::render::FETCH_BYTES;
    assert_eq!(FETCH_BYTES, MAX_RESULT_BYTES);
    let ws = workspace(&[], TOOLS_POLICY);
    let host = ws.host().await;
    let hm = host.memory.clone().unwrap();
    let long = "and then we talked about the dentist, the garden and the trip. ".repeat(12);
    let lines: String = (0..6)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"sender": "token:alice", "session_id": format!("s{i}"),
                    "started_at": format!("2025-0{}-01T10:00:00Z", i + 1),
                    "turns": [{"role": "user", "content": format!("Dentist story {i}: {long}")},
                              {"role": "assistant", "content": format!("Reply {i}: {long}")}]})
            )
        })
        .collect();
    hm.memory
        .import(&mut lines.as_bytes(), "default", &mut |_| {})
        .unwrap();
    let who = Principal::token("alice", PrincipalRole::Client);
    let args = serde_json::json!({"query": "what did I say about the dentist?", "limit": 5});
    let data = crate::tools::memory_fetch_as(&host, &who, &args).await;
    let text = data.to_string();
    // What the agent loop would send is the whole answer, not a cut one.
    assert!(text.len() <= MAX_RESULT_BYTES, "{}", text.len());
    assert_eq!(capsaga_agent::runner::truncate_result(&text), text);
    let eps = data["episodes"].as_array().unwrap();
    assert_eq!(eps.len(), 5, "{text}");
    for e in eps {
        let t = e["text"].as_str().unwrap();
        assert_eq!(capsaga_untrusted::count_markers(t), (1, 1), "{t}");
        assert!(
            t.contains("user: Dentist story") && t.contains("agent: Reply"),
            "{t}"
        );
    }
    // Five different sessions.
    let mut s: Vec<&str> = eps.iter().map(|e| e["session"].as_str().unwrap()).collect();
    s.sort();
    s.dedup();
    assert_eq!(s.len(), 5);
}
