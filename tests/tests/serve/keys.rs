//! The operator's key routes on the real binary (`capsaga serve` as a
//! child process with `CAPSAGA_KEK` and `CAPSAGA_TOKEN` in its
//! environment): `PUT /v1/keys/{name}` seals the key and answers its last
//! four characters only, `GET /v1/keys` lists, `DELETE` removes; bad names
//! and keys are 400; the key is in no answer and not in the state file.

use super::http;
use capsaga_tests::{TestWorkspace, capsaga_bin};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const TOKEN: &str = "operator-token-0123456789abcdef";
const KEK: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";
const SECRET: &str = "sk-rest-sealed-ABCDEFGHIJKLMNOP-9876";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_sealed_over_rest_and_shown_by_their_last_four_only() {
    let ws = TestWorkspace::new(&["time_now"], "[tools.time_now]\n");
    let mut child = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("CAPSAGA_CONFIG")
        .env("CAPSAGA_TOKEN", TOKEN)
        .env("CAPSAGA_KEK", KEK)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let base = format!("http://{}", v["listening"].as_str().unwrap());
    let c = http();
    let mut answers = String::new();
    let r = c
        .put(format!("{base}/v1/keys/org-openai"))
        .bearer_auth(TOKEN)
        .json(&json!({"key": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = r.text().await.unwrap();
    answers.push_str(&body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["key"]["last4"], "9876", "{v}");
    for (name, key) in [
        ("Bad Name", SECRET),
        ("ok", "short"),
        ("ok", "has space 0123456789"),
    ] {
        let r = c
            .put(format!("{base}/v1/keys/{name}"))
            .bearer_auth(TOKEN)
            .json(&json!({"key": key}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{name} {key}");
        answers.push_str(&r.text().await.unwrap());
    }
    let r = c
        .get(format!("{base}/v1/keys"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    answers.push_str(&body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["keys"][0]["created_by"], "env:CAPSAGA_TOKEN (operator)",
        "{v}"
    );
    let r = c
        .delete(format!("{base}/v1/keys/org-openai"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = c
        .delete(format!("{base}/v1/keys/org-openai"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(!answers.contains(SECRET) && !answers.contains("ABCDEFGHIJKLMNOP"));
    assert!(!logs.contains(SECRET), "never logged");
    let mut db = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(b) = std::fs::read(ws.root.join(".capsaga").join(f)) {
            db.extend(b);
        }
    }
    assert!(!db.windows(16).any(|w| w == b"ABCDEFGHIJKLMNOP"));
}
