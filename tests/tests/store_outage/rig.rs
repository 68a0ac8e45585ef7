//! The rig: a workspace with the `ledger` component and a scripted model,
//! a real `capsaga serve` child process on it (SQLite or a PostgreSQL
//! database), and the ledgers the tests hold.

use capsaga_tests::{TestWorkspace, capsaga_bin, listening_addr, wait_until};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// How long a write waits for SQLite's lock before it fails busy, ms.
pub const BUSY_MS: u64 = 300;

/// The policy: a short SQLite busy timeout, a long PostgreSQL lease (the
/// host keeps its sagas through the outage), the ledger granted the
/// workspace (its own compensation undoes its lines: the host's file
/// rollback is off, so the journal beside the ledger keeps every line),
/// with a deadline longer than any test holds it; the scripted model's
/// one call holds the REST turn's ledger.
pub fn workspace() -> TestWorkspace {
    let policy = format!(
        r#"busy_timeout_ms = {BUSY_MS}
store_lease_ms = 120000
[agent]
script = "script.json"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = {{ deadline_ms = 600000 }}
host_rollback = false
"#
    );
    let ws = TestWorkspace::new(&["ledger"], &policy);
    let script = r#"{"model":"scripted","turns":[
      {"text":"","tool_calls":[{"name":"ledger","arguments":{"path":"${home}/ws/rest.txt","entry":"rest","after":"wait"}}]},
      {"text":"Appended."}]}"#;
    std::fs::write(ws.root.join("script.json"), script).expect("write the script");
    ws
}

/// One held step's ledger: `<name>.txt` in the workspace, its journal, and
/// the files the `ledger` component waits on.
#[derive(Clone, Debug)]
pub struct Ledger {
    pub path: String,
}

impl Ledger {
    pub fn new(ws: &TestWorkspace, name: &str) -> Ledger {
        Ledger {
            path: ws.ws_path(&format!("{name}.txt")),
        }
    }

    /// The ledger's arguments, held (`"after": "wait"`).
    pub fn held_args(&self, entry: &str) -> serde_json::Value {
        serde_json::json!({"path": self.path, "entry": entry, "after": "wait"})
    }

    fn file(&self, suffix: &str) -> PathBuf {
        PathBuf::from(format!("{}{suffix}", self.path))
    }

    /// Wait until the step has written its line and waits.
    pub fn wait_held(&self) {
        let waiting = self.file(".waiting");
        wait_until(&format!("{} to be held", self.path), || waiting.exists());
        assert!(
            self.lines().iter().any(|l| !l.is_empty()),
            "the step wrote its line before it waits"
        );
    }

    /// Let the step return.
    pub fn release(&self) {
        std::fs::write(self.file(".go"), b"go").expect("write the go file");
    }

    /// The ledger's lines.
    pub fn lines(&self) -> Vec<String> {
        read_lines(&self.file(""))
    }

    /// The journal's lines (`execute <key>`, `compensate <key>`).
    pub fn journal(&self) -> Vec<String> {
        read_lines(&self.file(".journal"))
    }
}

fn read_lines(p: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A `capsaga serve` child process.
pub struct Server {
    pub child: Child,
    pub addr: String,
}

impl Server {
    /// Start `capsaga serve` on `ws` (with `CAPSAGA_STORE` = `store` when
    /// given). It runs with `SIGXFSZ` ignored (a disposition kept across
    /// `exec`), so that a file size limit makes its writes fail instead of
    /// killing it, as a full filesystem would.
    pub fn start(ws: &TestWorkspace, store: Option<&str>) -> Server {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("trap '' XFSZ; exec \"$0\" \"$@\"")
            .arg(capsaga_bin())
            .args(["--json", "--config"])
            .arg(ws.config())
            .args(["serve", "--listen", "127.0.0.1:0", "--catalog-poll-ms", "0"])
            .env_remove("CAPSAGA_CONFIG")
            .env_remove("CAPSAGA_TOKEN")
            .env_remove("CAPSAGA_STORE")
            .env_remove("CAPSAGA_SIMULATION")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(s) = store {
            cmd.env("CAPSAGA_STORE", s);
        }
        let mut child = cmd.spawn().expect("capsaga serve starts");
        let addr = listening_addr(&mut child, "server");
        Server { child, addr }
    }

    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A multi-threaded runtime for a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}
