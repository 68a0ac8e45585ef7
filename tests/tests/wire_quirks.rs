//! The wire-format quirks of real model servers, one family per test, each
//! over both formats (OpenAI-compatible chat completions and Anthropic
//! Messages) on a local server speaking that format, in real agent turns over
//! real components. Every request capsaga sends in these tests is checked
//! against the provider's published API shape (`tests/schemas/`), so a
//! quirk absorbed in an answer never comes back as a malformed request.

use capsaga_agent::provider::FailureKind;
use capsaga_agent::trace::{Outcome, TraceStep, Validation};
use capsaga_tests::llm_server::Reply;
use capsaga_tests::wire_rig::{
    FORMATS, Format, actions, history_calls, thoughts, tool_results, turn,
};
use capsaga_tests::{TestWorkspace, snapshot};
use serde_json::{Value, json};

const TOOLS: [&str; 4] = ["fs_read", "fs_write", "fs_list", "time_now"];

fn repairs(tr: &capsaga_agent::trace::ExecutionTrace) -> Vec<String> {
    thoughts(tr)
        .iter()
        .flat_map(|t| match t {
            TraceStep::Thought { repairs, .. } => repairs.clone(),
            _ => Vec::new(),
        })
        .collect()
}

fn problem_of(step: &TraceStep) -> Option<String> {
    match step {
        TraceStep::Thought { problem, .. } => problem.clone(),
        _ => None,
    }
}

/// Arguments that are not JSON are answered with an error, and the next
/// request carries a well-formed stand-in (`{}`), never the raw text (which
/// llama.cpp's server refuses with HTTP 500 on every later request); the
/// model then corrects itself. The raw text stays in the trace.
#[tokio::test(flavor = "multi_thread")]
async fn invalid_arguments_are_never_sent_back() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
        let good = format!("{{\"path\":\"{}\"}}", ws.ws_path("notes.txt"));
        // Anthropic's input is an object on the wire: a string that is not
        // JSON is the way a gateway passes broken input through.
        let broken = [
            Some(json!("{\"path\": \"/ws/notes.txt\"")),
            Some(json!("{path: notes}")),
        ];
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(f.calls(
                    &[(Some(json!("c1")), "fs_read", broken[0].clone())],
                    (10, 5),
                )),
                Reply::ok(f.calls(
                    &[(Some(json!("c2")), "fs_read", broken[1].clone())],
                    (10, 5),
                )),
                Reply::ok(f.calls(&[(Some(json!("c3")), "fs_read", f.args(&good))], (10, 5))),
                Reply::ok(f.text("It says hello.", (10, 5))),
            ],
        )
        .await;
        // Two invalid calls in a row end the turn (the model had its chance
        // to correct itself after the first, with a valid history).
        assert_eq!(t.trace.outcome, Outcome::ToolHallucination, "{f:?}");
        assert_eq!(t.requests.len(), 2, "{f:?}");
        let calls = history_calls(f, &t.requests[1].body);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].2, "{}", "{f:?}: the stand-in, not the raw text");
        let results = tool_results(f, &t.requests[1].body);
        assert!(
            results[0].1.contains("not valid JSON"),
            "{f:?}: {results:?}"
        );
        // The raw text is in the trace.
        let TraceStep::Action {
            args, validation, ..
        } = actions(&t.trace)[0]
        else {
            unreachable!()
        };
        assert_eq!(*validation, Validation::SchemaError);
        assert_eq!(args, &json!("{\"path\": \"/ws/notes.txt\""), "{f:?}");

        // With one invalid call, the corrected call runs and the turn succeeds.
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(f.calls(
                    &[(Some(json!("c1")), "fs_read", broken[1].clone())],
                    (10, 5),
                )),
                Reply::ok(f.calls(&[(Some(json!("c2")), "fs_read", f.args(&good))], (10, 5))),
                Reply::ok(f.text("It says hello.", (10, 5))),
            ],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success, "{f:?}: {:#?}", t.trace);
        let calls = history_calls(f, &t.requests[2].body);
        assert_eq!(calls[0].2, "{}");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[1].2).unwrap(),
            serde_json::from_str::<Value>(&good).unwrap()
        );
    }
}

/// "No arguments" in every spelling servers use (an empty string,
/// whitespace, `null`, the string "null", no field at all) is `{}`: the
/// argument-less tool runs at once, and the trace says what was read how.
#[tokio::test(flavor = "multi_thread")]
async fn no_arguments_in_every_spelling_is_an_empty_object() {
    let spellings: [Option<Value>; 5] = [
        Some(json!("")),
        Some(json!("  \n ")),
        Some(Value::Null),
        Some(json!("null")),
        None,
    ];
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        for args in &spellings {
            let t = turn(
                &ws,
                f,
                vec![
                    Reply::ok(f.calls(&[(Some(json!("c1")), "time_now", args.clone())], (10, 5))),
                    Reply::ok(f.text("It is now.", (10, 5))),
                ],
            )
            .await;
            assert_eq!(
                t.trace.outcome,
                Outcome::Success,
                "{f:?} {args:?}: {:#?}",
                t.trace
            );
            let TraceStep::Action {
                validation,
                step_seq,
                args: read,
                ..
            } = actions(&t.trace)[0]
            else {
                unreachable!()
            };
            assert_eq!(*validation, Validation::Ok);
            assert!(step_seq.is_some(), "it ran as a saga step");
            assert_eq!(read, &json!({}));
            let r = repairs(&t.trace);
            assert!(
                r.iter().any(|r| r.contains("read as {}")),
                "{f:?} {args:?}: {r:?}"
            );
            assert_eq!(history_calls(f, &t.requests[1].body)[0].2, "{}");
        }
    }
}

/// Arguments in the other shape (an object where OpenAI wants a string, a
/// string where Anthropic wants an object) and arguments JSON-encoded twice
/// or three times are read as the object they mean, and the call runs.
#[tokio::test(flavor = "multi_thread")]
async fn arguments_in_the_other_shape_or_encoded_again_are_read() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        std::fs::write(ws.ws().join("notes.txt"), "hello").unwrap();
        let obj = json!({"path": ws.ws_path("notes.txt")});
        let text = obj.to_string();
        let twice = serde_json::to_string(&text).unwrap();
        let other_shape = match f {
            Format::OpenAi => obj.clone(),
            Format::Anthropic => json!(text),
        };
        for (args, note) in [
            (other_shape, "not a string"),
            (json!(twice), "encoded 2 times"),
            (
                json!(serde_json::to_string(&twice).unwrap()),
                "encoded 3 times",
            ),
        ] {
            let t = turn(
                &ws,
                f,
                vec![
                    Reply::ok(f.calls(
                        &[(Some(json!("c1")), "fs_read", Some(args.clone()))],
                        (10, 5),
                    )),
                    Reply::ok(f.text("It says hello.", (10, 5))),
                ],
            )
            .await;
            assert_eq!(
                t.trace.outcome,
                Outcome::Success,
                "{f:?} {args}: {:#?}",
                t.trace
            );
            let r = repairs(&t.trace);
            let expected = match (f, note) {
                (Format::Anthropic, "not a string") => "a string, not an object",
                (Format::OpenAi, "not a string") => "an object, not a string",
                (_, n) => n,
            };
            assert!(r.iter().any(|x| x.contains(expected)), "{f:?}: {r:?}");
            let results = tool_results(f, &t.requests[1].body);
            assert!(results[0].1.contains("hello"), "{results:?}");
        }
    }
}

/// Every call gets an id unique in the conversation: parallel calls with
/// the same id, calls without an id or with an empty one, and an id reused
/// from an earlier answer are given fresh ids, so each tool result answers
/// exactly one call (the schemas' conversation checks would fail otherwise).
#[tokio::test(flavor = "multi_thread")]
async fn call_ids_are_unique_in_the_conversation() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        let now = f.args("{}");
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(f.calls(
                    &[
                        (Some(json!("same")), "time_now", now.clone()),
                        (Some(json!("same")), "time_now", now.clone()),
                        (None, "time_now", now.clone()),
                        (Some(json!("")), "time_now", now.clone()),
                    ],
                    (10, 5),
                )),
                Reply::ok(f.calls(
                    &[
                        (Some(json!("same")), "time_now", now.clone()),
                        (None, "time_now", now.clone()),
                        (Some(json!("functions.time_now:0")), "time_now", now.clone()),
                    ],
                    (10, 5),
                )),
                Reply::ok(f.text("done", (10, 5))),
            ],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success, "{f:?}: {:#?}", t.trace);
        let last = &t.requests[2].body;
        let calls = history_calls(f, last);
        let results = tool_results(f, last);
        assert_eq!(calls.len(), 7);
        assert_eq!(results.len(), 7);
        let ids: std::collections::BTreeSet<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids.len(), 7, "{f:?}: {calls:?}");
        for (c, r) in calls.iter().zip(&results) {
            assert_eq!(c.0, r.0, "each result answers its own call");
        }
        // The trace's action ids are the ones sent.
        let action_ids: Vec<String> = actions(&t.trace)
            .iter()
            .map(|a| match a {
                TraceStep::Action { call_id, .. } => call_id.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            action_ids,
            calls.iter().map(|c| c.0.clone()).collect::<Vec<_>>()
        );
        let r = repairs(&t.trace);
        assert!(r.iter().any(|x| x.contains("already used")), "{r:?}");
        assert!(r.iter().any(|x| x.contains("no id")), "{r:?}");
        // Kimi-style ids are valid for OpenAI-compatible servers, not for
        // Anthropic's alphabet.
        assert_eq!(
            ids.contains("functions.time_now:0"),
            f == Format::OpenAi,
            "{f:?}: {ids:?}"
        );
    }
}

/// A cut-off answer never runs its calls, even complete-looking ones, and is
/// not a success: OpenAI `length`, Anthropic `max_tokens` and
/// `model_context_window_exceeded`, with and without calls. The workspace is
/// byte-identical afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn truncated_answers_run_nothing_and_are_named() {
    for f in FORMATS {
        let reasons: &[&str] = match f {
            Format::OpenAi => &["length"],
            Format::Anthropic => &["max_tokens", "model_context_window_exceeded"],
        };
        let ws = TestWorkspace::new(&TOOLS, "");
        for reason in reasons {
            let before = snapshot(&ws.ws());
            let write = format!(
                "{{\"path\":\"{}\",\"content\":\"half a po\"}}",
                ws.ws_path("poem.txt")
            );
            let cut = f.finish(
                f.calls(&[(Some(json!("c1")), "fs_write", f.args(&write))], (10, 64)),
                reason,
            );
            let t = turn(&ws, f, vec![Reply::ok(cut)]).await;
            assert_eq!(t.trace.outcome, Outcome::Truncated, "{f:?} {reason}");
            assert!(actions(&t.trace).is_empty(), "no call ran");
            assert_eq!(snapshot(&ws.ws()), before, "nothing written");
            let msg = t.trace.final_response.clone().unwrap();
            assert!(msg.contains("1 tool call(s) were not executed"), "{msg}");
            assert!(msg.contains(reason), "{msg}");
            let th = thoughts(&t.trace);
            let TraceStep::Thought { finish_reason, .. } = th[0] else {
                unreachable!()
            };
            assert_eq!(finish_reason, "length");
            assert!(problem_of(th[0]).unwrap().starts_with("truncated"));
            // Text cut off without calls: truncated too, not success.
            let t = turn(
                &ws,
                f,
                vec![Reply::ok(f.finish(f.text("Once upon a", (10, 8)), reason))],
            )
            .await;
            assert_eq!(t.trace.outcome, Outcome::Truncated, "{f:?} {reason}");
            assert_ne!(t.trace.final_response.as_deref(), Some("Once upon a"));
        }
    }
}

/// Refusals in every form are not success: OpenAI's `refusal` field and
/// refusal content parts, `content_filter`; Anthropic's `refusal` stop
/// reason.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_and_filtered_answers_are_named() {
    let oa = |message: Value, finish: &str| {
        capsaga_tests::wire_rig::oa_answer(message, json!(finish), (10, 3))
    };
    let cases: Vec<(Format, Value)> = vec![
        (
            Format::OpenAi,
            oa(
                json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
                "stop",
            ),
        ),
        (
            Format::OpenAi,
            oa(
                json!({"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}),
                "stop",
            ),
        ),
        (
            Format::OpenAi,
            oa(
                json!({"role": "assistant", "content": "partial"}),
                "content_filter",
            ),
        ),
        (
            Format::Anthropic,
            Format::Anthropic.finish(
                Format::Anthropic.text("I can't help with that.", (10, 3)),
                "refusal",
            ),
        ),
    ];
    let ws = TestWorkspace::new(&TOOLS, "");
    for (f, answer) in cases {
        let t = turn(&ws, f, vec![Reply::ok(answer.clone())]).await;
        assert_eq!(t.trace.outcome, Outcome::Refused, "{f:?} {answer}");
        let msg = t.trace.final_response.unwrap();
        assert!(msg.starts_with("refused:"), "{msg}");
        assert!(
            msg.contains("I can't help") || msg.contains("content filter"),
            "{msg}"
        );
    }
}

/// An answer announcing tool calls without any (none, `null`, or the call
/// left as text in the content) is malformed: retried, then ended as
/// `malformed_answer` with what was wrong, never success. The tokens of
/// every try are billed. A retry that answers properly saves the turn.
#[tokio::test(flavor = "multi_thread")]
async fn announced_but_missing_tool_calls_are_malformed() {
    for f in FORMATS {
        let shapes: Vec<Value> = match f {
            Format::OpenAi => vec![
                json!({"role": "assistant", "content": null, "tool_calls": []}),
                json!({"role": "assistant", "content": null, "tool_calls": null}),
                json!({"role": "assistant", "content": "<tool_call>{\"name\": \"time_now\"}</tool_call>"}),
            ]
            .into_iter()
            .map(|m| capsaga_tests::wire_rig::oa_answer(m, json!("tool_calls"), (100, 7)))
            .collect(),
            Format::Anthropic => vec![json!([]), json!([{"type": "text", "text": "{\"name\": \"time_now\"}"}])]
                .into_iter()
                .map(|c| capsaga_tests::wire_rig::an_answer(c, "tool_use", (100, 7)))
                .collect(),
        };
        let ws = TestWorkspace::new(&TOOLS, "");
        for bad in shapes {
            let t = turn(&ws, f, vec![Reply::ok(bad.clone()), Reply::ok(bad.clone())]).await;
            assert_eq!(t.trace.outcome, Outcome::MalformedAnswer, "{f:?} {bad}");
            assert_eq!(t.requests.len(), 2, "retried once (retries = 1)");
            let th = thoughts(&t.trace);
            assert_eq!(th.len(), 1);
            let TraceStep::Thought {
                provider,
                model,
                finish_reason,
                attempts,
                prompt_tokens,
                response_tokens,
                ..
            } = th[0]
            else {
                unreachable!()
            };
            assert_eq!((provider.as_str(), model.as_str()), ("wire", f.model()));
            assert_eq!(finish_reason, "error");
            assert_eq!(attempts.len(), 2);
            assert!(
                attempts
                    .iter()
                    .all(|a| a.kind == Some(FailureKind::Malformed))
            );
            let problem = problem_of(th[0]).unwrap();
            assert!(problem.contains("but no tool"), "{problem}");
            // Both tries billed.
            assert_eq!((*prompt_tokens, *response_tokens), (200, 14));
            assert_eq!((t.trace.prompt_tokens, t.trace.response_tokens), (200, 14));
            assert!(t.trace.cost_usd > 0.0);
        }
        // The retry answers properly: success.
        let bad = f.finish(
            f.text("", (100, 7)),
            match f {
                Format::OpenAi => "tool_calls",
                Format::Anthropic => "tool_use",
            },
        );
        let t = turn(
            &ws,
            f,
            vec![Reply::ok(bad), Reply::ok(f.text("fine", (10, 2)))],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success, "{f:?}");
        assert_eq!(t.trace.prompt_tokens, 110, "the unusable try is billed too");
    }
    // `tool_calls: null` with a normal stop is just an answer.
    let ws = TestWorkspace::new(&TOOLS, "");
    let answer = capsaga_tests::wire_rig::oa_answer(
        json!({"role": "assistant", "content": "hi", "tool_calls": null}),
        json!("stop"),
        (1, 1),
    );
    let t = turn(&ws, Format::OpenAi, vec![Reply::ok(answer)]).await;
    assert_eq!(t.trace.outcome, Outcome::Success);
    assert_eq!(t.trace.final_response.as_deref(), Some("hi"));
}

/// An error object in a 200 body is a provider error with the provider's
/// own message, retried when its code says so (429, 5xx, overloaded, rate
/// limit), not when it does not; never "missing field `choices`".
#[tokio::test(flavor = "multi_thread")]
async fn errors_in_200_bodies_are_provider_errors() {
    for f in FORMATS {
        let (retriable, fatal) = match f {
            Format::OpenAi => (
                json!({"error": {"message": "Rate limit reached for requests", "code": 429}}),
                json!({"error": {"message": "Invalid model", "type": "invalid_request_error", "code": "model_not_found"}}),
            ),
            Format::Anthropic => (
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}),
            ),
        };
        let ws = TestWorkspace::new(&TOOLS, "");
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(retriable.clone()),
                Reply::ok(f.text("after the retry", (5, 5))),
            ],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success, "{f:?}: {:#?}", t.trace);
        let TraceStep::Thought { attempts, .. } = thoughts(&t.trace)[0] else {
            unreachable!()
        };
        assert_eq!(attempts[0].kind, Some(FailureKind::ErrorInBody));
        let e = attempts[0].error.clone().unwrap();
        assert!(
            e.contains("Rate limit reached") || e.contains("overloaded_error: Overloaded"),
            "{e}"
        );
        assert!(!e.contains("missing field"), "{e}");

        let t = turn(
            &ws,
            f,
            vec![Reply::ok(fatal), Reply::ok(f.text("never asked", (5, 5)))],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::ProviderError, "{f:?}");
        assert_eq!(t.requests.len(), 1, "not retried");
        let msg = t.trace.final_response.unwrap();
        assert!(msg.contains("invalid_request_error"), "{msg}");
        assert!(
            msg.contains("Invalid model") || msg.contains("max_tokens: too large"),
            "{msg}"
        );
    }
}

/// Content as an array of parts (text, thinking/reasoning, bare strings, one
/// part alone) and Anthropic thinking blocks: the answer is the text, the
/// reasoning is left out (and noted).
#[tokio::test(flavor = "multi_thread")]
async fn content_parts_and_thinking_are_read() {
    let oa = |content: Value| {
        capsaga_tests::wire_rig::oa_answer(
            json!({"role": "assistant", "content": content}),
            json!("stop"),
            (3, 3),
        )
    };
    let cases: Vec<(Format, Value, &str)> = vec![
        (
            Format::OpenAi,
            oa(
                json!([{"type": "thinking", "thinking": "let me see"}, {"type": "text", "text": "Paris"}, {"type": "text", "text": "."}]),
            ),
            "Paris.",
        ),
        (
            Format::OpenAi,
            oa(json!([{"type": "reasoning", "text": "hmm"}, "Paris"])),
            "Paris",
        ),
        (
            Format::OpenAi,
            oa(json!({"type": "text", "text": "Paris"})),
            "Paris",
        ),
        (
            Format::Anthropic,
            capsaga_tests::wire_rig::an_answer(
                json!([{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "Paris"}]),
                "end_turn",
                (3, 3),
            ),
            "Paris",
        ),
    ];
    let ws = TestWorkspace::new(&TOOLS, "");
    for (f, answer, text) in cases {
        let t = turn(&ws, f, vec![Reply::ok(answer.clone())]).await;
        assert_eq!(
            t.trace.outcome,
            Outcome::Success,
            "{f:?} {answer}: {:#?}",
            t.trace
        );
        assert_eq!(t.trace.final_response.as_deref(), Some(text));
    }
}

/// Bodies that are not an answer at all, each with a clear message: HTML
/// from a proxy, a stream nobody asked for, an empty body (retried). A
/// byte-order mark before the JSON is tolerated.
#[tokio::test(flavor = "multi_thread")]
async fn bodies_that_are_not_answers_say_what_they_are() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        for (raw, says, tries) in [
            ("<html><body>Bad gateway</body></html>", "not JSON", 1),
            ("data: {\"choices\": []}\n\ndata: [DONE]\n\n", "stream", 1),
            ("", "empty body", 2),
        ] {
            let t = turn(&ws, f, vec![Reply::raw(raw), Reply::raw(raw)]).await;
            assert_eq!(t.trace.outcome, Outcome::MalformedAnswer, "{f:?} {raw}");
            assert_eq!(t.requests.len(), tries, "{f:?} {raw}");
            let msg = t.trace.final_response.unwrap();
            assert!(msg.contains(says), "{msg}");
        }
        let body = format!("\u{feff}{}", f.text("with a BOM", (1, 1)));
        let t = turn(&ws, f, vec![Reply::raw(body)]).await;
        assert_eq!(
            t.trace.final_response.as_deref(),
            Some("with a BOM"),
            "{f:?}"
        );
    }
}

/// A tool name outside the documented alphabet (`fs.read`, spaces, quotes,
/// empty) is an unknown tool for the model to correct; the history sends a
/// valid stand-in name, the tool result names what the model wrote.
#[tokio::test(flavor = "multi_thread")]
async fn ill_formed_tool_names_are_not_sent_back() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(f.calls(
                    &[(Some(json!("c1")), "fs.read \"x\"", f.args("{}"))],
                    (5, 5),
                )),
                Reply::ok(f.calls(&[(Some(json!("c2")), "time_now", f.args("{}"))], (5, 5))),
                Reply::ok(f.text("done", (5, 5))),
            ],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success, "{f:?}: {:#?}", t.trace);
        let calls = history_calls(f, &t.requests[1].body);
        assert_eq!(calls[0].1, "invalid_tool_name");
        let results = tool_results(f, &t.requests[1].body);
        assert!(results[0].1.contains("fs.read"), "{results:?}");
    }
}

/// Anthropic's `pause_turn`: the paused answer goes back as it is (a
/// prefill without trailing whitespace) and the model goes on.
#[tokio::test(flavor = "multi_thread")]
async fn paused_turns_go_on() {
    let f = Format::Anthropic;
    let ws = TestWorkspace::new(&TOOLS, "");
    let paused = f.finish(f.text("Let me think about this.  \n", (5, 5)), "pause_turn");
    let t = turn(
        &ws,
        f,
        vec![
            Reply::ok(paused),
            Reply::ok(f.text("Done thinking.", (5, 5))),
        ],
    )
    .await;
    assert_eq!(t.trace.outcome, Outcome::Success, "{:#?}", t.trace);
    assert_eq!(t.trace.final_response.as_deref(), Some("Done thinking."));
    let msgs = t.requests[1].body["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"][0]["text"], "Let me think about this.");
    let TraceStep::Thought { finish_reason, .. } = thoughts(&t.trace)[0] else {
        unreachable!()
    };
    assert_eq!(finish_reason, "pause_turn");
}
