//! Issue 13 item 4: FIFOs, Unix sockets, device nodes and links to them in a
//! granted directory must not hang the host. The host's `open-at`
//! (`capsaga_sandbox::factors::fs::open_at`) opens without blocking and refuses
//! anything that is neither a regular file nor a directory, so:
//!
//! - the hostile `special_files` component, opening each special file in
//!   every way a guest can, gets a refusal for each at once (well within its
//!   deadline), while a regular file beside them still opens;
//! - afterwards no host thread waits in `open` on a FIFO (opening the FIFO
//!   for writing without blocking finds no reader);
//! - `capsaga call` of the first-party tools on a FIFO, with a one-second
//!   deadline, reports the refusal and the process exits.

use capsaga_core::error::ErrorKind;
use capsaga_core::tool::CallContext;
use capsaga_door::host::Host;
use capsaga_sandbox::{CallRequest, Op};
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.special_files]
grants = ["fs:read:~/ws/**", "fs:write:~/ws/**"]
limits = { deadline_ms = 3000 }
[tools.fs_read]
grants = ["fs:read:~/ws/**"]
limits = { deadline_ms = 1000 }
[tools.fs_list]
grants = ["fs:read:~/ws/**"]
limits = { deadline_ms = 1000 }
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 1000 }
"#;

/// `O_NONBLOCK` of the platform.
const O_NONBLOCK: i32 = if cfg!(target_os = "linux") {
    0o4000
} else {
    0x0004
};
/// `ENXIO`: no reader on the FIFO.
const ENXIO: i32 = 6;

/// The special files planted under `ws/`: (name, path). Device nodes only
/// where this process may create them (root with CAP_MKNOD).
struct Planted {
    specials: Vec<(String, PathBuf)>,
    fifos: Vec<PathBuf>,
    regular: PathBuf,
    skipped: Vec<String>,
    _socket: std::os::unix::net::UnixListener,
}

fn run(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn plant(ws: &Path) -> Planted {
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let regular = ws.join("regular.txt");
    std::fs::write(&regular, "plain text").unwrap();
    let mut specials = Vec::new();
    let mut fifos = Vec::new();
    let mut skipped = Vec::new();
    for name in ["fifo", "sub/fifo2"] {
        let p = ws.join(name);
        assert!(run("mkfifo", &[p.to_str().unwrap()]), "mkfifo {p:?}");
        fifos.push(p.clone());
        specials.push((name.to_string(), p));
    }
    let sock = ws.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind a Unix socket");
    specials.push(("sock".into(), sock));
    for (name, kind, major, minor) in [("chardev", "c", "1", "3"), ("blockdev", "b", "7", "250")] {
        let p = ws.join(name);
        if run("mknod", &[p.to_str().unwrap(), kind, major, minor]) {
            specials.push((name.into(), p));
        } else {
            skipped.push(format!("{name} (mknod not permitted here)"));
        }
    }
    for (link, target) in [
        ("link_fifo", "fifo"),
        ("link_chain", "link_fifo"),
        ("sub/link_up_fifo", "../fifo"),
        ("link_sock", "sock"),
    ] {
        let p = ws.join(link);
        std::os::unix::fs::symlink(target, &p).unwrap();
        specials.push((link.into(), p));
    }
    Planted {
        specials,
        fifos,
        regular,
        skipped,
        _socket: listener,
    }
}

/// No thread of this process waits to read `fifo`: opening it for writing
/// without blocking finds no reader.
fn assert_no_reader(fifo: &Path) {
    let r = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo);
    match r {
        Err(e) => assert_eq!(e.raw_os_error(), Some(ENXIO), "{fifo:?}: {e}"),
        Ok(_) => panic!("{fifo:?} has a reader: a host thread is blocked in open"),
    }
}

async fn call_special_files(host: &Host, paths: &[String]) -> Value {
    let t = host.registry.get("special_files").expect("tool loaded");
    assert!(t.grants.is_ok(), "tool callable");
    let ctx = CallContext {
        saga_id: "special".into(),
        step_seq: 0,
        idempotency_key: "special-files".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    let args = json!({ "paths": paths }).to_string();
    let (res, diags) = host
        .sandbox
        .call(CallRequest {
            tool: "special_files",
            prepared: t.component().expect("a component"),
            bindings: &t.bindings.execute,
            limits: &t.limits,
            ctx: &ctx,
            args_json: &args,
            op: &Op::Execute,
        })
        .await;
    let out = match res {
        Ok(Some(o)) => o,
        other => panic!("special_files failed: {other:?} ({diags:?})"),
    };
    out.data
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_of_special_file_is_refused_at_open_without_blocking() {
    let ws = TestWorkspace::new(&["special_files", "fs_read", "fs_list", "fs_write"], POLICY);
    let planted = plant(&ws.ws());
    eprintln!(
        "special files: {} planted{}",
        planted.specials.len(),
        if planted.skipped.is_empty() {
            String::new()
        } else {
            format!(", skipped: {}", planted.skipped.join(", "))
        }
    );
    let host = ws.host().await;
    let mut paths: Vec<String> = planted
        .specials
        .iter()
        .map(|(_, p)| p.to_string_lossy().into_owned())
        .collect();
    paths.push(planted.regular.to_string_lossy().into_owned());
    // Refused at once: a blocked open would hang the host's thread past
    // the call's deadline (epochs cannot stop it), never return.
    let out = tokio::time::timeout(
        capsaga_tests::wait_bound(),
        call_special_files(&host, &paths),
    )
    .await
    .expect("special_files returned: no open blocked");
    let results = out["results"].as_array().expect("results");
    assert_eq!(results.len(), paths.len());
    for r in results {
        let path = r["path"].as_str().unwrap();
        let regular = path == planted.regular.to_str().unwrap();
        for a in r["attempts"].as_array().unwrap() {
            let how = a["how"].as_str().unwrap();
            if how == "metadata" {
                // Looking at it is fine: stat does not open.
                assert_eq!(a["ok"], true, "{path}: {a}");
                continue;
            }
            assert_eq!(a["ok"], regular, "{path} {how}: {a}");
            // Reading a FIFO is what blocked: the host's check answers
            // `unsupported`. (Other modes may fail earlier in the OS: a
            // socket never opens, a write-only FIFO open without reader is
            // ENXIO, a device on a `nodev` mount is EACCES.)
            let fifo = ["fifo", "link_fifo", "link_chain"]
                .iter()
                .any(|n| path.ends_with(&format!("/{n}")) || path.ends_with("fifo2"))
                || path.ends_with("link_up_fifo");
            if fifo && matches!(how, "read" | "fs_read" | "read_write") {
                assert_eq!(a["io_kind"], "Unsupported", "{path} {how}: {a}");
            }
        }
    }
    for fifo in &planted.fifos {
        assert_no_reader(fifo);
    }
    // The first-party tools through the sandbox: refused, typed.
    for (tool, args) in [
        ("fs_read", json!({"path": ws.ws_path("fifo")})),
        ("fs_read", json!({"path": ws.ws_path("link_chain")})),
        ("fs_read", json!({"path": ws.ws_path("sock")})),
    ] {
        let t = host.registry.get(tool).expect("tool");
        assert!(t.grants.is_ok(), "callable");
        let ctx = CallContext {
            saga_id: "special".into(),
            step_seq: 1,
            idempotency_key: format!("special-{tool}"),
            deadline_ms: u64::MAX,
            dry_run: false,
        };
        let args_s = args.to_string();
        let call = host.sandbox.call(CallRequest {
            tool,
            prepared: t.component().expect("a component"),
            bindings: &t.bindings.execute,
            limits: &t.limits,
            ctx: &ctx,
            args_json: &args_s,
            op: &Op::Execute,
        });
        let (res, _) = tokio::time::timeout(capsaga_tests::wait_bound(), call)
            .await
            .unwrap_or_else(|_| panic!("{tool} {args}: the open blocked"));
        let e = res.expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Unsupported, "{tool} {args}: {e:?}");
    }
    for fifo in &planted.fifos {
        assert_no_reader(fifo);
    }
}

/// Wait for `child` at most `limit`; kill it and fail when it is still
/// running then. Its stdout and stderr (piped) are drained meanwhile, so a
/// full pipe cannot hold it up; returns the exit code and both outputs.
fn wait_bounded(mut child: std::process::Child, limit: Duration, what: &str) -> (i32, String) {
    fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = stdout.join().unwrap_or_default() + &stderr.join().unwrap_or_default();
    (status.code().unwrap_or(-1), out)
}

#[test]
fn capsaga_call_on_a_fifo_reports_the_refusal_and_exits() {
    // Only the tools called: the first command compiles every component of
    // the tools directory (a few seconds each in a debug build) and stores
    // it in the workspace's compiled cache, which the later ones load.
    let ws = TestWorkspace::new(&["fs_read", "fs_list", "fs_write"], POLICY);
    let planted = plant(&ws.ws());
    let fifo = ws.ws_path("fifo");
    let capsaga_call = |tool: &str, args: &Value| {
        let what = format!("capsaga call {tool} {args}");
        let child = ws
            .capsaga(&["--json", "call", tool, &args.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn capsaga");
        // The tool's deadline is 1 s; the command must be gone well before
        // this bound (which also covers compiling the components once).
        let (code, out) = wait_bounded(child, capsaga_tests::wait_bound(), &what);
        (code, out, what)
    };
    for (tool, args) in [
        ("fs_read", json!({"path": fifo})),
        ("fs_write", json!({"path": fifo, "content": "x"})),
    ] {
        let (code, out, what) = capsaga_call(tool, &args);
        assert_ne!(code, 0, "{what}: {out}");
        assert!(out.contains("unsupported"), "{what}: {out}");
        for f in &planted.fifos {
            assert_no_reader(f);
        }
    }
    // Listing the directory that holds them still works.
    let (code, out, what) = capsaga_call("fs_list", &json!({"path": ws.ws_path("")}));
    assert_eq!(code, 0, "{what}: {out}");
    assert!(out.contains("fifo"), "{what}: {out}");
}
