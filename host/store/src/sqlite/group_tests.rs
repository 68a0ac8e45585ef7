//! Group commit: concurrent writers share one transaction (one sync), a
//! writer whose job fails is rolled back alone, and with group commit off
//! every write is its own transaction.

use super::super::{BudgetStore, StoreError};
use super::{GroupCommit, SqliteStore};
use rusqlite::params;
use std::sync::Arc;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Hold the writer until `n` writes queued behind it (however long they
/// take to arrive on this machine), then let them run: odd ones fail after
/// writing. Returns the store and the commits the `n` writes took.
fn queued(mode: GroupCommit, n: usize) -> (Arc<SqliteStore>, u64, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        SqliteStore::open_with(&dir.path().join("s.db"), Duration::from_secs(5), mode).unwrap(),
    );
    let rt = runtime();
    let before = db.commits();
    rt.block_on(async {
        let running = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let blocker = {
            let db = Arc::clone(&db);
            let seen = Arc::clone(&db);
            let running = Arc::clone(&running);
            tokio::spawn(async move {
                db.write(move |_| {
                    running.store(true, std::sync::atomic::Ordering::SeqCst);
                    let t0 = std::time::Instant::now();
                    while seen.queued_writes() < n as u64 {
                        if t0.elapsed() > Duration::from_secs(180) {
                            return Err(StoreError::Decode("the writes never queued".into()));
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Ok(())
                })
                .await
            })
        };
        // The writes are sent once the blocker holds the writer, so that
        // none joins its transaction.
        while !running.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let writes: Vec<_> = (0..n)
            .map(|i| {
                let db = Arc::clone(&db);
                tokio::spawn(async move {
                    let day = format!("day-{i:03}");
                    let r = db
                        .write(move |tx| {
                            tx.execute(
                                "INSERT INTO budget_days (day, spent_usd, calls, input_tokens, output_tokens, updated_at) VALUES (?1, 1.0, 1, 0, 0, 'now')",
                                params![day],
                            )?;
                            if i % 2 == 1 {
                                return Err(StoreError::Decode(format!("planted failure {i}")));
                            }
                            Ok(i)
                        })
                        .await;
                    (i, r)
                })
            })
            .collect();
        blocker.await.unwrap().unwrap();
        for w in writes {
            let (i, r) = w.await.unwrap();
            if i % 2 == 1 {
                assert!(matches!(r, Err(StoreError::Decode(_))), "{i}: {r:?}");
            } else {
                assert_eq!(r.unwrap(), i);
            }
        }
    });
    let used = db.commits() - before - 1;
    (db, used, dir)
}

#[test]
fn queued_writers_share_one_commit_and_a_failed_one_is_rolled_back_alone() {
    let (db, commits, _dir) = queued(GroupCommit::On, 50);
    assert!(commits <= 2, "50 queued writes took {commits} commits");
    let rt = runtime();
    let days = rt.block_on(db.budget_days(1000)).unwrap();
    let names: Vec<&str> = days.iter().map(|d| d.day.as_str()).collect();
    assert_eq!(days.len(), 25, "{names:?}");
    assert!(days.iter().all(|d| {
        let i: usize = d.day[4..].parse().unwrap();
        i.is_multiple_of(2)
    }));
}

#[test]
fn without_group_commit_every_write_is_its_own_commit() {
    let (db, commits, _dir) = queued(GroupCommit::Off, 20);
    // Each write is its own transaction: the 10 that succeed commit one
    // each, the 10 that fail roll theirs back (no commit).
    assert_eq!(commits, 10, "one transaction per write");
    let days = runtime().block_on(db.budget_days(1000)).unwrap();
    assert_eq!(days.len(), 10);
}

#[test]
fn a_reader_sees_a_write_once_it_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let rt = runtime();
    rt.block_on(db.record_spend("2026-01-01", 0.5, 10, 20))
        .unwrap();
    assert!((rt.block_on(db.day_spent("2026-01-01")).unwrap() - 0.5).abs() < 1e-9);
}

/// The thread a lone write runs on.
fn writing_thread(db: &SqliteStore, rt: &tokio::runtime::Runtime) -> String {
    rt.block_on(db.write(|_| {
        Ok(std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string())
    }))
    .unwrap()
}

/// A write that finds the connection free runs on its caller's thread in a
/// multi-threaded runtime (no hand-off to the writer thread and back), and
/// through the writer thread in a one-thread runtime, where blocking the
/// caller would stall every other task; both are durable when they return.
#[test]
fn a_lone_write_runs_on_its_callers_thread_when_it_may_block() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let multi = runtime();
    let caller = multi.block_on(async { std::thread::current().name().map(str::to_string) });
    assert_eq!(
        Some(writing_thread(&db, &multi)),
        caller.or(Some("unnamed".into()))
    );
    let one = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(writing_thread(&db, &one), "capsaga-store-writer");
    // Inside a task on a worker thread too, once the writer thread has let
    // the connection go (it may still be checkpointing after the write
    // above answered: the write would then, rightly, go through it).
    db.writer.wait_idle();
    let db = Arc::new(db);
    let theirs = Arc::clone(&db);
    let task = multi.spawn(async move {
        let me = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        let wrote = theirs
            .write(|_| {
                Ok(std::thread::current()
                    .name()
                    .unwrap_or("unnamed")
                    .to_string())
            })
            .await
            .unwrap();
        (me, wrote)
    });
    let (worker, wrote) = multi.block_on(task).unwrap();
    assert_eq!(worker, wrote);
    assert_ne!(wrote, "capsaga-store-writer");
    let before = db.commits();
    multi
        .block_on(db.write(|tx| {
            tx.execute_batch(
                "INSERT INTO budget_days (day, updated_at) VALUES ('2026-12-04', 'now')",
            )?;
            Ok(())
        }))
        .unwrap();
    assert_eq!(db.commits(), before + 1);
    let days = multi.block_on(db.budget_days(10)).unwrap();
    assert_eq!(days.len(), 1, "the write is visible to the reader");
}
