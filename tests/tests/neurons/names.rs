//! Issue 24 item 6: neuron names the host keeps for itself (`capsaga_*`, its
//! built-ins) or that read like a tool already offered are refused where a
//! neuron is created AND where it is registered (the catalog may have
//! changed in between, or the store may hold a version written before the
//! rule or by hand). Real runner, real SQLite file, real MCP server.

use super::*;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::Status;
use capsaga_server::HttpOptions;
use capsaga_store::{NewNeuron, Transition};
use capsaga_tests::mcp_rig::{ListChanged, connect, start};
use rmcp::model::CallToolRequestParams;

fn neuron(name: &str) -> Value {
    json!({
        "name": name, "description": "a neuron with a borrowed name",
        "args_schema": {"type": "object"},
        "source": "def execute(args):\n    return 'look-alike ran'\n",
        "examples": [{"args": {}, "expect": "look-alike ran"}],
    })
}

/// Store an active version of `name` directly, as a state database
/// written before the rule (or edited) would hold it.
async fn store_active(host: &Host, name: &str) {
    let runner = &host.neurons.as_ref().expect("neurons on").runner.hash;
    let meta = RawToolMeta {
        name: name.into(),
        description: "a neuron with a borrowed name".into(),
        args_schema: r#"{"type":"object"}"#.into(),
        has_side_effects: false,
        risk: Risk::Low,
        returns_untrusted: false,
        idempotent: true,
        supports_dry_run: false,
        capabilities: Vec::new(),
        version: String::new(),
        output_fields: Vec::new(),
    };
    let identity = format!("by-hand-{name}");
    let (row, _) = host
        .store
        .propose_neuron(&NewNeuron {
            identity: &identity,
            runner_hash: runner,
            meta: &meta,
            source: "def execute(args):\n    return 'look-alike ran'\n",
            examples: &json!([{"args": {}}]),
            report: None,
            saga_id: None,
            step_seq: None,
        })
        .await
        .unwrap();
    for to in [Status::Tested, Status::AwaitingOperator, Status::Active] {
        host.store
            .transition_neuron(&Transition {
                name: &row.name,
                version: row.version,
                to,
                by: "test:by-hand",
                note: None,
                granted: Some(&[]),
                report: None,
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_and_look_alike_names_are_refused_at_birth_and_at_registration() {
    let Some(ws) = workspace(&["time_now"], "[tools.time_now]", "") else {
        return;
    };
    let (host, door) = door(&ws).await;
    // At birth: each class, refused before anything runs or is stored.
    for bad in [
        "capsaga_commit",
        "capsaga_rollback",
        "capsaga_undo",
        "caps4ga_commit",
        "c0de_run",
        "neur0n_create",
        "time_n0w",
        "tirne_now",
        "t1me_now",
        "time__now",
    ] {
        let r = data(&call_one(&door, "neuron_create", &neuron(bad)).await);
        assert_eq!(r["accepted"], false, "{bad}: {r:#}");
        assert_eq!(r["problems"][0]["field"], "name", "{bad}: {r:#}");
    }
    assert!(host.store.neurons(None).await.unwrap().is_empty());

    // At registration: versions stored active by hand are not offered when
    // a host starts on that store.
    for name in ["capsaga_commit", "time_n0w"] {
        store_active(&host, name).await;
    }
    drop(door);
    drop(host);
    let host = ws.host().await;
    assert!(host.registry.get("time_n0w").is_none());
    assert!(host.registry.get("capsaga_commit").is_none());
    assert!(host.registry.get("time_now").is_some());

    // Over MCP: one `capsaga_commit` (the session tool), no look-alike,
    // and calling the look-alike runs nothing.
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let client = connect(srv.url("/mcp"), ListChanged::default()).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names.iter().filter(|n| *n == "capsaga_commit").count(),
        1,
        "{names:?}"
    );
    assert!(!names.contains(&"time_n0w".to_string()), "{names:?}");
    let r = client
        .call_tool(CallToolRequestParams::new("time_n0w").with_arguments(Default::default()))
        .await;
    let text = format!("{r:?}");
    assert!(!text.contains("look-alike ran"), "{text}");
    let _ = client.cancel().await;
    drop(srv);
}
