//! Hostile submissions to `neuron_create`: refused before running (a name
//! confusable with a tool, capabilities beyond `max_grants`, a schema that
//! does not compile), or run as examples in a runner with no grants and
//! contained with a clear tool error while the host keeps serving.

use super::*;

fn neuron(name: &str, source: &str, examples: Value) -> Value {
    json!({
        "name": name, "description": "hostile test neuron",
        "args_schema": {"type": "object"},
        "source": source, "examples": examples,
    })
}

fn kinds(report: &Value) -> Vec<String> {
    report["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["got"]["error"]["kind"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("data {}", e["got"]["data"]))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_before_anything_runs() {
    let Some(ws) = workspace(
        &["fs_read"],
        "[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]",
        "max_grants = [\"fs:read:~/ws/**\"]",
    ) else {
        return;
    };
    let (host, door) = door(&ws).await;
    let ok = "def execute(args):\n    return 1\n";
    let ex = json!([{"args": {}, "expect": 1}]);
    for (name, field) in [
        ("fs_reacl", "name"),
        ("f5_read", "name"),
        ("fsread", "name"),
        ("neuron_create", "name"),
        ("capsaga_commit", "name"),
        ("c0de_run", "name"),
        ("fs_r3ad", "name"),
    ] {
        let r = data(&call_one(&door, "neuron_create", &neuron(name, ok, ex.clone())).await);
        assert_eq!(r["accepted"], false, "{name}: {r:#}");
        assert_eq!(r["problems"][0]["field"], field, "{r:#}");
    }
    let mut p = neuron("grabby", ok, ex.clone());
    p["capabilities"] = json!([
        "fs:read:/etc/**",
        "net:https:evil.example",
        "fs:write:~/ws/**"
    ]);
    let r = data(&call_one(&door, "neuron_create", &p).await);
    assert_eq!(r["problems"].as_array().unwrap().len(), 3, "{r:#}");
    let mut p = neuron("bad_schema", ok, ex.clone());
    p["args_schema"] = json!({"type": "object", "properties": {"x": {"type": 12}}});
    let r = data(&call_one(&door, "neuron_create", &p).await);
    assert_eq!(r["accepted"], false, "{r:#}");
    assert!(
        host.store.neurons(None).await.unwrap().is_empty(),
        "nothing stored"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_sources_fail_their_examples_with_clear_errors() {
    let Some(ws) = workspace(
        &[],
        // Fuel out of reach so the spinning source meets the deadline, not the
        // fuel cap, however fast the machine (toml integers are i64).
        "[limits]\ndeadline_ms = 1500\nmemory_bytes = 134217728\nfuel = 9223372036854775807",
        "",
    ) else {
        return;
    };
    let (host, door) = door(&ws).await;
    let cases: &[(&str, &str, &str)] = &[
        (
            "spin",
            "def execute(args):\n    while True:\n        pass\n",
            "timeout",
        ),
        (
            "bomb",
            "def execute(args):\n    x = []\n    while True:\n        x.append(bytearray(1 << 20))\n",
            "quota-exceeded",
        ),
        (
            "deep",
            "def f(n):\n    return f(n + 1)\ndef execute(args):\n    return f(0)\n",
            "quota-exceeded",
        ),
        (
            "flood",
            "def execute(args):\n    return 'x' * (100 * 1024 * 1024)\n",
            "quota-exceeded",
        ),
        (
            "passwd",
            "def execute(args):\n    return open('/etc/passwd').read()\n",
            "permission-denied",
        ),
        (
            "escape",
            "def execute(args):\n    open('/tmp/capsaga-neuron-escape', 'w').write('x')\n    return 1\n",
            "permission-denied",
        ),
        (
            "sock",
            "import socket\ndef execute(args):\n    return 1\n",
            "unsupported",
        ),
        (
            "proc",
            "import subprocess\ndef execute(args):\n    return 1\n",
            "unsupported",
        ),
        ("notpy", "fn main() { println!(\"hi\"); }\n", "invalid-args"),
    ];
    for (name, source, kind) in cases {
        let r = data(
            &call_one(
                &door,
                "neuron_create",
                &neuron(name, source, json!([{"args": {}, "expect": 1}])),
            )
            .await,
        );
        assert_eq!(r["passed"], false, "{name}: {r:#}");
        assert_eq!(kinds(&r), [kind.to_string()], "{name}: {r:#}");
        assert!(
            !r["examples"][0]["got"]["error"]["llm_hint"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        );
    }
    assert!(!std::path::Path::new("/tmp/capsaga-neuron-escape").exists());
    // The environment is empty: nothing of the host leaks.
    let env = "import os\ndef execute(args):\n    return sorted(os.environ.keys())\n";
    let r = data(
        &call_one(
            &door,
            "neuron_create",
            &neuron("env_peek", env, json!([{"args": {}, "expect": []}])),
        )
        .await,
    );
    assert!(r["passed"] == true || kinds(&r) == ["unsupported"], "{r:#}");
    // Still serving.
    let fine = data(
        &call_one(
            &door,
            "neuron_create",
            &neuron(
                "fine",
                "def execute(args):\n    return 1\n",
                json!([{"args": {}, "expect": 1}]),
            ),
        )
        .await,
    );
    assert_eq!(fine["passed"], true, "{fine:#}");
    assert_eq!(
        host.store.neurons(None).await.unwrap().len(),
        cases.len() + 2
    );
}

/// An example that floods its scratch directory with files is stopped while
/// it runs (WASI has no disk quota: the host measures). The example's seed
/// files fill the directory to just under the entry limit, so the flood
/// crosses it within its first few files however slow the machine (issue 32:
/// on a loaded machine 1,024 files took longer than the examples' 5 s
/// deadline); a flood the host did not stop would run into that deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_scratch_flood_is_stopped_by_the_quota() {
    let Some(ws) = workspace(
        &[],
        "[limits]\ndeadline_ms = 5000\nmemory_bytes = 134217728\nfuel = 9223372036854775807",
        "",
    ) else {
        return;
    };
    let (host, door) = door(&ws).await;
    let flood = "import os\ndef execute(args):\n    for i in range(100000):\n        open(os.path.join(args['dir'], f'{i}.txt'), 'w').close()\n    return 1\n";
    let below = capsaga_core::neuron::code_run::MAX_SCRATCH_ENTRIES - 8;
    let seeds: serde_json::Map<String, Value> = (0..below)
        .map(|i| (format!("seed{i}.txt"), json!("x")))
        .collect();
    let ex = json!([{"args": {"dir": "$SCRATCH"}, "files": seeds, "expect": 1}]);
    let r = data(&call_one(&door, "neuron_create", &neuron("inode_flood", flood, ex)).await);
    assert_eq!(kinds(&r), ["quota-exceeded"], "{r:#}");
    // Stopped while it ran, not found over the limit once the deadline had
    // stopped it (both are quota-exceeded).
    let wall = r["examples"][0]["wall_ms"].as_u64().unwrap_or(u64::MAX);
    assert!(
        wall < 5_000,
        "stopped by the deadline, not the quota: {r:#}"
    );
    let scratch = host.config.state_dir.join("neuron-scratch");
    let left = std::fs::read_dir(&scratch).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "the example's scratch directory is removed");
}
