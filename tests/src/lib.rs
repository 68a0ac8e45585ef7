//! Shared harness for capsaga integration tests: locating the real components
//! built from `tools/` and `tests/components/` (by `scripts/build-components`),
//! the `capsaga` binary, and throw-away workspaces with their own policy,
//! tools directory and SQLite file. [`http_server`] is a real HTTP(S) server on
//! 127.0.0.1 that records what reaches it.

pub mod http_server;

pub mod hostile;
pub mod llm_server;
pub mod mcp_rig;
pub mod neuron_rig;
pub mod otlp_receiver;
pub mod raw_http;
pub mod webdriver;
pub mod wire_rig;
pub mod wire_schema;

use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_store::Scope;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The cargo target directory (`CARGO_TARGET_DIR`, else `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// The compiled-component cache the test workspaces share:
/// `target/test-compiled-cache` (created by the first host, mode 0700).
pub fn shared_compiled_cache() -> PathBuf {
    target_dir().join("test-compiled-cache")
}

/// Path of a built component: first-party tools in `target/tools/`, test
/// components in `target/test-components/`.
///
/// # Panics
/// When the component was not built: run `scripts/build-components`.
pub fn component(name: &str) -> PathBuf {
    for dir in ["tools", "test-components"] {
        let p = target_dir().join(dir).join(format!("{name}.wasm"));
        if p.exists() {
            return p;
        }
    }
    panic!(
        "component `{name}` is not built: run scripts/build-components (looked in {}/tools and test-components)",
        target_dir().display()
    );
}

/// Run `c` with `stdin` written to its standard input, stdout and stderr
/// captured; its output once it exited.
pub fn output_with_stdin(c: &mut std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("the command's output")
}

/// The `capsaga` binary, built on first use with the command `scripts/test`
/// uses (`cargo build --workspace --all-targets`): the same feature set as
/// `cargo test --workspace`, so it is up to date there and nothing is
/// compiled twice (`-p capsaga --bin capsaga` alone resolves other
/// features and would rebuild Wasmtime and its dependants).
///
/// # Panics
/// When it cannot be built.
pub fn capsaga_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // A binary built by hand (`cargo build -p capsaga --bin
        // capsaga`), to run a few test binaries without building them all.
        if let Some(p) = std::env::var_os("CAPSAGA_TEST_BIN") {
            return PathBuf::from(p);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        // Not the variables cargo sets for a test process (CARGO_PKG_*,
        // CARGO_MANIFEST_DIR, ...): build scripts that watch the environment
        // would see another one than at the top level and rebuild.
        // CARGO_INCREMENTAL is kept: another setting than the top-level
        // build's would recompile every workspace crate.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            let keep = ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_INCREMENTAL"]
                .contains(&k.as_str())
                || [
                    "CARGO_BUILD_",
                    "CARGO_PROFILE_",
                    "CARGO_NET_",
                    "CARGO_REGISTRIES_",
                    "CARGO_TERM_",
                ]
                .iter()
                .any(|p| k.starts_with(p));
            if k.starts_with("CARGO_") && !keep {
                cmd.env_remove(&k);
            }
        }
        let status = cmd
            .args(["build", "--quiet", "--workspace", "--all-targets"])
            .current_dir(repo_root())
            .status()
            .expect("run cargo build for the capsaga binary");
        assert!(
            status.success(),
            "cargo build --workspace --all-targets failed"
        );
        target_dir().join("debug").join("capsaga")
    })
    .clone()
}

/// A throw-away workspace: `root/ws` is the granted directory, `root/tools`
/// holds the chosen components, `root/capsaga.toml` the policy, and
/// `root/.capsaga/state.db` the state.
pub struct TestWorkspace {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
    /// Canonical root path.
    pub root: PathBuf,
}

impl TestWorkspace {
    /// Create a workspace with the named components and a policy body (the
    /// `[tools.*]` sections; `~` is the root).
    pub fn new(components: &[&str], policy: &str) -> TestWorkspace {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        std::fs::create_dir(root.join("ws")).expect("mkdir ws");
        std::fs::create_dir(root.join("tools")).expect("mkdir tools");
        for c in components {
            std::fs::copy(component(c), root.join("tools").join(format!("{c}.wasm")))
                .expect("copy component");
        }
        let ws = TestWorkspace { dir, root };
        ws.write_policy(policy);
        ws
    }

    /// Rewrite the policy file. Unless `policy` sets its own
    /// `compiled_cache` (first, before any section: a test of the cache
    /// itself), the workspace shares [`shared_compiled_cache`], so each
    /// component is compiled once per test run, not once per test.
    pub fn write_policy(&self, policy: &str) {
        let cache = if policy.contains("compiled_cache") {
            String::new()
        } else {
            format!(
                "compiled_cache = \"{}\"\n",
                shared_compiled_cache().display()
            )
        };
        let text = format!(
            "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\n{cache}{policy}\n"
        );
        std::fs::write(self.config(), text).expect("write capsaga.toml");
    }

    /// The policy file.
    pub fn config(&self) -> PathBuf {
        self.root.join("capsaga.toml")
    }

    /// The granted directory.
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// A path under the granted directory, as a string.
    pub fn ws_path(&self, rel: &str) -> String {
        self.ws().join(rel).to_string_lossy().into_owned()
    }

    /// A `capsaga` command (the real binary, see [`capsaga_bin`]) on this
    /// workspace's policy, with its stdin closed; add arguments and run or
    /// spawn it.
    pub fn capsaga(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(capsaga_bin());
        c.arg("--config")
            .arg(self.config())
            .args(args)
            .stdin(std::process::Stdio::null())
            .env_remove("CAPSAGA_CONFIG");
        c
    }

    /// One `capsaga --json agent --script` turn on this workspace: the
    /// scripted model's `turns` (a JSON array of `{"text", "tool_calls"}`)
    /// written to `script.json` in the workspace root, the user message
    /// `task`. Returns the finished process's output.
    ///
    /// # Panics
    /// When the script cannot be written or the binary cannot run.
    pub fn scripted_turn(&self, turns: serde_json::Value, task: &str) -> std::process::Output {
        let script = self.root.join("script.json");
        let body = serde_json::json!({"model": "scripted", "turns": turns});
        std::fs::write(&script, body.to_string()).expect("write the script");
        self.capsaga(&[
            "--json",
            "agent",
            "--script",
            &script.to_string_lossy(),
            task,
        ])
        .output()
        .expect("run capsaga agent")
    }

    /// Open a host on this workspace.
    ///
    /// # Panics
    /// When the host cannot start.
    pub async fn host(&self) -> Arc<Host> {
        match Host::open(&self.config()).await {
            Ok(h) => h,
            Err(e) => panic!("host failed to open: {e}"),
        }
    }
}

/// The address a `capsaga serve` child prints on its first stdout line
/// (`{"listening": "127.0.0.1:PORT"}`); panics naming `what` when the
/// child printed something else (it did not start).
pub fn listening_addr(child: &mut std::process::Child, what: &str) -> String {
    use std::io::{BufRead, BufReader};
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("the listening line");
    let v: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("{e}: `{line}` (the {what} did not start)"));
    v["listening"].as_str().expect("listening").to_string()
}

/// Run a future to completion on a fresh current-thread runtime (for the
/// synchronous tests that read the state store).
///
/// # Panics
/// When the runtime cannot start.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// The workspace's state store, opened like the host opens it.
///
/// # Panics
/// When it cannot be opened.
pub fn open_store(ws: &TestWorkspace) -> capsaga_store::sqlite::SqliteStore {
    capsaga_store::sqlite::SqliteStore::open(&ws.root.join(".capsaga/state.db"))
        .expect("the state store opens")
}

/// One call of `tool` as the only step of a new saga, submitted through the
/// dispatch door; the saga is then aborted (rolled back if it wrote).
///
/// # Panics
/// When the door itself fails.
pub async fn call_once(host: &Arc<Host>, tool: &str, args: serde_json::Value) -> Outcome {
    let door = Dispatcher::new(host.clone());
    let mut saga = door
        .start(Scope::Call, "test", None)
        .await
        .expect("saga starts");
    let out = door
        .submit(&mut saga, Call::new(tool, Args::Value(&args)))
        .await
        .expect("the door works")
        .outcome;
    let _ = door.abort(&mut saga).await;
    out
}

/// The usual policy: fs tools granted the workspace.
pub const FS_POLICY: &str = r#"
[tools.fs_read]
grants = ["fs:read:~/ws/**"]
[tools.fs_list]
grants = ["fs:read:~/ws/**"]
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
"#;

/// Snapshot of every file under `dir`: relative path → bytes.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(base)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    out.insert(format!("{rel}/"), Vec::new());
                    walk(base, &p, out);
                }
                Ok(t) if t.is_symlink() => {
                    let target = std::fs::read_link(&p)
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    out.insert(format!("{rel} -> {target}"), Vec::new());
                }
                _ => {
                    out.insert(rel, std::fs::read(&p).unwrap_or_default());
                }
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// The longest a test waits for an event (a commit, a reload, a
/// notification, a process reaching a point) before it fails: long enough
/// that only something stuck, never something slow, reaches it.
/// `CAPSAGA_TEST_WAIT_SECS` changes it (default 180 s).
///
/// Tests wait for the event itself (polling a condition), never for a fixed
/// time followed by an assertion, so that the suite passes on machines much
/// slower and much faster than ours.
pub fn wait_bound() -> std::time::Duration {
    let secs = std::env::var("CAPSAGA_TEST_WAIT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(180);
    std::time::Duration::from_secs(secs)
}

/// Poll `cond` every 5 ms until it holds; panic naming `what` when
/// [`wait_bound`] passes first.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    let bound = wait_bound();
    while !cond() {
        assert!(
            t0.elapsed() < bound,
            "timed out after {bound:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// [`wait_until`] for async tests: `cond` is polled every 5 ms without
/// blocking the runtime's thread.
pub async fn wait_until_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = std::time::Instant::now();
    let bound = wait_bound();
    while !cond().await {
        assert!(
            t0.elapsed() < bound,
            "timed out after {bound:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
