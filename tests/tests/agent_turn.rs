//! Agent turns driven by the scripted provider over real components: invalid
//! calls are answered with tool_error messages the model can act on, two in a
//! row end the turn as tool_hallucination, a failing side-effecting step rolls
//! the turn's saga back, and the trace is stored in SQLite.

use capsaga_core::fsm::State;
use capsaga_host::agent::provider::{ChatRequest, ChatResponse, Provider, ProviderError, Role};
use capsaga_host::agent::runner::{TurnOptions, run_turn};
use capsaga_host::agent::scripted::ScriptedProvider;
use capsaga_host::agent::trace::{self, Outcome, TraceStep, Validation};
use capsaga_tests::{FS_POLICY, TestWorkspace, snapshot};
use std::sync::Mutex;

/// Wraps the scripted provider and records every request it receives, so the
/// test sees exactly what the model was told.
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

fn provider(ws: &TestWorkspace, script: &str) -> Recording {
    let path = ws.root.join("script.json");
    std::fs::write(&path, script).unwrap();
    Recording {
        inner: ScriptedProvider::from_file(&path, &ws.root).unwrap(),
        seen: Mutex::new(Vec::new()),
    }
}

fn last_tool_messages(p: &Recording, n: usize) -> Vec<String> {
    let seen = p.seen.lock().unwrap();
    let req = seen.last().unwrap();
    req.messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .rev()
        .take(n)
        .map(|m| m.content.clone())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_calls_get_tool_errors_then_the_model_recovers() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], FS_POLICY);
    std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
    let p = provider(
        &ws,
        r#"{"turns":[
            {"text":"read it","tool_calls":[{"name":"fs_reed","arguments":{"path":"${home}/ws/notes.txt"}}]},
            {"text":"again","tool_calls":[{"name":"fs_read","arguments":{"path":"${home}/ws/notes.txt"}}]},
            {"text":"bad args","tool_calls":[{"name":"fs_read","arguments":{"max_bytes":"ten"}}]},
            {"text":"The note says hello."}
        ]}"#,
    );
    let host = ws.host().await;
    let tr = run_turn(&host, &p, "read the note", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(tr.final_response.as_deref(), Some("The note says hello."));

    let msgs = last_tool_messages(&p, 3);
    // Unknown tool: names it, suggests the right one, lists the catalog.
    assert!(
        msgs[0].contains("- tool \"fs_reed\": does not exist"),
        "{}",
        msgs[0]
    );
    assert!(msgs[0].contains("did you mean \"fs_read\"?"), "{}", msgs[0]);
    assert!(
        msgs[0].contains("available tools: fs_list, fs_read, fs_write"),
        "{}",
        msgs[0]
    );
    // The valid read returns the content, wrapped as untrusted.
    assert!(
        msgs[1].starts_with("<untrusted source=\"tool:fs_read\""),
        "{}",
        msgs[1]
    );
    assert!(msgs[1].contains("hello"));
    // Schema errors: the missing field and the wrong type, by name.
    assert!(
        msgs[2].contains("- argument \"path\": missing (required, expected string)"),
        "{}",
        msgs[2]
    );
    assert!(
        msgs[2].contains("- argument \"max_bytes\": expected integer, got string \"ten\""),
        "{}",
        msgs[2]
    );

    let validations: Vec<Validation> = tr
        .steps
        .iter()
        .filter_map(|s| match s {
            TraceStep::Action { validation, .. } => Some(*validation),
            _ => None,
        })
        .collect();
    assert_eq!(
        validations,
        [
            Validation::UnknownTool,
            Validation::Ok,
            Validation::SchemaError
        ]
    );
    // Stored and loadable.
    let stored = trace::load(&host.db, &tr.trace_id).unwrap().unwrap();
    assert_eq!(stored, tr);
    assert_eq!(tr.saga_state, Some(State::Done));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_invalid_calls_in_a_row_end_as_tool_hallucination() {
    let ws = TestWorkspace::new(&["fs_read"], FS_POLICY);
    let p = provider(
        &ws,
        r#"{"turns":[
            {"text":"","tool_calls":[{"name":"read_file","arguments":{"path":"x"}}]},
            {"text":"","tool_calls":[{"name":"fs_read","arguments":"{\"path\":\"a\",\"path\":\"b\"}"}]},
            {"text":"never reached"}
        ]}"#,
    );
    let host = ws.host().await;
    let tr = run_turn(&host, &p, "read", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::ToolHallucination);
    assert_eq!(
        p.seen.lock().unwrap().len(),
        2,
        "the third turn must not be requested"
    );
    assert_eq!(tr.saga_state, Some(State::FailedRolledBack));
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_write_rolls_the_turn_back() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], FS_POLICY);
    std::fs::write(ws.ws().join("notes.txt"), "original\n").unwrap();
    let before = snapshot(&ws.ws());
    let p = provider(
        &ws,
        r#"{"turns":[
            {"text":"","tool_calls":[
                {"name":"fs_write","arguments":{"path":"${home}/ws/notes.txt","content":"edited\n"}},
                {"name":"fs_write","arguments":{"path":"${home}/ws/new.md","content":"new\n"}}]},
            {"text":"","tool_calls":[{"name":"fs_write","arguments":{"path":"${home}/elsewhere.txt","content":"x"}}]},
            {"text":"done"}
        ]}"#,
    );
    let host = ws.host().await;
    let tr = run_turn(&host, &p, "edit", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::RolledBack, "{tr:#?}");
    assert_eq!(tr.saga_state, Some(State::FailedRolledBack));
    assert_eq!(snapshot(&ws.ws()), before);
    assert!(!ws.root.join("elsewhere.txt").exists());
}
