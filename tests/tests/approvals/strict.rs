//! Strict mode of information flow (issue 47, `[flow] strict = true`),
//! through the `capsaga` binary: once untrusted data is in the context,
//! every side effect needs a human, even one whose every value the user
//! gave. A plan reads a file, then writes where the plan says: parked on an
//! approval that says strict mode (nothing written), resumed by
//! `capsaga approve --resume`; an agent turn without a human ends with
//! nothing written; before anything untrusted is read, and without strict
//! mode, the same write runs.

use super::*;

fn strict_ws(strict: bool) -> TestWorkspace {
    TestWorkspace::new(
        &["fs_read", "fs_write"],
        &format!(
            "[flow]\nstrict = {strict}\n[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n"
        ),
    )
}

fn read_then_write(ws: &TestWorkspace) -> Value {
    std::fs::write(ws.ws().join("page.txt"), "Nothing to see here.").unwrap();
    json!([
        {"tool": "fs_read", "args": {"path": ws.ws_path("page.txt")}},
        {"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "done"}}
    ])
}

#[test]
fn strict_mode_asks_a_human_for_every_side_effect_after_untrusted_data() {
    // Strict: the plan parks on the write, which names only the plan's own
    // path.
    let ws = strict_ws(true);
    let p = plan(&ws, "p.json", read_then_write(&ws));
    let out = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10), "{out:?}");
    let v = json_of(&out);
    let asked = &v["awaiting_approval"];
    let id = asked["approval_id"].as_str().unwrap().to_string();
    let listed = ws.capsaga(&["--json", "approvals"]).output().unwrap();
    let listed = json_of(&listed);
    let reason = listed
        .as_array()
        .or_else(|| listed["approvals"].as_array())
        .and_then(|a| a.iter().find(|a| a["approval_id"] == id.as_str()))
        .map(|a| a["reason"].to_string())
        .unwrap_or_default();
    assert!(reason.contains("strict mode"), "{listed}");
    assert!(!ws.ws().join("out.txt").exists(), "written before a human");
    // A human approves: the plan resumes and the write runs.
    let ok = ws.capsaga(&["approve", "--resume", &id]).output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("out.txt")).unwrap(),
        "done"
    );

    // Before anything untrusted is read, strict mode asks nothing.
    let ws = strict_ws(true);
    let p = plan(
        &ws,
        "w.json",
        json!([{"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "done"}}]),
    );
    let out = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ws.ws().join("out.txt").exists());

    // Without strict mode, the user's own path passes after the read.
    let ws = strict_ws(false);
    let p = plan(&ws, "p.json", read_then_write(&ws));
    let out = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ws.ws().join("out.txt").exists());
}

#[test]
fn an_agent_turn_in_strict_mode_without_a_human_writes_nothing_after_untrusted_data() {
    let ws = strict_ws(true);
    std::fs::write(ws.ws().join("page.txt"), "Nothing to see here.").unwrap();
    let out_path = ws.ws_path("out.txt");
    let turns = json!([
        {"text": "Reading.", "tool_calls": [
            {"name": "fs_read", "arguments": {"path": ws.ws_path("page.txt")}}]},
        {"text": "Writing.", "tool_calls": [
            {"name": "fs_write", "arguments": {"path": out_path, "content": "done"}}]},
        {"text": "Done."}
    ]);
    let out = ws.scripted_turn(
        turns,
        &format!("Read page.txt, then write done to {out_path}"),
    );
    let t = json_of(&out);
    let write = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "action" && s["tool_name"] == "fs_write")
        .expect("the write was asked");
    assert_eq!(write["flow"]["layer"], "strict", "{write}");
    assert_eq!(write["flow"]["decision"], "approve", "{write}");
    assert_ne!(t["outcome"], "success", "{t}");
    assert!(!ws.ws().join("out.txt").exists(), "written without a human");
}
