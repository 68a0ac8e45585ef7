//! `capsaga chat` and `capsaga agent --session` continue one conversation;
//! reflection distils episodes into proposals.

use super::*;

#[test]
fn capsaga_chat_and_agent_session_continue_one_conversation_from_the_command_line() {
    if !model_installed(
        "capsaga_chat_and_agent_session_continue_one_conversation_from_the_command_line",
    ) {
        return;
    }
    use std::io::Write as _;
    let ws = workspace(&[], "");
    let script = ws.root.join("chat.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"text":"Hello Alice."},{"text":"You said your name is Alice."}]}"#,
    )
    .unwrap();
    let mut child = ws
        .capsaga(&[
            "chat",
            "--script",
            script.to_str().unwrap(),
            "--session",
            "cli-chat",
            "--sender",
            "alice",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"My name is Alice.\nWhat is my name?\n/exit\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Hello Alice.") && stdout.contains("You said your name is Alice."),
        "{stdout}"
    );
    // `agent --session` continues the same session; `memory episodes` lists
    // the three turns for alice.
    let s2 = ws.root.join("agent.json");
    std::fs::write(&s2, r#"{"turns":[{"text":"Still Alice."}]}"#).unwrap();
    let out = ws
        .capsaga(&[
            "agent",
            "--script",
            s2.to_str().unwrap(),
            "--session",
            "cli-chat",
            "--sender",
            "alice",
            "and now?",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ws
        .capsaga(&["--json", "memory", "episodes", "--sender", "cli:alice"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let eps: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let eps = eps.as_array().unwrap();
    assert_eq!(eps.len(), 3, "{eps:?}");
    assert!(eps.iter().all(|e| e["session_id"] == "cli-chat"));
    // A fact: proposed, listed, approved from the command line, forgotten.
    let out = ws.capsaga(&["memory", "approve"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "no ids and no --all is a usage error"
    );
    let out = ws
        .capsaga(&["memory", "forget", "f-0000000000000000"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(9),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reflection_distils_groups_into_proposals_and_a_failed_run_queues_nothing() {
    if !model_installed("reflection_distils_groups_into_proposals_and_a_failed_run_queues_nothing")
    {
        return;
    }
    use capsaga_door::memory::capsaga_memory::NewEpisode;
    let ws = workspace(&[], "");
    let host = ws.host().await;
    let hm = host.memory.clone().unwrap();
    let ep = |i: usize, msg: &str| NewEpisode {
        trace_id: format!("t{i}"),
        session_id: format!("s{i}"),
        sender: "alice".into(),
        namespace: "default".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        user_message: msg.into(),
        final_response: Some("Done.".into()),
        outcome: "success".into(),
        summary: None,
        steps: 3,
        turn_in_session: 5,
    };
    for (i, m) in [
        "Please book my usual flight from Turin to Berlin for the conference.",
        "Book the Turin to Berlin flight again, same as usual for the conference.",
        "I need my usual Turin-Berlin flight booked for the conference next week.",
        "Order my usual vegetarian lunch box for the team meeting.",
        "Get the usual vegetarian lunch boxes delivered for our team meeting.",
    ]
    .iter()
    .enumerate()
    {
        hm.memory.index_episode(&ep(i, m)).unwrap();
    }
    // The model fails on the second group: the run's first proposal is
    // withdrawn, nothing stays queued.
    let p = scripted(
        &ws,
        "r1.json",
        &[text("Alice flies Turin to Berlin for conferences.")],
    );
    let budget = capsaga_agent::budget::Budget::open(&host.config, host.store.clone()).unwrap();
    let meter = capsaga_agent::meter::Meter::new(&budget);
    let e = capsaga_agent::reflect::reflect(&hm, &p, &meter, "default", 2)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("nothing was queued"), "{e}");
    assert!(
        hm.memory
            .store()
            .proposals(Some("pending"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        hm.memory
            .store()
            .proposals(Some("withdrawn"))
            .unwrap()
            .len(),
        1
    );
    // A run that completes: one proposal per group, untrusted until approved.
    let p = scripted(
        &ws,
        "r2.json",
        &[
            text("Alice flies Turin to Berlin for conferences."),
            text("Alice's team eats vegetarian lunch boxes at meetings."),
        ],
    );
    let r = capsaga_agent::reflect::reflect(&hm, &p, &meter, "default", 2)
        .await
        .unwrap();
    assert_eq!((r.clusters, r.proposals.len()), (2, 2), "{r:?}");
    {
        let seen = p.seen.lock().unwrap();
        assert!(
            seen.iter()
                .all(|q| q.tools.is_empty() && q.role.as_deref() == Some("reflect"))
        );
        assert!(
            seen.iter()
                .all(|q| capsaga_untrusted::count_markers(&q.messages[0].content).0 >= 1)
        );
    }
    let ids: Vec<String> = r.proposals.iter().map(|p| p.proposal_id.clone()).collect();
    hm.memory.approve(&ids[..1], "operator:test").unwrap();
    hm.memory.discard(&ids[1..], "operator:test").unwrap();
    // The approved group's episodes are reflected; the discarded group's
    // stay for a later reflection.
    let left = hm.memory.reflection_clusters("default", 2).unwrap();
    assert_eq!(left.len(), 1);
    assert!(
        left[0]
            .episodes
            .iter()
            .all(|e| e.user_message.contains("lunch"))
    );
    let md = std::fs::read_to_string(ws.ws().join("MEMORY.md")).unwrap();
    assert!(
        md.contains("Turin to Berlin") && !md.contains("lunch"),
        "{md}"
    );
}
