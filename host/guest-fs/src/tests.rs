//! The journal and the restore over real files in temporary directories,
//! with the operations done as the host's filesystem functions do them:
//! locate, journal, then the change.

use crate::beneath::{Roots, locate, open_root};
use crate::capture::Change;
use crate::journal::{JournalConfig, JournalError, StepJournal, SyncMode};
use crate::restore::{Expected, fold};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(crate) struct Rig {
    _t: tempfile::TempDir,
    pub(crate) ws: PathBuf,
    outside: PathBuf,
    pub(crate) cfg: JournalConfig,
}

pub(crate) fn rig() -> Rig {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().canonicalize().unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("a.txt"), b"alpha").unwrap();
    std::fs::write(ws.join("sub/b.txt"), b"bravo").unwrap();
    std::fs::set_permissions(ws.join("sub/b.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();
    let cfg = JournalConfig {
        dir: base.join("state/fs-journal"),
        call_cap_bytes: 1 << 30,
        saga_cap_bytes: 1 << 31,
        sync: SyncMode::Destructive,
    };
    Rig {
        _t: t,
        ws,
        outside,
        cfg,
    }
}

impl Rig {
    pub(crate) fn roots(&self) -> Roots {
        Roots::open(&[self.ws.to_string_lossy().into_owned()]).unwrap()
    }
    pub(crate) fn journal(&self, seq: u64) -> StepJournal {
        StepJournal::open(&self.cfg, "saga-1", seq, self.roots()).unwrap()
    }
    pub(crate) fn dir(&self) -> File {
        open_root(&self.ws).unwrap()
    }
    pub(crate) fn allowed(&self) -> Vec<String> {
        vec![self.ws.to_string_lossy().into_owned()]
    }
    pub(crate) fn outside(&self) -> &Path {
        &self.outside
    }
}

/// Every entry under `dir`: path → (kind, mode, bytes or link target).
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, (char, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, (char, u32, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, ('l', 0, t.to_string_lossy().as_bytes().to_vec()));
            } else if m.is_dir() {
                out.insert(rel, ('d', mode, Vec::new()));
                walk(base, &p, out);
            } else {
                out.insert(rel, ('f', mode, std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// Journal `path` for `change`, then run `act` (the change itself).
pub(crate) fn guarded(
    j: &mut StepJournal,
    dir: &File,
    path: &str,
    change: Change,
    act: impl FnOnce(),
) {
    let follow = matches!(change, Change::Write | Change::Truncate | Change::Create);
    let loc = locate(j.roots(), dir, path, follow).unwrap();
    j.before(&loc, change).unwrap();
    act();
}

pub(crate) fn renamed(j: &mut StepJournal, dir: &File, from: &str, to: &str, ws: &Path) {
    let a = locate(j.roots(), dir, from, false).unwrap();
    let b = locate(j.roots(), dir, to, false).unwrap();
    j.before_rename(&a, &b).unwrap();
    std::fs::rename(ws.join(from), ws.join(to)).unwrap();
}

fn rollback(r: &Rig, seqs: &[u64]) -> Vec<crate::restore::RestoreReport> {
    let mut expected = Expected::new();
    let mut out = Vec::new();
    for &seq in seqs.iter().rev() {
        let mut j = StepJournal::reopen(&r.cfg, "saga-1", seq, Roots::default())
            .unwrap()
            .unwrap();
        let plan = j.plan(&expected).unwrap();
        let rep = j.restore(&plan, &r.allowed());
        if let Some((_, _, left)) = j.last_finished() {
            fold(&mut expected, &left);
        }
        out.push(rep);
    }
    out
}

#[test]
fn every_kind_of_change_is_rolled_back_byte_for_byte() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "a.txt", Change::Truncate, || {
        std::fs::write(ws.join("a.txt"), b"changed").unwrap()
    });
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"changed twice").unwrap()
    });
    guarded(&mut j, &dir, "new/", Change::CreateDir, || {
        std::fs::create_dir(ws.join("new")).unwrap()
    });
    guarded(&mut j, &dir, "new/n.txt", Change::Create, || {
        std::fs::write(ws.join("new/n.txt"), b"n").unwrap()
    });
    guarded(&mut j, &dir, "sub/b.txt", Change::Unlink, || {
        std::fs::remove_file(ws.join("sub/b.txt")).unwrap()
    });
    guarded(&mut j, &dir, "sub", Change::RemoveDir, || {
        std::fs::remove_dir(ws.join("sub")).unwrap()
    });
    // The file written through a link is the link's target.
    guarded(&mut j, &dir, "link", Change::Write, || {
        std::fs::write(ws.join("link"), b"through the link").unwrap()
    });
    guarded(&mut j, &dir, "l2", Change::Symlink, || {
        std::os::unix::fs::symlink("/etc/passwd", ws.join("l2")).unwrap()
    });
    // Write a temporary file, rename it over a.txt; rename a directory.
    guarded(&mut j, &dir, "tmp", Change::Create, || {
        std::fs::write(ws.join("tmp"), b"replacement").unwrap()
    });
    renamed(&mut j, &dir, "tmp", "a.txt", &ws);
    renamed(&mut j, &dir, "new", "moved", &ws);
    guarded(&mut j, &dir, "moved/n.txt", Change::Write, || {
        std::fs::write(ws.join("moved/n.txt"), b"n2").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    assert_ne!(snapshot(&r.ws), before);
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean, "{:#?}", reps[0]);
    assert_eq!(snapshot(&r.ws), before, "{:#?}", reps[0]);
    // A second pass (a crash before the step's status was logged, or an
    // operator's retry) undoes the history once, not twice.
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean && reps[0].paths.is_empty(), "{:#?}", reps[0]);
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_path_journaled_once_per_step_and_several_steps_roll_back_in_reverse() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    for (seq, text) in [(0u64, "one"), (1, "two"), (2, "three")] {
        let mut j = r.journal(seq);
        for _ in 0..3 {
            guarded(&mut j, &dir, "a.txt", Change::Write, || {
                std::fs::write(ws.join("a.txt"), text).unwrap()
            });
        }
        assert_eq!(j.changes(), 1, "journaled once per step");
        j.seal().unwrap();
    }
    let reps = rollback(&r, &[0, 1, 2]);
    assert!(reps.iter().all(|r| r.clean), "{reps:#?}");
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_path_someone_else_changed_is_left_alone_and_reported() {
    let r = rig();
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"by the step").unwrap()
    });
    guarded(&mut j, &dir, "c.txt", Change::Create, || {
        std::fs::write(ws.join("c.txt"), b"new").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    std::fs::write(ws.join("a.txt"), b"by a human afterwards").unwrap();
    let reps = rollback(&r, &[0]);
    assert!(!reps[0].clean);
    assert_eq!(
        std::fs::read(ws.join("a.txt")).unwrap(),
        b"by a human afterwards",
        "not clobbered"
    );
    assert!(!ws.join("c.txt").exists(), "the rest is restored");
    let problems = reps[0].problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("a.txt") && problems[0].contains("someone else"));
}

#[test]
fn hard_links_are_never_written_and_restores_never_write_through_one() {
    let r = rig();
    let dir = r.dir();
    let ws = r.ws.clone();
    std::fs::hard_link(r.outside.join("secret"), ws.join("hl")).unwrap();
    let mut j = r.journal(0);
    let loc = locate(j.roots(), &dir, "hl", true).unwrap();
    assert!(matches!(
        j.before(&loc, Change::Write),
        Err(JournalError::Refused(_))
    ));
    assert!(matches!(
        j.before(&loc, Change::SetTimes),
        Err(JournalError::Refused(_))
    ));
    // Unlinking one name is fine: the restore puts a new file back.
    guarded(&mut j, &dir, "hl", Change::Unlink, || {
        std::fs::remove_file(ws.join("hl")).unwrap()
    });
    j.seal().unwrap();
    drop(j);
    // Meanwhile a new hard link to the outside file appears under the name.
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean, "{reps:#?}");
    assert_eq!(std::fs::read(ws.join("hl")).unwrap(), b"secret");
    std::fs::write(ws.join("hl"), b"rewritten inside").unwrap();
    assert_eq!(
        std::fs::read(r.outside.join("secret")).unwrap(),
        b"secret",
        "the restored name is a file of its own"
    );
}

#[test]
fn a_directory_swapped_for_a_link_out_between_journal_and_restore_is_not_crossed() {
    let r = rig();
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "sub/b.txt", Change::Truncate, || {
        std::fs::write(ws.join("sub/b.txt"), b"").unwrap()
    });
    guarded(&mut j, &dir, "sub/secret", Change::Create, || {
        std::fs::write(ws.join("sub/secret"), b"x").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    // The guest (a later call, or anyone) swaps `sub` for a link outside.
    std::fs::rename(ws.join("sub"), ws.join("sub.old")).unwrap();
    std::os::unix::fs::symlink(&r.outside, ws.join("sub")).unwrap();
    let reps = rollback(&r, &[0]);
    assert!(!reps[0].clean);
    assert_eq!(
        std::fs::read(r.outside.join("secret")).unwrap(),
        b"secret",
        "nothing removed or written outside"
    );
    assert!(!r.outside.join("b.txt").exists());
}

#[test]
fn guest_paths_outside_the_grant_are_never_journaled() {
    let r = rig();
    let dir = r.dir();
    std::os::unix::fs::symlink(&r.outside, r.ws.join("out")).unwrap();
    std::os::unix::fs::symlink("../outside/secret", r.ws.join("rel-out")).unwrap();
    let j = r.journal(0);
    for p in [
        "../outside/secret",
        "out/secret",
        "sub/../../outside/secret",
    ] {
        assert!(locate(j.roots(), &dir, p, false).is_err(), "{p}");
    }
    assert!(locate(j.roots(), &dir, "rel-out", true).is_err());
    // Not following: the link itself is the path (inside the grant).
    assert_eq!(
        locate(j.roots(), &dir, "rel-out", false)
            .unwrap()
            .rel
            .as_str(),
        "rel-out"
    );
}

#[test]
fn past_a_cap_the_change_and_every_later_one_are_refused() {
    let mut r = rig();
    r.cfg.call_cap_bytes = 400;
    let dir = r.dir();
    std::fs::write(r.ws.join("big"), vec![7u8; 1000]).unwrap();
    let mut j = r.journal(0);
    let loc = locate(j.roots(), &dir, "big", true).unwrap();
    assert!(matches!(
        j.before(&loc, Change::Write),
        Err(JournalError::Quota(_))
    ));
    let loc = locate(j.roots(), &dir, "small", true).unwrap();
    assert!(
        matches!(j.before(&loc, Change::Create), Err(JournalError::Quota(_))),
        "stopped for the rest of the call"
    );
    j.start_call();
    assert!(j.before(&loc, Change::Create).is_ok());
    // The saga cap counts the other steps' journals.
    r.cfg.call_cap_bytes = 1 << 20;
    r.cfg.saga_cap_bytes = j.bytes() + 100;
    drop(j);
    let mut j2 = r.journal(1);
    let loc = locate(j2.roots(), &dir, "big", true).unwrap();
    assert!(matches!(
        j2.before(&loc, Change::Write),
        Err(JournalError::Quota(_))
    ));
}

#[test]
fn an_interrupted_restore_resumes_with_its_plan_and_a_second_pass_changes_nothing() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    for i in 0..20 {
        let name = format!("f{i}");
        guarded(&mut j, &dir, &name, Change::Create, || {
            std::fs::write(ws.join(&name), format!("{i}")).unwrap()
        });
    }
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"x").unwrap()
    });
    j.seal().unwrap();
    // A pass planned, then the process dies: nothing restored yet.
    let plan = j.plan(&Expected::new()).unwrap();
    assert!(plan.conflicts.is_empty());
    drop(j);
    // Someone removes f3 meanwhile (the plan is kept: resumed, not redone).
    let mut j = StepJournal::reopen(&r.cfg, "saga-1", 0, Roots::default())
        .unwrap()
        .unwrap();
    let plan = j.open_plan().expect("an open plan");
    assert!(plan.resumed);
    let rep = j.restore(&plan, &r.allowed());
    assert!(rep.clean, "{rep:#?}");
    assert_eq!(snapshot(&r.ws), before);
    assert!(j.open_plan().is_none());
    // Another pass over the restored files: nothing moves.
    let plan = j.plan(&Expected::new()).unwrap();
    let rep = j.restore(&plan, &r.allowed());
    assert_eq!(snapshot(&r.ws), before, "{rep:#?}");
}

#[test]
fn a_torn_tail_is_cut_off_and_the_rest_restores() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"zz").unwrap()
    });
    let path = j.path().to_path_buf();
    drop(j);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"CSJ1\x10\x00\x00\x00garbage").unwrap();
    let mut j = StepJournal::reopen(&r.cfg, "saga-1", 0, Roots::default())
        .unwrap()
        .unwrap();
    assert_eq!(j.changes(), 1);
    let plan = j.plan(&Expected::new()).unwrap();
    assert!(j.restore(&plan, &r.allowed()).clean);
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_restore_touches_only_the_steps_grants() {
    let r = rig();
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"zz").unwrap()
    });
    j.seal().unwrap();
    let plan = j.plan(&Expected::new()).unwrap();
    let rep = j.restore(&plan, &["/somewhere/else".to_string()]);
    assert!(!rep.clean);
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"zz");
}

#[test]
fn a_path_put_back_as_the_step_left_it_is_restored_not_reported() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "a.txt", Change::Write, || {
        std::fs::write(ws.join("a.txt"), b"by the step").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    // Someone rewrites it (a new inode, new times) with the same bytes.
    std::fs::remove_file(ws.join("a.txt")).unwrap();
    std::fs::write(ws.join("a.txt"), b"by the step").unwrap();
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean, "{reps:#?}");
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_directory_removed_after_a_compensation_wrote_in_it_comes_back_first() {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "made", Change::CreateDir, || {
        std::fs::create_dir(ws.join("made")).unwrap()
    });
    guarded(&mut j, &dir, "made/x", Change::Create, || {
        std::fs::write(ws.join("made/x"), b"x").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    // The rollback: plan, then the tool's compensation (lent the journal)
    // removes what the step made and more, then the restore.
    let mut j = StepJournal::reopen(&r.cfg, "saga-1", 0, r.roots())
        .unwrap()
        .unwrap();
    let plan = j.plan(&Expected::new()).unwrap();
    j.start_call();
    guarded(&mut j, &dir, "made/x", Change::Write, || {
        std::fs::write(ws.join("made/x"), b"compensating").unwrap()
    });
    guarded(&mut j, &dir, "made/x", Change::Unlink, || {
        std::fs::remove_file(ws.join("made/x")).unwrap()
    });
    guarded(&mut j, &dir, "made", Change::RemoveDir, || {
        std::fs::remove_dir(ws.join("made")).unwrap()
    });
    guarded(&mut j, &dir, "made2", Change::CreateDir, || {
        std::fs::create_dir(ws.join("made2")).unwrap()
    });
    let rep = j.restore(&plan, &r.allowed());
    assert!(rep.clean, "{rep:#?}");
    assert_eq!(snapshot(&r.ws), before);
}

/// A rename recorded, then stopped before it was done (a SIGKILL during a
/// compensation), then the same work done again in the same journal by
/// `redo` (the next recovery's compensation) and renamed over to its end.
/// The restore must see that the first rename never happened, not take the
/// file at its old place for someone else's.
fn rename_stopped_then_redone(redo: impl FnOnce(&mut StepJournal, &File, &Path)) {
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    guarded(&mut j, &dir, "tmp", Change::Create, || {
        std::fs::write(ws.join("tmp"), b"first").unwrap()
    });
    let from = locate(j.roots(), &dir, "tmp", false).unwrap();
    let to = locate(j.roots(), &dir, "a.txt", false).unwrap();
    j.before_rename(&from, &to).unwrap();
    // Stopped here: no rename. The work again, to its end.
    redo(&mut j, &dir, &ws);
    renamed(&mut j, &dir, "tmp", "a.txt", &ws);
    j.seal().unwrap();
    drop(j);
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"second");
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean, "{reps:#?}");
    assert!(
        reps[0]
            .paths
            .iter()
            .any(|p| p.action.contains("stopped before this rename")),
        "{reps:#?}"
    );
    assert_eq!(snapshot(&r.ws), before);
}

#[test]
fn a_rename_journaled_but_never_done_is_not_undone() {
    // The stale temporary file is written again in place: it is still the
    // file the record names.
    rename_stopped_then_redone(|j, dir, ws| {
        guarded(j, dir, "tmp", Change::Write, || {
            std::fs::write(ws.join("tmp"), b"second").unwrap()
        });
    });
}

#[test]
fn a_rename_never_done_whose_source_the_work_again_replaced_is_not_undone() {
    // The work done again removes the stale temporary file and makes a new
    // one (found by crash_recovery with the `ledger` test component's
    // compensation): the restore puts the old bytes back at the old place
    // under a new inode, so the file's identity no longer tells; the
    // journal's next record of the old place, which found the file still
    // there, does.
    rename_stopped_then_redone(|j, dir, ws| {
        guarded(j, dir, "tmp", Change::Unlink, || {
            std::fs::remove_file(ws.join("tmp")).unwrap()
        });
        guarded(j, dir, "tmp", Change::Create, || {
            std::fs::write(ws.join("tmp"), b"second").unwrap()
        });
    });
}

#[test]
fn a_rename_done_is_undone_even_when_its_source_name_is_used_again() {
    // The converse: the rename happened, then a new file took the old
    // name; the next record of the old place found nothing there, so the
    // rename is undone (after that file, which the step made, is removed).
    let r = rig();
    let before = snapshot(&r.ws);
    let dir = r.dir();
    let ws = r.ws.clone();
    let mut j = r.journal(0);
    renamed(&mut j, &dir, "a.txt", "moved.txt", &ws);
    guarded(&mut j, &dir, "a.txt", Change::Create, || {
        std::fs::write(ws.join("a.txt"), b"new").unwrap()
    });
    j.seal().unwrap();
    drop(j);
    let reps = rollback(&r, &[0]);
    assert!(reps[0].clean, "{reps:#?}");
    assert_eq!(snapshot(&r.ws), before);
}
