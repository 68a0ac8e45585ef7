//! The later value wins in semantic memory (issue 49), over real SQLite
//! files and the real model: reflection never distils a value a later
//! episode of the same sender changed, and approving a later fact on a
//! subject marks the earlier one superseded (an older one approved after
//! it is superseded at once).

mod common;

use capsaga_memory::{Memory, NewEpisode};

fn index(m: &Memory, i: usize, sender: &str, at: &str, msg: &str) -> String {
    m.index_episode(&NewEpisode {
        trace_id: format!("t{i}"),
        session_id: format!("s{i}"),
        sender: sender.into(),
        namespace: "default".into(),
        started_at: at.into(),
        user_message: msg.into(),
        final_response: Some("Noted.".into()),
        outcome: "success".into(),
        summary: None,
        steps: 3,
        turn_in_session: 5,
    })
    .unwrap()
    .episode_id
}

const OLD: [&str; 2] = [
    "My dentist appointment with Dr. Rossi is on March 3rd.",
    "Reminder for me: the dentist appointment with Dr. Rossi is on March 3rd.",
];
const NEW: [&str; 2] = [
    "I moved my dentist appointment with Dr. Rossi to April 9th.",
    "My dentist appointment with Dr. Rossi is now on April 9th.",
];

fn texts(c: &capsaga_memory::Cluster) -> Vec<&str> {
    c.episodes.iter().map(|e| e.user_message.as_str()).collect()
}

#[test]
fn reflection_never_distils_a_value_a_later_episode_changed() {
    require_model!("reflection_never_distils_a_value_a_later_episode_changed");
    // Alone, the first value is a group reflection would distil.
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(&d.path().join("before"));
    for (i, t) in OLD.iter().enumerate() {
        index(&m, i, "alice", &format!("2025-01-0{}T10:00:00Z", i + 1), t);
    }
    let c = m.reflection_clusters("default", 2).unwrap();
    assert_eq!(c.len(), 1, "{c:#?}");
    assert_eq!(texts(&c[0]).len(), 2);
    // With the later change: the group holds the new value only, the old
    // episodes set aside as superseded.
    let m = common::memory(&d.path().join("after"));
    let mut old_ids = Vec::new();
    for (i, t) in OLD.iter().enumerate() {
        old_ids.push(index(
            &m,
            i,
            "alice",
            &format!("2025-01-0{}T10:00:00Z", i + 1),
            t,
        ));
    }
    for (i, t) in NEW.iter().enumerate() {
        index(
            &m,
            10 + i,
            "alice",
            &format!("2025-02-0{}T10:00:00Z", i + 1),
            t,
        );
    }
    // Another sender's value, later: it changes nothing of alice's.
    index(
        &m,
        20,
        "bob",
        "2025-03-01T10:00:00Z",
        "My dentist appointment with Dr. Rossi is on May 5th.",
    );
    let c = m.reflection_clusters("default", 2).unwrap();
    let all: Vec<&str> = c.iter().flat_map(texts).collect();
    assert!(all.iter().all(|t| !t.contains("March 3rd")), "{c:#?}");
    assert!(all.iter().any(|t| t.contains("April 9th")), "{c:#?}");
    // Bob's value stays: another sender's episodes never supersede.
    assert!(all.iter().any(|t| t.contains("May 5th")), "{c:#?}");
    let mut superseded: Vec<String> = c.iter().flat_map(|x| x.superseded.clone()).collect();
    superseded.sort();
    old_ids.sort();
    assert_eq!(superseded, old_ids);
}

#[test]
fn a_later_approved_fact_supersedes_the_earlier_one_and_an_older_one_is_superseded_at_once() {
    require_model!(
        "a_later_approved_fact_supersedes_the_earlier_one_and_an_older_one_is_superseded_at_once"
    );
    let d = tempfile::tempdir().unwrap();
    let m = common::memory(d.path());
    let jan = index(&m, 1, "alice", "2025-01-05T10:00:00Z", OLD[0]);
    let mar = index(&m, 2, "alice", "2025-03-05T10:00:00Z", NEW[0]);
    let dec = index(
        &m,
        3,
        "alice",
        "2024-12-05T10:00:00Z",
        "Dentist with Dr. Rossi on February 20th.",
    );
    let propose = |text: &str, ep: &str| {
        m.propose("default", text, "reflection", vec![ep.to_string()])
            .unwrap()
            .proposal_id
    };
    let p1 = propose(
        "Alice's dentist appointment with Dr. Rossi is on March 3rd.",
        &jan,
    );
    let first = m.approve(&[p1], "op").unwrap().remove(0);
    assert_eq!(first.valid_at, "2025-01-05T10:00:00.000Z");
    let p2 = propose(
        "Alice's dentist appointment with Dr. Rossi is on April 9th.",
        &mar,
    );
    let second = m.approve(&[p2], "op").unwrap().remove(0);
    assert_eq!(second.superseded_by, None);
    let stored = m.store().fact(&first.fact_id).unwrap();
    assert_eq!(
        stored.superseded_by.as_deref(),
        Some(second.fact_id.as_str())
    );
    // Only the current value is retrieved.
    let got = m
        .search_facts(&["default"], "When is Alice's dentist appointment?", 5, 0.0)
        .unwrap();
    let ids: Vec<&str> = got.iter().map(|f| f.fact_id.as_str()).collect();
    assert_eq!(ids, [second.fact_id.as_str()], "{got:#?}");
    // A value older than the current one, approved now: superseded at once.
    let p3 = propose(
        "Alice's dentist appointment with Dr. Rossi is on February 20th.",
        &dec,
    );
    let third = m.approve(&[p3], "op").unwrap().remove(0);
    assert_eq!(
        third.superseded_by.as_deref(),
        Some(second.fact_id.as_str())
    );
    assert_eq!(m.store().fact(&second.fact_id).unwrap().superseded_by, None);
    // A fact on another subject is left alone.
    let other = index(&m, 4, "alice", "2025-04-01T10:00:00Z", "I am vegetarian.");
    let p4 = propose("Alice is vegetarian.", &other);
    m.approve(&[p4], "op").unwrap();
    assert_eq!(m.store().fact(&second.fact_id).unwrap().superseded_by, None);
    let log = m.store().log_lines(20).unwrap();
    assert_eq!(
        log.iter().filter(|(_, a, _, _)| a == "supersede").count(),
        2,
        "{log:#?}"
    );
    // Reopened: the superseded facts stay out of the index.
    drop(m);
    let m = common::memory(d.path());
    let got = m
        .search_facts(&["default"], "When is Alice's dentist appointment?", 5, 0.0)
        .unwrap();
    assert!(
        got.iter()
            .all(|f| f.fact_id != first.fact_id && f.fact_id != third.fact_id)
    );
}
