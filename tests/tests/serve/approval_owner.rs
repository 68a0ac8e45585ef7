//! An approval belongs to a principal (issue 45 item 1), from the
//! attacker's side, against a real `capsaga serve` (SQLite) and the real
//! `ledger` component (its journal counts executions): an operator's
//! approval of one principal's parked call, once the saga that asked has
//! ended, is claimed by that principal's identical call and by no other
//! principal's, whatever surface either uses (a REST turn, a stateless
//! request, an MCP session, a task, `capsaga call` in another process) and
//! whatever the other's role (another client token, an operator token, the
//! command line's operator, a token whose name differs only in case; a
//! revoked token's name cannot be created again).

use super::scoped::{Srv, executes, saga_in, server, session_call, set_script};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::principal::Role;
use capsaga_server::auth::digest;
use capsaga_store::TokenOpError;
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
approval = "always"
# Its journal counts executions: the host must not roll it back.
host_rollback = false
# Long enough to run as a task for a client of the tasks extension.
limits = { deadline_ms = 60000 }
"#;

/// Who makes the call, and through which surface.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `POST /v1/turns` (the scripted model makes the call).
    Turn(&'static str),
    /// A stateless request without a handle (its own saga).
    Stateless(&'static str),
    /// An MCP session.
    Session(&'static str),
    /// A task of the tasks extension.
    Task(&'static str),
    /// `capsaga call` in another process: `cli:<user>`, an operator.
    Cli,
}

fn ledger(round: usize) -> (Value, String) {
    let args = json!({"path": "", "entry": format!("round {round}")});
    (args, format!("round {round}"))
}

struct Rig {
    ws: TestWorkspace,
    srv: Srv,
}

impl Rig {
    fn args(&self, round: usize) -> Value {
        let (mut a, _) = ledger(round);
        a["path"] = json!(self.ws.ws_path("ledger.txt"));
        a
    }

    /// The call of round `round` through `via`; whether it ran (and the
    /// saga it ended in, ended unless it waits with a handle).
    async fn call(&self, via: Via, round: usize) -> (bool, Option<String>) {
        let args = self.args(round);
        let before = executes(&self.ws);
        let saga = match via {
            Via::Turn(who) => {
                set_script(&self.srv.script, Some(("ledger", &args)));
                let t = self.srv.turn(who).await;
                t["saga_id"].as_str().map(str::to_owned)
            }
            Via::Stateless(who) => {
                let v = self.srv.stateless(who, "ledger", &args, json!({})).await;
                let saga = saga_in(&v);
                // Parked: end the saga that asked (its handle's rollback).
                if v["result"]["isError"] == true {
                    let r = self
                        .srv
                        .with_handle(who, "capsaga_rollback", &json!({}), &saga)
                        .await;
                    assert_eq!(r["result"]["isError"], false, "{r}");
                }
                Some(saga)
            }
            Via::Session(who) => {
                let s = self.srv.session(who).await;
                let v = session_call(&s, "ledger", &args).await;
                let saga = saga_in(&v);
                if v["isError"] == true {
                    let r = session_call(&s, "capsaga_rollback", &json!({})).await;
                    assert_eq!(r["isError"], false, "{r}");
                }
                let _ = s.cancel().await;
                Some(saga)
            }
            Via::Task(who) => {
                let caps = json!({"io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
                let v = self.srv.stateless(who, "ledger", &args, caps).await;
                assert_eq!(v["result"]["resultType"], "task", "{v}");
                let id = v["result"]["taskId"].as_str().unwrap().to_string();
                let t0 = Instant::now();
                let done = loop {
                    let g = self
                        .srv
                        .rpc(
                            who,
                            "tasks/get",
                            json!({"taskId": id, "_meta": {
                                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                "io.modelcontextprotocol/clientCapabilities":
                                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}),
                        )
                        .await;
                    if g["result"]["status"] != "working" {
                        break g;
                    }
                    assert!(t0.elapsed() < Duration::from_secs(120), "{g}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                assert_eq!(done["result"]["status"], "completed", "{done}");
                done["result"]["statusMessage"]
                    .as_str()
                    .map(|m| m.trim_start_matches("saga ").to_string())
            }
            Via::Cli => {
                let o = self
                    .ws
                    .capsaga(&["--json", "call", "ledger", &args.to_string()])
                    .output()
                    .unwrap();
                let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
                let saga = v["result"]["saga_id"]
                    .as_str()
                    .or_else(|| v["saga_id"].as_str())
                    .map(str::to_owned);
                if o.status.code() == Some(10) {
                    let id = saga.clone().expect("a parked call names its saga");
                    let rb = self
                        .ws
                        .capsaga(&["rollback", "--saga", &id])
                        .output()
                        .unwrap();
                    assert!(rb.status.success(), "{rb:?}");
                } else {
                    assert!(o.status.success(), "{o:?}");
                }
                saga
            }
        };
        (executes(&self.ws) > before, saga)
    }

    /// The call of round `round` by `via` parks, and its saga ends; the
    /// operator approves its approval; the approval's id.
    async fn asked_and_approved(&self, via: Via, round: usize) -> String {
        let (ran, _) = self.call(via, round).await;
        assert!(!ran, "{via:?} ran without a human");
        let args = self.args(round);
        let mine: Vec<_> = self
            .srv
            .pending()
            .await
            .into_iter()
            .filter(|a| a.args == args)
            .collect();
        assert_eq!(mine.len(), 1, "{via:?}: {mine:?}");
        let id = mine[0].approval_id.clone();
        let asker = self.srv.host.store.saga(&mine[0].saga_id).await.unwrap();
        assert!(
            asker.is_some_and(|s| s.state.is_terminal()),
            "{via:?}: the saga that asked has ended"
        );
        self.srv.approve(&id).await;
        id
    }

    async fn status(&self, id: &str) -> ApprovalStatus {
        self.srv.host.store.approval(id).await.unwrap().status
    }

    /// `attacker` makes the identical call: it does not run, and the
    /// approval stays approved.
    async fn refused(&self, attacker: Via, round: usize, id: &str) {
        let (ran, _) = self.call(attacker, round).await;
        assert!(
            !ran,
            "round {round}: {attacker:?} claimed another's approval"
        );
        assert_eq!(
            self.status(id).await,
            ApprovalStatus::Approved,
            "{attacker:?}"
        );
    }

    /// `owner` makes the identical call: it runs once, claiming the
    /// approval in its own saga.
    async fn claims(&self, owner: Via, round: usize, id: &str) {
        let (ran, saga) = self.call(owner, round).await;
        assert!(ran, "round {round}: {owner:?} did not claim its approval");
        let row = self.srv.host.store.approval(id).await.unwrap();
        assert_eq!(row.status, ApprovalStatus::Claimed);
        assert_eq!(row.claimed_saga, saga, "{owner:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_claimed_by_the_principal_that_asked_and_no_other() {
    let ws = TestWorkspace::new(&["ledger"], POLICY);
    let srv = server(&ws).await;
    let rig = Rig { ws, srv };
    // (who asks, who tries to claim, who claims), each with a call of its
    // own arguments, so that each attempt alone would have claimed.
    let rounds = [
        (Via::Turn("bob"), Via::Turn("mallory"), Via::Session("bob")),
        (
            Via::Stateless("bob"),
            Via::Stateless("mallory"),
            Via::Turn("bob"),
        ),
        (
            Via::Session("bob"),
            Via::Session("mallory"),
            Via::Stateless("bob"),
        ),
        (
            Via::Stateless("bob"),
            Via::Stateless("alice"),
            Via::Session("bob"),
        ),
        (Via::Turn("bob"), Via::Turn("alice"), Via::Stateless("bob")),
        (Via::Stateless("bob"), Via::Cli, Via::Turn("bob")),
        (Via::Cli, Via::Stateless("bob"), Via::Cli),
        (Via::Cli, Via::Turn("alice"), Via::Cli),
        (
            Via::Stateless("bob"),
            Via::Task("mallory"),
            Via::Task("bob"),
        ),
        (
            Via::Task("bob"),
            Via::Session("mallory"),
            Via::Stateless("bob"),
        ),
    ];
    for (round, (asker, attacker, owner)) in rounds.into_iter().enumerate() {
        let id = rig.asked_and_approved(asker, round).await;
        rig.refused(attacker, round, &id).await;
        rig.claims(owner, round, &id).await;
    }
    assert_eq!(
        executes(&rig.ws),
        rounds.len(),
        "each approved call ran once"
    );
    let audit = rig.ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_named_alike_or_re_created_never_gets_another_tokens_approval() {
    let ws = TestWorkspace::new(&["ledger"], POLICY);
    let srv = server(&ws).await;
    let store = srv.host.store.clone();
    let rig = Rig { ws, srv };
    let id = rig.asked_and_approved(Via::Stateless("bob"), 0).await;
    // A token whose name differs only in case is another principal.
    let bob_upper = super::wire2026::secret("Bob");
    store
        .create_token("Bob", Role::Client, &digest(bob_upper.as_bytes()), "test")
        .await
        .unwrap();
    rig.refused(Via::Stateless("Bob"), 0, &id).await;
    rig.refused(Via::Turn("Bob"), 0, &id).await;
    // bob's token revoked: its name is never created again, so no later
    // token inherits what an operator approved for bob.
    store.revoke_token("bob", "test").await.unwrap();
    for role in [Role::Client, Role::Operator] {
        let again = store
            .create_token(
                "bob",
                role,
                &digest(b"another-secret-0123456789abcdef"),
                "test",
            )
            .await;
        assert!(
            matches!(again, Err(TokenOpError::NameTaken(_))),
            "{again:?}"
        );
    }
    let r = rig
        .srv
        .stateless("bob", "ledger", &rig.args(0), json!({}))
        .await;
    assert!(r.get("result").is_none(), "a revoked token is refused: {r}");
    rig.refused(Via::Session("mallory"), 0, &id).await;
    assert_eq!(executes(&rig.ws), 0);
}
