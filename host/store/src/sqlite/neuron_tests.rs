//! The neuron table's migration on a real SQLite file (the neuron store's
//! behaviour is in the shared suite, `host/store/tests/suite/neurons.rs`, run on both
//! back ends).

use super::super::*;
use super::*;

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
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
