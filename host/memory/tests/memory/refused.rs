//! Bad databases from the attacker's side: corrupt or foreign files and
//! another model's vectors are refused, nothing touched.

use super::*;

#[test]
fn a_corrupt_or_foreign_database_is_refused_and_left_untouched() {
    require_model!("a_corrupt_or_foreign_database_is_refused_and_left_untouched");
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let db = d.path().join("episodes.db");
    let open = || Memory::open(MemoryConfig::new(db.clone(), ws.clone()), common::model());
    // Random bytes.
    let junk: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &junk).unwrap();
    let e = open().unwrap_err();
    assert!(matches!(e, MemoryError::Database { .. }), "{e}");
    assert!(e.to_string().contains("nothing was changed"), "{e}");
    assert_eq!(std::fs::read(&db).unwrap(), junk);
    // Another application's SQLite database.
    std::fs::remove_file(&db).unwrap();
    let foreign = rusqlite::Connection::open(&db).unwrap();
    foreign
        .execute_batch("CREATE TABLE episodes (x); INSERT INTO episodes VALUES (1);")
        .unwrap();
    drop(foreign);
    let before = std::fs::read(&db).unwrap();
    let e = open().unwrap_err();
    assert!(
        e.to_string().contains("not a capsaga memory database"),
        "{e}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
    // A capsaga memory database whose pages were damaged after the header.
    std::fs::remove_file(&db).unwrap();
    {
        let m = open().unwrap();
        for i in 0..300 {
            m.index_episode(&ep(
                &format!("t{i}"),
                "s",
                "u",
                &"padding words ".repeat(40),
                "ok",
                "2026-01-01T00:00:00Z",
            ))
            .unwrap();
        }
    }
    let mut bytes = std::fs::read(&db).unwrap();
    let wal = d.path().join("episodes.db-wal");
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "the WAL was not checkpointed at close"
    );
    for b in &mut bytes[4096 * 3..4096 * 6] {
        *b = 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    let e = open().unwrap_err();
    assert!(matches!(e, MemoryError::Database { .. }), "{e}");
    // A newer schema.
    std::fs::remove_file(&db).unwrap();
    drop(open().unwrap());
    let c = rusqlite::Connection::open(&db).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    assert!(open().unwrap_err().to_string().contains("newer"));
}

/// A real second embedder of another dimension (hashed bag of words), to
/// open a database filled by MiniLM.
struct Hashed;
impl Embedder for Hashed {
    fn model_id(&self) -> &str {
        "hashed-bow-8"
    }
    fn dim(&self) -> usize {
        8
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0; 8];
                for w in t.split_whitespace() {
                    v[w.len() % 8] += 1.0;
                }
                capsaga_memory::embed::normalise(v)
            })
            .collect())
    }
}

#[test]
fn another_models_dimension_is_refused() {
    require_model!("another_models_dimension_is_refused");
    let d = tempfile::tempdir().unwrap();
    drop(common::memory(d.path()));
    let cfg = MemoryConfig::new(
        d.path().join("memory/episodes.db"),
        d.path().join("workspace"),
    );
    let e = Memory::open(cfg, Arc::new(Hashed)).unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::Dimension {
                expected: 8,
                found: 384,
                ..
            }
        ),
        "{e}"
    );
}
