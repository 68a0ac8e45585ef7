//! The memory database's schema, its stamp and the checks at open.

use crate::error::{MemoryError, Result};
use rusqlite::Connection;

/// `PRAGMA application_id` of a capsaga memory database ("CSMM").
pub const APPLICATION_ID: i64 = 0x4353_4d4d;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

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
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
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
    Ok(())
}
