//! The other base tools of issue 12 through the real sandbox: `fs_edit`
//! (unique search-and-replace, diff in the dry run, undone by the rollback),
//! `fs_glob` (bounded, confined, links not followed) and `web_search`
//! (a SearXNG-style JSON backend on 127.0.0.1 over TLS, chosen by the
//! operator through `[env]`, results wrapped as untrusted).

use capsaga_core::error::ErrorKind;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_store::Scope;
use capsaga_tests::http_server::TestServer;
use capsaga_tests::{TestWorkspace, snapshot};
use serde_json::{Value, json};
use std::sync::Arc;

/// One call through the dispatch door as a one-step saga, kept (finished).
async fn step(host: &Arc<Host>, tool: &str, args: Value) -> Outcome {
    let door = Dispatcher::new(host.clone());
    let mut saga = door.start(Scope::Call, "test", None).await.unwrap();
    let out = door
        .submit(&mut saga, Call::new(tool, Args::Value(&args)))
        .await
        .unwrap()
        .outcome;
    let _ = door.finish(&mut saga).await;
    out
}

fn data(out: &Outcome) -> &Value {
    match out {
        Outcome::Committed { output, .. } => &output.data,
        other => panic!("expected success, got {other:?}"),
    }
}

fn error_kind(out: &Outcome) -> ErrorKind {
    match out {
        Outcome::ReadFailed { error, .. } | Outcome::Failed { error, .. } => error.kind,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fs_edit_replaces_once_and_is_rolled_back() {
    let ws = TestWorkspace::new(
        &["fs_edit"],
        "[tools.fs_edit]\ngrants = [\"fs:write:~/ws/**\"]\n",
    );
    let f = ws.ws_path("main.rs");
    std::fs::write(&f, "fn a() {}\nfn b() {}\nfn b() {}\n").unwrap();
    std::fs::write(ws.root.join("outside.rs"), "fn a() {}").unwrap();
    std::os::unix::fs::symlink(ws.root.join("outside.rs"), ws.ws().join("link.rs")).unwrap();
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let edit = |path: &str, old: &str, new: &str| json!({"path": path, "old_string": old, "new_string": new});
    // Not unique, not found, outside: refused, nothing written.
    assert_eq!(
        error_kind(&step(&host, "fs_edit", edit(&f, "fn b() {}", "x")).await),
        ErrorKind::InvalidArgs
    );
    assert_eq!(
        error_kind(&step(&host, "fs_edit", edit(&f, "fn z", "x")).await),
        ErrorKind::NotFound
    );
    let outside = ws.root.join("outside.rs").display().to_string();
    assert_eq!(
        error_kind(&step(&host, "fs_edit", edit(&outside, "fn a", "x")).await),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        error_kind(&step(&host, "fs_edit", edit(&ws.ws_path("link.rs"), "fn a", "x")).await),
        ErrorKind::PermissionDenied
    );
    assert_eq!(snapshot(&ws.ws()), before);
    assert_eq!(
        std::fs::read_to_string(ws.root.join("outside.rs")).unwrap(),
        "fn a() {}"
    );

    let door = Dispatcher::new(host.clone());
    let mut saga = door.start(Scope::Call, "test", None).await.unwrap();
    let args = edit(&f, "fn a() {}", "fn alpha() {}");
    let out = door
        .submit(&mut saga, Call::new("fs_edit", Args::Value(&args)))
        .await
        .unwrap()
        .outcome;
    let d = data(&out);
    assert_eq!(d["replacements"], 1);
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .contains("-fn a() {}\n+fn alpha() {}"),
        "{d}"
    );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn alpha() {}\nfn b() {}\nfn b() {}\n"
    );
    let report = door.abort(&mut saga).await.unwrap();
    assert!(report.all_compensated(), "{report:?}");
    assert_eq!(snapshot(&ws.ws()), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn fs_glob_lists_bounded_and_confined() {
    let ws = TestWorkspace::new(
        &["fs_glob"],
        "[tools.fs_glob]\ngrants = [\"fs:read:~/ws/**\"]\n",
    );
    for f in ["a.md", "b.txt", "docs/c.md", "docs/deep/d.md"] {
        let p = ws.ws().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }
    std::fs::write(ws.root.join("outside.md"), "x").unwrap();
    std::os::unix::fs::symlink(&ws.root, ws.ws().join("up")).unwrap();
    let host = ws.host().await;
    let ws_s = ws.ws().display().to_string();
    let out = step(
        &host,
        "fs_glob",
        json!({"pattern": "**/*.md", "root": ws_s}),
    )
    .await;
    let paths: Vec<String> = data(&out)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            format!("{ws_s}/a.md"),
            format!("{ws_s}/docs/c.md"),
            format!("{ws_s}/docs/deep/d.md")
        ]
    );
    let out = step(
        &host,
        "fs_glob",
        json!({"pattern": "**/*", "root": ws_s, "max_results": 2}),
    )
    .await;
    assert_eq!(data(&out)["truncated"], true);
    let root = ws.root.display().to_string();
    let out = step(&host, "fs_glob", json!({"pattern": "*.md", "root": root})).await;
    assert_eq!(error_kind(&out), ErrorKind::PermissionDenied);
    let out = step(
        &host,
        "fs_glob",
        json!({"pattern": "../*.md", "root": ws_s}),
    )
    .await;
    assert_eq!(error_kind(&out), ErrorKind::InvalidArgs);
}

#[tokio::test(flavor = "multi_thread")]
async fn web_search_queries_the_operators_backend() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let policy = format!(
        "[tools.web_search]\ngrants = [\"net:https:127.0.0.1:{tp}\", \"env:WEB_SEARCH_URL\"]\n\
         [env]\nWEB_SEARCH_URL = \"{}\"\n[net]\nca_files = [\"ca.pem\"]\n",
        srv.tls_url("/search")
    );
    let ws = TestWorkspace::new(&["web_search"], &policy);
    std::fs::write(ws.root.join("ca.pem"), &srv.ca_pem).unwrap();
    let host = ws.host().await;
    let out = step(
        &host,
        "web_search",
        json!({"query": "wasm components", "max_results": 2, "time_range": "year"}),
    )
    .await;
    let d = data(&out);
    let results = d["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["title"], "About wasm components");
    assert_eq!(results[0]["url"], "https://docs.example/wasm");
    assert!(results[1]["snippet"].as_str().unwrap().chars().count() <= 401);
    assert_eq!(d["suggestions"], json!(["wasm components tutorial"]));
    let seen = srv.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].tls);
    assert_eq!(
        seen[0].path,
        "/search?q=wasm+components&format=json&pageno=1&time_range=year"
    );
    // Without the operator's backend the tool is not callable at all.
    ws.write_policy(&format!(
        "[tools.web_search]\ngrants = [\"net:https:127.0.0.1:{tp}\"]\n[net]\nca_files = [\"ca.pem\"]\n"
    ));
    let host = ws.host().await;
    match step(&host, "web_search", json!({"query": "x"})).await {
        Outcome::Refused { error, .. } => {
            assert!(
                error.message.contains("env:WEB_SEARCH_URL"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.count(), 1);
}

/// The first-party components declare their outputs' field labels (issue
/// 47), read by the host at load from the real components' `output-fields`
/// export: a few paths of each, trusted or untrusted as
/// docs/information-flow.md's table says.
#[tokio::test(flavor = "multi_thread")]
async fn first_party_tools_declare_their_field_labels() {
    use capsaga_flow::Integrity::{Trusted, Untrusted};
    let expected = [
        ("fs_read", "/size_bytes", Trusted),
        ("fs_read", "/content", Untrusted),
        ("fs_list", "/entries/*/name", Trusted),
        ("fs_list", "/path", Untrusted),
        ("fs_glob", "/matches/*/path", Trusted),
        ("fs_glob", "/pattern", Untrusted),
        ("fs_write", "/written_sha256", Trusted),
        ("fs_write", "/path", Untrusted),
        ("fs_write", "/previous/content", Untrusted),
        ("fs_edit", "/replacements", Trusted),
        ("fs_edit", "/diff", Untrusted),
        ("web_fetch", "/bytes", Trusted),
        ("web_fetch", "/text", Untrusted),
        ("web_search", "/results", Untrusted),
        ("http_request", "/body", Untrusted),
        ("shell_run", "/exit_code", Trusted),
        ("shell_run", "/stdout", Untrusted),
    ];
    let mut tools: Vec<&str> = expected.iter().map(|e| e.0).collect();
    tools.dedup();
    let ws = TestWorkspace::new(&tools, "");
    let host = ws.host().await;
    for (tool, path, integrity) in expected {
        let t = host
            .registry
            .get(tool)
            .unwrap_or_else(|| panic!("{tool} not loaded"));
        let found = t
            .meta
            .field_labels
            .fields
            .iter()
            .find(|(p, _)| p.to_string() == path)
            .map(|(_, i)| *i);
        assert_eq!(
            found,
            Some(integrity),
            "{tool} {path}: {:?}",
            t.meta.field_labels
        );
    }
}
