//! Episodes: indexed by sender, retrieved recent plus matches (hostile FTS
//! syntax as plain words), forgotten, archived by retention.

use super::*;

#[test]
fn episodes_are_indexed_by_sender_and_retrieved_recent_plus_matches() {
    require_model!("episodes_are_indexed_by_sender_and_retrieved_recent_plus_matches");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    m.index_episode(&ep(
        "t1",
        "s1",
        "alice",
        "My project codename is BLUEBIRD.",
        "Noted.",
        "2026-01-01T10:00:00Z",
    ))
    .unwrap();
    for i in 0..8 {
        m.index_episode(&ep(
            &format!("t{}", i + 2),
            "s2",
            "alice",
            &format!("weather question number {i}"),
            "sunny",
            &format!("2026-01-0{}T10:00:00Z", 2 + i % 7),
        ))
        .unwrap();
    }
    m.index_episode(&ep(
        "tb",
        "s3",
        "bob",
        "bob's codename is REDFOX",
        "ok",
        "2026-01-09T10:00:00Z",
    ))
    .unwrap();
    // Indexing is idempotent per trace.
    let again = m
        .index_episode(&ep(
            "t1",
            "s1",
            "alice",
            "My project codename is BLUEBIRD.",
            "Noted.",
            "2026-01-01T10:00:00Z",
        ))
        .unwrap();
    assert_eq!(m.store().counts().unwrap().0, 10, "{again:?}");
    let now: Timestamp = "2026-01-10T00:00:00Z".parse().unwrap();
    let got = m
        .search_episodes(
            "default",
            Some("alice"),
            "what is the codename of my project?",
            5,
            3,
            now,
        )
        .unwrap();
    // The best match first (relevance order), then the latest ones.
    assert!(got[0].user_message.contains("BLUEBIRD"), "{got:#?}");
    // Keyed by sender: bob's episode never reaches alice.
    assert!(got.iter().all(|e| e.sender == "alice"));
    assert!(got.len() <= 8);
    let recent: Vec<&str> = got[3..].iter().map(|e| e.started_at.as_str()).collect();
    assert!(recent.windows(2).all(|w| w[0] >= w[1]), "{recent:?}");
}

#[test]
fn fts_syntax_in_a_user_message_is_plain_words() {
    require_model!("fts_syntax_in_a_user_message_is_plain_words");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    m.index_episode(&ep(
        "t1",
        "s",
        "u",
        "the secret is in user_message column",
        "ok",
        "2026-01-01T00:00:00Z",
    ))
    .unwrap();
    m.index_episode(&ep(
        "t2",
        "s",
        "u",
        "unrelated words here",
        "fine",
        "2026-01-01T00:00:01Z",
    ))
    .unwrap();
    let now = Timestamp::now();
    // Every FTS5 operator and column filter: no error, no operator effect.
    for q in [
        "\"",
        "\"\"\"",
        "*",
        "secret*",
        "NEAR(secret column, 2)",
        "secret OR",
        "OR OR OR",
        "- secret",
        "^secret",
        "user_message:secret",
        "{user_message final_response}: secret",
        "secret AND NOT column",
        "(secret",
        "secret)",
        "\0secret",
        "sec\"ret",
        "final_response : \"x\" *",
        "NOT",
        "AND",
        "+",
        ":",
        "'); DROP TABLE episodes; --",
    ] {
        let r = m.search_episodes("default", Some("u"), q, 0, 3, now);
        assert!(r.is_ok(), "{q:?}: {r:?}");
    }
    // `-secret` would exclude with operator meaning; here it is a word.
    let r = m
        .search_episodes("default", Some("u"), "-secret", 0, 3, now)
        .unwrap();
    assert_eq!(r.len(), 1);
    assert!(r[0].user_message.contains("secret"));
    // A column filter word is just a word (no episode holds "final").
    assert_eq!(
        m.search_episodes("default", Some("u"), "final_response: zzz", 0, 3, now)
            .unwrap()
            .len(),
        0
    );
    assert_eq!(m.store().counts().unwrap().0, 2);
}

#[test]
fn episode_forget_removes_row_and_index() {
    require_model!("episode_forget_removes_row_and_index");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    let e = m
        .index_episode(&ep(
            "t1",
            "s",
            "u",
            "my locker code is 4471",
            "noted",
            "2026-01-01T00:00:00Z",
        ))
        .unwrap();
    m.record_turn("s", "u", "my locker code is 4471", Some("noted"), "t1")
        .unwrap();
    m.forget(&e.episode_id, "operator").unwrap();
    assert!(
        m.search_episodes("default", Some("u"), "locker code", 5, 3, Timestamp::now())
            .unwrap()
            .is_empty()
    );
    assert!(m.history("s").unwrap().turns.is_empty());
}

#[test]
fn retention_archives_old_unimportant_episodes_out_of_the_index_and_keeps_them() {
    require_model!("retention_archives_old_unimportant_episodes_out_of_the_index_and_keeps_them");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    // A successful turn, then the same words again, failed: not novel,
    // short, failed, so unimportant.
    let kept = m
        .index_episode(&ep("t2", "s", "u", "zebra", "ok", "2025-01-01T00:00:00Z"))
        .unwrap();
    assert!(kept.importance >= 0.3, "{}", kept.importance);
    let mut old = ep("t1", "s", "u", "zebra", "", "2025-01-01T00:00:01Z");
    old.outcome = "tool_hallucination".into();
    old.final_response = None;
    let e = m.index_episode(&old).unwrap();
    assert!(e.importance < 0.3, "{}", e.importance);
    // Recent and unimportant: kept in the index.
    let mut recent = old.clone();
    recent.trace_id = "t3".into();
    recent.started_at = "2025-12-30T00:00:00Z".into();
    let recent = m.index_episode(&recent).unwrap();
    assert!(recent.importance < 0.3);
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let ids = m.retention(now).unwrap();
    assert_eq!(ids, vec![e.episode_id.clone()]);
    let hits = m
        .search_episodes("default", Some("u"), "zebra", 0, 5, now)
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert!(hits.iter().all(|h| h.episode_id != e.episode_id));
    let all = m
        .store()
        .list_episodes(&capsaga_memory::EpisodeQuery {
            include_archived: true,
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert!(
        all.iter()
            .any(|x| x.episode_id == e.episode_id && x.archived)
    );
    assert!(
        m.store()
            .log_lines(5)
            .unwrap()
            .iter()
            .any(|(_, a, _, _)| a == "archive")
    );
}
