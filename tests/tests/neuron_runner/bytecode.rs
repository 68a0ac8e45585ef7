//! The runner's `neuron-compiler` export and the definition's `code`: the
//! host compiles a neuron once, in an instance of its own, and hands the
//! bytecode to later calls. Shown here: compiling runs none of the source;
//! a call with the bytecode answers as one without it (errors and
//! tracebacks included); the runner really runs the bytecode it is handed
//! (which is why the host passes only bytes made from the same source);
//! bytes that do not load, or were made for another name, are ignored and
//! the source is compiled; a source that is not Python does not compile and
//! says where.

use super::{exec, rig};
use capsaga_core::error::ErrorKind;
use capsaga_tests::neuron_rig::neuron;
use serde_json::json;

const ADD: &str = "def execute(args):\n    return args['a'] + args['b']\n";

#[tokio::test]
async fn a_call_with_the_bytecode_answers_as_one_with_the_source() {
    let rig = rig!();
    let code = rig.compile("adder", ADD).await.expect("compiles");
    assert!(!code.is_empty());
    let mut def = neuron("adder", ADD);
    let plain = exec(rig, &def, &[], json!({"a": 2, "b": 3})).await;
    def.code = Some(code);
    let fast = exec(rig, &def, &[], json!({"a": 2, "b": 3})).await;
    assert_eq!(plain.data(), json!(5));
    assert_eq!(fast.data(), json!(5));

    // Errors keep the line and the quoted source line.
    let src = "def execute(args):\n    x = 1\n    return x / 0\n";
    let mut def = neuron("probe", src);
    def.code = Some(rig.compile("probe", src).await.expect("compiles"));
    let e = exec(rig, &def, &[], json!({})).await.err().clone();
    assert_eq!(e.kind, ErrorKind::Unknown, "{e:#?}");
    assert!(e.message.contains("line 3"), "{e:#?}");
    assert!(e.message.contains("return x / 0"), "{e:#?}");
}

#[tokio::test]
async fn compiling_runs_none_of_the_source() {
    let rig = rig!();
    // Top-level code that would spin, allocate or exit if it ran.
    for src in [
        "while True:\n    pass\n",
        "x = bytearray(1 << 40)\n",
        "import sys\nsys.exit(1)\n",
        "import socket\n",
    ] {
        // Had it run, the loop would end at the deadline and the others
        // fail: an error, not bytecode.
        let code = rig.compile("probe", src).await;
        assert!(code.is_ok(), "{src:?}: {code:?}");
    }
}

#[tokio::test]
async fn the_runner_runs_the_bytecode_it_is_handed() {
    let rig = rig!();
    let mut def = neuron("probe", "def execute(args):\n    return 'source'\n");
    def.code = Some(
        rig.compile("probe", "def execute(args):\n    return 'bytecode'\n")
            .await
            .expect("compiles"),
    );
    // The bytes win over the source: the host must (and does) hand a
    // neuron only the bytes compiled from its own pinned source.
    assert_eq!(
        exec(rig, &def, &[], json!({})).await.data(),
        json!("bytecode")
    );
}

#[tokio::test]
async fn bytecode_that_does_not_load_or_names_another_neuron_is_ignored() {
    let rig = rig!();
    let src = "def execute(args):\n    return 'source'\n";
    let other = rig
        .compile("other", "def execute(args):\n    return 'other'\n")
        .await
        .expect("compiles");
    for code in [
        b"not marshal data".to_vec(),
        Vec::new(),
        // A valid marshal of something that is not code: the integer 7.
        vec![0xe9, 7, 0, 0, 0],
        other,
    ] {
        let mut def = neuron("probe", src);
        def.code = Some(code.clone());
        let c = exec(rig, &def, &[], json!({})).await;
        assert_eq!(c.data(), json!("source"), "{code:?}");
    }
}

#[tokio::test]
async fn a_source_that_is_not_python_does_not_compile() {
    let rig = rig!();
    let e = rig
        .compile("probe", "def execute(args):\n    return [1, 2\n")
        .await
        .expect_err("a syntax error");
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e:#?}");
    assert!(e.message.contains("probe is not valid Python"), "{e:#?}");
    assert!(e.details.as_deref().expect("details")["line"].is_u64());
    let e = rig
        .compile("probe", "x = 1\0\n")
        .await
        .expect_err("a NUL byte");
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e:#?}");
    // Nesting that exhausts the parser's wasm stack: the compile traps
    // (`quota-exceeded`), the host then gives calls no bytecode, and each
    // call reports the same as without the cache.
    let deep = format!("x = {}\n", "-".repeat(200_000) + "1");
    let e = rig.compile("probe", &deep).await.expect_err("too deep");
    assert!(
        matches!(e.kind, ErrorKind::InvalidArgs | ErrorKind::QuotaExceeded),
        "{e:#?}"
    );
    let c = exec(rig, &neuron("probe", &deep), &[], json!({})).await;
    assert_eq!(c.err().kind, e.kind, "{:#?}", c.err());
}
