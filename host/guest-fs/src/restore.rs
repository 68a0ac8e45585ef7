//! Rolling a step's files back from its journal.
//!
//! A restore is a **pass** over a step's journal:
//! 1. [`StepJournal::plan`] (before the tool's own `compensate` runs)
//!    compares each path the step changed with what is expected there: what
//!    the restore of a later step of the saga left (the `expected` map, see
//!    [`fold`]), else what the step itself left when its call ended (its
//!    `post` record). A path someone else changed since is **left alone** and
//!    reported. The plan is recorded (synced), so a pass interrupted and
//!    resumed leaves alone exactly the same paths.
//! 2. [`StepJournal::restore`] undoes the records in reverse order: a path
//!    that was absent is removed (a directory only when empty: what is left
//!    inside was not the step's), a file is rewritten byte for byte with its
//!    mode and modification time, a directory or a link recreated, a rename
//!    renamed back (never over something: `RENAME_NOREPLACE`). Each record
//!    done is noted, so neither a resumed pass nor a later one (an
//!    operator's retry) redoes it: the records are a history, undone once;
//!    the one action a kill interrupted before its note is idempotent. A
//!    change made after a record was undone (the tool's compensation, run
//!    again before a resumed pass) is journaled anew, so the pass undoes it
//!    first.
//!    Nothing is created on the way to a path: in reverse order its parent
//!    is back before it, so a missing one was removed by someone else.
//! 3. The granted directories are synced (`syncfs`), then a `finished`
//!    record (synced) says what each path holds now: the next older step's
//!    expectation.
//!
//! Every action works on a parent directory reached from the granted
//! directory one plain name at a time (no link followed, as
//! [`crate::beneath::walk`]) and on one plain name in it:
//! nothing is written through a link or into a file another name shares (a
//! file is rewritten in place only when the descriptor opened without
//! following is a regular file with one name; otherwise a new file is
//! renamed over the name), nothing is reached by an absolute path, nothing
//! outside the step's grants.

use crate::journal::StepJournal;
use crate::record::{At, Fingerprint, Header, Prior, Time};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// What each path is expected to hold when an older step is restored: what
/// the restore of the nearest later step left (`None`: it left the path
/// alone, so older steps leave it alone too).
pub type Expected = BTreeMap<At, Option<Fingerprint>>;

/// What a finished pass left at each path (`None`: left alone).
pub type Left = Vec<(At, Option<Fingerprint>)>;

/// Fold the result of a finished pass into `expected` (steps are restored
/// newest first, so the latest fold is the nearest later step).
pub fn fold(expected: &mut Expected, left: &[(At, Option<Fingerprint>)]) {
    for (at, fp) in left {
        expected.insert(at.clone(), *fp);
    }
}

/// A restore pass: its number and the paths it leaves alone.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Pass number (from 1).
    pub pass: u32,
    /// Paths left alone, and why.
    pub conflicts: BTreeMap<At, String>,
    /// True when this pass was started before and is being resumed.
    pub resumed: bool,
}

/// What the restore did to one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// The path, absolute.
    pub path: String,
    /// What was done, or why not.
    pub action: String,
    /// False when the path was left alone or the action failed.
    pub ok: bool,
}

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreReport {
    /// The pass.
    pub pass: u32,
    /// True when the pass resumed an interrupted one.
    pub resumed: bool,
    /// Each record undone or left, in the order of the restore.
    pub paths: Vec<Restored>,
    /// True when every path was restored.
    pub clean: bool,
}

impl RestoreReport {
    /// The paths that were not restored, with why: `path (why)`.
    pub fn problems(&self) -> Vec<String> {
        self.paths
            .iter()
            .filter(|r| !r.ok)
            .map(|r| format!("{} ({})", r.path, r.action))
            .collect()
    }
}

impl StepJournal {
    /// The latest finished pass: its number, whether it was clean, and what
    /// it left at each path.
    pub fn last_finished(&self) -> Option<(u32, bool, Left)> {
        self.frames.iter().rev().find_map(|f| match &f.header {
            Header::Finished { pass, clean, left } => Some((*pass, *clean, left.clone())),
            _ => None,
        })
    }

    /// A pass that was planned and never finished (a restore interrupted).
    pub fn open_plan(&self) -> Option<Plan> {
        let mut plan = None;
        for f in &self.frames {
            match &f.header {
                Header::Plan { pass, conflicts } => {
                    plan = Some(Plan {
                        pass: *pass,
                        conflicts: conflicts.iter().cloned().collect(),
                        resumed: true,
                    });
                }
                Header::Finished { pass, .. } if plan.as_ref().is_some_and(|p| p.pass == *pass) => {
                    plan = None;
                }
                _ => {}
            }
        }
        plan
    }

    /// Start a new restore pass: find the paths someone else changed since
    /// the step (see the module documentation) and record the plan.
    ///
    /// # Errors
    /// The I/O error writing the plan.
    pub fn plan(&mut self, expected: &Expected) -> io::Result<Plan> {
        let pass = self
            .frames
            .iter()
            .filter_map(|f| match &f.header {
                Header::Plan { pass, .. } => Some(*pass),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            + 1;
        let post = self.post();
        // What an earlier pass of this step left (a retry after a pass that
        // left some paths alone): the paths it restored hold its work.
        let own: BTreeMap<At, Option<Fingerprint>> = self
            .last_finished()
            .map(|(_, _, left)| left.into_iter().collect())
            .unwrap_or_default();
        let done = self.done_records();
        self.forget_parents();
        let mut conflicts = BTreeMap::new();
        for at in self.paths_of(|i| !done.contains_key(&(i as u32))) {
            let want = match expected.get(&at) {
                Some(None) => {
                    conflicts.insert(
                        at,
                        "left alone by the rollback of a later step: someone else changed it"
                            .to_string(),
                    );
                    continue;
                }
                Some(Some(fp)) => Some(*fp),
                None => match own.get(&at) {
                    Some(Some(fp)) => Some(*fp),
                    _ => post.get(&at).copied(),
                },
            };
            let Some(want) = want else { continue };
            // The bytes are summed only when the cheap look differs.
            let mut now = self.look_with(&at, false);
            if !now.same(&want) && want.sum.is_some() {
                now = self.look_with(&at, true);
            }
            if !now.same(&want) {
                conflicts.insert(
                    at,
                    format!(
                        "changed since the step by someone else: the step left {}, it holds {}",
                        want.describe(),
                        now.describe()
                    ),
                );
            }
        }
        self.forget_parents();
        let header = Header::Plan {
            pass,
            conflicts: conflicts
                .iter()
                .map(|(a, w)| (a.clone(), w.clone()))
                .collect(),
        };
        self.note(&header, true)?;
        Ok(Plan {
            pass,
            conflicts,
            resumed: false,
        })
    }

    /// Restore the journal in reverse for `plan`, touching only paths under
    /// the directories named in `allowed` (the step's write grants).
    pub fn restore(&mut self, plan: &Plan, allowed: &[String]) -> RestoreReport {
        let mut unlimited = None;
        match self.restore_until(plan, allowed, &mut unlimited) {
            Some(report) => report,
            None => unreachable!("a restore without a kill point runs to its end"),
        }
    }

    /// [`StepJournal::restore`], stopped as a kill would stop it when
    /// `ticks` runs out (`None`: never): a tick before each record's action
    /// and one between the action and its progress note. `None` when
    /// stopped. For the crash tests, which stop a restore at every point.
    pub(crate) fn restore_until(
        &mut self,
        plan: &Plan,
        allowed: &[String],
        ticks: &mut Option<usize>,
    ) -> Option<RestoreReport> {
        let mut tick = || match ticks {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
            None => true,
        };
        let mut clean = plan.conflicts.is_empty();
        let mut paths: Vec<Restored> = plan
            .conflicts
            .iter()
            .map(|(at, why)| Restored {
                path: at.display(),
                action: format!("left alone: {why}"),
                ok: false,
            })
            .collect();
        let done = self.done_records();
        self.forget_parents();
        let mut dir_times: Vec<(At, Time)> = Vec::new();
        let mut used_roots = BTreeSet::new();
        // What the nearest later record of each path found there (the
        // loop goes from the newest record back): a `Pre`'s `id`, `None`
        // after a rename to or from the path. Read for a rename recorded
        // but perhaps never done (`undo_move`'s `stayed`).
        let mut next_found: BTreeMap<At, Option<(u64, u64)>> = BTreeMap::new();
        for i in (0..self.frames.len()).rev() {
            let header = self.frames[i].header.clone();
            let ats: Vec<&At> = match &header {
                Header::Pre { at, .. } => vec![at],
                Header::Moved { from, to, .. } => vec![to, from],
                _ => continue,
            };
            let source_found = track_found(&mut next_found, &header);
            let shown = ats[0].display();
            if let Some((pass, action)) = done.get(&(i as u32)) {
                // Done before an interruption of this pass (reported), or
                // by an earlier pass (not repeated: the records are a
                // history, undone once).
                if *pass == plan.pass {
                    paths.push(Restored {
                        path: shown,
                        action: action.clone(),
                        ok: true,
                    });
                }
                continue;
            }
            if ats.iter().any(|a| plan.conflicts.contains_key(*a)) {
                continue;
            }
            if let Some(a) = ats.iter().find(|a| !allowed.contains(&a.root)) {
                clean = false;
                paths.push(Restored {
                    path: a.display(),
                    action: "not restored: not under a directory this step was granted for writing"
                        .into(),
                    ok: false,
                });
                continue;
            }
            for a in &ats {
                used_roots.insert(a.root.clone());
            }
            if !tick() {
                return None;
            }
            let Some(res) = self.undo_record(i, &header, source_found, &mut dir_times) else {
                continue;
            };
            if !tick() {
                return None;
            }
            clean &= self.record_outcome(plan.pass, i, shown, res, &mut paths);
        }
        clean &= self.finish(plan, dir_times, &used_roots, clean);
        Some(RestoreReport {
            pass: plan.pass,
            resumed: plan.resumed,
            paths,
            clean,
        })
    }

    /// Undo record `i` (`header`): a path's prior state put back (a
    /// directory's time noted in `dir_times`, put back at the end), or a
    /// rename reversed (`source_found`: what the next record of its source
    /// found there). `None` for a record that is neither.
    fn undo_record(
        &mut self,
        i: usize,
        header: &Header,
        source_found: Option<(u64, u64)>,
        dir_times: &mut Vec<(At, Time)>,
    ) -> Option<Result<String, String>> {
        Some(match header {
            Header::Pre { at, prior, .. } => {
                if let Prior::Dir { mtime, .. } = prior {
                    dir_times.push((at.clone(), *mtime));
                }
                self.restore_pre(i, at, prior)
            }
            Header::Moved { from, to, what } => {
                let stayed = what.is_some() && source_found == *what;
                let r = self.undo_move(from, to, *what, stayed);
                self.forget_parents();
                r
            }
            _ => return None,
        })
    }

    /// Note that record `i` was undone in this pass, and report what
    /// happened to its path in `paths`. False when it was not restored.
    fn record_outcome(
        &mut self,
        pass: u32,
        i: usize,
        shown: String,
        res: Result<String, String>,
        paths: &mut Vec<Restored>,
    ) -> bool {
        match res {
            Ok(action) => {
                let note = Header::Done {
                    pass,
                    i: i as u32,
                    action: action.clone(),
                };
                if let Err(e) = self.note(&note, false) {
                    tracing::warn!("restore progress not recorded: {e}");
                }
                paths.push(Restored {
                    path: shown,
                    action,
                    ok: true,
                });
                true
            }
            Err(why) => {
                paths.push(Restored {
                    path: shown,
                    action: format!("not restored: {why}"),
                    ok: false,
                });
                false
            }
        }
    }

    /// The end of a restore: the directories' times put back, the roots
    /// synced, what is left of each path and the pass's end recorded.
    /// Whether the restore is still `clean`.
    fn finish(
        &mut self,
        plan: &Plan,
        dir_times: Vec<(At, Time)>,
        used_roots: &BTreeSet<String>,
        mut clean: bool,
    ) -> bool {
        for (at, mtime) in dir_times {
            let _ = self.set_dir_mtime(&at, mtime);
        }
        for name in used_roots {
            if let Ok(i) = self.roots.get_or_open(name)
                && let Some(r) = self.roots.at(i)
                && let Err(e) = rustix::fs::syncfs(&r.dir)
            {
                tracing::warn!("syncfs {name}: {e}");
            }
        }
        let mut left = Vec::new();
        for at in self.paths() {
            let fp = if plan.conflicts.contains_key(&at) {
                None
            } else {
                // No sums: an older step compares with these only while
                // nothing touched the path since (same inode and times).
                Some(self.look(&at))
            };
            left.push((at, fp));
        }
        let finished = Header::Finished {
            pass: plan.pass,
            clean,
            left,
        };
        if let Err(e) = self.note(&finished, true) {
            tracing::warn!("the end of the restore was not recorded: {e}");
            clean = false;
        }
        clean
    }

    /// Records undone by any pass: index → (pass, what was done).
    fn done_records(&self) -> BTreeMap<u32, (u32, String)> {
        self.frames
            .iter()
            .filter_map(|f| match &f.header {
                Header::Done { pass, i, action } => Some((*i, (*pass, action.clone()))),
                _ => None,
            })
            .collect()
    }
}

/// What the nearest later record found at the source of a rename
/// (`header`, read before it is noted), and `header` noted in `next_found`
/// (see `StepJournal::restore_until`).
fn track_found(
    next_found: &mut BTreeMap<At, Option<(u64, u64)>>,
    header: &Header,
) -> Option<(u64, u64)> {
    let source_found = match header {
        Header::Moved { from, .. } => next_found.get(from).copied().flatten(),
        _ => None,
    };
    match header {
        Header::Pre { at, id, .. } => {
            next_found.insert(at.clone(), *id);
        }
        Header::Moved { from, to, .. } => {
            next_found.insert(from.clone(), None);
            next_found.insert(to.clone(), None);
        }
        _ => {}
    }
    source_found
}
