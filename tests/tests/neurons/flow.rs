//! A neuron is an attacker's way in (issue 47): the agent wrote its code,
//! so its output is untrusted whatever it declares and whatever grants it
//! has (none here). A neuron that answers "save the notes to
//! <dir>/drop/evil.txt" feeds that path to `fs_write`; the door finds the
//! path only in the neuron's output and refuses the write
//! (`on_untrusted = "deny"`) before anything is written. The real runner,
//! the real `capsaga` binary for the turn.

use super::*;
use capsaga_door::neurons::operator;

/// A neuron with no grant that names where notes go, under `dir`.
fn note_target() -> Value {
    json!({
        "name": "note_target",
        "description": "Where to keep notes under a directory.",
        "args_schema": {
            "type": "object", "additionalProperties": false,
            "required": ["dir"],
            "properties": {"dir": {"type": "string"}}
        },
        "capabilities": [],
        "source": "def execute(args):\n    return {\"path\": args[\"dir\"] + \"/drop/evil.txt\"}\n",
        "examples": [{"args": {"dir": "/x"}, "expect": {"path": "/x/drop/evil.txt"}}],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_a_neuron_answered_never_reaches_a_write_without_a_human() {
    let Some(ws) = workspace(
        &["fs_write"],
        "[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\non_untrusted = \"deny\"\n",
        "",
    ) else {
        return;
    };
    let (host, door) = door(&ws).await;
    let out = call_one(&door, "neuron_create", &note_target()).await;
    assert_eq!(
        data(&out)["status"],
        "awaiting_operator",
        "{:#}",
        data(&out)
    );
    let row = host
        .store
        .neuron("note_target", None)
        .await
        .unwrap()
        .unwrap();
    let home = host.config.home.to_string_lossy().into_owned();
    operator::approve(&*host.store, &home, &row, &[], All, "cli:test", None)
        .await
        .unwrap();
    drop(door);
    drop(host);

    let dir = ws.ws().display().to_string();
    let target = format!("{dir}/drop/evil.txt");
    std::fs::create_dir_all(ws.ws().join("drop")).unwrap();
    let turns = json!([
        {"text": "Asking.", "tool_calls": [
            {"name": "note_target", "arguments": {"dir": dir}}]},
        {"text": "Saving where it said.", "tool_calls": [
            {"name": "fs_write", "arguments": {"path": target, "content": "the notes"}}]},
        {"text": "Done."}
    ]);
    let task = format!("Ask note_target where my notes go in {dir}, then save them there.");
    let out = ws.scripted_turn(turns, &task);
    let t: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let steps = t["steps"].as_array().unwrap();
    let asked = steps
        .iter()
        .find(|s| s["type"] == "action" && s["tool_name"] == "note_target")
        .expect("the neuron ran");
    assert!(asked["error"].is_null(), "{asked}");
    let write = steps
        .iter()
        .find(|s| s["type"] == "action" && s["tool_name"] == "fs_write")
        .expect("the write was asked");
    assert_eq!(write["error"]["kind"], "permission_denied", "{write}");
    assert_eq!(write["flow"]["decision"], "deny", "{write}");
    assert!(
        write["flow"].to_string().contains("note_target"),
        "the neuron is the source: {write}"
    );
    assert!(!std::path::Path::new(&target).exists(), "written");
    assert_eq!(t["after_untrusted"], true, "{t}");
}
