//! The operator console (issue 29) in a real headless Chromium
//! (`capsaga_tests::webdriver`, Debian's chromium + chromedriver) against
//! a real `capsaga serve` on 127.0.0.1 over a real workspace: sign in with
//! an operator token; approve a parked `fs_write` and see the plan resume
//! and commit; deny one and see the rollback; hostile text in tool
//! arguments, file content, a model answer and a neuron's source shown as
//! text with no script run; the `fs_write` preview as a unified diff; a
//! neuron approved with a subset of its grants and retired; the spend chart (inline
//! SVG) and the memory page; a CSRF attempt from another origin, a POST without the session's
//! CSRF token and a client token refused; a revoked token's session ended.
//! Screenshots of each page go to `target/console-screenshots/`.
//!
//! Without Chromium the tests print SKIPPED and pass (CI installs it).

use capsaga_core::approval::ApprovalStatus;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::Status;
use capsaga_core::principal::Role;
use capsaga_door::host::Host;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_store::{NewNeuron, Transition};
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{Running, http, start};
use capsaga_tests::webdriver::Browser;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

mod flow;
mod memory;
mod refused;
mod stale;

const ALICE: &str = "alice-operator-secret-0123456789";
const BOB: &str = "bob-client-secret-0123456789abcd";

/// Hostile text: an inline script, an event handler, quotes and an
/// ampersand. Rendered as HTML, it would set `window.__pwned` or open an
/// alert.
const PAYLOAD: &str = r#"<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2;alert(2)"><svg onload=alert(3)>"' &amp;"#;

/// What of [`PAYLOAD`] shows as is inside JSON (arguments are shown as
/// pretty JSON, where its quotes are escaped).
const VISIBLE: &str = "<script>window.__pwned=1</script><img src=x onerror=";

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
approval = "always"
[tools.fs_edit]
grants = ["fs:write:~/ws/**"]
"#;

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["fs_write", "fs_edit"], POLICY)
}

/// Run `steps` as a plan with the CLI: it parks on its approval. Its
/// (saga id, approval id).
fn parked_plan(ws: &TestWorkspace, name: &str, steps: Value) -> (String, String) {
    let p = ws.root.join(name);
    std::fs::write(&p, json!({"description": name, "steps": steps}).to_string()).unwrap();
    let out = ws
        .capsaga(&["--json", "run", "--plan", &p.to_string_lossy()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["saga_id"].as_str().unwrap().to_string(),
        v["awaiting_approval"]["approval_id"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

async fn tokens(host: &Host) {
    for (name, role, secret) in [("alice", Role::Operator, ALICE), ("bob", Role::Client, BOB)] {
        host.store
            .create_token(name, role, &digest(secret.as_bytes()), "test")
            .await
            .unwrap();
    }
}

/// A server over `ws` with alice (operator) and bob (client), answering
/// turns with `answer` (a scripted model).
async fn server(ws: &TestWorkspace, answer: &str) -> (Arc<Host>, Running) {
    let script = ws.root.join("script.json");
    std::fs::write(
        &script,
        json!({"model": "scripted", "turns": [{"text": answer}]}).to_string(),
    )
    .unwrap();
    let host = ws.host().await;
    tokens(&host).await;
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(script);
    let srv = start(host.clone(), o).await;
    (host, srv)
}

/// Where screenshots go: `target/console-screenshots/<name>.png`.
pub fn shot(name: &str) -> PathBuf {
    capsaga_tests::target_dir()
        .join("console-screenshots")
        .join(format!("{name}.png"))
}

/// Sign in with `token` on the form.
pub async fn sign_in(b: &Browser, srv: &Running, token: &str) {
    b.goto(&srv.url("/console/login")).await;
    let field = b.get("#token").await;
    b.type_into(&field, token).await;
    b.click(&b.get("#sign-in").await).await;
}

/// No script of the page's data ran: `window.__pwned` unset, no dialog
/// open, no `<img>` or `<svg>` element made from data (the console's own
/// charts are `figure.chart > svg`), and the only script element is the
/// console's own file.
pub async fn no_script_ran(b: &Browser, page: &str) {
    assert_eq!(b.alert().await, None, "{page}: a dialog opened");
    let v = b
        .eval(
            "return [typeof window.__pwned, document.querySelectorAll('img,svg:not(figure.chart > svg),iframe,object').length, \
             Array.from(document.scripts).map(s => s.getAttribute('src'))];",
        )
        .await;
    assert_eq!(
        v,
        json!(["undefined", 0, ["/console/static/console.js"]]),
        "{page}"
    );
}

/// Store a neuron version `name` v1 awaiting the operator, its
/// description and source [`PAYLOAD`], requesting `grants`.
async fn propose_neuron(host: &Host, name: &str, grants: &[String]) {
    let meta = RawToolMeta {
        name: name.into(),
        description: PAYLOAD.into(),
        args_schema: r#"{"type":"object"}"#.into(),
        has_side_effects: false,
        risk: Risk::Low,
        returns_untrusted: false,
        idempotent: true,
        supports_dry_run: false,
        capabilities: grants.to_vec(),
        version: String::new(),
        output_fields: Vec::new(),
    };
    host.store
        .propose_neuron(&NewNeuron {
            identity: &format!("{name}-identity"),
            runner_hash: "r",
            meta: &meta,
            source: PAYLOAD,
            examples: &json!([{"args": {"x": PAYLOAD}}]),
            report: None,
            saga_id: None,
            step_seq: None,
        })
        .await
        .unwrap();
    for to in [Status::Tested, Status::AwaitingOperator] {
        host.store
            .transition_neuron(&Transition {
                name,
                version: 1,
                to,
                by: "test",
                note: None,
                granted: None,
                report: None,
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_approves_and_denies_in_the_browser_and_hostile_text_stays_text() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let ws = ws();
    // Plan A: one fs_write of hostile content, parked on its approval.
    let (saga_a, approval_a) = parked_plan(
        &ws,
        "a.json",
        json!([{"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": PAYLOAD}}]),
    );
    // Plan B: an edit that commits, then a write parked on its approval.
    std::fs::write(ws.ws().join("b.txt"), "before").unwrap();
    let (saga_b, approval_b) = parked_plan(
        &ws,
        "b.json",
        json!([
            {"tool": "fs_edit", "args": {"path": ws.ws_path("b.txt"), "old_string": "before", "new_string": "after"}},
            {"tool": "fs_write", "args": {"path": ws.ws_path("c.txt"), "content": "c"}},
        ]),
    );
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("b.txt")).unwrap(),
        "after"
    );
    let (host, srv) = server(&ws, PAYLOAD).await;
    // A turn whose model answers with the hostile text.
    let turn: Value = http()
        .post(srv.url("/v1/turns"))
        .bearer_auth(ALICE)
        .json(&json!({"task": "say something"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trace_id = turn["trace_id"].as_str().unwrap().to_string();

    // Not signed in: the sign-in form.
    b.goto(&srv.url("/console")).await;
    assert!(
        b.url().await.ends_with("/console/login"),
        "{}",
        b.url().await
    );
    b.screenshot(&shot("sign-in")).await;
    sign_in(&b, &srv, ALICE).await;
    b.wait_text("#operator", "token:alice").await;
    let cookie = b
        .cookies()
        .await
        .into_iter()
        .find(|c| c["name"] == "capsaga_console")
        .expect("the session cookie");
    assert_eq!(cookie["httpOnly"], true, "{cookie}");
    assert_eq!(cookie["sameSite"], "Strict", "{cookie}");

    // The queue: both approvals, the hostile arguments shown as text.
    b.wait_text("#pending", "2 pending").await;
    let a = format!("section[data-approval=\"{approval_a}\"]");
    assert!(b.text(&a).await.contains(VISIBLE), "{}", b.text(&a).await);
    // A's preview as a unified diff: a new file, every line added.
    let section = b.text(&a).await;
    assert!(
        section.contains("--- /dev/null") && section.contains("+<script>window.__pwned=1"),
        "{section}"
    );
    // The risk fs_write declares in its meta.
    let risk = format!("{a} p.risk");
    assert_eq!(b.attr(&b.get(&risk).await, "data-risk").await, "medium");
    assert!(b.text(&risk).await.contains("Risk: medium"), "{section}");
    no_script_ran(&b, "approvals").await;
    // The live badge (server-sent events) shows the same count.
    b.wait_text("#pending-badge", "2 pending").await;
    b.screenshot(&shot("approvals")).await;

    // Approve A: the plan resumes and commits the write.
    b.click(&b.get(&format!("{a} button.approve")).await).await;
    b.wait_text("#flash", "resumed: Done").await;
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        PAYLOAD
    );
    let row = host.store.approval(&approval_a).await.unwrap();
    assert_eq!(row.decided_by.as_deref(), Some("token:alice (operator)"));
    assert_eq!(row.status, ApprovalStatus::Claimed);
    no_script_ran(&b, "approvals after the decision").await;

    // Deny B with a hostile note: the parked saga rolls back (the
    // committed edit undone).
    let note = format!("section[data-approval=\"{approval_b}\"] input[name=note]");
    b.type_into(&b.get(&note).await, PAYLOAD).await;
    let sel = format!("section[data-approval=\"{approval_b}\"] button.deny");
    b.click(&b.get(&sel).await).await;
    b.wait_text("#flash", "rolled back: FailedRolledBack").await;
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("b.txt")).unwrap(),
        "before"
    );
    assert!(!ws.ws().join("c.txt").exists());
    let row = host.store.approval(&approval_b).await.unwrap();
    assert_eq!(row.status, ApprovalStatus::Denied);
    assert_eq!(row.decided_by.as_deref(), Some("token:alice (operator)"));
    b.wait_text("#pending", "0 pending").await;

    // The decided approvals, newest first: B denied with its note (text,
    // not markup), A approved then claimed by its step.
    b.click(&b.get("#decided-link").await).await;
    let decided = b.text("#decided").await;
    let row_a = b.text(&format!("tr[data-approval=\"{approval_a}\"]")).await;
    let row_b = b.text(&format!("tr[data-approval=\"{approval_b}\"]")).await;
    assert!(
        row_a.contains("claimed") && row_a.contains("token:alice (operator)"),
        "{decided}"
    );
    assert!(
        row_b.contains("denied") && row_b.contains(VISIBLE),
        "{decided}"
    );
    let order = b
        .eval("return Array.from(document.querySelectorAll('#decided tbody tr')).map(r => r.dataset.approval);")
        .await;
    assert_eq!(order, json!([approval_b, approval_a]), "newest first");
    no_script_ran(&b, "decided approvals").await;
    b.screenshot(&shot("decided")).await;

    // The sagas list and A's timeline: the hostile content is data there too.
    b.goto(&srv.url("/console/sagas")).await;
    let list = b.text("#sagas").await;
    assert!(
        list.contains(&saga_a[..12]) && list.contains(&saga_b[..12]),
        "{list}"
    );
    b.screenshot(&shot("sagas")).await;
    b.goto(&srv.url("/console/sagas?state=FailedRolledBack"))
        .await;
    let filtered = b.text("#sagas").await;
    assert!(
        filtered.contains(&saga_b[..12]) && !filtered.contains(&saga_a[..12]),
        "{filtered}"
    );
    b.goto(&srv.url(&format!("/console/sagas/{saga_a}"))).await;
    assert_eq!(b.text("#saga-state").await, "Done");
    assert!(b.text("ol.steps").await.contains(VISIBLE));
    no_script_ran(&b, "saga timeline").await;
    b.screenshot(&shot("saga")).await;
    // Undo the Done saga from its page: the committed write is compensated.
    b.click(&b.get("button[value=undo]").await).await;
    b.wait_text("#flash", "Undone by token:alice").await;
    assert!(!ws.ws().join("a.txt").exists(), "A's write undone");
    assert_ne!(b.text("#saga-state").await, "Done");

    // The model's answer on the trace page, reached from the turn's saga.
    let turn_saga = turn["saga_id"].as_str().unwrap().to_string();
    b.goto(&srv.url(&format!("/console/sagas/{turn_saga}")))
        .await;
    b.click(&b.get("#trace-link").await).await;
    assert!(
        b.url()
            .await
            .ends_with(&format!("/console/traces/{trace_id}")),
        "{}",
        b.url().await
    );
    assert!(
        b.text("#final-answer").await.contains(PAYLOAD),
        "{}",
        b.text("body").await
    );
    no_script_ran(&b, "trace").await;
    b.screenshot(&shot("trace")).await;

    // A neuron whose description and source are hostile, awaiting the
    // operator: shown as text; approved with a subset of what it requests
    // (the write withheld), then retired.
    let grant = format!("fs:read:{}/**", ws.ws().display());
    let write = format!("fs:write:{}/out/**", ws.ws().display());
    propose_neuron(&host, "evil_tool", &[grant.clone(), write.clone()]).await;
    b.goto(&srv.url("/console/neurons")).await;
    let n = "section[data-neuron=\"evil_tool@1\"]";
    assert!(b.text(n).await.contains(PAYLOAD), "{}", b.text(n).await);
    no_script_ran(&b, "neurons").await;
    b.screenshot(&shot("neurons")).await;
    let grants = b.get(&format!("{n} textarea[name=grants]")).await;
    b.clear(&grants).await;
    b.type_into(&grants, &grant).await;
    b.click(&b.get(&format!("{n} button.approve")).await).await;
    b.wait_text("#flash", "evil_tool v1 is active").await;
    assert!(
        b.text("#flash")
            .await
            .contains(&format!("withheld: {write}")),
        "{}",
        b.text("#flash").await
    );
    assert!(b.text(&format!("{n} .withheld")).await.contains(&write));
    let row = host
        .store
        .neuron("evil_tool", Some(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, Status::Active);
    assert_eq!(row.decided_by.as_deref(), Some("token:alice (operator)"));
    assert_eq!(row.granted, std::slice::from_ref(&grant));
    b.click(&b.get(&format!("{n} button.deny")).await).await;
    b.wait_text("#flash", "evil_tool v1 is retired").await;
    // Another one rejected, with a hostile note: recorded as text.
    propose_neuron(&host, "other_tool", std::slice::from_ref(&grant)).await;
    b.goto(&srv.url("/console/neurons")).await;
    let o = "section[data-neuron=\"other_tool@1\"]";
    b.type_into(&b.get(&format!("{o} input[name=note]")).await, PAYLOAD)
        .await;
    b.click(&b.get(&format!("{o} button[value=reject]")).await)
        .await;
    b.wait_text("#flash", "other_tool v1 is rejected").await;
    let row = host
        .store
        .neuron("other_tool", Some(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, Status::Rejected);
    assert_eq!(row.decided_by.as_deref(), Some("token:alice (operator)"));
    assert!(row.granted.is_empty(), "{:?}", row.granted);
    no_script_ran(&b, "neurons after a rejection").await;

    b.goto(&srv.url("/console/health")).await;
    assert!(
        b.text("#audit").await.starts_with("ok"),
        "{}",
        b.text("#audit").await
    );
    // The spend chart: an inline SVG of the last 14 days (the turn above
    // spent today), no script.
    let bars = b
        .eval("return [document.querySelectorAll('#spend-chart svg').length, document.querySelectorAll('#spend-chart tbody tr').length];")
        .await;
    assert_eq!(bars, json!([1, 14]), "{}", b.text("body").await);
    // The providers (the scripted model here) and this host with its policy.
    assert_eq!(b.text("#mode").await, "simulation");
    assert!(
        b.text("#providers").await.contains("scripted"),
        "{}",
        b.text("body").await
    );
    assert_eq!(b.text("#store").await, "sqlite");
    let me = b.text("#hosts tbody tr").await;
    assert!(
        me.contains(&host.owner.id().to_string()) && me.contains("(this host)"),
        "{me}"
    );
    assert!(me.contains(&host.config.policy_sha256[..12]), "{me}");
    no_script_ran(&b, "health").await;
    b.screenshot(&shot("health")).await;
    b.goto(&srv.url("/console/health?days=3")).await;
    let rows = b
        .eval("return document.querySelectorAll('#spend-chart tbody tr').length;")
        .await;
    assert_eq!(rows, json!(3));

    // The memory page: its proposals, or that memory is off here.
    b.goto(&srv.url("/console/memory")).await;
    let state = b
        .eval("return [!!document.querySelector('#memory-off'), !!document.querySelector('#proposals-pending')];")
        .await;
    assert!(
        state == json!([true, false]) || state == json!([false, true]),
        "{state} {}",
        b.text("body").await
    );
    no_script_ran(&b, "memory").await;
    b.screenshot(&shot("memory")).await;
}
