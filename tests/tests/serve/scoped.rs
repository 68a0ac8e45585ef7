//! What the tests of issue 45 items 1 and 2 share (`approval_owner`,
//! `scope`): a real `capsaga serve` on 127.0.0.1 with named tokens (bob and
//! mallory clients, alice an operator) and a model script for REST turns,
//! and one client of each surface: a REST turn, a stateless (2026-07-28)
//! request, an MCP session (2025-11-25, rmcp's client), a task.

use super::wire2026::secret;
use super::{Running, http, start};
use capsaga_core::principal::Role;
use capsaga_door::host::Host;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_tests::TestWorkspace;
use rmcp::model::ClientConfig;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// An MCP session of rmcp's client.
pub type Session = RunningService<rmcp::RoleClient, ClientConfig>;

/// The server, its host and its model script.
pub struct Srv {
    pub host: Arc<Host>,
    pub srv: Running,
    pub script: PathBuf,
}

/// A server over `ws` with tokens for bob and mallory (clients) and alice
/// (operator), its REST turns answered by the script [`Srv::script`].
pub async fn server(ws: &TestWorkspace) -> Srv {
    let host = ws.host().await;
    for (name, role) in [
        ("bob", Role::Client),
        ("mallory", Role::Client),
        ("alice", Role::Operator),
    ] {
        host.store
            .create_token(name, role, &digest(secret(name).as_bytes()), "test")
            .await
            .unwrap();
    }
    let script = ws.root.join("turns.json");
    set_script(&script, None);
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(script.clone());
    let srv = start(host.clone(), o).await;
    Srv { host, srv, script }
}

/// The model of every REST turn from now on: calls `call` (tool, arguments)
/// if given, then answers.
pub fn set_script(path: &std::path::Path, call: Option<(&str, &Value)>) {
    let first = match call {
        Some((name, args)) => {
            json!({"text": "on it", "tool_calls": [{"name": name, "arguments": args}]})
        }
        None => json!({"text": "Nothing to do."}),
    };
    let script = json!({"model": "scripted", "turns": [first, {"text": "Done."}]});
    std::fs::write(path, script.to_string()).unwrap();
}

impl Srv {
    /// A REST turn (`POST /v1/turns`) of `who`: its answer.
    pub async fn turn(&self, who: &str) -> Value {
        let r = http()
            .post(self.srv.url("/v1/turns"))
            .bearer_auth(secret(who))
            .json(&json!({"task": "do the thing"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "turn of {who}");
        r.json().await.unwrap()
    }

    /// A stateless (2026-07-28) `tools/call` of `name` by `who`, with
    /// `meta` added to the request's `_meta` (a saga handle, capabilities):
    /// the JSON-RPC answer.
    pub async fn stateless(&self, who: &str, name: &str, args: &Value, meta: Value) -> Value {
        let mut m = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "scope-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let (Some(m), Value::Object(e)) = (m.as_object_mut(), meta) {
            for (k, v) in e {
                if k == "io.modelcontextprotocol/clientCapabilities" {
                    m.insert(k, v);
                } else {
                    m.entry(k).or_insert(v);
                }
            }
        }
        self.rpc(
            who,
            "tools/call",
            json!({"name": name, "arguments": args, "_meta": m}),
        )
        .await
    }

    /// A stateless call naming the saga handle `handle`.
    pub async fn with_handle(&self, who: &str, name: &str, args: &Value, handle: &str) -> Value {
        self.stateless(who, name, args, json!({"dev.capsaga/saga": handle}))
            .await
    }

    /// One stateless JSON-RPC request of `who`: its answer.
    pub async fn rpc(&self, who: &str, method: &str, params: Value) -> Value {
        super::tasks::post(&self.srv.url("/mcp"), who, method, params).await
    }

    /// An MCP session (2025-11-25) of `who`.
    pub async fn session(&self, who: &str) -> Session {
        capsaga_tests::mcp_rig::connect_as(
            self.srv.url("/mcp"),
            Some(&secret(who)),
            ClientConfig::default(),
        )
        .await
        .unwrap()
    }

    /// The operator alice approves approval `id` over REST.
    pub async fn approve(&self, id: &str) {
        self.decide(id, "approve").await;
    }

    /// The operator alice decides approval `id` over REST (`verb`:
    /// `approve` or `deny`).
    pub async fn decide(&self, id: &str, verb: &str) {
        let r = http()
            .post(self.srv.url(&format!("/v1/approvals/{id}/{verb}")))
            .bearer_auth(secret("alice"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    }

    /// A session of bob's that wrote `file` in its saga: the session and
    /// its saga.
    pub async fn session_that_wrote(&self, ws: &TestWorkspace, file: &str) -> (Session, String) {
        let s = self.session("bob").await;
        let v = session_call(
            &s,
            "fs_write",
            &json!({"path": ws.ws_path(file), "content": "a\n"}),
        )
        .await;
        assert_eq!(v["isError"], false, "{v}");
        let saga = saga_in(&v);
        (s, saga)
    }

    /// The pending approvals.
    pub async fn pending(&self) -> Vec<capsaga_store::ApprovalRow> {
        self.host.store.approvals(false).await.unwrap()
    }
}

/// A session's call of `tool` with `args`: the result as JSON.
pub async fn session_call(s: &Session, tool: &str, args: &Value) -> Value {
    let r = capsaga_tests::mcp_rig::call(s, tool, args).await;
    serde_json::to_value(&r).unwrap()
}

/// The saga a result (stateless answer or session result) names.
pub fn saga_in(v: &Value) -> String {
    let r = v.get("result").unwrap_or(v);
    let s = &r["structuredContent"];
    s["saga_id"]
        .as_str()
        .or_else(|| s["error"]["saga_id"].as_str())
        .unwrap_or_else(|| panic!("no saga id in {v}"))
        .to_string()
}

/// The executions the ledger's journal beside `ledger.txt` counts.
pub fn executes(ws: &TestWorkspace) -> usize {
    std::fs::read_to_string(ws.ws().join("ledger.txt.journal"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("execute "))
        .count()
}
