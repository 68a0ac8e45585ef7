//! An agent turn (scripted model) in which `shell_run` writes and edits
//! files with a pipeline, `fs_edit` changes one of them, a later step fails,
//! and the whole turn is rolled back: the workspace is byte-identical.

use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::scripted::ScriptedProvider;
use capsaga_agent::trace::Outcome;
use capsaga_core::fsm::State;
use capsaga_store::StepStatus;
use capsaga_tests::{TestWorkspace, snapshot};

const POLICY: &str = r#"
[tools.shell_run]
grants = ["fs:write:~/ws/**"]
[tools.fs_edit]
grants = ["fs:write:~/ws/**"]
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_undoes_the_shells_writes() {
    let ws = TestWorkspace::new(&["shell_run", "fs_edit", "fs_write"], POLICY);
    std::fs::write(
        ws.ws().join("log.txt"),
        "ok start\nERROR disk\nok run\nERROR net\nERROR disk\n",
    )
    .unwrap();
    std::fs::write(ws.ws().join("notes.md"), "# Notes\nstatus: draft\n").unwrap();
    std::fs::create_dir(ws.ws().join("old")).unwrap();
    std::fs::write(ws.ws().join("old/a.txt"), "a").unwrap();
    let before = snapshot(&ws.ws());
    let script = r##"{"model": "scripted-test", "turns": [
      {"text": "Summarise the errors with a pipeline.",
       "tool_calls": [{"name": "shell_run", "arguments": {"script":
         "mkdir -p report && grep ERROR log.txt | cut -d' ' -f2 | sort | uniq -c | sort -rn > report/errors.txt && sed -i 's/draft/reviewed/' notes.md && echo \"errors: $(wc -l < report/errors.txt)\" >> notes.md && rm -r old && cat report/errors.txt"}}]},
      {"text": "Add a title.",
       "tool_calls": [{"name": "fs_edit", "arguments": {"path": "${home}/ws/notes.md", "old_string": "# Notes", "new_string": "# Error notes"}}]},
      {"text": "Keep a copy outside the workspace.",
       "tool_calls": [{"name": "fs_write", "arguments": {"path": "${home}/elsewhere.txt", "content": "copy"}}]},
      {"text": "Done."}
    ]}"##;
    let path = ws.root.join("script.json");
    std::fs::write(&path, script).unwrap();
    let provider = ScriptedProvider::from_file(&path, &ws.root).unwrap();
    let host = ws.host().await;
    // The user names the files the agent writes (a path it chose after
    // reading a tool's output would need a human: information flow).
    let task = format!(
        "summarise the log into {0}/ws/notes.md, keep a copy in {0}/elsewhere.txt",
        ws.root.display()
    );
    let tr = run_turn(&host, &provider, &task, &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::RolledBack, "{tr:#?}");
    assert_eq!(tr.saga_state, Some(State::FailedRolledBack));
    assert!(!ws.root.join("elsewhere.txt").exists());
    assert_eq!(
        snapshot(&ws.ws()),
        before,
        "byte-identical after the rollback"
    );
    // The shell and the edit did run and commit, then were compensated.
    let steps = host
        .store
        .steps(tr.saga_id.as_deref().unwrap())
        .await
        .unwrap();
    let summary: Vec<(String, StepStatus)> = steps
        .iter()
        .map(|s| (s.tool_id.clone(), s.status))
        .collect();
    assert_eq!(
        summary,
        [
            ("shell_run".to_owned(), StepStatus::Compensated),
            ("fs_edit".to_owned(), StepStatus::Compensated),
            ("fs_write".to_owned(), StepStatus::Fail),
        ]
    );
    let shell = steps[0].output.as_ref().unwrap();
    assert_eq!(shell["data"]["exit_code"], 0, "{shell}");
    assert_eq!(shell["data"]["stdout"], "      2 disk\n      1 net\n");
    // The dry run logged before it is the pre-image crash recovery would use.
    let pre = steps[0].preimage.as_ref().unwrap();
    assert_eq!(
        pre["data"]["changes"].as_array().unwrap().len(),
        shell["data"]["changes"].as_array().unwrap().len()
    );
}
