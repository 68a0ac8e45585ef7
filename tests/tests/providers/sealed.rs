//! Provider keys sealed under `CAPSAGA_KEK` (issue 24 item 9a; seed 003):
//! `capsaga keys add` seals a key (AES-256-GCM, a data key per key) into
//! the state; a provider naming it (`api_key_sealed`) sends it to the real
//! local server speaking the OpenAI wire format; listings show only its
//! last four characters; a wrong KEK, no KEK, a tampered ciphertext or a
//! row copied under another name are clear errors and nothing is sent;
//! the key is never in the state file, an answer or a log line.

use super::oa_text;
use capsaga_tests::TestWorkspace;
use capsaga_tests::llm_server::{LlmServer, Reply};
use serde_json::Value;
use std::process::{Output, Stdio};

const KEK: &str = "6b65792d656e6372797074696f6e2d6b65792d666f722d746573747321212121";
const OTHER_KEK: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SECRET: &str = "sk-org-sealed-0123456789abcdef-WXYZ";

fn ws(server: &LlmServer, key: &str) -> TestWorkspace {
    TestWorkspace::new(
        &["time_now"],
        &format!(
            "[tools.time_now]\n[providers.org]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\napi_key_sealed = \"{key}\"\n",
            server.url("/v1")
        ),
    )
}

fn run(ws: &TestWorkspace, args: &[&str], kek: Option<&str>, stdin: &str) -> Output {
    let mut c = ws.capsaga(args);
    c.env_remove("CAPSAGA_KEK").env_remove("OPENAI_API_KEY");
    if let Some(k) = kek {
        c.env("CAPSAGA_KEK", k);
    }
    capsaga_tests::output_with_stdin(&mut c, stdin)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn state_bytes(ws: &TestWorkspace) -> Vec<u8> {
    let mut b = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(x) = std::fs::read(ws.root.join(".capsaga").join(f)) {
            b.extend(x);
        }
    }
    b
}

fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

async fn agent(ws: &TestWorkspace, kek: Option<&str>) -> Output {
    let ws_cfg = ws.config();
    let kek = kek.map(str::to_string);
    let root = ws.root.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = std::process::Command::new(capsaga_tests::capsaga_bin());
        c.arg("--config")
            .arg(ws_cfg)
            .args(["agent", "what time is it"])
            .current_dir(root)
            .stdin(Stdio::null())
            .env_remove("CAPSAGA_CONFIG")
            .env_remove("CAPSAGA_KEK")
            .env("RUST_LOG", "debug");
        if let Some(k) = kek {
            c.env("CAPSAGA_KEK", k);
        }
        c.output().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_key_reaches_its_provider_and_nowhere_else() {
    let llm = LlmServer::start(vec![Reply::ok(oa_text("It is noon.", (10, 3)))]).await;
    let ws = ws(&llm, "org-openai");
    // Without a KEK nothing is sealed.
    let o = run(&ws, &["keys", "add", "org-openai"], None, SECRET);
    assert!(!o.status.success());
    assert!(text(&o).contains("CAPSAGA_KEK is not set"), "{}", text(&o));
    let o = run(
        &ws,
        &["--json", "keys", "add", "org-openai"],
        Some(KEK),
        &format!("{SECRET}\n"),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!holds(&o.stdout, SECRET) && !holds(&o.stderr, SECRET));
    let added: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(added["key"]["last4"], "WXYZ");
    let o = run(&ws, &["--json", "keys", "list"], None, "");
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed["keys"][0]["name"], "org-openai");
    assert_eq!(listed["keys"][0]["last4"], "WXYZ");
    assert!(!holds(&o.stdout, SECRET));
    assert!(
        !holds(&state_bytes(&ws), SECRET),
        "no clear key in the state"
    );
    assert!(
        !holds(&state_bytes(&ws), "0123456789abcdef"),
        "no part of it either"
    );
    let audit = run(&ws, &["audit", "verify"], None, "");
    assert!(
        audit.status.success(),
        "the KEY record chains: {}",
        text(&audit)
    );
    // The provider gets exactly the key, in its Authorization header.
    let o = agent(&ws, Some(KEK)).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !holds(&o.stdout, SECRET) && !holds(&o.stderr, SECRET),
        "not logged"
    );
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {SECRET}").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_or_missing_kek_and_tampered_or_moved_keys_send_nothing() {
    let llm = LlmServer::start(vec![]).await;
    let ws = ws(&llm, "org-openai");
    let o = run(&ws, &["keys", "add", "org-openai"], Some(KEK), SECRET);
    assert!(o.status.success(), "{}", text(&o));
    for (kek, why) in [
        (Some(OTHER_KEK), "another key-encryption key"),
        (None, "CAPSAGA_KEK is not set"),
        (Some("not-a-kek"), "CAPSAGA_KEK is malformed"),
    ] {
        let o = agent(&ws, kek).await;
        assert!(!o.status.success(), "{kek:?}");
        let t = text(&o);
        assert!(t.contains(why), "{kek:?}: {t}");
        assert!(!t.contains(SECRET) && !t.contains(KEK), "{t}");
    }
    // One byte of the stored ciphertext flipped, as an attacker with the
    // state file would.
    let db = rusqlite::Connection::open(ws.root.join(".capsaga/state.db")).unwrap();
    let ct: Vec<u8> = db
        .query_row(
            "SELECT ciphertext FROM provider_keys WHERE name = 'org-openai'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut bad = ct.clone();
    bad[20] ^= 1;
    db.execute(
        "UPDATE provider_keys SET ciphertext = ?1 WHERE name = 'org-openai'",
        rusqlite::params![bad],
    )
    .unwrap();
    let o = agent(&ws, Some(KEK)).await;
    assert!(!o.status.success());
    assert!(text(&o).contains("does not authenticate"), "{}", text(&o));
    // Restored, then copied under another name the policy uses: the
    // sealed key is bound to its name.
    db.execute(
        "UPDATE provider_keys SET ciphertext = ?1 WHERE name = 'org-openai'",
        rusqlite::params![ct],
    )
    .unwrap();
    db.execute(
        "INSERT INTO provider_keys (name, format, kek_id, wrapped_dek, ciphertext, last4, created_at, created_by) SELECT 'stolen', format, kek_id, wrapped_dek, ciphertext, last4, created_at, created_by FROM provider_keys WHERE name = 'org-openai'",
        [],
    )
    .unwrap();
    drop(db);
    let moved = self::ws(&llm, "stolen");
    std::fs::create_dir_all(moved.root.join(".capsaga")).unwrap();
    std::fs::copy(
        ws.root.join(".capsaga/state.db"),
        moved.root.join(".capsaga/state.db"),
    )
    .unwrap();
    let o = agent(&moved, Some(KEK)).await;
    assert!(!o.status.success());
    assert!(text(&o).contains("does not authenticate"), "{}", text(&o));
    assert!(llm.requests().is_empty(), "nothing was sent");
}
