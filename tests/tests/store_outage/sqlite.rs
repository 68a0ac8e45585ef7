//! The outage on SQLite: the database kept busy by another process, and
//! every write of the server failing as on a full filesystem.

use super::outage::{Fault, run};
use super::rig::{Server, runtime, workspace};
use capsaga_store::Store;
use capsaga_store::sqlite::SqliteStore;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

/// Another process (this test's) holds SQLite's write lock, longer than
/// the server's `busy_timeout_ms`: every write of the server fails busy.
struct Busy {
    db: PathBuf,
    held: Option<rusqlite::Connection>,
}

impl Fault for Busy {
    fn apply(&mut self) {
        let c = rusqlite::Connection::open(&self.db).expect("open the state database");
        c.execute_batch("BEGIN EXCLUSIVE")
            .expect("take the write lock");
        self.held = Some(c);
    }

    fn lift(&mut self) {
        if let Some(c) = self.held.take() {
            c.execute_batch("ROLLBACK").expect("let the lock go");
        }
    }
}

/// The server's file size limit lowered to 0 on the running process
/// (`prlimit`): every write to a file fails (EFBIG), as on a full
/// filesystem, until it is raised again.
struct Full {
    pid: u32,
}

impl Full {
    fn prlimit(&self, limit: &str) {
        let out = Command::new("prlimit")
            .arg("--pid")
            .arg(self.pid.to_string())
            .arg(format!("--fsize={limit}"))
            .output()
            .expect("run prlimit (util-linux)");
        assert!(
            out.status.success(),
            "prlimit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Fault for Full {
    fn apply(&mut self) {
        self.prlimit("0:unlimited");
    }

    fn lift(&mut self) {
        self.prlimit("unlimited:unlimited");
    }
}

fn db(ws: &capsaga_tests::TestWorkspace) -> PathBuf {
    ws.root.join(".capsaga/state.db")
}

fn opener(path: PathBuf) -> impl Fn() -> std::future::Ready<Arc<dyn Store>> {
    move || {
        let s: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&path).expect("the state database opens"));
        std::future::ready(s)
    }
}

#[test]
fn a_busy_sqlite_during_a_step_never_ends_in_done() {
    let ws = workspace();
    let mut server = Server::start(&ws, None);
    let mut fault = Busy {
        db: db(&ws),
        held: None,
    };
    runtime().block_on(run(&ws, &mut server, &mut fault, opener(db(&ws))));
}

#[test]
fn a_full_filesystem_during_a_step_never_ends_in_done() {
    let ws = workspace();
    let mut server = Server::start(&ws, None);
    let mut fault = Full { pid: server.pid() };
    runtime().block_on(run(&ws, &mut server, &mut fault, opener(db(&ws))));
}
