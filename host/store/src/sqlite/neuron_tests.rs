//! The neuron store over a real SQLite file: versions by content, the life
//! of a version, the log records, removal of a pending version.

use super::super::*;
use super::*;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::Status;
use serde_json::json;

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn meta(name: &str, description: &str) -> RawToolMeta {
    RawToolMeta {
        name: name.into(),
        description: description.into(),
        args_schema: r#"{"type":"object"}"#.into(),
        has_side_effects: false,
        risk: Risk::Low,
        returns_untrusted: false,
        idempotent: true,
        supports_dry_run: false,
        capabilities: vec!["fs:read:/d/**".into()],
        version: String::new(),
    }
}

fn propose(db: &SqliteStore, m: &RawToolMeta, identity: &str) -> (NeuronRow, bool) {
    block(db.propose_neuron(&NewNeuron {
        identity,
        runner_hash: "r",
        meta: m,
        source: "def execute(args): return 1",
        examples: &json!([{"args": {}}]),
        report: None,
        saga_id: Some("s1"),
        step_seq: Some(0),
    }))
    .unwrap()
}

fn to(name: &str, version: u32, to: Status) -> Transition<'_> {
    Transition {
        name,
        version,
        to,
        by: "test",
        note: None,
        granted: None,
        report: None,
    }
}

#[test]
fn versions_are_numbered_by_content_and_live_their_life() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("state.db")).unwrap();
    let (v1, new) = propose(&db, &meta("stats", "a"), "id1");
    assert!(new);
    assert_eq!(
        (v1.version, v1.status, v1.meta.version.as_str()),
        (1, Status::Proposed, "1")
    );
    let (again, new) = propose(&db, &meta("stats", "a"), "id1");
    assert!(!new, "the same content is the same version");
    assert_eq!(again.version, 1);
    let (v2, _) = propose(&db, &meta("stats", "b"), "id2");
    assert_eq!(v2.version, 2);

    // Not straight to active: the examples and the operator come first.
    let err = block(db.transition_neuron(&to("stats", 1, Status::Active))).unwrap_err();
    assert!(matches!(err, NeuronOpError::Refused { .. }), "{err}");
    let report = json!({"passed": true});
    let mut t = to("stats", 1, Status::Tested);
    t.report = Some(&report);
    assert_eq!(
        block(db.transition_neuron(&t)).unwrap().report,
        Some(report.clone())
    );
    block(db.transition_neuron(&to("stats", 1, Status::AwaitingOperator))).unwrap();
    let grants = vec!["fs:read:/d/**".to_string()];
    let mut t = to("stats", 1, Status::Active);
    t.granted = Some(&grants);
    let active = block(db.transition_neuron(&t)).unwrap();
    assert_eq!(active.granted, grants);

    // Activating version 2 retires version 1 in the same transaction.
    block(db.transition_neuron(&to("stats", 2, Status::Tested))).unwrap();
    block(db.transition_neuron(&to("stats", 2, Status::AwaitingOperator))).unwrap();
    block(db.transition_neuron(&to("stats", 2, Status::Active))).unwrap();
    let all = block(db.neurons(Some("stats"))).unwrap();
    assert_eq!(
        all.iter().map(|r| r.status).collect::<Vec<_>>(),
        [Status::Retired, Status::Active]
    );
    assert_eq!(block(db.neuron("stats", None)).unwrap().unwrap().version, 2);
    assert_eq!(
        block(db.neuron_by_identity("id1"))
            .unwrap()
            .unwrap()
            .version,
        1
    );
    assert_eq!(all[0].saga_id.as_deref(), Some("s1"));

    // Every change is in the chained log, and the log still verifies.
    let log = block(db.log(Some("neuron:stats"))).unwrap();
    let statuses: Vec<&str> = log
        .iter()
        .map(|r| r.detail["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        statuses,
        [
            "proposed",
            "proposed",
            "tested",
            "awaiting_operator",
            "active",
            "tested",
            "awaiting_operator",
            "retired",
            "active"
        ]
    );
    let report = block(crate::audit::verify(&db, None)).unwrap();
    assert!(report.ok(), "{report:?}");
}

#[test]
fn only_a_pending_version_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("state.db")).unwrap();
    propose(&db, &meta("a", "a"), "ida");
    assert_eq!(
        block(db.remove_pending_neuron("ida", "t")).unwrap(),
        Removed::Removed
    );
    assert_eq!(
        block(db.remove_pending_neuron("ida", "t")).unwrap(),
        Removed::Absent
    );
    propose(&db, &meta("b", "b"), "idb");
    block(db.transition_neuron(&to("b", 1, Status::Tested))).unwrap();
    block(db.transition_neuron(&to("b", 1, Status::Active))).unwrap();
    assert_eq!(
        block(db.remove_pending_neuron("idb", "t")).unwrap(),
        Removed::Kept(Status::Active)
    );
    assert!(
        block(db.neurons(None))
            .unwrap()
            .iter()
            .all(|r| r.name == "b")
    );
}

#[test]
fn a_version_2_database_gains_the_neurons_table() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    drop(SqliteStore::open(&p).unwrap());
    {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute_batch("DROP TABLE neurons; PRAGMA user_version = 2;")
            .unwrap();
    }
    let db = SqliteStore::open(&p).unwrap();
    assert!(block(db.neurons(None)).unwrap().is_empty());
    let v: i64 = db
        .read(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
}
