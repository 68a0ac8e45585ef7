//! The memory page (issue 29, over issue 27's memory) in a real headless
//! Chromium: the reflection's fact proposals with their source episodes,
//! hostile text (in a proposed fact and in the episode's user message)
//! shown as data; the operator approves the proposal checked and discards
//! another, and only the approved one becomes a fact, decided under the
//! signed-in operator.

use super::*;

const MEMORY_POLICY: &str = "\n[memory]\nenabled = true\nworkspace = \"ws\"\n";

/// Whether the embedding model is where the host looks for it (as the
/// memory tests decide: CI must have it; elsewhere SKIPPED).
fn model_installed(test: &str) -> bool {
    let dir = std::env::var_os("CAPSAGA_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| capsaga_tests::target_dir().join("models/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: the embedding model is missing from {} and CI must have it (scripts/setup)",
        dir.display()
    );
    eprintln!(
        "\n*** SKIPPED {test}: the embedding model is not installed (run scripts/setup) ***\n"
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_approves_and_discards_memory_proposals_in_the_browser() {
    if !model_installed("an_operator_approves_and_discards_memory_proposals_in_the_browser") {
        return;
    }
    let Some(b) = Browser::start().await else {
        return;
    };
    let ws = TestWorkspace::new(
        &["fs_write", "fs_edit"],
        &format!("{MEMORY_POLICY}{POLICY}"),
    );
    std::fs::write(ws.ws().join("SOUL.md"), "Be useful. Never invent facts.").unwrap();
    let (host, srv) = server(&ws, "Noted: the review is on Tuesday.").await;
    let hm = host.memory.clone().expect("memory is on");
    // A turn whose task is hostile: its episode is the proposals' source.
    let turn: Value = http()
        .post(srv.url("/v1/turns"))
        .bearer_auth(ALICE)
        .json(&json!({"task": PAYLOAD}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trace_id = turn["trace_id"].as_str().expect("a trace id").to_string();
    let mut episode = None;
    capsaga_tests::wait_until_async("the turn's episode", || {
        let found = hm.memory.store().episode_of_trace(&trace_id).ok().flatten();
        let seen = found.is_some();
        episode = found;
        async move { seen }
    })
    .await;
    let episode = episode.expect("the episode").episode_id;
    let keep = hm
        .memory
        .propose(
            "default",
            "The quarterly review is on Tuesday.",
            "reflection",
            vec![episode.clone()],
        )
        .unwrap();
    let hostile = hm
        .memory
        .propose("default", PAYLOAD, "reflection", vec![episode.clone()])
        .unwrap();

    sign_in(&b, &srv, ALICE).await;
    b.wait_text("#operator", "token:alice").await;
    b.goto(&srv.url("/console/memory")).await;
    b.wait_text("#proposals-pending", "2 pending").await;
    let ks = format!("section[data-proposal=\"{}\"]", keep.proposal_id);
    let hs = format!("section[data-proposal=\"{}\"]", hostile.proposal_id);
    let shown = b.text(&hs).await;
    assert!(
        shown.contains("<script>window.__pwned=1</script>"),
        "{shown}"
    );
    // The source episode, its hostile user message shown as text too.
    let ep = b
        .text(&format!("{ks} div.episode[data-episode=\"{episode}\"]"))
        .await;
    assert!(ep.contains("<script>window.__pwned=1</script>"), "{ep}");
    no_script_ran(&b, "memory proposals").await;
    b.screenshot(&shot("memory-proposals")).await;

    // Approve the one checked: only it becomes a fact.
    b.click(&b.get(&format!("{ks} input[name=id]")).await).await;
    b.click(&b.get("#approve-selected").await).await;
    b.wait_text("#proposals-pending", "1 pending").await;
    let store = hm.memory.store();
    let k = store.proposal(&keep.proposal_id).unwrap();
    assert_eq!(k.status, "approved");
    assert_eq!(k.decided_by.as_deref(), Some("token:alice (operator)"));
    assert_eq!(
        store.proposal(&hostile.proposal_id).unwrap().status,
        "pending"
    );
    let facts = store.facts(None).unwrap();
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0].text, "The quarterly review is on Tuesday.");

    // Discard the hostile one: it never becomes a fact.
    b.click(&b.get(&format!("{hs} input[name=id]")).await).await;
    b.click(&b.get("#discard-selected").await).await;
    b.wait_text("#proposals-pending", "0 pending").await;
    assert_eq!(
        store.proposal(&hostile.proposal_id).unwrap().status,
        "discarded"
    );
    assert_eq!(store.facts(None).unwrap().len(), 1);
    no_script_ran(&b, "memory proposals after the decisions").await;
}
