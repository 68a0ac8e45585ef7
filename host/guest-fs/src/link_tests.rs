//! The hard-link rule holds for a path journaled already (issue 45 item
//! 4): a name linked to the file after the step's first change to it, by
//! someone else, makes every later write, truncation or time change of
//! the step (the rest of the call, or the tool's own compensation, lent the
//! journal) refused as the first one would have been.

use crate::beneath::locate;
use crate::capture::Change;
use crate::journal::{JournalError, StepJournal};
use crate::tests::{Rig, guarded, rig};

#[test]
fn a_name_linked_after_the_first_change_refuses_every_later_write() {
    type Plant = fn(&std::path::Path, &std::path::Path);
    let plants: [(&str, Plant); 3] = [
        ("a hard link to a file outside the grant", |ws, outside| {
            std::fs::remove_file(ws.join("a.txt")).unwrap();
            std::fs::hard_link(outside.join("secret"), ws.join("a.txt")).unwrap();
        }),
        ("a hard link to another file of the grant", |ws, _| {
            std::fs::remove_file(ws.join("a.txt")).unwrap();
            std::fs::hard_link(ws.join("sub/b.txt"), ws.join("a.txt")).unwrap();
        }),
        ("a second name of the file itself", |ws, _| {
            std::fs::hard_link(ws.join("a.txt"), ws.join("alias")).unwrap();
        }),
    ];
    for (what, plant) in plants {
        let r = rig();
        let ws = r.ws.clone();
        // The step: its first write of a.txt is journaled (one name).
        let mut j = r.journal(0);
        write_a(&r, &mut j, b"step");
        j.seal().unwrap();
        drop(j);
        plant(&ws, r.outside());
        // The compensation, lent the step's journal reopened.
        let mut j = StepJournal::reopen(&r.cfg, "saga-1", 0, r.roots())
            .unwrap()
            .unwrap();
        j.start_call();
        let loc = locate(j.roots(), &r.dir(), "a.txt", true).unwrap();
        for change in [Change::Write, Change::Truncate, Change::SetTimes] {
            assert!(
                matches!(j.before(&loc, change), Err(JournalError::Refused(_))),
                "{what}: {change:?}"
            );
        }
        // Removing a name writes through nothing.
        assert!(j.before(&loc, Change::Unlink).is_ok(), "{what}");
    }
}

#[test]
fn a_name_linked_during_the_call_refuses_the_next_write() {
    let r = rig();
    let (dir, ws) = (r.dir(), r.ws.clone());
    let mut j = r.journal(0);
    write_a(&r, &mut j, b"first");
    std::fs::hard_link(ws.join("a.txt"), ws.join("alias")).unwrap();
    let loc = locate(j.roots(), &dir, "a.txt", true).unwrap();
    assert!(matches!(
        j.before(&loc, Change::Write),
        Err(JournalError::Refused(_))
    ));
    // Once the other name is gone, the path is writable again.
    std::fs::remove_file(ws.join("alias")).unwrap();
    assert!(j.before(&loc, Change::Write).is_ok());
}

/// The step writes `bytes` to `a.txt` of `r`'s grant, journaled in `j`.
fn write_a(r: &Rig, j: &mut StepJournal, bytes: &'static [u8]) {
    let a = r.ws.join("a.txt");
    guarded(j, &r.dir(), "a.txt", Change::Write, || {
        std::fs::write(&a, bytes).unwrap()
    });
}
