use super::fitness::{CallRecord, fitness, fitness_by_day, should_retire};
use super::name::{self, NameError, skeleton};
use super::proposal::{Example, Proposal, judge, same, substitute};
use super::*;
use crate::error::ErrorKind;
use serde_json::json;

fn policy(max_grants: &[&str]) -> NeuronsPolicy {
    NeuronsFile {
        enabled: true,
        max_grants: max_grants.iter().map(|s| s.to_string()).collect(),
        ..NeuronsFile::default()
    }
    .check("/home/op")
    .unwrap()
}

fn proposal() -> Proposal {
    serde_json::from_value(json!({
        "name": "csv_stats",
        "description": "Mean of a CSV column.",
        "args_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "source": "def execute(args):\n    return 1\n",
        "examples": [{"args": {"path": "$SCRATCH/a.csv"}, "expect": 1, "files": {"a.csv": "x\n1\n"}}]
    }))
    .unwrap()
}

#[test]
fn life_moves_only_forward_along_its_edges() {
    use Status::*;
    assert!(Proposed.can_become(Tested));
    assert!(Tested.can_become(AwaitingOperator));
    assert!(AwaitingOperator.can_become(Active));
    assert!(Active.can_become(Retired));
    assert!(AwaitingOperator.can_become(Rejected));
    for (from, to) in [
        (Proposed, Active),
        (Proposed, AwaitingOperator),
        (Retired, Active),
        (Rejected, Active),
        (Active, AwaitingOperator),
        (Rejected, Tested),
    ] {
        assert!(!from.can_become(to), "{from} -> {to}");
    }
    for s in Status::ALL {
        assert_eq!(Status::parse(s.as_str()), Some(s));
    }
}

#[test]
fn identity_pins_source_description_schema_and_runner() {
    let p = proposal();
    let base = identity("r1", &p.source, &p.meta("1"));
    assert_eq!(
        base,
        identity("r1", &p.source, &p.meta("7")),
        "numbering is not content"
    );
    assert_ne!(base, identity("r2", &p.source, &p.meta("1")));
    assert_ne!(
        base,
        identity("r1", "def execute(a): return 2", &p.meta("1"))
    );
    let mut m = p.meta("1");
    m.description.push(' ');
    assert_ne!(base, identity("r1", &p.source, &m));
    let mut m = p.meta("1");
    m.args_schema = r#"{"type":"object"}"#.into();
    assert_ne!(base, identity("r1", &p.source, &m));
    let mut m = p.meta("1");
    m.capabilities.push("fs:read:/d/**".into());
    assert_ne!(base, identity("r1", &p.source, &m));
}

#[test]
fn names_that_read_alike_are_one_name() {
    let taken = ["fs_read", "web_fetch", "time_now"];
    for bad in [
        "fs_read",
        "fsread",
        "fs__read",
        "f5_read",
        "fs_reacl",
        "vveb_fetch",
        "tirne_now",
    ] {
        let r = name::check(bad, taken);
        assert!(matches!(r, Err(NameError::Shadows { .. })), "{bad}: {r:?}");
    }
    assert!(matches!(
        name::check("FS_READ", taken),
        Err(NameError::Rule(_))
    ));
    assert!(matches!(
        name::check("fѕ_read", taken),
        Err(NameError::Rule(_))
    ));
    assert!(matches!(
        name::check("neuron_create", taken),
        Err(NameError::Reserved(_))
    ));
    assert!(matches!(
        name::check("c0de_run", taken),
        Err(NameError::Reserved(_))
    ));
    assert!(name::check("csv_stats", taken).is_ok());
    assert_eq!(skeleton("fѕ_read"), skeleton("fs_read"), "Cyrillic dze");
}

/// Issue 24 item 6, class by class: the host's prefix and built-ins, case,
/// digit/letter swaps, letter pairs, separators, Unicode look-alikes.
#[test]
fn reserved_names_and_every_confusable_class_are_refused() {
    let taken = ["fs_read", "web_fetch", "time_now", "http_request", "llm"];
    // The session tools and anything starting like `capsaga_`.
    for bad in [
        "capsaga_commit",
        "capsaga_rollback",
        "capsaga_undo",
        "capsagacommit",
        "capsaga",
        "c4psaga_commit",
        "caps4ga_x",
        "cap5aga_commit",
        "capsaga_c0mmit",
        "neuron_create",
        "neuroncreate",
        "neur0n_create",
        "code_run",
        "c0de_run",
        "coderun",
        "cocle_run",
    ] {
        let r = name::check(bad, taken);
        assert!(
            matches!(r, Err(NameError::Reserved(_))) || matches!(r, Err(NameError::Shadows { .. })),
            "{bad}: {r:?}"
        );
    }
    assert!(matches!(
        name::check("capsaga_commit", []),
        Err(NameError::Reserved(_))
    ));
    // Case and non-ASCII spellings never pass the rule.
    for bad in [
        "Time_now",
        "TIME_NOW",
        "time_Now",
        "tіme_now",
        "ｔime_now",
        "time\u{200b}_now",
    ] {
        assert!(
            matches!(name::check(bad, taken), Err(NameError::Rule(_))),
            "{bad}"
        );
    }
    // Digit/letter swaps, letter pairs, separators.
    for bad in [
        "f5_read",
        "fs_r3ad",
        "t1me_now",
        "time_n0w",
        "tirne_now",
        "time_n0vv",
        "vveb_fetch",
        "web_fetc",
        "http_reque5t",
        "http_request_",
        "http__request",
        "h77p_request",
        "l1m",
        "fs_reacl",
        "fsread",
    ] {
        let r = name::check(bad, taken);
        if bad == "web_fetc" {
            assert!(r.is_ok(), "a different word is another name: {r:?}");
            continue;
        }
        assert!(matches!(r, Err(NameError::Shadows { .. })), "{bad}: {r:?}");
    }
    // Unicode look-alikes of a taken name fold onto it (the rule refuses
    // them as neuron names; the skeleton catches them in other names).
    for (a, b) in [
        ("fѕ_read", "fs_read"),
        ("ｆｓ_ｒｅａｄ", "fs_read"),
        ("𝐟𝐬_𝐫𝐞𝐚𝐝", "fs_read"),
        ("time_nοw", "time_now"),
    ] {
        assert_eq!(skeleton(a), skeleton(b), "{a}");
    }
    // Names that only share letters are fine.
    for ok in [
        "csv_stats",
        "fs_stats",
        "readme_index",
        "time_zone",
        "web_archive",
    ] {
        assert!(name::check(ok, taken).is_ok(), "{ok}");
    }
}

/// Issue 27: the memory built-ins' names, and their look-alikes.
#[test]
fn memory_names_are_reserved() {
    // The memory built-ins and anything starting like `memory_` (issue
    // 27): reserved even when memory is off and they are not offered.
    for bad in [
        "memory_fetch",
        "memory_propose",
        "memory_search",
        "memory_forget",
        "memoryfetch",
        "mem0ry_fetch",
        "rnemory_fetch",
        "memory_fetch2",
        "memory__propose",
        "memory",
    ] {
        assert!(
            matches!(name::check(bad, []), Err(NameError::Reserved(_))),
            "{bad}: {:?}",
            name::check(bad, [])
        );
    }
    // Names that merely mention memory elsewhere stay free.
    assert!(name::check("recall_notes", []).is_ok());
    assert!(name::check("notes_memory", []).is_ok());
}

#[test]
fn a_good_proposal_has_no_problems() {
    let p = proposal();
    assert_eq!(p.check(&policy(&[]), ["fs_read"]), vec![]);
}

#[test]
fn every_problem_is_reported_with_a_hint() {
    let mut p = proposal();
    p.name = "fs_reaD".into();
    p.args_schema = json!({"type": "object", "properties": {"n": {"type": "nonsense"}}});
    p.capabilities = vec!["fs:read:/etc/**".into(), "sockets:all".into()];
    p.examples.push(Example {
        args: json!({}),
        expect: Some(json!(1)),
        expect_error: Some("no-such-kind".into()),
        files: [("../x".to_string(), String::new())].into(),
    });
    let problems = p.check(&policy(&["fs:read:~/data/**"]), ["fs_read"]);
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert!(fields.contains(&"name"), "{problems:#?}");
    assert!(fields.contains(&"meta"), "{problems:#?}");
    assert_eq!(
        fields.iter().filter(|f| **f == "capabilities").count(),
        2,
        "{problems:#?}"
    );
    assert!(fields.contains(&"examples[1]"), "{problems:#?}");
    assert!(problems.iter().all(|p| !p.llm_hint.is_empty()));
}

#[test]
fn requests_within_the_ceiling_pass_and_beyond_fail() {
    let mut p = proposal();
    p.capabilities = vec!["fs:read:/home/op/data/sub/**".into()];
    assert!(p.check(&policy(&["fs:read:~/data/**"]), []).is_empty());
    p.capabilities = vec!["fs:write:/home/op/data/**".into()];
    assert_eq!(p.check(&policy(&["fs:read:~/data/**"]), []).len(), 1);
    p.capabilities = vec!["net:https:evil.example".into()];
    assert_eq!(p.check(&policy(&[]), []).len(), 1);
}

#[test]
fn side_effects_without_dry_run_are_high_risk() {
    let mut p = proposal();
    p.has_side_effects = true;
    assert_eq!(p.meta("1").risk, crate::meta::Risk::High);
    p.supports_dry_run = true;
    assert_eq!(p.meta("1").risk, crate::meta::Risk::Low);
}

#[test]
fn examples_are_judged_by_data_or_error_kind() {
    let ex = |expect: Option<serde_json::Value>, err: Option<&str>| Example {
        args: json!({}),
        expect,
        expect_error: err.map(str::to_string),
        files: Default::default(),
    };
    assert!(judge(
        &ex(Some(json!({"m": 2.0})), None),
        Ok(&json!({"m": 2}))
    ));
    assert!(judge(&ex(Some(json!(0.1 + 0.2)), None), Ok(&json!(0.3))));
    assert!(!judge(
        &ex(Some(json!({"m": 2})), None),
        Ok(&json!({"m": 3}))
    ));
    assert!(judge(&ex(None, None), Ok(&json!(null))));
    assert!(judge(
        &ex(None, Some("invalid-args")),
        Err(ErrorKind::InvalidArgs)
    ));
    assert!(judge(
        &ex(None, Some("invalid_args")),
        Err(ErrorKind::InvalidArgs)
    ));
    assert!(!judge(
        &ex(None, Some("not-found")),
        Err(ErrorKind::InvalidArgs)
    ));
    assert!(!judge(&ex(None, None), Err(ErrorKind::Unknown)));
    assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    assert_eq!(
        substitute(&json!({"p": "$SCRATCH/a.csv", "n": [1, "$SCRATCH"]}), "/s"),
        json!({"p": "/s/a.csv", "n": [1, "/s"]})
    );
}

#[test]
fn fitness_counts_rates_and_latency() {
    let rec = |ok: bool, kind: Option<&str>, ms: u64| CallRecord {
        ok,
        error_kind: kind.map(str::to_string),
        latency_ms: Some(ms),
        at: None,
    };
    let calls: Vec<CallRecord> = (1..=20)
        .map(|i| rec(i % 4 != 0, (i % 4 == 0).then_some("unknown"), i))
        .collect();
    let f = fitness(&calls);
    assert_eq!((f.calls, f.ok), (20, 15));
    assert_eq!(f.success_rate, Some(0.75));
    assert_eq!(f.error_kinds["unknown"], 5);
    assert_eq!((f.p50_ms, f.p95_ms), (Some(10), Some(19)));
    let below = RetireBelow {
        success_rate: 0.8,
        min_calls: 20,
    };
    assert!(should_retire(&f, &below));
    assert!(
        !should_retire(&fitness(&calls[..10]), &below),
        "too few calls"
    );
    assert_eq!(fitness(&[]).success_rate, None);
}

#[test]
fn section_checks_grants_and_thresholds() {
    let p = policy(&["fs:read:~/data/**"]);
    assert_eq!(p.max_grants[0].to_string(), "fs:read:/home/op/data/**");
    let bad = NeuronsFile {
        max_grants: vec!["fs:read:/x/*.md".into()],
        ..NeuronsFile::default()
    };
    assert!(bad.check("/h").is_err());
    let bad = NeuronsFile {
        retire_below: Some(RetireBelow {
            success_rate: 1.5,
            min_calls: 1,
        }),
        ..NeuronsFile::default()
    };
    assert!(bad.check("/h").is_err());
}

#[test]
fn seed_files_beyond_a_scratch_directory_are_refused_before_anything_is_written() {
    use crate::neuron::code_run::MAX_SCRATCH_ENTRIES;
    let mut p = proposal();
    let seed = |n: usize| -> std::collections::BTreeMap<String, String> {
        (0..n).map(|i| (format!("s{i}.txt"), "x".into())).collect()
    };
    p.examples[0].files = seed(MAX_SCRATCH_ENTRIES);
    assert!(p.check(&policy(&[]), ["fs_read"]).is_empty());
    p.examples[0].files = seed(MAX_SCRATCH_ENTRIES + 1);
    let problems = p.check(&policy(&[]), ["fs_read"]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].field, "examples[0]");
    assert!(problems[0].message.contains("seed files"), "{problems:#?}");
}

#[test]
fn fitness_is_folded_per_day() {
    let rec = |ok: bool, at: Option<&str>, ms: u64| CallRecord {
        ok,
        error_kind: None,
        latency_ms: Some(ms),
        at: at.map(str::to_string),
    };
    let calls = [
        rec(true, Some("2026-01-02T10:00:00Z"), 10),
        rec(false, Some("2026-01-01T23:59:59Z"), 30),
        rec(true, Some("2026-01-02T11:00:00Z"), 20),
        rec(true, None, 5),
        rec(true, Some("<svg>"), 5),
    ];
    let days = fitness_by_day(&calls);
    assert_eq!(days.len(), 2);
    assert_eq!(days[0].day, "2026-01-01");
    assert_eq!(days[0].fitness.success_rate, Some(0.0));
    assert_eq!(days[1].day, "2026-01-02");
    assert_eq!(
        (days[1].fitness.calls, days[1].fitness.p50_ms),
        (2, Some(10))
    );
}
