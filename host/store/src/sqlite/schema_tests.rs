//! The schema's versions: each one exactly what its capsaga made, and a file
//! of every older version upgraded at open to the schema of a new one.

use super::*;
use crate::SCHEMA_VERSION;
use sha2::{Digest, Sha256};

/// Every entry of `sqlite_schema` (type, name, table, SQL text), sorted.
fn schema_of(c: &Connection) -> String {
    let mut st = c
        .prepare(
            "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok(format!(
                "{}|{}|{}|{}",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("\n")
}

/// A database made by the migrations 1 to `version`, as a file at `p`.
fn made_at(p: &std::path::Path, version: i64) -> Connection {
    super::tests::older_file(p, version, "")
}

/// SHA-256 of [`schema_of`] a database made by the migrations 1 to N, for
/// N = 1..=15, as capsaga made them (1 to 14 before the migrations moved
/// into numbered files, main fa6d0bf; 15 with issue 48's `charged` and
/// `chained`): a released version never changes.
const RELEASED: [&str; 15] = [
    "e88eb045baac5cc0123a845a00b721023a182c0db2997daa2eb54426b54d89c7",
    "c1e4a20f9f701437167088ddb91c10c00edae1ad654530b1ec40d96834d82740",
    "cb67b8e93d566b8b45bf21db3db56b07e8ee17e740df124caf78f0aeb12874c6",
    "bdd6fba9ea03d88ae5a7fae08907082e8dd7b93db01c76f4fb9fd437fee5a96d",
    "b71eb980839664282de65d9feb06efea19021879817728be9f30067955e25ac6",
    "dc5b2788457f5750d13ced135c2a8e621265fabb73727820a3d4860f86e69fad",
    "711f55e7ad0ff8ae0a7ddd9ee07d31e097f67ad35e18501d8660a23531d1d254",
    "994a44886b76db3b6c8e63ff6982f8a0a2e6e58f79b614beaeefea03c1a9b9e1",
    "ef6dfb8a24e386d235ffe0152eab69c054524bc2b661aa0a9eaa25713ff2c0b8",
    "0661e1d5b0fea7dbaa88e460f071fe5453aa68882228d0689563370d58adfd0c",
    "8872db44f15fdfaa3a9f01f2b14ab0c9289eb20774eb5afac095822351b3798a",
    "48db6433492e60a9ea2a993d6bcebd5c2dc19c2eecb2be42db8e0be9c7140377",
    "77610a618eb8c9a88750503f74949296d8c572080c7a324557f56203615cc014",
    "50c97ad48c44ee87a6a9fe1c654a52993ef6ac5ec675a56b69cd3c299f04178d",
    "c401e3ca530b84bb2a0ce8cb3f3be25242224a269057aa8be88aaf2b95c1e515",
];

#[test]
fn every_version_is_the_schema_it_was_released_with() {
    let dir = tempfile::tempdir().unwrap();
    let mut found = Vec::new();
    for v in 1..=SCHEMA_VERSION {
        let c = made_at(&dir.path().join(format!("v{v}.db")), v);
        found.push(hex::encode(Sha256::digest(schema_of(&c).as_bytes())));
    }
    assert_eq!(found, RELEASED, "a released version of the schema changed");
}

#[test]
fn a_file_of_every_older_version_upgrades_to_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    drop(SqliteStore::open(&fresh).unwrap());
    let want = schema_of(&Connection::open(&fresh).unwrap());
    assert!(want.contains("mcp_tasks"), "{want}");
    for v in 1..SCHEMA_VERSION {
        let p = dir.path().join(format!("v{v}.db"));
        drop(made_at(&p, v));
        drop(SqliteStore::open(&p).unwrap());
        let c = Connection::open(&p).unwrap();
        assert_eq!(schema_of(&c), want, "a version {v} file upgraded");
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }
}

/// A task of a version 14 file (before the tasks joined the log) is left
/// out of `audit verify`'s replay after the upgrade, and joins the log at
/// its next change; an unsettled reservation of that file is charged once
/// it expired, as any other.
#[test]
fn a_task_and_a_reservation_of_a_version_14_file_are_kept_by_the_upgrade() {
    use crate::upgrade_fixture::{pre_upgrade_rows, pre_upgrade_rows_are_kept};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v14.db");
    drop(super::tests::older_file(
        &p,
        14,
        &pre_upgrade_rows("'2026-12-01T00:00:00.000Z'"),
    ));
    let s = SqliteStore::open(&p).unwrap();
    super::tests::block(pre_upgrade_rows_are_kept(&s));
}
