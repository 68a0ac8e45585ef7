//! Budget caps across restarts: each agent turn runs in its own `capsaga`
//! process on the same workspace, so the per-day spend the caps are checked
//! against can only come from the SQLite counters. The scripted provider
//! (the embedded default when no provider is configured) is priced through
//! an operator price table so that its simulated tokens cost money.

use capsaga_tests::{FS_POLICY, TestWorkspace, capsaga_bin};
use serde_json::Value;
use std::process::Command;

const PRICES: &str = r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"scripted-priced":{"input_per_m":10.0,"output_per_m":30.0}}}"#;

const SCRIPT: &str = r#"{"model":"scripted-priced","turns":[
  {"text":"","tool_calls":[{"name":"fs_list","arguments":{"path":"${home}/ws"}}]},
  {"text":"The workspace is listed."}]}"#;

fn policy(ws: &TestWorkspace, caps: &str) {
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nscript = \"script.json\"\n[budget]\nprices = \"prices.json\"\n{caps}\n"
    ));
}

/// Run `capsaga --json agent` in a fresh process; (exit code, trace).
fn agent(ws: &TestWorkspace) -> (i32, Value) {
    let out = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .args(["agent", "list the workspace"])
        .env_remove("CAPSAGA_SIMULATION")
        .output()
        .expect("run capsaga");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn thoughts(tr: &Value) -> Vec<&Value> {
    tr["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "thought")
        .collect()
}

#[test]
fn day_caps_hold_across_process_restarts() {
    let ws = TestWorkspace::new(&["fs_list", "fs_read", "fs_write"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();
    std::fs::write(ws.root.join("script.json"), SCRIPT).unwrap();

    // 1. No caps: measure what one turn costs.
    policy(&ws, "");
    let (code, tr) = agent(&ws);
    assert_eq!(code, 0, "{tr:#}");
    assert_eq!(tr["outcome"], "success");
    assert!(
        tr["provider_mode"]
            .as_str()
            .unwrap()
            .starts_with("scripted (no provider is configured"),
        "{}",
        tr["provider_mode"]
    );
    let x = tr["cost_usd"].as_f64().unwrap();
    assert!(x > 0.0, "the priced script must cost something");
    let t = thoughts(&tr);
    assert_eq!(t.len(), 2);
    let sum: f64 = t.iter().map(|s| s["cost_usd"].as_f64().unwrap()).sum();
    assert!((sum - x).abs() < 1e-12);
    assert!(t.iter().all(|s| s["tier"] == "normal"));

    // 2. A new process with a day soft cap below what is already spent and
    // a hard cap above it: the turn runs on the cheaper tier.
    policy(
        &ws,
        &format!("day_soft_usd = {}\nday_hard_usd = {}", x * 0.5, x * 1.5),
    );
    let (code, tr) = agent(&ws);
    assert_eq!(code, 0, "{tr:#}");
    let t = thoughts(&tr);
    assert_eq!(t.len(), 2);
    assert!(t.iter().all(|s| s["tier"] == "cheap"), "{tr:#}");

    // 3. Another process: 2x is spent today, past the hard cap. No model
    // call is made and the turn ends budget_hit.
    let (code, tr) = agent(&ws);
    assert_eq!(code, 7, "{tr:#}");
    assert_eq!(tr["outcome"], "budget_hit");
    assert!(thoughts(&tr).is_empty());
    let msg = tr["final_response"].as_str().unwrap();
    assert!(
        msg.contains("per-day hard cap") && msg.contains("no model call"),
        "{msg}"
    );
    assert_eq!(tr["cost_usd"], 0.0);

    // The counters, as the operator sees them.
    let out = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .arg("budget")
        .output()
        .unwrap();
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    let day = &b["days"][0];
    assert_eq!(day["calls"], 4);
    assert!((day["spent_usd"].as_f64().unwrap() - 2.0 * x).abs() < 1e-9);

    // And the human output says which model ran and why.
    policy(&ws, "");
    let out = Command::new(capsaga_bin())
        .args(["--config"])
        .arg(ws.config())
        .args(["agent", "list the workspace"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("model: scripted (no provider is configured; script "),
        "{text}"
    );
    let out = Command::new(capsaga_bin())
        .args(["--config"])
        .arg(ws.config())
        .args(["trace", "last"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("model: scripted"), "{text}");
    assert!(
        text.contains("  thought  scripted/scripted-priced [normal]"),
        "{text}"
    );
    assert!(text.contains("  action   fs_list"), "{text}");
    assert!(text.contains("  critic   fitness: pass"), "{text}");
}

#[test]
fn request_hard_cap_stops_the_turn_before_the_next_call() {
    let ws = TestWorkspace::new(&["fs_list", "fs_read", "fs_write"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();
    std::fs::write(ws.root.join("script.json"), SCRIPT).unwrap();
    // Any spend reaches a tiny per-request cap: the first call runs (nothing
    // spent yet), the second is refused.
    policy(&ws, "request_hard_usd = 0.000001");
    let (code, tr) = agent(&ws);
    assert_eq!(code, 7, "{tr:#}");
    assert_eq!(tr["outcome"], "budget_hit");
    assert_eq!(thoughts(&tr).len(), 1);
    assert!(
        tr["final_response"]
            .as_str()
            .unwrap()
            .contains("per-request hard cap")
    );
}
