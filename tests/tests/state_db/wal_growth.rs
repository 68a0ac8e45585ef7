//! Issue 13, item 9: the SQLite `-wal` file must not grow without bound.

use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use capsaga_store::sqlite::checkpoint::{CHECKPOINT_THRESHOLD_BYTES, JOURNAL_SIZE_LIMIT_BYTES};
use capsaga_store::sqlite::{SqliteStore, wal_bytes};
use capsaga_store::{NewSaga, NewStep, SagaStore, Scope, StepStore};
use capsaga_tests::{TestWorkspace, block_on};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A reader as an operator's script would hold one: a read transaction left
/// open on a snapshot.
struct Reader(Connection);

impl Reader {
    fn hold(db: &Path) -> Reader {
        let c = Connection::open(db).unwrap();
        c.execute_batch("BEGIN").unwrap();
        let _: i64 = c
            .query_row("SELECT count(*) FROM wal_log", [], |r| r.get(0))
            .unwrap();
        Reader(c)
    }

    fn release(self) -> Connection {
        self.0.execute_batch("COMMIT").unwrap();
        self.0
    }
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    (dir, p)
}

/// Commit `n` steps of one new saga (each with an 8 KiB argument, so the
/// log grows quickly), straight through the store.
fn commit_steps(db: &SqliteStore, saga: &str, n: u64) {
    block_on(async {
        db.create_saga(&NewSaga {
            saga_id: saga,
            scope: Scope::Plan,
            label: "wal growth",
            state: State::Acting,
            owner: "test",
            plan: None,
            principal: None,
        })
        .await
        .unwrap();
        let grants: Vec<String> = vec![];
        for i in 0..n {
            let args = json!({"i": i, "pad": "p".repeat(8192)});
            let key = format!("{saga}-{i}");
            db.begin_step(&NewStep {
                saga_id: saga,
                step_seq: i,
                tool_id: "t",
                tool_hash: "h",
                grants: &grants,
                has_side_effects: true,
                idempotency_key: &key,
                args: &args,
                preimage: None,
                approval: None,
                fence: capsaga_store::FIRST_FENCE,
            })
            .await
            .unwrap();
            let out = ToolOutput {
                data: json!({"ok": i}),
                effects: vec![],
                next_hint: None,
                summary: String::new(),
            };
            db.commit_step(
                capsaga_store::StepKey {
                    saga_id: saga,
                    fence: capsaga_store::FIRST_FENCE,
                    step_seq: i,
                },
                &out,
            )
            .await
            .unwrap();
        }
    });
}

/// Steps until the `-wal` file is past the checkpoint threshold (a reader
/// holds it), at most `max` sagas of 100.
fn grow_past_threshold(db: &SqliteStore, path: &Path, tag: &str) -> u64 {
    for round in 0..40 {
        commit_steps(db, &format!("{tag}-{round}"), 100);
        if wal_bytes(path) > CHECKPOINT_THRESHOLD_BYTES + JOURNAL_SIZE_LIMIT_BYTES {
            return wal_bytes(path);
        }
    }
    panic!("the -wal file never grew past the threshold: the test holds no snapshot");
}

#[test]
fn the_wal_is_cut_back_once_a_reader_lets_go() {
    let (_dir, path) = temp_db();
    let db = SqliteStore::open(&path).unwrap();
    let reader = Reader::hold(&path);
    let grown = grow_past_threshold(&db, &path, "a");
    // Still held: nothing can be truncated, nothing is lost either.
    let idle = reader.release();
    commit_steps(&db, "after", 1);
    let after = wal_bytes(&path);
    assert!(
        after <= JOURNAL_SIZE_LIMIT_BYTES,
        "the -wal file stayed at {after} bytes (grew to {grown}) after the reader let go"
    );
    // The reader's connection stays open (no close-time cleanup by SQLite):
    // the store truncates the file itself when it is dropped.
    drop(db);
    assert_eq!(wal_bytes(&path), 0, "-wal left when the command returned");
    drop(idle);
}

#[test]
fn a_later_command_truncates_what_an_earlier_reader_left() {
    // The reader holds its snapshot until after the writer is gone: the
    // writer cannot truncate, and the next process (here: a store opened,
    // used for reads only and dropped) must.
    let (_dir, path) = temp_db();
    let db = SqliteStore::open(&path).unwrap();
    let reader = Reader::hold(&path);
    let grown = grow_past_threshold(&db, &path, "b");
    drop(db);
    assert!(wal_bytes(&path) >= grown, "nothing could be truncated yet");
    let idle = reader.release();
    let later = SqliteStore::open(&path).unwrap();
    let sagas = block_on(later.sagas(1000)).unwrap();
    assert!(!sagas.is_empty());
    drop(later);
    assert_eq!(
        wal_bytes(&path),
        0,
        "a later command left the -wal file at its old size"
    );
    // And many short-lived readers (one statement each) never hold it.
    let db = SqliteStore::open(&path).unwrap();
    let readers: Vec<Connection> = (0..4).map(|_| Connection::open(&path).unwrap()).collect();
    for round in 0..3 {
        commit_steps(&db, &format!("c-{round}"), 50);
        for r in &readers {
            let _: i64 = r
                .query_row("SELECT count(*) FROM saga_steps", [], |x| x.get(0))
                .unwrap();
        }
    }
    drop(db);
    assert_eq!(wal_bytes(&path), 0);
    drop(idle);
}

const SPIN_POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.spin]
limits = { deadline_ms = 6000 }
"#;

#[test]
fn no_snapshot_is_held_across_a_tool_call() {
    // A plan writes a file, then calls a tool that burns its deadline.
    // While that call runs, an outside connection can checkpoint and
    // truncate the -wal file completely: the host holds no read snapshot
    // (and no write transaction) across the call.
    let ws = TestWorkspace::new(&["fs_write", "spin"], SPIN_POLICY);
    let plan = ws.root.join("p.json");
    let steps = json!([
        {"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": "A"}},
        {"tool": "spin", "args": {}},
    ]);
    std::fs::write(
        &plan,
        json!({"description": "spin", "steps": steps}).to_string(),
    )
    .unwrap();
    let mut child = ws
        .capsaga(&["run", "--plan", &plan.to_string_lossy()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let db = ws.root.join(".capsaga/state.db");
    let deadline = Instant::now() + capsaga_tests::wait_bound();
    // Wait until the spin step's BEGIN is durable (the call is running).
    let probe = loop {
        assert!(Instant::now() < deadline, "the spin step never began");
        assert!(child.try_wait().unwrap().is_none(), "the plan ended early");
        if let Ok(c) = Connection::open(&db) {
            let began: i64 = c
                .query_row(
                    "SELECT count(*) FROM saga_steps WHERE tool_id = 'spin' AND status = 'BEGIN'",
                    [],
                    |r| r.get(0),
                )
                .unwrap_or(0);
            if began == 1 {
                break c;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the call is running");
    let (busy, _, _): (i64, i64, i64) = probe
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(busy, 0, "the host held a snapshot across the tool call");
    assert_eq!(wal_bytes(&db), 0);
    drop(probe);
    let status = child.wait().unwrap();
    assert!(status.code().is_some(), "{status:?}");
}
