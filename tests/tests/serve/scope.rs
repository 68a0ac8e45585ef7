//! One saga, one scope (issue 45 item 2), from the attacker's side, against
//! a real `capsaga serve` (SQLite): a saga opened by one scope (an MCP
//! session, a task, a REST turn, a plan) is never continued, committed or
//! rolled back through another (a stateless request naming it as a saga
//! handle, the operator console acting on a saga a live scope holds), even
//! by its own principal; another principal cannot even tell it exists.

use super::scoped::{Srv, executes, saga_in, server, session_call, set_script};
use super::wire2026::secret;
use capsaga_core::fsm::State;
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
host_rollback = false
limits = { deadline_ms = 120000, fuel = 10000000000000 }
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.time_now]
"#;

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["ledger", "fs_write", "time_now"], POLICY)
}

/// The refusal of a handle that names no saga of the caller's.
async fn unknown_handle_message(srv: &Srv, who: &str) -> String {
    let forged = "0b0e6c36-6f2c-4c55-9a65-3f1d2a8e9b10";
    let v = srv.with_handle(who, "time_now", &json!({}), forged).await;
    v["error"]["message"].as_str().unwrap().to_string()
}

/// Every way a stateless request can drive saga `saga` by its handle
/// (a call in it, `capsaga_commit`, `capsaga_rollback` by `_meta` or by
/// argument), by its own principal `owner` and by `other`: each refused
/// (`-32602`), the owner told which scope opened it, the other told as for
/// a saga that does not exist.
async fn every_handle_use_is_refused(srv: &Srv, saga: &str, opened_by: &str, write: &Value) {
    let forged = unknown_handle_message(srv, "mallory").await;
    for who in ["bob", "mallory"] {
        let attempts = [
            srv.with_handle(who, "fs_write", write, saga).await,
            srv.with_handle(who, "capsaga_commit", &json!({}), saga)
                .await,
            srv.with_handle(who, "capsaga_rollback", &json!({}), saga)
                .await,
            srv.stateless(who, "capsaga_rollback", &json!({"saga": saga}), json!({}))
                .await,
            srv.stateless(who, "capsaga_commit", &json!({"saga": saga}), json!({}))
                .await,
        ];
        for v in attempts {
            assert_eq!(v["error"]["code"], -32602, "{who}: {v}");
            let msg = v["error"]["message"].as_str().unwrap();
            if who == "bob" {
                assert!(msg.contains(opened_by), "{msg}");
            } else {
                assert_eq!(msg, forged, "no existence oracle for another principal");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_sessions_saga_is_never_joined_committed_or_rolled_back_by_a_handle() {
    let ws = ws();
    let srv = server(&ws).await;
    let (s, saga) = srv.session_that_wrote(&ws, "a.txt").await;
    let evil = json!({"path": ws.ws_path("evil.txt"), "content": "x"});
    every_handle_use_is_refused(&srv, &saga, "an MCP session", &evil).await;
    assert!(
        !ws.ws().join("evil.txt").exists(),
        "no call joined the session's saga"
    );
    let row = srv.host.store.saga(&saga).await.unwrap().unwrap();
    assert_eq!(
        row.state,
        State::Acting,
        "neither committed nor rolled back"
    );
    assert_eq!(srv.host.store.steps(&saga).await.unwrap().len(), 1);
    // The session's own rollback still has its step to roll back.
    let r = session_call(&s, "capsaga_rollback", &json!({})).await;
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["structuredContent"]["undone"].as_array().unwrap().len(),
        1,
        "{r}"
    );
    assert!(!ws.ws().join("a.txt").exists());
    let _ = s.cancel().await;
}

/// A task's saga while its call runs (`ledger` appends, then spins until
/// cancelled); its id is what `tasks/get` shows.
async fn running_task(srv: &Srv, ws: &TestWorkspace) -> (String, String) {
    let caps = json!({"io.modelcontextprotocol/clientCapabilities":
        {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let args = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid", "after": "spin"});
    let v = srv.stateless("bob", "ledger", &args, caps).await;
    assert_eq!(v["result"]["resultType"], "task", "{v}");
    let id = v["result"]["taskId"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    while executes(ws) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the task never wrote"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let g = srv.rpc("bob", "tasks/get", task_params(&id)).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    let saga = g["result"]["statusMessage"]
        .as_str()
        .unwrap()
        .trim_start_matches("saga ")
        .to_string();
    (id, saga)
}

fn task_params(id: &str) -> Value {
    json!({"taskId": id, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}}})
}

fn ledger_text(ws: &TestWorkspace) -> String {
    std::fs::read_to_string(ws.ws().join("ledger.txt")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_tasks_saga_is_never_joined_or_rolled_back_by_a_handle() {
    let ws = ws();
    let srv = server(&ws).await;
    let (task, saga) = running_task(&srv, &ws).await;
    let evil = json!({"path": ws.ws_path("evil.txt"), "content": "x"});
    every_handle_use_is_refused(&srv, &saga, "an MCP task", &evil).await;
    assert!(!ws.ws().join("evil.txt").exists());
    assert!(
        ledger_text(&ws).contains("paid"),
        "nothing compensated the task's step"
    );
    let row = srv.host.store.saga(&saga).await.unwrap().unwrap();
    assert!(!row.state.is_terminal(), "{}", row.state);
    let g = srv.rpc("bob", "tasks/get", task_params(&task)).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    // The task's own cancel undoes it.
    let c = srv.rpc("bob", "tasks/cancel", task_params(&task)).await;
    assert!(c.get("error").is_none(), "{c}");
    assert!(!ledger_text(&ws).contains("paid"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_names_only_a_saga_opened_as_a_handle() {
    let ws = ws();
    let srv = server(&ws).await;
    let evil = json!({"path": ws.ws_path("evil.txt"), "content": "x"});
    // A REST turn's saga (ended) and a plan's (`capsaga call`, parked on
    // nothing: Done), the principal's own for the turn.
    set_script(
        &srv.script,
        Some((
            "fs_write",
            &json!({"path": ws.ws_path("t.txt"), "content": "t\n"}),
        )),
    );
    let t = srv.turn("bob").await;
    assert_eq!(t["outcome"], "success", "{t}");
    let turn = t["saga_id"].as_str().unwrap().to_string();
    every_handle_use_is_refused(&srv, &turn, "a REST turn", &evil).await;
    let o = ws
        .capsaga(&["--json", "call", "time_now", "{}"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let call: Value = serde_json::from_slice(&o.stdout).unwrap();
    let call = call["saga_id"].as_str().unwrap().to_string();
    for who in ["bob", "mallory"] {
        let v = srv.with_handle(who, "fs_write", &evil, &call).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
    }
    assert!(!ws.ws().join("evil.txt").exists());
    assert!(ws.ws().join("t.txt").exists(), "the turn's step stands");
    // A handle's own saga: continued, then committed, by its principal.
    let a = srv
        .stateless(
            "bob",
            "fs_write",
            &json!({"path": ws.ws_path("h1.txt"), "content": "1"}),
            json!({"dev.capsaga/saga": "new"}),
        )
        .await;
    let h = saga_in(&a);
    let b = srv
        .with_handle(
            "bob",
            "fs_write",
            &json!({"path": ws.ws_path("h2.txt"), "content": "2"}),
            &h,
        )
        .await;
    assert_eq!(b["result"]["isError"], false, "{b}");
    let c = srv
        .with_handle("bob", "capsaga_commit", &json!({}), &h)
        .await;
    assert_eq!(c["result"]["isError"], false, "{c}");
    let row = srv.host.store.saga(&h).await.unwrap().unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.scope.map(|s| s.as_str()), Some("handle"));
}

/// The operator console (signed in over raw HTTP): its session cookie and
/// the CSRF token of a saga's page.
struct Console {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

impl Console {
    async fn sign_in(srv: &Srv) -> Console {
        let http = capsaga_tests::mcp_rig::http_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let base = srv.srv.url("");
        let r = http
            .post(format!("{base}/console/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}", secret("alice")))
            .send()
            .await
            .unwrap();
        let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
        let cookie = set.split(';').next().unwrap().to_string();
        Console { http, base, cookie }
    }

    /// Post `action` on saga `id`'s page: the status and the page.
    async fn act(&self, id: &str, action: &str) -> (u16, String) {
        let page = self
            .http
            .get(format!("{}/console/sagas/{id}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("no CSRF token in {page}"))
            .to_string();
        let r = self
            .http
            .post(format!("{}/console/sagas/{id}/action", self.base))
            .header("cookie", &self.cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&action={action}"))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_acts_on_no_saga_a_live_scope_of_its_host_holds() {
    let ws = ws();
    let srv = server(&ws).await;
    let console = Console::sign_in(&srv).await;
    // A live session's saga.
    let (s, session_saga) = srv.session_that_wrote(&ws, "a.txt").await;
    for action in ["rollback", "undo"] {
        let (status, page) = console.act(&session_saga, action).await;
        assert_eq!(status, 409, "{action}: {page}");
        assert!(page.contains("in use by an MCP session"), "{page}");
    }
    assert!(ws.ws().join("a.txt").exists());
    assert_eq!(
        srv.host
            .store
            .saga(&session_saga)
            .await
            .unwrap()
            .unwrap()
            .state,
        State::Acting
    );
    // A running task's saga.
    let (task, task_saga) = running_task(&srv, &ws).await;
    let (status, page) = console.act(&task_saga, "rollback").await;
    assert_eq!(status, 409, "{page}");
    assert!(page.contains("in use by an MCP task"), "{page}");
    assert!(ledger_text(&ws).contains("paid"));
    let c = srv.rpc("bob", "tasks/cancel", task_params(&task)).await;
    assert!(c.get("error").is_none(), "{c}");
    // Once the session ended (committed by the session-end rule), the
    // operator undoes its saga.
    let _ = s.cancel().await;
    let t0 = Instant::now();
    while srv
        .host
        .store
        .saga(&session_saga)
        .await
        .unwrap()
        .unwrap()
        .state
        != State::Done
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the session never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, page) = console.act(&session_saga, "undo").await;
    assert_eq!(status, 200, "{page}");
    assert!(!ws.ws().join("a.txt").exists(), "undone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_denial_of_a_sessions_parked_call_is_applied_by_the_session() {
    let policy = format!(
        "{POLICY}\n[tools.fs_edit]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n"
    );
    let ws = TestWorkspace::new(&["ledger", "fs_write", "time_now", "fs_edit"], &policy);
    std::fs::write(ws.ws().join("e.txt"), "hello world").unwrap();
    let srv = server(&ws).await;
    let (s, saga) = srv.session_that_wrote(&ws, "a.txt").await;
    let edit = json!({"path": ws.ws_path("e.txt"), "old_string": "world", "new_string": "there"});
    let p = session_call(&s, "fs_edit", &edit).await;
    assert_eq!(p["isError"], true, "{p}");
    let id = srv.pending().await[0].approval_id.clone();
    srv.decide(&id, "deny").await;
    // The session held the saga: the denial left it to the session, which
    // rolls it back before its next call and starts a new saga.
    let next = session_call(&s, "time_now", &json!({})).await;
    assert_eq!(next["isError"], false, "{next}");
    assert_ne!(saga_in(&next), saga);
    let row = srv.host.store.saga(&saga).await.unwrap().unwrap();
    assert_eq!(row.state, State::FailedRolledBack);
    assert!(
        !ws.ws().join("a.txt").exists(),
        "the step before the denied one undone"
    );
    let _ = s.cancel().await;
}
