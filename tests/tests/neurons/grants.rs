//! The operator approves a neuron version with a subset of what it
//! requested (issue 29): what is withheld does not exist inside its
//! sandbox, and nothing beyond the request can be granted.

use super::*;
use capsaga_door::neurons::operator;

/// Reads `src`, and copies it to `dst` when given.
const COPY: &str = r#"def execute(args):
    with open(args["src"]) as f:
        text = f.read()
    if "dst" in args:
        with open(args["dst"], "w") as f:
            f.write(text)
    return {"text": text}

def dry_run(args):
    return {"would": "read " + args["src"]}
"#;

fn proposal(caps: Value) -> Value {
    json!({
        "name": "copy_file",
        "description": "Reads a file and optionally copies it (test neuron).",
        "args_schema": {
            "type": "object", "additionalProperties": false, "required": ["src"],
            "properties": {"src": {"type": "string"}, "dst": {"type": "string"}}
        },
        "capabilities": caps,
        "has_side_effects": true,
        "supports_dry_run": true,
        "risk": "medium",
        "source": COPY,
        "examples": [{"args": {"src": "$SCRATCH/a.txt", "dst": "$SCRATCH/b.txt"},
            "files": {"a.txt": "A"}, "expect": {"text": "A"}}],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_neuron_approved_with_a_subset_runs_without_what_was_withheld() {
    let Some(ws) = workspace(&[], "", "max_grants = [\"fs:write:~/ws/**\"]") else {
        return;
    };
    std::fs::create_dir_all(ws.ws().join("out")).unwrap();
    std::fs::write(ws.ws().join("in.txt"), "data").unwrap();
    let (host, door) = door(&ws).await;
    let read = format!("fs:read:{}/**", ws.ws().display());
    let write = format!("fs:write:{}/out/**", ws.ws().display());
    let out = call_one(
        &door,
        "neuron_create",
        &proposal(json!([read.clone(), write.clone()])),
    )
    .await;
    let report = data(&out);
    assert_eq!(report["passed"], true, "{report:#}");
    let row = host.store.neuron("copy_file", None).await.unwrap().unwrap();
    let home = host.config.home.to_string_lossy().into_owned();

    // Without `Subset` a forgotten grant is an error, naming what is left.
    let only_read = [read.clone()];
    let err = operator::approve(&*host.store, &home, &row, &only_read, All, "t", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&write) && err.contains("--partial"), "{err}");
    // A subset never widens: a grant beyond the request is still refused.
    let beyond = [read.clone(), format!("fs:write:{}/**", ws.ws().display())];
    let narrowed = operator::check_grants(&row, &beyond, &home, Subset).unwrap();
    assert_eq!(
        narrowed,
        [read.clone(), write.clone()],
        "narrowed to the request"
    );
    let elsewhere = ["fs:read:/etc/**".to_string()];
    assert!(
        operator::approve(&*host.store, &home, &row, &elsewhere, Subset, "t", None)
            .await
            .is_err()
    );

    let active = operator::approve(&*host.store, &home, &row, &only_read, Subset, "t", None)
        .await
        .unwrap();
    assert_eq!(active.granted, std::slice::from_ref(&read));
    assert_eq!(operator::withheld(&active), std::slice::from_ref(&write));
    drop(door);
    drop(host);

    // The next host loads it with the read grant only.
    let (host, door) = super::door(&ws).await;
    let args = json!({"src": ws.ws_path("in.txt")});
    assert_eq!(
        data(&call_one(&door, "copy_file", &args).await)["text"],
        "data"
    );
    let args = json!({"src": ws.ws_path("in.txt"), "dst": ws.ws_path("out/copy.txt")});
    let out = call_one(&door, "copy_file", &args).await;
    assert!(
        !matches!(out.outcome, Outcome::Committed { .. }),
        "the withheld write ran: {:#?}",
        out.outcome
    );
    assert!(!ws.ws().join("out/copy.txt").exists());

    // The console's fitness chart of this version: both calls, one day,
    // half of them successful.
    let days = capsaga_server::console_data::fitness(&*host.store, &active.identity)
        .await
        .unwrap();
    assert_eq!(days.len(), 1, "{days:?}");
    assert_eq!((days[0].calls, days[0].ok), (2, 1), "{days:?}");
    assert_eq!(days[0].success_rate, Some(0.5));
    assert!(days[0].p50_ms.is_some());
}
