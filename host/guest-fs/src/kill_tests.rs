//! A rollback stopped at every point, then the next recovery run to its
//! end: the files are as they were before the step and the report is
//! clean. In the host's order: the step's call (journaled, then sealed),
//! then each recovery plans (or resumes the open pass), runs the tool's
//! compensation again (tools' compensations are idempotent: each decides
//! from what it finds) with the journal lent, and restores. A kill can come
//! between a record and its change, between two changes, before a
//! restore's action and between the action and its progress note.
//! `tests/crash_recovery` does the same with real processes at random
//! points; this goes through every point of a few shapes of work.

use crate::beneath::{Roots, locate, open_root};
use crate::capture::Change;
use crate::journal::{JournalConfig, StepJournal, SyncMode};
use crate::restore::{Expected, RestoreReport};
use crate::tests::{guarded, renamed, rig, snapshot};
use std::collections::BTreeMap;
use std::path::Path;

/// One change, journaled before it is made.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A new file (or one truncated and written).
    Create(&'static str, &'static [u8]),
    /// A file written in place.
    Write(&'static str, &'static [u8]),
    Unlink(&'static str),
    Rename(&'static str, &'static str),
    Mkdir(&'static str),
    Rmdir(&'static str),
}

/// A shape of work: the files before, the step's changes, and the tool's
/// compensation (what it does, decided from what it finds).
struct Shape {
    name: &'static str,
    before: &'static [(&'static str, &'static [u8])],
    step: &'static [Op],
    compensate: fn(&Path) -> Vec<Op>,
}

fn read(ws: &Path, name: &str) -> Option<Vec<u8>> {
    std::fs::read(ws.join(name)).ok()
}

const SHAPES: &[Shape] = &[
    Shape {
        // fs_write of a new file: a temporary file renamed over the name;
        // its compensation removes what it wrote, and a stale temporary.
        name: "new file through a rename",
        before: &[],
        step: &[Op::Create(".t.tmp", b"v1"), Op::Rename(".t.tmp", "t.txt")],
        compensate: |ws| {
            let mut ops = Vec::new();
            if read(ws, "t.txt").as_deref() == Some(b"v1") {
                ops.push(Op::Unlink("t.txt"));
            }
            if read(ws, ".t.tmp").is_some() {
                ops.push(Op::Unlink(".t.tmp"));
            }
            ops
        },
    },
    Shape {
        // The ledger: an append in place; its compensation rewrites the
        // file without the line through a temporary file (a stale one
        // removed first) and a rename.
        name: "append in place, compensation through a rename",
        before: &[("ledger", b"a\n")],
        step: &[Op::Write("ledger", b"a\nb\n")],
        compensate: |ws| {
            let mut ops = Vec::new();
            if read(ws, "ledger").is_some_and(|t| t.ends_with(b"b\n")) {
                if read(ws, "ledger.tmp").is_some() {
                    ops.push(Op::Unlink("ledger.tmp"));
                }
                ops.push(Op::Create("ledger.tmp", b"a\n"));
                ops.push(Op::Rename("ledger.tmp", "ledger"));
            }
            ops
        },
    },
    Shape {
        // A file moved aside and a new one written at its name; the
        // compensation removes the new one and moves the old one back.
        name: "moved aside, replaced",
        before: &[("f", b"old")],
        step: &[Op::Rename("f", "f.bak"), Op::Create("f", b"new")],
        compensate: |ws| {
            let mut ops = Vec::new();
            if read(ws, "f").as_deref() == Some(b"new") {
                ops.push(Op::Unlink("f"));
            }
            if read(ws, "f.bak").is_some() && (read(ws, "f").is_none() || !ops.is_empty()) {
                ops.push(Op::Rename("f.bak", "f"));
            }
            ops
        },
    },
    Shape {
        // fs_write over an existing file: in place, with a marker file
        // while it writes; its compensation puts the old bytes back through
        // a temporary file and a rename, and removes the marker.
        name: "overwrite in place with a marker",
        before: &[("w", b"old")],
        step: &[
            Op::Create(".w.marker", b""),
            Op::Write("w", b"new!"),
            Op::Unlink(".w.marker"),
        ],
        compensate: |ws| {
            let mut ops = Vec::new();
            let marker = read(ws, ".w.marker").is_some();
            if marker || read(ws, "w").as_deref() != Some(b"old") {
                if read(ws, ".w.ctmp").is_some() {
                    ops.push(Op::Unlink(".w.ctmp"));
                }
                ops.push(Op::Create(".w.ctmp", b"old"));
                ops.push(Op::Rename(".w.ctmp", "w"));
            }
            if marker {
                ops.push(Op::Unlink(".w.marker"));
            }
            ops
        },
    },
    Shape {
        // fs_write with `create_dirs`: a directory made, a file written in
        // it through a temporary file and a rename; the compensation
        // removes the file, then the directory when empty.
        name: "new directory and file",
        before: &[],
        step: &[
            Op::Mkdir("d"),
            Op::Create("d/.f.tmp", b"v1"),
            Op::Rename("d/.f.tmp", "d/f"),
        ],
        compensate: |ws| {
            let mut ops = Vec::new();
            if read(ws, "d/f").as_deref() == Some(b"v1") {
                ops.push(Op::Unlink("d/f"));
            }
            if read(ws, "d/.f.tmp").is_some() {
                ops.push(Op::Unlink("d/.f.tmp"));
            }
            if ws.join("d").is_dir() {
                ops.push(Op::Rmdir("d"));
            }
            ops
        },
    },
    Shape {
        // A directory of files renamed, a file added in it; the
        // compensation removes the new file and renames the directory back.
        name: "directory renamed, file added",
        before: &[("e/x", b"x0")],
        step: &[Op::Rename("e", "e2"), Op::Create("e2/y", b"y1")],
        compensate: |ws| {
            let mut ops = Vec::new();
            if read(ws, "e2/y").is_some() {
                ops.push(Op::Unlink("e2/y"));
            }
            if ws.join("e2").is_dir() && !ws.join("e").exists() {
                ops.push(Op::Rename("e2", "e"));
            }
            ops
        },
    },
    Shape {
        // A compensation that does nothing: the host's restore alone.
        name: "two files, no compensation",
        before: &[("g", b"g0")],
        step: &[
            Op::Write("g", b"g1"),
            Op::Create("h", b"h1"),
            Op::Rename("h", "g"),
        ],
        compensate: |_| Vec::new(),
    },
];

fn tick(ticks: &mut Option<usize>) -> bool {
    match ticks {
        Some(0) => false,
        Some(n) => {
            *n -= 1;
            true
        }
        None => true,
    }
}

/// Journal and make `op`; false when a kill came first.
fn apply(j: &mut StepJournal, ws: &Path, op: Op, ticks: &mut Option<usize>) -> bool {
    if !tick(ticks) {
        return false;
    }
    let dir = open_root(ws).unwrap();
    let journal = |j: &mut StepJournal, name: &str, change: Change| {
        let follow = matches!(change, Change::Write | Change::Create);
        let loc = locate(j.roots(), &dir, name, follow).unwrap();
        j.before(&loc, change).unwrap();
    };
    match op {
        Op::Create(n, _) => journal(j, n, Change::Create),
        Op::Write(n, _) => journal(j, n, Change::Write),
        Op::Unlink(n) => journal(j, n, Change::Unlink),
        Op::Mkdir(n) => journal(j, n, Change::CreateDir),
        Op::Rmdir(n) => journal(j, n, Change::RemoveDir),
        Op::Rename(a, b) => {
            let from = locate(j.roots(), &dir, a, false).unwrap();
            let to = locate(j.roots(), &dir, b, false).unwrap();
            j.before_rename(&from, &to).unwrap();
        }
    }
    if !tick(ticks) {
        return false;
    }
    match op {
        Op::Create(n, b) => std::fs::write(ws.join(n), b).unwrap(),
        Op::Write(n, b) => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(ws.join(n))
                .unwrap();
            f.write_all(b).unwrap();
            f.set_len(b.len() as u64).unwrap();
        }
        Op::Unlink(n) => {
            // Kept open until the test ends, so that its inode number is
            // not given to the next new file (ext4 does that at once), as
            // in a real workspace, where other files come and go.
            KEEP.lock()
                .unwrap()
                .push(std::fs::File::open(ws.join(n)).unwrap());
            std::fs::remove_file(ws.join(n)).unwrap()
        }
        Op::Rename(a, b) => std::fs::rename(ws.join(a), ws.join(b)).unwrap(),
        Op::Mkdir(n) => std::fs::create_dir(ws.join(n)).unwrap(),
        Op::Rmdir(n) => std::fs::remove_dir(ws.join(n)).unwrap(),
    }
    true
}

static KEEP: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());

/// Everything under `ws`: relative path → bytes (`None`: a directory).
fn files(ws: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.insert(rel, None);
                walk(base, &p, out);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(ws, ws, &mut out);
    out
}

struct Case {
    _t: tempfile::TempDir,
    ws: std::path::PathBuf,
    cfg: JournalConfig,
}

impl Case {
    fn new(shape: &Shape) -> Case {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        for (name, bytes) in shape.before {
            if let Some(parent) = ws.join(name).parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(ws.join(name), bytes).unwrap();
        }
        let cfg = JournalConfig {
            dir: base.join("state/fs-journal"),
            call_cap_bytes: 1 << 30,
            saga_cap_bytes: 1 << 31,
            sync: SyncMode::Destructive,
        };
        Case { _t: t, ws, cfg }
    }

    fn roots(&self) -> Roots {
        Roots::open(&[self.ws.to_string_lossy().into_owned()]).unwrap()
    }

    /// The step's call, stopped by `ticks`.
    fn step(&self, shape: &Shape, ticks: &mut Option<usize>) {
        let mut j = StepJournal::open(&self.cfg, "saga-1", 0, self.roots()).unwrap();
        j.start_call();
        for op in shape.step {
            if !apply(&mut j, &self.ws, *op, ticks) {
                return;
            }
        }
        j.seal().unwrap();
    }

    /// One recovery of the step, stopped by `ticks`: `None` when stopped
    /// (or when there is no journal: nothing to restore).
    fn recover(&self, shape: &Shape, ticks: &mut Option<usize>) -> Option<RestoreReport> {
        let mut j = StepJournal::reopen(&self.cfg, "saga-1", 0, self.roots()).unwrap()?;
        if !tick(ticks) {
            return None;
        }
        let plan = match j.open_plan() {
            Some(p) => p,
            None => j.plan(&Expected::new()).unwrap(),
        };
        j.start_call();
        for op in (shape.compensate)(&self.ws) {
            if !apply(&mut j, &self.ws, op, ticks) {
                return None;
            }
        }
        j.restore_until(&plan, &[self.ws.to_string_lossy().into_owned()], ticks)
    }
}

/// Runs `f(k)` for k = 0, 1, ... until a run was not stopped (it returns
/// false); panics past `cap` points.
fn every_point(cap: usize, mut f: impl FnMut(usize) -> bool) -> usize {
    for k in 0..cap {
        if !f(k) {
            return k;
        }
    }
    panic!("more than {cap} kill points");
}

#[test]
fn a_rollback_killed_at_any_point_is_finished_by_the_next_recovery() {
    let mut cases = 0;
    for shape in SHAPES {
        let want = Case::new(shape);
        let before = files(&want.ws);
        // k0: where the step's own call is stopped (the last value: not
        // stopped); k1: where the first recovery is.
        every_point(64, |k0| {
            let mut step_stopped = false;
            every_point(64, |k1| {
                let c = Case::new(shape);
                let mut t0 = Some(k0);
                c.step(shape, &mut t0);
                step_stopped = t0 == Some(0);
                let mut t1 = Some(k1);
                let first = c.recover(shape, &mut t1);
                let stopped = first.is_none() && t1 == Some(0);
                let report = if stopped {
                    c.recover(shape, &mut None)
                } else {
                    first
                };
                cases += 1;
                let context = format!(
                    "{}: step stopped at {k0} ({step_stopped}), first recovery at {k1} ({stopped})",
                    shape.name
                );
                if let Some(report) = &report {
                    assert!(report.clean, "{context}: {report:#?}");
                }
                assert_eq!(files(&c.ws), before, "{context}: {report:#?}");
                stopped
            });
            step_stopped
        });
    }
    assert!(cases > 100, "{cases} cases");
}

#[test]
fn a_recovery_killed_twice_is_finished_by_the_third() {
    let mut cases = 0;
    for shape in SHAPES {
        let want = Case::new(shape);
        let before = files(&want.ws);
        every_point(64, |k1| {
            let mut first_stopped = false;
            every_point(64, |k2| {
                let c = Case::new(shape);
                c.step(shape, &mut None);
                let mut t1 = Some(k1);
                let first = c.recover(shape, &mut t1);
                first_stopped = first.is_none();
                let mut second_stopped = false;
                let report = if first_stopped {
                    let mut t2 = Some(k2);
                    let second = c.recover(shape, &mut t2);
                    second_stopped = second.is_none();
                    if second_stopped {
                        c.recover(shape, &mut None)
                    } else {
                        second
                    }
                } else {
                    first
                };
                cases += 1;
                let context = format!(
                    "{}: first recovery stopped at {k1} ({first_stopped}), the second at {k2} ({second_stopped})",
                    shape.name
                );
                let report = report.expect("a journal");
                assert!(report.clean, "{context}: {report:#?}");
                assert_eq!(files(&c.ws), before, "{context}: {report:#?}");
                second_stopped
            });
            first_stopped
        });
    }
    assert!(cases > 100, "{cases} cases");
}

/// Found by crash_recovery: a recovery killed in the middle of a step's
/// restore, after undoing the compensation's removal of a file the step
/// had made (temporary file renamed over the name) and before undoing the
/// rename. The next recovery runs the tool's compensation again (it is
/// idempotent), which removes the file again; that removal must be
/// journaled, else the resumed pass finds neither name and reports the
/// rename's undo as impossible. `read_back`: the journal is read back from
/// its file between the two recoveries (else the same one goes on, as in
/// one process).
fn compensation_again_after_an_interrupted_restore(read_back: bool) {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "tmp", Change::Create, || {
        std::fs::write(ws.join("tmp"), b"written\n").unwrap()
    });
    renamed(&mut j, &dir, "tmp", "new.txt", &ws);
    j.seal().unwrap();
    let reopen = |j: StepJournal| {
        if !read_back {
            return j;
        }
        drop(j);
        StepJournal::reopen(&r.cfg, "saga-1", 0, r.roots())
            .unwrap()
            .unwrap()
    };
    let compensate = |j: &mut StepJournal| {
        j.start_call();
        guarded(j, &dir, "new.txt", Change::Unlink, || {
            std::fs::remove_file(ws.join("new.txt")).unwrap()
        });
    };
    // The first recovery: plan, compensation, the restore's first record
    // (the newest: the compensation's removal) undone and noted; killed.
    let mut j = reopen(j);
    let plan = j.plan(&Expected::new()).unwrap();
    compensate(&mut j);
    assert!(j.restore_until(&plan, &r.allowed(), &mut Some(2)).is_none());
    assert_eq!(std::fs::read(ws.join("new.txt")).unwrap(), b"written\n");
    // The next recovery resumes the pass, the compensation first.
    let mut j = reopen(j);
    let plan = j.open_plan().expect("the interrupted pass");
    compensate(&mut j);
    let rep = j.restore(&plan, &r.allowed());
    assert!(rep.clean, "{rep:#?}");
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_compensation_run_again_after_an_interrupted_restore_is_undone_too() {
    compensation_again_after_an_interrupted_restore(true);
    compensation_again_after_an_interrupted_restore(false);
}
