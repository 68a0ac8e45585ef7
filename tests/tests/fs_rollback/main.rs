//! The host's file rollback (issue 28) with real components, real files and
//! a real state store: whatever a tool's `compensate` does (nothing, garbage,
//! a trap), a rollback leaves the workspace byte for byte as it was; what
//! someone else changed since a step is reported, not clobbered; a guest
//! cannot make the host journal or restore outside its grant.

mod attacks;
mod cli;
mod components;
mod undo_links;

use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_door::saga::Saga;
use capsaga_store::{Scope, StepStatus};
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::sync::Arc;

/// The policy: both hostile components granted the workspace.
pub const POLICY: &str = r#"
[tools.fs_churn]
grants = ["fs:write:~/ws/**"]
[tools.undo_garbage]
grants = ["fs:write:~/ws/**"]
"#;

/// A workspace with files of several kinds, modes and a link.
pub fn workspace(extra_policy: &str) -> TestWorkspace {
    let ws = TestWorkspace::new(
        &["fs_churn", "undo_garbage"],
        &format!("{POLICY}{extra_policy}"),
    );
    let w = ws.ws();
    std::fs::write(w.join("a.txt"), "original A\n").unwrap();
    std::fs::write(w.join("big.bin"), vec![7u8; 10_000]).unwrap();
    std::fs::create_dir_all(w.join("sub/deeper")).unwrap();
    std::fs::write(w.join("sub/b.txt"), [0u8, 159, 146, 150, 255]).unwrap();
    std::fs::write(w.join("sub/deeper/c.txt"), "c\n").unwrap();
    std::fs::create_dir(w.join("empty")).unwrap();
    std::os::unix::fs::symlink("a.txt", w.join("link")).unwrap();
    ws
}

/// A path in the workspace.
pub fn p(ws: &TestWorkspace, rel: &str) -> String {
    ws.ws_path(rel)
}

/// A saga on `host`.
pub async fn saga(host: &Arc<Host>) -> (Dispatcher, Saga) {
    let door = Dispatcher::new(host.clone());
    let saga = door.start(Scope::Call, "fs rollback", None).await.unwrap();
    (door, saga)
}

/// Submit `tool` with `args` in `saga`.
pub async fn submit(door: &Dispatcher, saga: &mut Saga, tool: &str, args: Value) -> Outcome {
    door.submit(saga, Call::new(tool, Args::Value(&args)))
        .await
        .unwrap()
        .outcome
}

/// The ops argument.
pub fn ops(list: Value) -> Value {
    json!({ "ops": list })
}

/// The statuses of a saga's steps.
pub async fn statuses(host: &Arc<Host>, saga: &str) -> Vec<StepStatus> {
    host.store
        .steps(saga)
        .await
        .unwrap()
        .iter()
        .map(|s| s.status)
        .collect()
}

/// The `FS_RESTORE` records of a saga.
pub async fn restores(host: &Arc<Host>, saga: &str) -> Vec<Value> {
    host.store
        .log(Some(saga))
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.record == "FS_RESTORE")
        .map(|r| r.detail)
        .collect()
}
