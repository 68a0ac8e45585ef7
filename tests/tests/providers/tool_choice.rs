//! `tool_choice` on the wire: what each format receives for a forced call,
//! that the choice is dropped once the model called a tool, that it is
//! recorded in the trace, and that a named tool the turn does not offer is
//! refused before anything is sent.

use super::*;
use capsaga_agent::provider::ToolChoice;
use capsaga_agent::runner::AgentError;

fn choice_of(t: &TraceStep) -> Option<String> {
    match t {
        TraceStep::Thought { tool_choice, .. } => tool_choice.clone(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_required_from_the_policy_holds_until_the_model_calls_a_tool() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
    let args = format!("{{\"path\":\"{}\"}}", ws.ws_path("notes.txt"));
    let server = LlmServer::start(vec![
        Reply::ok(oa_tool_call("call_1", "fs_read", &args, (100, 10))),
        Reply::ok(oa_text("It says hello.", (120, 5))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\ntool_choice = \"required\"\n{}",
        openai_section("oa", &server, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["tool_choice"], "required", "{}", reqs[0].body);
    assert!(
        reqs[1].body.get("tool_choice").is_none(),
        "after the call the model decides: {}",
        reqs[1].body
    );
    let th = thoughts(&tr);
    assert_eq!(choice_of(th[0]).as_deref(), Some("required"));
    assert_eq!(choice_of(th[1]), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_format_gets_its_own_form_of_every_choice() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    for (choice, oa, an) in [
        (
            ToolChoice::Required,
            json!("required"),
            json!({"type": "any"}),
        ),
        (ToolChoice::None, json!("none"), json!({"type": "none"})),
        (
            ToolChoice::Tool("fs_list".into()),
            json!({"type": "function", "function": {"name": "fs_list"}}),
            json!({"type": "tool", "name": "fs_list"}),
        ),
        (ToolChoice::Auto, Value::Null, Value::Null),
    ] {
        let oa_server = LlmServer::start(vec![Reply::ok(oa_text("done", (10, 1)))]).await;
        let an_server = LlmServer::start(vec![Reply::ok(an_text("done", (10, 1)))]).await;
        ws.write_policy(&format!(
            "{FS_POLICY}\n[agent]\nprovider_order = [\"oa\"]\n{}{}",
            openai_section("oa", &oa_server, ""),
            anthropic_section("an", &an_server, "")
        ));
        let host = ws.host().await;
        for (server, name, want) in [(&oa_server, "oa", &oa), (&an_server, "an", &an)] {
            let route = RequestRoute {
                preferred: vec![name.to_string()],
                ..RequestRoute::default()
            };
            let opts = TurnOptions {
                tool_choice: Some(choice.clone()),
                ..TurnOptions::default()
            };
            let tr = turn(&host, &keys(), route, opts).await;
            assert_eq!(tr.outcome, Outcome::Success, "{choice}: {tr:#?}");
            let reqs = server.requests();
            let body = &reqs.last().expect("a request").body;
            assert_eq!(
                body.get("tool_choice").cloned().unwrap_or(Value::Null),
                *want,
                "{name} {choice}: {body}"
            );
            let recorded = choice_of(thoughts(&tr)[0]);
            let expect = (choice != ToolChoice::Auto).then(|| choice.to_string());
            assert_eq!(recorded, expect, "{name} {choice}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_named_tool_the_turn_does_not_offer_is_refused_before_anything_is_sent() {
    let ws = TestWorkspace::new(&["fs_read", "fs_list"], "");
    let server = LlmServer::start(vec![Reply::ok(oa_text("never", (1, 1)))]).await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n{}",
        openai_section("oa", &server, "")
    ));
    let host = ws.host().await;
    let selected = select(&host.config, &keys(), &Selection::default()).unwrap();
    // Not installed at all, and a name with look-alike spelling.
    for name in ["fs_write", "fs_reaD", "shell_run"] {
        let opts = TurnOptions {
            tool_choice: Some(ToolChoice::Tool(name.into())),
            ..TurnOptions::default()
        };
        let err = run_turn(&host, selected.provider.as_ref(), "write", &opts)
            .await
            .expect_err(name);
        assert!(
            matches!(&err, AgentError::ToolChoiceNotOffered { tool, offered }
                if tool == name && offered.contains("fs_read")),
            "{err}"
        );
    }
    assert!(server.requests().is_empty(), "nothing was sent");
    // No saga was left open by the refused turns.
    let open = ws.capsaga(&["--json", "sagas"]).output().unwrap();
    let text = String::from_utf8_lossy(&open.stdout);
    assert!(!text.contains("\"PLANNING\""), "{text}");
}

#[test]
fn the_cli_refuses_a_bad_choice_and_an_unoffered_tool_with_a_usage_error() {
    let ws = TestWorkspace::new(&["fs_read"], FS_POLICY);
    let script = ws.ws().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "done"}]}"#).unwrap();
    let script = script.to_string_lossy().to_string();
    for choice in ["always", "tool:", "tool:fs_write"] {
        let o = ws
            .capsaga(&["agent", "--script", &script, "--tool-choice", choice, "hi"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{choice}: {o:?}");
    }
    let o = ws
        .capsaga(&[
            "--json",
            "agent",
            "--script",
            &script,
            "--tool-choice",
            "tool:fs_read",
            "hi",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

/// `forced_call = "json_schema"`: the forced request carries no tools but a
/// JSON Schema of the call, the answer is read back as the call, it goes
/// through the door like any call, and the next request is an ordinary one.
#[tokio::test(flavor = "multi_thread")]
async fn a_forced_call_sent_as_a_json_schema_answer_runs_through_the_door() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
    let call = json!({"name": "fs_read", "arguments": {"path": ws.ws_path("notes.txt")}});
    let server = LlmServer::start(vec![
        Reply::ok(oa_text(&call.to_string(), (100, 20))),
        Reply::ok(oa_text("It says hello.", (120, 5))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\ntool_choice = \"tool:fs_read\"\n{}",
        openai_section("oa", &server, "forced_call = \"json_schema\"")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    let reqs = server.requests();
    let first = &reqs[0].body;
    assert!(
        first.get("tools").is_none() && first.get("tool_choice").is_none(),
        "{first}"
    );
    let schema = &first["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["name"]["const"], "fs_read", "{first}");
    assert_eq!(
        schema["properties"]["arguments"]["type"], "object",
        "{first}"
    );
    let second = &reqs[1].body;
    assert!(second.get("response_format").is_none(), "{second}");
    assert!(
        second["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{second}"
    );
    let read = tr
        .steps
        .iter()
        .find_map(|s| match s {
            TraceStep::Action {
                tool_name,
                exec_result,
                untrusted,
                ..
            } if tool_name == "fs_read" => Some((exec_result.clone(), *untrusted)),
            _ => None,
        })
        .expect("the forced call ran");
    assert!(read.0.is_some() && read.1, "{read:?}");
}

/// `forced_call = "json_schema_always"`: every request of the turn goes as
/// a JSON Schema answer. After the forced call, the next request offers the
/// calls and a bounded final answer, the system prompt names the shapes and
/// the tools, and `{"answer": ...}` ends the turn with that text, its saga
/// done; a repeated call leaves only the final answer on offer.
#[tokio::test(flavor = "multi_thread")]
async fn json_schema_always_bounds_every_answer_and_ends_with_a_final_answer() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
    let call = json!({"name": "fs_read", "arguments": {"path": ws.ws_path("notes.txt")}});
    let server = LlmServer::start(vec![
        Reply::ok(oa_text(&call.to_string(), (100, 20))),
        Reply::ok(oa_text(&call.to_string(), (100, 20))),
        Reply::ok(oa_text(r#"{"answer": "It says hello."}"#, (120, 5))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\ntool_choice = \"required\"\nmax_tokens = 256\n{}",
        openai_section("oa", &server, "forced_call = \"json_schema_always\"")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(tr.final_response.as_deref(), Some("It says hello."));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert!(r.body.get("tools").is_none(), "{}", r.body);
        let system = r.body["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains("Answer with one JSON object") && system.contains("- fs_read: "),
            "{system}"
        );
    }
    // The second request (auto): every offered tool's call, and the answer
    // bounded to (256 - 16) / 3 characters.
    let shapes = reqs[1].body["response_format"]["json_schema"]["schema"]["anyOf"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(shapes.len(), 4, "three tools and the answer");
    assert_eq!(shapes[3]["properties"]["answer"]["maxLength"], 80);
    // The third, after the model repeated its call: the answer alone.
    let third = &reqs[2].body["response_format"]["json_schema"]["schema"];
    assert_eq!(third["required"], json!(["answer"]), "{third}");
}

/// One turn under the fs policy with `agent` as the lines of its `[agent]`
/// section, against an OpenAI-compatible server answering `replies`: the
/// trace and the bodies of the requests the server received.
async fn forced_turn(
    ws: &TestWorkspace,
    agent: &str,
    replies: Vec<Reply>,
    opts: TurnOptions,
) -> (ExecutionTrace, Vec<Value>) {
    let server = LlmServer::start(replies).await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\n{agent}\n{}",
        openai_section("oa", &server, "")
    ));
    let host = ws.host().await;
    let tr = turn(&host, &keys(), RequestRoute::default(), opts).await;
    let bodies = server.requests().into_iter().map(|r| r.body).collect();
    (tr, bodies)
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_turns_tool_call_limit_the_model_is_asked_for_its_answer_and_a_call_is_refused_unrun()
 {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    let first = format!(
        "{{\"path\":\"{}\",\"content\":\"one\"}}",
        ws.ws_path("a.txt")
    );
    let second = format!(
        "{{\"path\":\"{}\",\"content\":\"two\"}}",
        ws.ws_path("b.txt")
    );
    // The model ignores `tool_choice: none` once (a server may not honour
    // it): that call must not run.
    let (tr, reqs) = forced_turn(
        &ws,
        "tool_choice = \"required\"\nmax_tool_calls = 1",
        vec![
            Reply::ok(oa_tool_call("call_1", "fs_write", &first, (100, 10))),
            Reply::ok(oa_tool_call("call_2", "fs_write", &second, (120, 10))),
            Reply::ok(oa_text("Wrote a.txt.", (130, 5))),
        ],
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(
        tr.saga_state,
        Some(capsaga_core::fsm::State::Done),
        "{tr:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "one"
    );
    assert!(
        !ws.ws().join("b.txt").exists(),
        "the call past the limit ran"
    );
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["tool_choice"], "required");
    assert_eq!(reqs[1]["tool_choice"], "none", "{}", reqs[1]);
    assert_eq!(reqs[2]["tool_choice"], "none", "{}", reqs[2]);
    let th = thoughts(&tr);
    assert_eq!(choice_of(th[1]).as_deref(), Some("none"));
    // The refused call is in the trace, unrun, with the reason the model got.
    let refused: Vec<_> = tr
        .steps
        .iter()
        .filter_map(|s| match s {
            TraceStep::Action {
                call_id,
                step_seq,
                error,
                ..
            } if call_id == "call_2" => Some((step_seq, error.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "{tr:#?}");
    assert!(refused[0].0.is_none());
    let msg = refused[0]
        .1
        .as_ref()
        .map(|e| e.message.clone())
        .unwrap_or_default();
    assert!(msg.contains("limit of 1 tool call"), "{msg}");
    assert!(
        reqs[2].to_string().contains("limit of 1 tool call"),
        "the model was told why"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_forced_call_leaves_the_choice_forced_until_a_valid_one() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
    let good = format!("{{\"path\":\"{}\"}}", ws.ws_path("notes.txt"));
    let (tr, reqs) = forced_turn(
        &ws,
        "tool_choice = \"required\"",
        vec![
            Reply::ok(oa_tool_call(
                "call_1",
                "fs_read",
                r#"{"path": 7}"#,
                (100, 10),
            )),
            Reply::ok(oa_tool_call("call_2", "fs_read", &good, (110, 10))),
            Reply::ok(oa_text("It says hello.", (120, 5))),
        ],
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["tool_choice"], "required");
    assert_eq!(
        reqs[1]["tool_choice"], "required",
        "still forced after the invalid call: {}",
        reqs[1]
    );
    assert!(reqs[2].get("tool_choice").is_none(), "{}", reqs[2]);
    let th = thoughts(&tr);
    assert_eq!(choice_of(th[1]).as_deref(), Some("required"));
    assert_eq!(choice_of(th[2]), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_invalid_forced_calls_end_the_turn_as_a_tool_hallucination() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    let (tr, reqs) = forced_turn(
        &ws,
        "tool_choice = \"required\"",
        vec![
            Reply::ok(oa_tool_call(
                "call_1",
                "fs_read",
                r#"{"path": 7}"#,
                (100, 10),
            )),
            Reply::ok(oa_tool_call(
                "call_2",
                "fs_read",
                r#"{"path": 8}"#,
                (110, 10),
            )),
            Reply::ok(oa_text("never asked", (120, 5))),
        ],
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::ToolHallucination, "{tr:#?}");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1]["tool_choice"], "required");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_providers_temperature_goes_with_every_request_and_none_by_default() {
    let ws = TestWorkspace::new(&["fs_read"], "");
    for (extra, want) in [("temperature = 0.7", json!(0.7)), ("", Value::Null)] {
        let server = LlmServer::start(vec![Reply::ok(oa_text("done", (10, 1)))]).await;
        ws.write_policy(&format!(
            "{FS_POLICY}\n{}",
            openai_section("oa", &server, extra)
        ));
        let host = ws.host().await;
        let tr = turn(
            &host,
            &keys(),
            RequestRoute::default(),
            TurnOptions::default(),
        )
        .await;
        assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
        let body = &server.requests()[0].body;
        assert_eq!(
            body.get("temperature").cloned().unwrap_or(Value::Null),
            want,
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_call_does_not_count_toward_the_tool_call_limit() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    let good = format!(
        "{{\"path\":\"{}\",\"content\":\"one\"}}",
        ws.ws_path("a.txt")
    );
    let (tr, reqs) = forced_turn(
        &ws,
        "tool_choice = \"required\"\nmax_tool_calls = 1",
        vec![
            Reply::ok(oa_tool_call(
                "call_1",
                "fs_write",
                r#"{"path": 7}"#,
                (100, 10),
            )),
            Reply::ok(oa_tool_call("call_2", "fs_write", &good, (110, 10))),
            Reply::ok(oa_text("Wrote a.txt.", (120, 5))),
        ],
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "one"
    );
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1]["tool_choice"], "required", "{}", reqs[1]);
    assert_eq!(reqs[2]["tool_choice"], "none", "{}", reqs[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_limit_of_zero_tool_calls_sends_none_from_the_first_model_call() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    let opts = TurnOptions {
        max_tool_calls: Some(0),
        ..TurnOptions::default()
    };
    let (tr, reqs) = forced_turn(
        &ws,
        "tool_choice = \"required\"",
        vec![Reply::ok(oa_text("No tools.", (10, 1)))],
        opts,
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(reqs[0]["tool_choice"], "none", "{}", reqs[0]);
    assert_eq!(choice_of(thoughts(&tr)[0]).as_deref(), Some("none"));
}
