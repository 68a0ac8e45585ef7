//! The memory database's schema, its stamp and the checks at open.

use crate::error::{MemoryError, Result};
use rusqlite::Connection;

/// `PRAGMA application_id` of a capsaga memory database ("CSMM").
pub const APPLICATION_ID: i64 = 0x4353_4d4d;

/// The schema version this build writes (`PRAGMA user_version`).
///
/// - 1: episodes, their FTS5 index, facts, proposals, sessions, the log.
/// - 2 (issue 49): an episode's position in its session (`seq`) and when
///   it was indexed (`indexed_at`, never used to rank: its date is
///   `started_at`, the exchange's own time); a fact's date of validity
///   (`valid_at`, the latest date of what it was distilled from) and the
///   later fact that superseded it (`superseded_by`); a proposal's
///   `valid_at`. A version 1 file is upgraded in place at open.
/// - 3 (issue 47): an episode's and a session turn's `label` (`trusted`,
///   `untrusted`: whether the turn it was recorded from read untrusted
///   data); rows written before have none and are recalled as untrusted.
/// - 4 (issue 49): a version per namespace and sender of what a search
///   reads of their episodes (`episode_versions`, kept by triggers on every
///   insert, delete and change of an episode's vector, archived flag,
///   sender, namespace or date), so that the sender's vectors are held in
///   memory between searches and read again only after a change, by any
///   connection ([`super::Store::episode_vectors`]).
pub const SCHEMA_VERSION: i64 = 4;

/// Version 1, as the first memory databases were created (kept verbatim:
/// a new database is created as version 1 and upgraded, so that every
/// file, old or new, goes through the same migrations).
const SCHEMA_V1: &str = "
CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE episodes (
    id             INTEGER PRIMARY KEY,
    episode_id     TEXT NOT NULL UNIQUE,
    trace_id       TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    sender         TEXT NOT NULL,
    namespace      TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    user_message   TEXT NOT NULL,
    final_response TEXT,
    outcome        TEXT NOT NULL,
    summary        TEXT,
    importance     REAL NOT NULL DEFAULT 0.5,
    reflected      INTEGER NOT NULL DEFAULT 0,
    archived       INTEGER NOT NULL DEFAULT 0,
    embedding      BLOB,
    scope          TEXT NOT NULL
);
CREATE INDEX idx_episodes_sender_time ON episodes(namespace, sender, started_at DESC);
CREATE INDEX idx_episodes_trace ON episodes(trace_id);
CREATE INDEX idx_episodes_unembedded ON episodes(id) WHERE embedding IS NULL AND archived = 0;
CREATE VIRTUAL TABLE episodes_fts USING fts5(
    user_message, final_response, summary, scope,
    content='episodes', content_rowid='id'
);
CREATE TRIGGER episodes_ai AFTER INSERT ON episodes WHEN new.archived = 0 BEGIN
    INSERT INTO episodes_fts(rowid, user_message, final_response, summary, scope)
    VALUES (new.id, new.user_message, new.final_response, new.summary, new.scope);
END;
CREATE TRIGGER episodes_ad AFTER DELETE ON episodes WHEN old.archived = 0 BEGIN
    INSERT INTO episodes_fts(episodes_fts, rowid, user_message, final_response, summary, scope)
    VALUES ('delete', old.id, old.user_message, old.final_response, old.summary, old.scope);
END;
CREATE TRIGGER episodes_au AFTER UPDATE OF user_message, final_response, summary, archived ON episodes BEGIN
    INSERT INTO episodes_fts(episodes_fts, rowid, user_message, final_response, summary, scope)
    SELECT 'delete', old.id, old.user_message, old.final_response, old.summary, old.scope WHERE old.archived = 0;
    INSERT INTO episodes_fts(rowid, user_message, final_response, summary, scope)
    SELECT new.id, new.user_message, new.final_response, new.summary, new.scope WHERE new.archived = 0;
END;
CREATE TABLE semantic_facts (
    fact_id      TEXT PRIMARY KEY,
    namespace    TEXT NOT NULL,
    text         TEXT NOT NULL,
    embedding    BLOB NOT NULL,
    source       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    importance   REAL NOT NULL DEFAULT 0.5,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_access  TEXT
);
CREATE TABLE fact_proposals (
    proposal_id TEXT PRIMARY KEY,
    namespace   TEXT NOT NULL,
    text        TEXT NOT NULL,
    origin      TEXT NOT NULL,
    episode_ids TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',
    decided_at  TEXT,
    decided_by  TEXT,
    fact_id     TEXT
);
CREATE TABLE session_turns (
    session_id     TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    sender         TEXT NOT NULL,
    user_message   TEXT NOT NULL,
    final_response TEXT,
    trace_id       TEXT NOT NULL,
    at             TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE session_summaries (
    session_id TEXT PRIMARY KEY,
    summary    TEXT NOT NULL,
    upto_seq   INTEGER NOT NULL
);
CREATE TABLE memory_log (
    id     INTEGER PRIMARY KEY,
    at     TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
";

/// Version 1 → 2 (see [`SCHEMA_VERSION`]). Existing episodes are
/// numbered in their session by date (then insertion); existing facts are
/// valid from their creation.
const MIGRATE_V2: &str = "
ALTER TABLE episodes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE episodes ADD COLUMN indexed_at TEXT;
UPDATE episodes SET seq = r.n FROM (
    SELECT id, row_number() OVER (PARTITION BY namespace, sender, session_id ORDER BY started_at, id) AS n
    FROM episodes) AS r WHERE episodes.id = r.id;
CREATE INDEX idx_episodes_session ON episodes(namespace, sender, session_id, seq);
ALTER TABLE semantic_facts ADD COLUMN valid_at TEXT;
ALTER TABLE semantic_facts ADD COLUMN superseded_by TEXT;
UPDATE semantic_facts SET valid_at = created_at;
ALTER TABLE fact_proposals ADD COLUMN valid_at TEXT;
";

/// Version 2 → 3 (see [`SCHEMA_VERSION`]).
const MIGRATE_V3: &str = "
ALTER TABLE episodes ADD COLUMN label TEXT;
ALTER TABLE session_turns ADD COLUMN label TEXT;
";

/// Version 3 → 4 (see [`SCHEMA_VERSION`]). Every scope starts at version
/// 1; an upsert in a trigger bumps the scope of each row written.
const MIGRATE_V4: &str = "
CREATE TABLE episode_versions (
    namespace TEXT NOT NULL,
    sender    TEXT NOT NULL,
    v         INTEGER NOT NULL,
    PRIMARY KEY (namespace, sender)
) WITHOUT ROWID;
INSERT INTO episode_versions (namespace, sender, v)
    SELECT DISTINCT namespace, sender, 1 FROM episodes;
CREATE TRIGGER episode_versions_ai AFTER INSERT ON episodes BEGIN
    INSERT INTO episode_versions (namespace, sender, v) VALUES (new.namespace, new.sender, 1)
        ON CONFLICT (namespace, sender) DO UPDATE SET v = v + 1;
END;
CREATE TRIGGER episode_versions_ad AFTER DELETE ON episodes BEGIN
    UPDATE episode_versions SET v = v + 1 WHERE namespace = old.namespace AND sender = old.sender;
END;
CREATE TRIGGER episode_versions_au AFTER UPDATE OF embedding, archived, namespace, sender, started_at ON episodes BEGIN
    UPDATE episode_versions SET v = v + 1 WHERE namespace = old.namespace AND sender = old.sender;
    INSERT INTO episode_versions (namespace, sender, v) VALUES (new.namespace, new.sender, 1)
        ON CONFLICT (namespace, sender) DO UPDATE SET v = v + 1;
END;
";

fn bad(reason: impl Into<String>) -> MemoryError {
    MemoryError::Database {
        path: Default::default(),
        reason: reason.into(),
    }
}

/// Check the file and create or verify the schema.
pub(super) fn prepare(conn: &Connection, model_id: &str, dim: usize) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // The first read of the file: a file that is not SQLite fails here.
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| bad(format!("not a readable SQLite database: {e}")))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    if app == 0 && version == 0 && tables == 0 {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(SCHEMA_V1)?;
        tx.execute(
            "INSERT INTO memory_meta (key, value) VALUES ('embedding_model', ?1), ('embedding_dim', ?2)",
            (model_id, dim.to_string()),
        )?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", 1)?;
        migrate(&tx, 1)?;
        tx.commit()?;
        return Ok(());
    }
    if app != APPLICATION_ID {
        return Err(bad(format!(
            "not a capsaga memory database (application id {app:#x}, {tables} schema objects)"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(bad(format!(
            "schema version {version} is newer than this capsaga's ({SCHEMA_VERSION})"
        )));
    }
    if version < 1 {
        return Err(bad(format!("schema version {version} is unknown")));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let check: String = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(bad(format!("damaged: {check}")));
    }
    let meta = |k: &str| -> Result<String> {
        Ok(
            conn.query_row("SELECT value FROM memory_meta WHERE key = ?1", [k], |r| {
                r.get(0)
            })?,
        )
    };
    let stored_dim: usize = meta("embedding_dim")?
        .parse()
        .map_err(|_| bad("embedding_dim is not a number"))?;
    if stored_dim != dim {
        return Err(MemoryError::Dimension {
            what: "the memory database".into(),
            expected: dim,
            found: stored_dim,
        });
    }
    let stored_model = meta("embedding_model")?;
    if stored_model != model_id {
        return Err(bad(format!(
            "its vectors were made by `{stored_model}`, this memory embeds with `{model_id}`"
        )));
    }
    // Upgraded only once every check passed (a refused file is left as it
    // was), in one transaction: a crash leaves it at its old version.
    if version < SCHEMA_VERSION {
        let tx = conn.unchecked_transaction()?;
        migrate(&tx, version)?;
        tx.commit()?;
    }
    Ok(())
}

/// Upgrade a database of version `from` to [`SCHEMA_VERSION`] inside the
/// caller's transaction.
fn migrate(conn: &Connection, from: i64) -> Result<()> {
    if from < 2 {
        conn.execute_batch(MIGRATE_V2)?;
    }
    if from < 3 {
        conn.execute_batch(MIGRATE_V3)?;
    }
    if from < 4 {
        conn.execute_batch(MIGRATE_V4)?;
    }
    conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// A memory database as a version 1 build wrote it, with two episodes
    /// of one session (the later one inserted first) and a fact.
    fn plant_v1(path: &std::path::Path, model: &str) {
        let c = Connection::open(path).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch(SCHEMA_V1).unwrap();
        c.execute(
            "INSERT INTO memory_meta (key, value) VALUES ('embedding_model', ?1), ('embedding_dim', '4')",
            [model],
        )
        .unwrap();
        for (id, at) in [
            ("e-b", "2025-01-02T00:00:00Z"),
            ("e-a", "2025-01-01T00:00:00Z"),
        ] {
            c.execute(
                "INSERT INTO episodes (episode_id, trace_id, session_id, sender, namespace, started_at, user_message, outcome, scope)
                 VALUES (?1, ?1, 's', 'u', 'default', ?2, 'hello', 'success', 'x')",
                (id, at),
            )
            .unwrap();
        }
        c.execute(
            "INSERT INTO semantic_facts (fact_id, namespace, text, embedding, source, created_at)
             VALUES ('f-1', 'default', 'a fact', x'00000000', 'manual', '2024-12-01T00:00:00Z')",
            [],
        )
        .unwrap();
        c.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
    }

    fn version(path: &std::path::Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_version_1_file_is_upgraded_in_place_and_keeps_its_rows() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("episodes.db");
        plant_v1(&path, "m");
        let store = Store::open(&path, "m", 4).unwrap();
        // Numbered in their session by date, whatever the insertion order.
        let a = store.episode("e-a").unwrap();
        let b = store.episode("e-b").unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        let f = store.fact("f-1").unwrap();
        assert_eq!(f.valid_at, "2024-12-01T00:00:00Z");
        assert_eq!(f.superseded_by, None);
        // Version 3: no label, so recalled as untrusted.
        assert!(store.episode_labels(&["e-a", "e-b"]).unwrap().is_empty());
        store.set_episode_label("e-a", "trusted").unwrap();
        assert_eq!(store.episode_labels(&["e-a"]).unwrap()["e-a"], "trusted");
        drop(store);
        assert_eq!(version(&path), SCHEMA_VERSION);
        let idx: i64 = Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'idx_episodes_session'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(idx, 1);
        // Opened again: nothing to do.
        Store::open(&path, "m", 4).unwrap();
    }

    #[test]
    fn a_refused_version_1_file_is_left_at_version_1() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("episodes.db");
        plant_v1(&path, "another-model");
        assert!(Store::open(&path, "m", 4).is_err());
        assert_eq!(version(&path), 1);
    }
}
