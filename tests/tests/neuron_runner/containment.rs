//! Hostile neuron sources, each contained: deadline, memory, recursion, output, files, sockets, processes, environment, imports.

use super::*;

#[tokio::test]
async fn infinite_loop_stops_at_the_deadline() {
    let rig = rig!();
    // Fuel out of reach, so only the deadline can stop the loop: with the
    // default fuel a fast machine runs out of fuel first (quota-exceeded).
    let limits = Limits {
        deadline_ms: 1_500,
        fuel: u64::MAX,
        ..Limits::DEFAULT
    };
    let def = neuron(
        "spin",
        "def execute(args):\n    while True:\n        pass\n",
    );
    let c = rig.call(&def, &Op::Execute, &[], &limits, "{}").await;
    // Stopped by its own 1500 ms deadline (the guest's epoch interrupt
    // names it; on a starved machine the rig's fallback timer, 250 ms
    // later, says "host side"), not by a default limit.
    let e = contained(rig, &c, ErrorKind::Timeout).await;
    assert!(
        e.message.contains("deadline of 1500 ms") || e.message.contains("host side"),
        "{e:#?}"
    );
    // A loop at the top level of the source, too.
    let def = neuron("spin_top", "while True:\n    pass\n");
    let c = rig.call(&def, &Op::Execute, &[], &limits, "{}").await;
    contained(rig, &c, ErrorKind::Timeout).await;
}

#[tokio::test]
async fn memory_bomb_hits_the_memory_cap() {
    let rig = rig!();
    let limits = Limits {
        memory_bytes: 128 * 1024 * 1024,
        ..Limits::DEFAULT
    };
    let src = "def execute(args):\n    hoard = []\n    while True:\n        \
               hoard.append(bytearray(8 * 1024 * 1024))\n";
    let c = rig
        .call(&neuron("bomb", src), &Op::Execute, &[], &limits, "{}")
        .await;
    let e = contained(rig, &c, ErrorKind::QuotaExceeded).await;
    assert!(e.message.contains("memory"), "{e:#?}");
    // One huge allocation at once (1.5 GB, within wasm32's index range).
    let c = exec_src(
        rig,
        "def execute(args):\n    return len(bytearray(1_500_000_000))\n",
    )
    .await;
    contained(rig, &c, ErrorKind::QuotaExceeded).await;
}

#[tokio::test]
async fn deep_recursion_is_refused() {
    let rig = rig!();
    let c = exec_src(
        rig,
        "def f(n):\n    return f(n + 1)\ndef execute(args):\n    return f(0)\n",
    )
    .await;
    let e = contained(rig, &c, ErrorKind::QuotaExceeded).await;
    assert!(e.message.contains("recursed too deeply"), "{e:#?}");
    // Recursion inside C code (the JSON encoder on a deeply nested list).
    let src = "import json\ndef execute(args):\n    v = []\n    for _ in range(100000):\n        \
               v = [v]\n    return len(json.dumps(v))\n";
    let c = exec_src(rig, src).await;
    contained(rig, &c, ErrorKind::QuotaExceeded).await;
    // The recursion limit lifted by the neuron: the sandbox's caps still hold.
    let src = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\n\
               def execute(args):\n    return f(0)\n";
    let c = exec_src(rig, src).await;
    let e = c.err().clone();
    assert!(
        matches!(e.kind, ErrorKind::QuotaExceeded | ErrorKind::Timeout),
        "{e:#?}"
    );
    contained(rig, &c, e.kind).await;
}

#[tokio::test]
async fn hundred_megabytes_of_output_are_capped() {
    let rig = rig!();
    let c = exec_src(
        rig,
        "def execute(args):\n    return 'x' * (100 * 1024 * 1024)\n",
    )
    .await;
    let e = contained(rig, &c, ErrorKind::QuotaExceeded).await;
    assert!(
        e.message.contains("cap") || e.message.contains("memory"),
        "{e:#?}"
    );
    let c = exec_src(
        rig,
        "def execute(args):\n    print('y' * (100 * 1024 * 1024))\n",
    )
    .await;
    let e = contained(rig, &c, ErrorKind::QuotaExceeded).await;
    assert!(e.message.contains("printed more than"), "{e:#?}");
    // Many small prints, caught by the neuron: still refused at the end.
    let mut def = neuron(
        "chatty",
        "def execute(args):\n    try:\n        while True:\n            print('line')\n    \
         except Exception:\n        return 'swallowed'\n",
    );
    def.max_output_bytes = 64 * 1024;
    let c = exec(rig, &def, &[], json!({})).await;
    contained(rig, &c, ErrorKind::QuotaExceeded).await;
    // Writing to the raw stdout descriptor: the host keeps a bounded capture.
    let c = exec_src(
        rig,
        "import os\ndef execute(args):\n    os.write(1, b'z' * (100 * 1024 * 1024))\n    return 1\n",
    )
    .await;
    assert!(
        c.stdio.len() < 64 * 1024,
        "{} bytes captured",
        c.stdio.len()
    );
}

#[tokio::test]
async fn etc_passwd_does_not_exist() {
    let rig = rig!();
    let c = exec_src(
        rig,
        "def execute(args):\n    return open('/etc/passwd').read()\n",
    )
    .await;
    let e = contained(rig, &c, ErrorKind::PermissionDenied).await;
    assert!(e.message.contains("/etc/passwd"), "{e:#?}");
    assert!(!format!("{e:?}").contains("root:"), "{e:#?}");
    let c = exec_src(
        rig,
        "import os\ndef execute(args):\n    return os.listdir('/')\n",
    )
    .await;
    assert!(c.result.is_err() || c.data() == json!([]), "{:?}", c.result);
}

#[tokio::test]
async fn writes_outside_the_scratch_directory_are_refused() {
    let rig = rig!();
    let (_d, root) = tempdir();
    let scratch = root.join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    std::os::unix::fs::symlink(&root, scratch.join("up")).expect("symlink");
    let grants = caps(&[write_grant(&scratch)]);
    let def = neuron(
        "writer",
        "def execute(args):\n    with open(args['path'], 'w') as f:\n        f.write('escaped')\n    return 'ok'\n",
    );
    let s = scratch.display().to_string();
    for path in [
        format!("{s}/../outside.txt"),
        root.join("outside.txt").display().to_string(),
        format!("{s}/up/outside.txt"),
        "/tmp/capsaga-neuron-escape.txt".to_string(),
        "outside.txt".to_string(),
    ] {
        let c = exec(rig, &def, &grants, json!({ "path": path })).await;
        contained(rig, &c, ErrorKind::PermissionDenied).await;
    }
    assert!(!root.join("outside.txt").exists());
    assert!(!Path::new("/tmp/capsaga-neuron-escape.txt").exists());
    // Inside the scratch directory it works.
    let c = exec(
        rig,
        &def,
        &grants,
        json!({ "path": format!("{s}/inside.txt") }),
    )
    .await;
    assert_eq!(c.data(), json!("ok"));
    assert_eq!(
        std::fs::read_to_string(scratch.join("inside.txt")).expect("inside"),
        "escaped"
    );
}

#[tokio::test]
async fn no_sockets_and_no_processes() {
    let rig = rig!();
    for module in [
        "socket",
        "_socket",
        "ssl",
        "select",
        "asyncio",
        "subprocess",
        "ctypes",
        "multiprocessing",
    ] {
        let c = exec_src(
            rig,
            &format!("import {module}\ndef execute(args):\n    return 1\n"),
        )
        .await;
        let e = contained(rig, &c, ErrorKind::Unsupported).await;
        assert!(e.message.contains("no sockets"), "{module}: {e:#?}");
    }
    // Through the import machinery by other names.
    let c = exec_src(
        rig,
        "def execute(args):\n    return str(__import__('socket'))\n",
    )
    .await;
    contained(rig, &c, ErrorKind::Unsupported).await;
    // Process functions of os: absent or refused.
    for call in [
        "os.system('id')",
        "os.popen('id').read()",
        "os.fork()",
        "os.execv('/bin/sh', ['sh'])",
    ] {
        let c = exec_src(
            rig,
            &format!("import os\ndef execute(args):\n    return {call}\n"),
        )
        .await;
        assert!(c.result.is_err(), "{call}: {:?}", c.result);
        let e = c.err().clone();
        contained(rig, &c, e.kind).await;
    }
}

#[tokio::test]
async fn the_host_environment_is_not_visible() {
    let rig = rig!();
    assert!(std::env::var_os("PATH").is_some());
    let src = "import os\ndef execute(args):\n    return {'env': dict(os.environ), 'path': os.getenv('PATH')}\n";
    let c = exec_src(rig, src).await;
    assert_eq!(c.data(), json!({"env": {}, "path": null}));
    // An env: grant shows exactly the operator's value, in this call only.
    let policy =
        PolicyFile::parse("[env]\nLANG = \"C.UTF-8\"\n[tools.probe]\ngrants = [\"env:LANG\"]\n")
            .expect("policy")
            .check("/")
            .expect("checked");
    let factors = Factors::load(&policy, Path::new("/")).expect("factors");
    let grants = caps(&["env:LANG".to_string()]);
    let c = rig
        .call_with(
            &neuron("probe", src),
            &Op::Execute,
            &grants,
            &Limits::DEFAULT,
            "{}",
            &factors,
        )
        .await;
    assert_eq!(c.data(), json!({"env": {"LANG": "C.UTF-8"}, "path": null}));
    let c = exec_src(rig, src).await;
    assert_eq!(c.data(), json!({"env": {}, "path": null}));
}

#[tokio::test]
async fn the_hosts_files_cannot_be_imported() {
    let rig = rig!();
    let (_d, host_dir) = tempdir();
    std::fs::write(host_dir.join("host_secret.py"), "SECRET = 'host-only'\n").expect("write");
    let dir = host_dir.display().to_string();
    // sys.path pointing at a host directory: nothing is imported from files.
    let src = format!(
        "import sys\nsys.path.insert(0, {dir:?})\nimport host_secret\ndef execute(args):\n    return host_secret.SECRET\n"
    );
    let c = exec_src(rig, &src).await;
    let e = contained(rig, &c, ErrorKind::Unsupported).await;
    assert!(
        e.message.contains("not available in the neuron runner"),
        "{e:#?}"
    );
    // Even when that directory is granted: a neuron reads files, never imports them.
    let c = exec(
        rig,
        &neuron("probe", &src),
        &caps(&[read_grant(&host_dir)]),
        json!({}),
    )
    .await;
    contained(rig, &c, ErrorKind::Unsupported).await;
    // Loading the file by hand: it does not exist in the sandbox.
    let src = format!(
        "def execute(args):\n    ns = {{}}\n    exec(open({:?}).read(), ns)\n    return ns['SECRET']\n",
        host_dir.join("host_secret.py").display().to_string()
    );
    let c = exec_src(rig, &src).await;
    contained(rig, &c, ErrorKind::PermissionDenied).await;
    // Nor does the runner's own source on the host.
    let own = capsaga_tests::repo_root().join("tools/neuron_runner/src/app.py");
    let c = exec_src(
        rig,
        &format!(
            "def execute(args):\n    return open({:?}).read()\n",
            own.display().to_string()
        ),
    )
    .await;
    contained(rig, &c, ErrorKind::PermissionDenied).await;
    // A module that was never pre-imported is refused with the list of what exists.
    let c = exec_src(rig, "import sqlite3\ndef execute(args):\n    return 1\n").await;
    let e = contained(rig, &c, ErrorKind::Unsupported).await;
    assert!(e.message.contains("statistics"), "{e:#?}");
}

#[tokio::test]
async fn a_source_that_is_not_python_is_invalid_args() {
    let rig = rig!();
    for source in [
        "SELECT name FROM users WHERE id = 1;",
        "fn main() {\n    println!(\"hello\");\n}\n",
        "#!/bin/sh\nrm -rf / --no-preserve-root\nexit 0 ]]\n",
        "\u{0}\u{1}\u{2}binary\u{0}",
        "<?php echo 'hi'; ?>",
    ] {
        let c = exec_src(rig, source).await;
        let e = contained(rig, &c, ErrorKind::InvalidArgs).await;
        assert!(
            e.message.contains("not valid Python") || e.message.contains("cannot be compiled"),
            "{source:?}: {e:#?}"
        );
    }
}
