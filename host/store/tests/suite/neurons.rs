//! Neurons on both back ends: versions by content, their life, removal of
//! a pending version; shared by hosts.

use super::{Db, suite};
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::Status;
use capsaga_store::*;
use serde_json::json;

fn meta(name: &str, description: &str) -> RawToolMeta {
    RawToolMeta {
        name: name.into(),
        description: description.into(),
        args_schema: r#"{"type":"object"}"#.into(),
        has_side_effects: false,
        risk: Risk::Low,
        returns_untrusted: false,
        idempotent: true,
        supports_dry_run: false,
        capabilities: vec!["fs:read:/d/**".into()],
        version: String::new(),
        output_fields: Vec::new(),
    }
}

async fn propose(db: &dyn Store, m: &RawToolMeta, identity: &str) -> (NeuronRow, bool) {
    db.propose_neuron(&NewNeuron {
        identity,
        runner_hash: "r",
        meta: m,
        source: "def execute(args): return 1",
        examples: &json!([{"args": {}}]),
        report: None,
        saga_id: Some("s1"),
        step_seq: Some(0),
    })
    .await
    .unwrap()
}

fn to(name: &str, version: u32, to: Status) -> Transition<'_> {
    Transition {
        name,
        version,
        to,
        by: "test",
        note: None,
        granted: None,
        report: None,
    }
}

async fn versions_are_numbered_by_content_and_live_their_life(db: &Db) {
    let a = db.open().await;
    // A second host sees and changes the same versions.
    let b = db.open().await;
    let (v1, new) = propose(&*a, &meta("stats", "a"), "id1").await;
    assert!(new);
    assert_eq!(
        (v1.version, v1.status, v1.meta.version.as_str()),
        (1, Status::Proposed, "1")
    );
    let (again, new) = propose(&*b, &meta("stats", "a"), "id1").await;
    assert!(!new, "the same content is the same version");
    assert_eq!(again.version, 1);
    let (v2, _) = propose(&*b, &meta("stats", "b"), "id2").await;
    assert_eq!(v2.version, 2);

    let err = a
        .transition_neuron(&to("stats", 1, Status::Active))
        .await
        .unwrap_err();
    assert!(matches!(err, NeuronOpError::Refused { .. }), "{err}");
    let report = json!({"passed": true});
    let mut t = to("stats", 1, Status::Tested);
    t.report = Some(&report);
    assert_eq!(
        a.transition_neuron(&t).await.unwrap().report,
        Some(report.clone())
    );
    b.transition_neuron(&to("stats", 1, Status::AwaitingOperator))
        .await
        .unwrap();
    let grants = vec!["fs:read:/d/**".to_string()];
    let mut t = to("stats", 1, Status::Active);
    t.granted = Some(&grants);
    assert_eq!(a.transition_neuron(&t).await.unwrap().granted, grants);
    b.transition_neuron(&to("stats", 2, Status::Tested))
        .await
        .unwrap();
    b.transition_neuron(&to("stats", 2, Status::AwaitingOperator))
        .await
        .unwrap();
    b.transition_neuron(&to("stats", 2, Status::Active))
        .await
        .unwrap();
    let all = a.neurons(Some("stats")).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.status).collect::<Vec<_>>(),
        [Status::Retired, Status::Active]
    );
    assert_eq!(a.neuron("stats", None).await.unwrap().unwrap().version, 2);
    assert_eq!(
        a.neuron("stats", Some(1)).await.unwrap().unwrap().version,
        1
    );
    assert_eq!(
        b.neuron_by_identity("id1").await.unwrap().unwrap().version,
        1
    );
    assert_eq!(all[0].saga_id.as_deref(), Some("s1"));
    let log = a.log(Some("neuron:stats")).await.unwrap();
    let statuses: Vec<&str> = log
        .iter()
        .map(|r| r.detail["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        statuses,
        [
            "proposed",
            "proposed",
            "tested",
            "awaiting_operator",
            "active",
            "tested",
            "awaiting_operator",
            "retired",
            "active"
        ]
    );
    assert!(a.calls_of("id1").await.unwrap().is_empty());
    let report = audit::verify(&*b, None).await.unwrap();
    assert!(report.ok(), "{report:?}");
}

async fn only_a_pending_version_is_removed(db: &Db) {
    let a = db.open().await;
    propose(&*a, &meta("a", "a"), "ida").await;
    assert_eq!(
        a.remove_pending_neuron("ida", "t").await.unwrap(),
        Removed::Removed
    );
    assert_eq!(
        a.remove_pending_neuron("ida", "t").await.unwrap(),
        Removed::Absent
    );
    propose(&*a, &meta("b", "b"), "idb").await;
    a.transition_neuron(&to("b", 1, Status::Tested))
        .await
        .unwrap();
    a.transition_neuron(&to("b", 1, Status::Active))
        .await
        .unwrap();
    assert_eq!(
        a.remove_pending_neuron("idb", "t").await.unwrap(),
        Removed::Kept(Status::Active)
    );
    assert!(a.neurons(None).await.unwrap().iter().all(|r| r.name == "b"));
}

suite!(
    versions_are_numbered_by_content_and_live_their_life,
    only_a_pending_version_is_removed,
);
