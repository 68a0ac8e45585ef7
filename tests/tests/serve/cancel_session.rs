//! A call of an MCP session (2025-11-25, one saga per session) that its
//! client cancels (`notifications/cancelled`), against a real `capsaga mcp`
//! over stdio: the saga is settled from its log. A call cancelled before it
//! logged anything (here: while the server waits for the client to approve
//! it) leaves the session's saga as it was, its earlier steps kept, parked
//! on the approval the call asked for (the operator's to decide), and
//! committed later by `capsaga_commit`; a call cancelled after its step
//! began (the `ledger` component spinning after its write) rolls the saga
//! back, as a failed step does.

use capsaga_store::{ApprovalStore, SagaStore, StepStatus, StepStore};
use capsaga_tests::{TestWorkspace, block_on, open_store};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.ledger]
grants = ["fs:write:~/ws/**"]
approval = "always"
limits = { deadline_ms = 600000, fuel = 100000000000000 }
[approvals]
client_confirm = ["ledger"]
"#;

/// `capsaga mcp` spoken to line by line, as a client that supports
/// elicitation.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Session {
    fn start(ws: &TestWorkspace) -> Session {
        let mut child = ws
            .capsaga(&["mcp", "--catalog-poll-ms", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn capsaga mcp");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut s = Session {
            child,
            stdin,
            lines,
        };
        s.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "cancel-test", "version": "1"}}),
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message from the server.
    fn next(&mut self) -> Value {
        let l = self.lines.next().expect("a message").unwrap();
        serde_json::from_str(&l).unwrap()
    }

    /// Send request `id` and read until its answer (answering nothing else).
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self.next();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// Send tools/call `id`, and read until the server asks the client
    /// (an elicitation); that request.
    fn call_until_asked(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}));
        loop {
            let v = self.next();
            if v["method"] == "elicitation/create" {
                return v;
            }
            assert!(v["id"] != id, "answered before asking: {v}");
        }
    }

    fn cancel(&mut self, id: u64) {
        self.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the user changed their mind"}}),
        );
    }

    fn end(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn saga_of(v: &Value) -> String {
    v["result"]["structuredContent"]["saga_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a saga id in {v}"))
        .to_string()
}

#[test]
fn a_call_cancelled_before_it_logged_anything_leaves_the_sessions_saga_as_it_was() {
    let ws = TestWorkspace::new(&["fs_write", "ledger"], POLICY);
    let mut s = Session::start(&ws);
    let a = s.request(
        1,
        "tools/call",
        json!({"name": "fs_write", "arguments": {"path": ws.ws_path("a.txt"), "content": "a\n"}}),
    );
    assert_eq!(a["result"]["isError"], false, "{a}");
    let saga = saga_of(&a);

    // The ledger call waits for the client's approval; the client cancels.
    let ledger = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid"});
    s.call_until_asked(2, "ledger", ledger.clone());
    s.cancel(2);
    // Nothing ran and nothing was rolled back: the session's saga goes on,
    // parked on the approval the call asked for (it stays the operator's
    // to decide, as for a client that cannot be asked).
    let c = s.request(
        3,
        "tools/call",
        json!({"name": "capsaga_commit", "arguments": {}}),
    );
    assert_eq!(c["result"]["isError"], true, "{c}");
    assert_eq!(saga_of(&c), saga, "the same saga: {c}");
    assert_eq!(
        c["result"]["structuredContent"]["saga_state"], "AwaitingApproval",
        "{c}"
    );
    assert!(ws.ws().join("a.txt").exists(), "a.txt kept");

    // The operator approves; the same call again runs once, in the same
    // saga, and commit keeps both steps.
    let store = open_store(&ws);
    let pending = block_on(store.approvals(false)).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let ok = ws
        .capsaga(&["approve", &pending[0].approval_id])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    let again = s.request(
        4,
        "tools/call",
        json!({"name": "ledger", "arguments": ledger}),
    );
    assert_eq!(again["result"]["isError"], false, "{again}");
    assert_eq!(saga_of(&again), saga, "{again}");
    let c = s.request(
        5,
        "tools/call",
        json!({"name": "capsaga_commit", "arguments": {}}),
    );
    assert_eq!(c["result"]["isError"], false, "{c}");
    assert_eq!(saga_of(&c), saga, "the same saga: {c}");
    s.end();
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "a\n"
    );
    assert!(
        std::fs::read_to_string(ws.ws().join("ledger.txt"))
            .unwrap()
            .contains("paid")
    );
    let row = block_on(store.saga(&saga)).unwrap().unwrap();
    assert_eq!(row.state.to_string(), "Done", "{row:?}");
    let steps = block_on(store.steps(&saga)).unwrap();
    assert_eq!(
        steps.iter().map(|s| s.status).collect::<Vec<_>>(),
        [StepStatus::Commit, StepStatus::Commit],
        "{steps:?}"
    );
}

#[test]
fn a_call_cancelled_after_its_step_began_rolls_the_sessions_saga_back() {
    let ws = TestWorkspace::new(&["fs_write", "ledger"], POLICY);
    let mut s = Session::start(&ws);
    let a = s.request(
        1,
        "tools/call",
        json!({"name": "fs_write", "arguments": {"path": ws.ws_path("a.txt"), "content": "a\n"}}),
    );
    let saga = saga_of(&a);
    let ledger_file = ws.ws().join("ledger.txt");
    let ledger = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid", "after": "spin"});
    let asked = s.call_until_asked(2, "ledger", ledger);
    // Approve; the ledger writes, then spins (ten minutes of deadline).
    s.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"approve": true}}}));
    let t = std::time::Instant::now();
    while !std::fs::read_to_string(&ledger_file).is_ok_and(|x| x.contains("paid")) {
        assert!(t.elapsed().as_secs() < 60, "the ledger never wrote");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.cancel(2);
    // The saga was recovered: the next call starts another one.
    let b = s.request(
        3,
        "tools/call",
        json!({"name": "fs_write", "arguments": {"path": ws.ws_path("b.txt"), "content": "b\n"}}),
    );
    assert_eq!(b["result"]["isError"], false, "{b}");
    assert_ne!(saga_of(&b), saga, "a new saga: {b}");
    s.end();
    assert!(!ws.ws().join("a.txt").exists(), "a.txt compensated");
    assert!(
        !std::fs::read_to_string(&ledger_file)
            .unwrap_or_default()
            .contains("paid"),
        "the ledger's entry compensated"
    );
    let store = open_store(&ws);
    let row = block_on(store.saga(&saga)).unwrap().unwrap();
    assert!(row.state.is_terminal(), "{row:?}");
    let steps = block_on(store.steps(&saga)).unwrap();
    assert!(
        steps.iter().all(|s| s.status == StepStatus::Compensated),
        "{steps:?}"
    );
}
