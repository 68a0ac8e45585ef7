//! Memory over REST: sessions and episodes belong to the authenticated
//! principal; only an operator decides proposals.

use super::*;
use crate::tools::TOOLS_POLICY;

/// Named tokens for the REST tests: an operator and two clients.
pub(super) const OPERATOR_TOKEN: &str = "memory-operator-0123456789abcdef";
pub(super) const ALICE_TOKEN: &str = "memory-alice-client-0123456789ab";
const BOB_TOKEN: &str = "memory-bob-client-0123456789abcd";

pub(super) async fn memory_server(
    ws: &TestWorkspace,
    answers: &str,
) -> (std::sync::Arc<Host>, capsaga_tests::mcp_rig::Running) {
    use capsaga_server::HttpOptions;
    use capsaga_server::auth::digest;
    let script = ws.root.join("rest.json");
    std::fs::write(&script, answers).unwrap();
    let host = ws.host().await;
    for (name, role, secret) in [
        ("root", PrincipalRole::Operator, OPERATOR_TOKEN),
        ("alice", PrincipalRole::Client, ALICE_TOKEN),
        ("bob", PrincipalRole::Client, BOB_TOKEN),
    ] {
        host.store
            .create_token(name, role, &digest(secret.as_bytes()), "test")
            .await
            .unwrap();
    }
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(script);
    let srv = capsaga_tests::mcp_rig::start(host.clone(), o).await;
    (host, srv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_sessions_and_episodes_belong_to_the_authenticated_principal() {
    if !model_installed("rest_sessions_and_episodes_belong_to_the_authenticated_principal") {
        return;
    }
    let ws = workspace(&[], TOOLS_POLICY);
    let (host, srv) = memory_server(
        &ws,
        r#"{"turns":[{"text":"Noted."},{"text":"Noted."},{"text":"Noted."}]}"#,
    )
    .await;
    let hm = host.memory.clone().unwrap();
    let c = capsaga_tests::mcp_rig::http();
    // Two turns of one session as alice.
    for task in ["My badge number is 88213.", "What is my badge number?"] {
        let r = c
            .post(srv.url("/v1/turns"))
            .bearer_auth(ALICE_TOKEN)
            .json(&serde_json::json!({"task": task, "session_id": "rest-session"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    }
    let h = hm.memory.history("rest-session").unwrap();
    assert_eq!(h.total_turns, 2);
    assert_eq!(h.sender.as_deref(), Some("token:alice"));
    // A body naming a sender (or any principal) is refused before any
    // turn: the sender is the token's principal, never the request's.
    for body in [
        r#"{"task": "what is alice's badge?", "sender": "token:alice"}"#,
        r#"{"task": "what is alice's badge?", "principal": "token:alice"}"#,
        r#"{"task": "x", "task": "what is alice's badge?"}"#,
    ] {
        let r = c
            .post(srv.url("/v1/turns"))
            .bearer_auth(BOB_TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{body}");
    }
    // Bob naming alice's session gets no part of it: refused before any
    // model call, and the session still holds alice's two turns only.
    let r = c
        .post(srv.url("/v1/turns"))
        .bearer_auth(BOB_TOKEN)
        .json(&serde_json::json!({"task": "What did I say before?", "session_id": "rest-session"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 409, "{}", r.text().await.unwrap());
    let h = hm.memory.history("rest-session").unwrap();
    assert_eq!(h.total_turns, 2);
    // Bob's own turn is his episode; alice's episodes stay hers.
    let r = c
        .post(srv.url("/v1/turns"))
        .bearer_auth(BOB_TOKEN)
        .json(&serde_json::json!({"task": "What is my badge number?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let q = capsaga_door::memory::capsaga_memory::EpisodeQuery {
        limit: 10,
        ..Default::default()
    };
    let eps = hm.memory.store().list_episodes(&q).unwrap();
    let mut senders: Vec<&str> = eps.iter().map(|e| e.sender.as_str()).collect();
    senders.sort();
    assert_eq!(
        senders,
        ["token:alice", "token:alice", "token:bob"],
        "{eps:?}"
    );
    // What bob's turn retrieved: none of alice's episodes (the badge
    // number is only in hers).
    let bob_bundle = hm
        .memory
        .bundle_for_turn("token:bob", "What is my badge number?")
        .unwrap();
    assert!(
        bob_bundle.episodes.iter().all(|e| e.sender == "token:bob"),
        "{:?}",
        bob_bundle.episodes
    );
    assert!(!bob_bundle.render().contains("88213"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_decides_memory_proposals_over_rest() {
    if !model_installed("only_an_operator_decides_memory_proposals_over_rest") {
        return;
    }
    let ws = workspace(&[], TOOLS_POLICY);
    let (host, srv) = memory_server(&ws, r#"{"turns":[]}"#).await;
    let hm = host.memory.clone().unwrap();
    let c = capsaga_tests::mcp_rig::http();
    let p = hm
        .memory
        .propose(
            "default",
            "The badge number is 88213.",
            "agent:test",
            vec![],
        )
        .unwrap();
    let list_url = srv.url("/v1/memory/proposals");
    let url = srv.url(&format!("/v1/memory/proposals/{}/approve", p.proposal_id));
    let discard = srv.url(&format!("/v1/memory/proposals/{}/discard", p.proposal_id));
    // No token: 401. A client token: 403 on the list and on each decision,
    // whatever the body claims; the proposal stays pending.
    assert_eq!(
        c.get(&list_url).send().await.unwrap().status().as_u16(),
        401
    );
    assert_eq!(c.post(&url).send().await.unwrap().status().as_u16(), 401);
    let r = c
        .get(&list_url)
        .bearer_auth(ALICE_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    for u in [&url, &discard] {
        for body in [None, Some(r#"{}"#), Some(r#"{"by": "token:root"}"#)] {
            let mut req = c.post(u.as_str()).bearer_auth(ALICE_TOKEN);
            if let Some(b) = body {
                req = req.header("content-type", "application/json").body(b);
            }
            let r = req.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 403, "{u} {body:?}");
        }
    }
    assert_eq!(
        hm.memory.store().proposal(&p.proposal_id).unwrap().status,
        "pending"
    );
    assert!(hm.memory.store().facts(None).unwrap().is_empty());
    // The operator lists it.
    let list: serde_json::Value = c
        .get(&list_url)
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        list["proposals"][0]["proposal_id"],
        p.proposal_id.as_str(),
        "{list}"
    );
    // A body is admitted by the strict rule: duplicate keys, a name of a
    // decider, anything but `{}` is refused, and nothing is decided.
    for body in [
        r#"{"a": 1, "a": 2}"#,
        r#"{"by": "mallory"}"#,
        "[",
        r#"{"__proto__": {}}"#,
    ] {
        let r = c
            .post(&url)
            .bearer_auth(OPERATOR_TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{body}");
    }
    assert_eq!(
        hm.memory.store().proposal(&p.proposal_id).unwrap().status,
        "pending"
    );
    let ok = c
        .post(&url)
        .bearer_auth(OPERATOR_TOKEN)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200, "{}", ok.text().await.unwrap());
    let again = c
        .post(&url)
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 409);
    let decided = hm.memory.store().proposal(&p.proposal_id).unwrap();
    assert_eq!(decided.status, "approved");
    // Recorded under the authenticated principal, never a body's name.
    assert_eq!(decided.decided_by.as_deref(), Some("token:root (operator)"));
    assert_eq!(hm.memory.store().facts(None).unwrap().len(), 1);
    let missing = c
        .post(srv.url("/v1/memory/proposals/p-nope/discard"))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let bad = c
        .post(srv.url("/v1/memory/proposals/x/delete"))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 404);
}
