//! One recall: the query embedded once, held vectors that see later writes.

use super::*;

#[test]
fn one_recall_embeds_the_query_once_for_facts_and_episodes() {
    require_model!("one_recall_embeds_the_query_once_for_facts_and_episodes");
    let (d, ws) = workspace_with_one_memory_md_fact();
    let counting = Arc::new(Counting(
        common::model(),
        std::sync::atomic::AtomicUsize::new(0),
    ));
    // Every fact given (the seed's threshold of 0.7 is the score's, not
    // what this test is about).
    let mut cfg = MemoryConfig::new(d.path().join("episodes.db"), ws);
    cfg.fact_threshold = 0.0;
    let m = Memory::open(cfg, counting.clone()).unwrap();
    m.index_episode(&ep(
        "t1",
        "s1",
        "alice",
        "I work from Rome, so my time zone is Europe/Rome.",
        "Noted.",
        "2026-01-01T10:00:00Z",
    ))
    .unwrap();
    m.embed_pending(10).unwrap();
    let embedded = |c: &Counting| c.1.load(std::sync::atomic::Ordering::SeqCst);
    let before = embedded(&counting);
    let b = m
        .bundle_for_turn("alice", "which time zone is the operator in?")
        .unwrap();
    // Facts and episodes both answered, from one embedding of the query
    // (it was two, one per search).
    assert_eq!(b.facts.len(), 1, "{b:?}");
    assert!(b.episodes[0].user_message.contains("Europe/Rome"), "{b:?}");
    assert_eq!(embedded(&counting) - before, 1);
    // The same for `memory_fetch` and `capsaga memory search`'s call.
    let before = embedded(&counting);
    let r = m
        .recall(&capsaga_memory::RecallQuery {
            namespace: "default",
            sender: Some("alice"),
            message: "Rome time zone",
            facts: 5,
            fact_threshold: 0.0,
            relevant: 5,
            recent: 0,
            reinforce: false,
            now: Timestamp::now(),
        })
        .unwrap();
    assert_eq!((r.facts.len(), r.episodes.len()), (1, 1));
    assert_eq!(embedded(&counting) - before, 1);
}

#[test]
fn a_search_sees_what_was_written_after_its_vectors_were_held_in_memory() {
    require_model!("a_search_sees_what_was_written_after_its_vectors_were_held_in_memory");
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    let now: Timestamp = "2026-02-01T00:00:00Z".parse().unwrap();
    // No word in common with what it finds: only the vectors bring it.
    let q = "Which digits open my cabinet at the fitness centre?";
    let sessions = |m: &Memory| -> Vec<String> {
        m.search_episodes("default", Some("u"), q, 0, 5, now)
            .unwrap()
            .into_iter()
            .map(|e| e.session_id)
            .collect()
    };
    for i in 0..3 {
        m.index_episode(&ep(
            &format!("t{i}"),
            &format!("s{i}"),
            "u",
            &format!("Recipe idea number {i}: pasta with beans."),
            "ok",
            &format!("2026-01-0{}T10:00:00Z", i + 1),
        ))
        .unwrap();
    }
    m.embed_pending(10).unwrap();
    // Searched once: the sender's vectors are now held in memory.
    assert!(!sessions(&m).contains(&"s-locker".to_string()));
    // A new episode, embedded afterwards, is found by the next search.
    m.index_episode(&ep(
        "t-locker",
        "s-locker",
        "u",
        "My gym locker code is 4412.",
        "ok",
        "2026-01-05T10:00:00Z",
    ))
    .unwrap();
    m.embed_pending(10).unwrap();
    assert_eq!(sessions(&m)[0], "s-locker");
    // Written by another connection (another process's import): seen too.
    let other = Memory::open(m.config().clone(), common::model()).unwrap();
    other
        .index_episode(&ep(
            "t-locker2",
            "s-locker2",
            "u",
            "New gym locker, the code is 9075 now.",
            "ok",
            "2026-01-06T10:00:00Z",
        ))
        .unwrap();
    other.embed_pending(10).unwrap();
    assert!(sessions(&m).contains(&"s-locker2".to_string()));
    // Forgotten: gone from the next search.
    let id = m
        .search_episodes("default", Some("u"), q, 0, 5, now)
        .unwrap()
        .into_iter()
        .find(|e| e.session_id == "s-locker")
        .unwrap()
        .episode_id;
    m.forget(&id, "test").unwrap();
    assert!(!sessions(&m).contains(&"s-locker".to_string()));
}
