//! The crash harness: a real `capsaga` child killed with SIGKILL at a
//! chosen point, a seeded random source, the test's report line.

use capsaga_store::LogStore;
use capsaga_store::sqlite::SqliteStore as Db;
use capsaga_tests::block_on;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// xorshift64*: enough randomness for kill points, no dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn head(db: &Db) -> i64 {
    block_on(db.head()).ok().flatten().map_or(0, |(seq, _)| seq)
}

/// When to kill a child.
pub enum KillAt<'a> {
    /// Once the log has grown by this many rows (plus a jitter, µs).
    Rows(i64, u64),
    /// After this long, whatever it is doing (start-up included).
    After(Duration),
    /// As soon as this says so (polled).
    When(&'a dyn Fn() -> bool),
}

/// Spawn `cmd`; kill it (SIGKILL) at `at`, or let it finish. Returns true
/// when it was killed.
pub fn run_and_kill(mut cmd: std::process::Command, db: &Db, at: KillAt<'_>) -> bool {
    let start = head(db);
    let t0 = Instant::now();
    let mut child: Child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn capsaga");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return false;
        }
        let due = match at {
            KillAt::Rows(rows, jitter_us) => {
                let due = head(db) >= start + rows;
                if due {
                    std::thread::sleep(Duration::from_micros(jitter_us));
                }
                due
            }
            KillAt::After(d) => t0.elapsed() >= d,
            KillAt::When(f) => f(),
        };
        if due {
            let killed = child.try_wait().expect("try_wait").is_none();
            let _ = child.kill();
            let _ = child.wait();
            return killed;
        }
        assert!(Instant::now() < deadline, "capsaga child hangs");
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// Print a line of the test's report on the real stderr: libtest captures
/// `println!`/`eprintln!` of passing tests, and the trial count and tally
/// belong in the test command's output.
pub fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
