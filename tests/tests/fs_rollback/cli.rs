//! `capsaga undo --saga S` and `capsaga log` show what the host restored,
//! per path (the real binary).

use super::*;

#[test]
fn undo_and_log_show_each_path_the_host_restored() {
    let ws = workspace("");
    let args = ops(json!([
        {"op": "write", "path": p(&ws, "a.txt"), "content": "bye"},
        {"op": "write", "path": p(&ws, "new.txt"), "content": "new"},
    ]));
    let out = ws
        .capsaga(&["--json", "call", "fs_churn", &args.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["saga_state"], "Done", "{v:#}");
    let saga = v["saga_id"].as_str().unwrap().to_string();

    let undo = ws.capsaga(&["undo", "--saga", &saga]).output().unwrap();
    let text = String::from_utf8_lossy(&undo.stdout);
    assert!(undo.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "restored {}: rewrote its 11 bytes",
            p(&ws, "a.txt")
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "restored {}: removed what the step created",
            p(&ws, "new.txt")
        )),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "original A\n"
    );

    let log = ws.capsaga(&["log", "--saga", &saga]).output().unwrap();
    let text = String::from_utf8_lossy(&log.stdout);
    assert!(
        text.contains("FS_RESTORE") && text.contains("the host restored 2 of 2 path(s)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("restored {}", p(&ws, "new.txt"))),
        "{text}"
    );
    let log = ws
        .capsaga(&["--json", "log", "--saga", &saga])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&log.stdout).unwrap();
    let rec = v["log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["record"] == "FS_RESTORE")
        .expect("an FS_RESTORE record");
    assert_eq!(rec["detail"]["clean"], true, "{rec:#}");
    assert_eq!(
        rec["detail"]["paths"].as_array().unwrap().len(),
        2,
        "{rec:#}"
    );
}
