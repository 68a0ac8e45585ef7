//! Tasks of the MCP tasks extension (issue 48) on both back ends: a task
//! written by one host is read by another; a client's read is scoped to
//! its principal in the statement (another principal's id is not found,
//! like a guessed one); every change is a compare-and-set on the row's
//! version, so of writers racing from one version exactly one wins (a
//! terminal status is written once); the open tasks are listed per owner;
//! ended ones are forgotten after their time, open ones never; every
//! creation, change and deletion is in the hash-chained log, so a task row
//! edited behind its back fails `audit verify`.

use super::{Db, suite};
use capsaga_store::clock::{now_rfc3339, rfc3339_after};
use capsaga_store::*;

fn task(id: &str, principal: &str, owner: &str) -> TaskRow {
    let at = now_rfc3339();
    TaskRow {
        task_id: id.into(),
        principal: principal.into(),
        saga_id: Some(format!("saga-of-{id}")),
        owner: Some(owner.into()),
        status: "working".into(),
        detail: None,
        answers: None,
        cancel_requested: false,
        created_at: at.clone(),
        updated_at: at,
        version: 1,
    }
}

async fn tasks_are_shared_scoped_and_written_once(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    let t = task("t1", "token:bob", "host-a");
    a.create_task(&t).await.unwrap();
    assert!(
        a.create_task(&t).await.is_err(),
        "{}: a duplicate id",
        db.name()
    );
    // Another host reads it; only its principal does.
    let got = b.task_of("t1", "token:bob").await.unwrap();
    assert_eq!(got.as_ref(), Some(&t), "{}", db.name());
    for (id, who) in [
        ("t1", "token:eve"),
        ("t1", "token:Bob"),
        ("t1", ""),
        ("t2", "token:bob"),
        ("%", "token:bob"),
    ] {
        assert_eq!(
            b.task_of(id, who).await.unwrap(),
            None,
            "{}: {id} for {who:?}",
            db.name()
        );
    }
    // Host B records a cancel request; host A's write from the version it
    // read before is refused, and it reads the request.
    let stale = a.task("t1").await.unwrap().unwrap();
    let mut cancel = b.task_of("t1", "token:bob").await.unwrap().unwrap();
    cancel.cancel_requested = true;
    cancel.updated_at = now_rfc3339();
    assert!(b.put_task(&cancel).await.unwrap(), "{}", db.name());
    let mut done = stale.clone();
    done.status = "completed".into();
    done.detail = Some(r#"{"content":[]}"#.into());
    assert!(!a.put_task(&done).await.unwrap(), "{}: stale", db.name());
    let now = a.task("t1").await.unwrap().unwrap();
    assert!(now.cancel_requested && now.version == 2, "{now:?}");
    assert_eq!(now.status, "working");
    // Writers racing from one version, on both hosts: exactly one wins.
    let mut racers = tokio::task::JoinSet::new();
    for i in 0..8 {
        let s = if i % 2 == 0 { a.clone() } else { b.clone() };
        let mut w = now.clone();
        w.status = if i % 2 == 0 { "cancelled" } else { "failed" }.into();
        racers.spawn(async move { s.put_task(&w).await.unwrap() });
    }
    let mut wins = 0;
    while let Some(r) = racers.join_next().await {
        wins += usize::from(r.unwrap());
    }
    assert_eq!(wins, 1, "{}", db.name());
    let ended = b.task("t1").await.unwrap().unwrap();
    assert!(ended.is_terminal() && ended.version == 3, "{ended:?}");
    // An unknown status is refused by the table.
    let mut bad = ended.clone();
    bad.status = "done".into();
    assert!(a.put_task(&bad).await.is_err(), "{}", db.name());
    // Open tasks, per owner.
    a.create_task(&task("t2", "token:bob", "host-a"))
        .await
        .unwrap();
    b.create_task(&task("t3", "token:eve", "host-b"))
        .await
        .unwrap();
    let ids = |v: Vec<TaskRow>| {
        let mut ids: Vec<String> = v.into_iter().map(|t| t.task_id).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(b.open_tasks(None).await.unwrap()), ["t2", "t3"]);
    assert_eq!(ids(b.open_tasks(Some("host-a")).await.unwrap()), ["t2"]);
    assert!(b.open_tasks(Some("host-c")).await.unwrap().is_empty());
    // Forgetting: ended tasks changed before the time given; open ones stay.
    assert_eq!(b.forget_tasks("2000-01-01T00:00:00.000Z").await.unwrap(), 0);
    assert_eq!(b.forget_tasks(&rfc3339_after(60_000)).await.unwrap(), 1);
    assert_eq!(a.task("t1").await.unwrap(), None, "{}", db.name());
    assert!(a.task("t2").await.unwrap().is_some());
    assert!(a.task("t3").await.unwrap().is_some());
}

suite!(tasks_are_shared_scoped_and_written_once);

async fn a_task_row_edited_behind_the_log_fails_audit_verify(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    a.create_task(&task("t1", "token:bob", "host-a"))
        .await
        .unwrap();
    b.create_task(&task("t2", "token:bob", "host-b"))
        .await
        .unwrap();
    let mut done = a.task("t1").await.unwrap().unwrap();
    done.status = "completed".into();
    done.detail = Some(r#"{"content":[{"type":"text","text":"paid 10"}]}"#.into());
    assert!(a.put_task(&done).await.unwrap());
    let verify =
        |s: std::sync::Arc<dyn Store>| async move { audit::verify(&*s, None).await.unwrap() };
    let r = verify(b.clone()).await;
    assert!(r.ok(), "{}: {r:?}", db.name());
    // Forgotten once ended: the log says so, and still verifies.
    assert_eq!(a.forget_tasks(&rfc3339_after(60_000)).await.unwrap(), 1);
    let r = verify(b.clone()).await;
    assert!(r.ok(), "{}: {r:?}", db.name());
    // Each edit behind the log's back is found: a result rewritten, a
    // status moved, an owner changed, a forgotten row put back, a row
    // deleted, a row marked as older than the log.
    let tampered = [
        "UPDATE mcp_tasks SET detail = '{\"content\":[]}' WHERE task_id = 't2'",
        "UPDATE mcp_tasks SET status = 'cancelled' WHERE task_id = 't2'",
        "UPDATE mcp_tasks SET owner = 'host-x' WHERE task_id = 't2'",
        "DELETE FROM mcp_tasks WHERE task_id = 't2'",
        "UPDATE mcp_tasks SET chained = FALSE WHERE task_id = 't2'",
    ];
    let before = a.task("t2").await.unwrap().unwrap();
    for sql in tampered {
        db.tamper(&format!("BEGIN; {sql}; COMMIT;")).await;
        let r = verify(b.clone()).await;
        let task = r
            .findings
            .iter()
            .filter(|f| f.check == "replay" && f.reason.contains("task t2"))
            .count();
        assert_eq!(task, 1, "{}: {sql}: {r:?}", db.name());
        // Put back as it was.
        db.tamper("DELETE FROM mcp_tasks WHERE task_id = 't2'")
            .await;
        b.create_task(&before).await.unwrap();
    }
    assert!(verify(b.clone()).await.ok(), "{}", db.name());
    // The forgotten task put back in its table.
    db.tamper(&format!(
        "INSERT INTO mcp_tasks (task_id, principal, status, created_at, updated_at, chained) VALUES ('t1', 'token:bob', 'completed', '{0}', '{0}', TRUE)",
        done.created_at
    ))
    .await;
    let r = verify(b.clone()).await;
    assert!(
        r.findings.iter().any(|f| f.reason.contains("task t1")),
        "{}: {r:?}",
        db.name()
    );
}

suite!(a_task_row_edited_behind_the_log_fails_audit_verify);
