//! Past conversations imported and exported (issue 49), over real SQLite
//! files and the real model: each exchange an episode with its own date
//! and session, an import run twice adds nothing, bad lines are reported by
//! number, an export reads back as the same episodes.

mod common;

use capsaga_memory::transfer::{self, Report};
use capsaga_memory::{Memory, NewEpisode};

use common::session;

fn import(m: &Memory, text: &str) -> Report {
    m.import(&mut text.as_bytes(), "default", &mut |_| {})
        .unwrap()
}

fn all(m: &Memory) -> Vec<capsaga_memory::Episode> {
    let mut v = m
        .store()
        .list_episodes(&capsaga_memory::EpisodeQuery {
            include_archived: true,
            limit: 1000,
            ..Default::default()
        })
        .unwrap();
    v.sort_by(|a, b| a.episode_id.cmp(&b.episode_id));
    v
}

#[test]
fn an_import_keeps_dates_and_sessions_adds_nothing_twice_and_reports_bad_lines() {
    require_model!("an_import_keeps_dates_and_sessions_adds_nothing_twice_and_reports_bad_lines");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    let file = [
        session(
            "token:alice",
            "a-1",
            "2025-02-03T09:00:00+01:00",
            &[("My dentist is Dr. Rossi.", "Noted."), ("ok", "ok")],
        ),
        "{not json".to_string(),
        String::new(),
        session(
            "token:alice",
            "a-2",
            "2025-03-04T10:00:00Z",
            &[("ok", "ok"), ("ok", "ok")],
        ),
        r#"{"sender":"token:bob","session_id":"b-1","started_at":"soon","turns":[]}"#.to_string(),
    ]
    .join("\n");
    let r = import(&m, &file);
    assert_eq!((r.lines, r.sessions, r.exchanges), (5, 2, 4), "{r:?}");
    assert_eq!((r.added, r.already, r.bad_lines), (4, 0, 2), "{r:?}");
    assert_eq!(r.bad.iter().map(|b| b.line).collect::<Vec<_>>(), [2, 5]);
    assert!(r.bad[1].reason.contains("started_at"), "{:?}", r.bad);
    // Dated by the session (the exchange's own time), not by the import,
    // with its session and position; two identical exchanges of one
    // instant are two episodes.
    let eps = all(&m);
    assert_eq!(eps.len(), 4);
    let dentist = eps
        .iter()
        .find(|e| e.user_message.contains("Rossi"))
        .unwrap();
    assert_eq!(dentist.started_at, "2025-02-03T08:00:00.000Z");
    assert_eq!((dentist.session_id.as_str(), dentist.seq), ("a-1", 1));
    assert!(eps.iter().all(|e| e.sender == "token:alice"));
    assert_eq!(
        eps.iter()
            .filter(|e| e.session_id == "a-2" && e.user_message == "ok")
            .count(),
        2
    );
    // Embedded in the import: every episode has its vector.
    assert_eq!(m.embed_pending(100).unwrap(), 0);
    // The same file again adds nothing.
    let again = import(&m, &file);
    assert_eq!((again.added, again.already), (0, 4), "{again:?}");
    assert_eq!(all(&m), eps);
    // `check` finds the same bad lines and writes nothing.
    let c = transfer::check(&mut file.as_bytes()).unwrap();
    assert_eq!(c.bad, r.bad);
}

#[test]
fn an_export_imported_again_adds_nothing_and_reads_back_into_a_fresh_memory() {
    require_model!("an_export_imported_again_adds_nothing_and_reads_back_into_a_fresh_memory");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(&d.path().join("a"));
    // Live turns (their positions skip a turn that was not indexed) and an
    // imported session.
    for (seq, msg) in [(1, "first live turn"), (3, "third live turn")] {
        m.index_episode(&NewEpisode {
            trace_id: format!("t{seq}"),
            session_id: "live".into(),
            sender: "token:alice".into(),
            namespace: "default".into(),
            started_at: format!("2025-05-0{seq}T10:00:00.123Z"),
            user_message: msg.into(),
            final_response: Some("done".into()),
            outcome: "success".into(),
            turn_in_session: seq,
            ..Default::default()
        })
        .unwrap();
    }
    import(
        &m,
        &session(
            "token:bob",
            "b",
            "2025-01-01T00:00:00Z",
            &[("hello", "hi"), ("bye", "see you")],
        ),
    );
    let mut out = Vec::new();
    assert_eq!(m.export("default", None, &mut out).unwrap(), 2);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let again = import(&m, &text);
    assert_eq!((again.added, again.already), (0, 4), "{again:?}");
    // Into a fresh memory: the same episodes, ids included.
    let fresh = common::memory(&d.path().join("b"));
    assert_eq!(import(&fresh, &text).added, 4);
    let (x, y) = (all(&m), all(&fresh));
    let key = |e: &capsaga_memory::Episode| {
        (
            e.episode_id.clone(),
            e.sender.clone(),
            e.session_id.clone(),
            e.started_at.clone(),
            e.user_message.clone(),
            e.final_response.clone(),
        )
    };
    assert_eq!(
        x.iter().map(key).collect::<Vec<_>>(),
        y.iter().map(key).collect::<Vec<_>>()
    );
    // One sender only.
    let mut bob = Vec::new();
    m.export("default", Some("token:bob"), &mut bob).unwrap();
    assert_eq!(String::from_utf8(bob).unwrap().lines().count(), 1);
}

#[test]
fn an_import_on_several_threads_stores_the_vectors_of_one_thread() {
    require_model!("an_import_on_several_threads_stores_the_vectors_of_one_thread");
    // Enough exchanges for several groups of the embedder, of many lengths.
    let lines: Vec<String> = (0..12)
        .map(|s| {
            let xs: Vec<(String, String)> = (0..10)
                .map(|i| {
                    (
                        format!(
                            "Question {s}-{i}: {}",
                            "tell me more ".repeat(1 + (s * i) % 7)
                        ),
                        format!("Answer {i}."),
                    )
                })
                .collect();
            let xs: Vec<(&str, &str)> = xs.iter().map(|(u, a)| (u.as_str(), a.as_str())).collect();
            session("u", &format!("s{s}"), "2025-02-03T09:00:00Z", &xs)
        })
        .collect();
    let text = lines.join("\n");
    let vectors = |workers: usize| {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("workspace");
        let mut cfg = capsaga_memory::MemoryConfig::new(d.path().join("memory/episodes.db"), ws);
        cfg.import_workers = workers;
        let m = Memory::open(cfg, common::model()).unwrap();
        assert_eq!(import(&m, &text).added, 120);
        let mut ids: Vec<String> = all(&m).into_iter().map(|e| e.episode_id).collect();
        ids.sort();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        m.store().episodes_with_vectors(&refs).unwrap()
    };
    let one = vectors(1);
    let three = vectors(3);
    assert_eq!(one.len(), 120);
    for ((a, va), (b, vb)) in one.iter().zip(&three) {
        assert_eq!(a.episode_id, b.episode_id);
        assert!(va.is_some());
        assert_eq!(va, vb, "{}", a.user_message);
    }
}
