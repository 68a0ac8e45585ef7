//! The guarded file natively: every shape a link or a swap can take
//! between a step and its undo, refused; the file itself, accepted.

use super::*;
use crate::fs::test_dir::TestDir;
use crate::fs::{with_granted_roots, write_file};
use std::fs;

/// A fresh test directory with `ws/d/a.txt` and `outside/secret`.
fn dirs(name: &str) -> TestDir {
    let d = TestDir::new(&format!("file-{name}"));
    fs::create_dir_all(d.0.join("ws/d")).unwrap();
    fs::create_dir_all(d.0.join("outside")).unwrap();
    fs::write(d.0.join("ws/d/a.txt"), "step wrote this").unwrap();
    fs::write(d.0.join("outside/secret"), "step wrote this").unwrap();
    d
}

fn in_ws<R>(d: &TestDir, f: impl FnOnce(&Path) -> R) -> R {
    let ws = d.0.join("ws");
    with_granted_roots([&ws], || f(&ws))
}

fn id_of(p: &Path) -> FileId {
    open_file(p, &Expect::Any).unwrap().unwrap().id().clone()
}

#[test]
fn the_file_itself_is_accepted_read_and_rewritten_in_place() {
    let d = dirs("itself");
    in_ws(&d, |ws| {
        let a = ws.join("d/a.txt");
        let id = id_of(&a);
        assert_eq!(id.names, 1);
        let f = open_file(&a, &Expect::Same(id.clone())).unwrap().unwrap();
        assert_eq!(f.read_at_most(100).unwrap(), b"step wrote this");
        assert_eq!(f.read_at_most(3).unwrap().len(), 4, "max + 1 bytes");
        let scratch = ws.join("d/.scratch");
        write_file(&a, b"before", &scratch, &Expect::Same(id.clone())).unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"before");
        assert_eq!(id_of(&a), id, "same object");
        assert!(
            open_file(&ws.join("d/none"), &Expect::Any)
                .unwrap()
                .is_none()
        );
        assert!(
            open_file(&ws.join("no/none"), &Expect::OneName)
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            open_file(&ws.join("no/none"), &Expect::Same(id.clone())),
            Err(FileError::Gone)
        ));
        assert!(matches!(
            open_file(&a, &Expect::Absent),
            Err(FileError::Occupied)
        ));
        assert!(matches!(
            open_file(Path::new("/elsewhere/x"), &Expect::Any),
            Err(FileError::Outside)
        ));
    });
}

#[test]
fn links_and_swaps_planted_after_the_step_are_refused_and_never_written() {
    use std::os::unix::fs::symlink;
    // (shape, what the outsider does, the refusal expected)
    type Plant = fn(&Path, &Path);
    let shapes: [(&str, Plant, &str); 6] = [
        (
            "hard link to a file outside",
            |ws, out| {
                fs::remove_file(ws.join("d/a.txt")).unwrap();
                fs::hard_link(out.join("secret"), ws.join("d/a.txt")).unwrap();
            },
            "replaced",
        ),
        (
            "second name inside the grant",
            |ws, _| {
                fs::hard_link(ws.join("d/a.txt"), ws.join("alias")).unwrap();
            },
            "names",
        ),
        (
            "symlink swapped in for the file",
            |ws, out| {
                fs::remove_file(ws.join("d/a.txt")).unwrap();
                symlink(out.join("secret"), ws.join("d/a.txt")).unwrap();
            },
            "link",
        ),
        (
            "parent directory swapped for a symlink",
            |ws, out| {
                fs::rename(ws.join("d"), ws.join("d.old")).unwrap();
                fs::copy(ws.join("d.old/a.txt"), out.join("a.txt")).unwrap();
                symlink(out, ws.join("d")).unwrap();
            },
            "detour",
        ),
        (
            "file replaced by a directory",
            |ws, _| {
                fs::remove_file(ws.join("d/a.txt")).unwrap();
                fs::create_dir(ws.join("d/a.txt")).unwrap();
            },
            "not-a-file",
        ),
        (
            "file replaced by a FIFO",
            |ws, _| {
                fs::remove_file(ws.join("d/a.txt")).unwrap();
                let ok = std::process::Command::new("mkfifo")
                    .arg(ws.join("d/a.txt"))
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    fs::create_dir(ws.join("d/a.txt")).unwrap();
                }
            },
            "not-a-file",
        ),
    ];
    for (i, (shape, plant, code)) in shapes.into_iter().enumerate() {
        let d = dirs(&format!("plant{i}"));
        let out = d.0.join("outside");
        in_ws(&d, |ws| {
            let a = ws.join("d/a.txt");
            let id = id_of(&a);
            plant(ws, &out);
            let expect = Expect::Same(id);
            let e = write_file(&a, b"pre-image", &ws.join(".scratch"), &expect).unwrap_err();
            assert_eq!(e.code(), code, "{shape}: {e}");
            let e = remove_file(&a, &expect).unwrap_err();
            assert_eq!(e.code(), code, "{shape}: {e}");
            assert_eq!(
                fs::read(out.join("secret")).unwrap(),
                b"step wrote this",
                "{shape}"
            );
            let tool = e.unrevertible(&a);
            assert_eq!(tool.kind.as_str(), "unrevertible", "{shape}");
            assert!(!crate::fs::interrupted(&ws.join(".scratch")), "{shape}");
        });
        if code == "detour" {
            assert_eq!(fs::read(out.join("a.txt")).unwrap(), b"step wrote this");
        }
    }
}

#[test]
fn one_name_refuses_a_hard_link_and_names_may_only_shrink() {
    let d = dirs("names");
    in_ws(&d, |ws| {
        let a = ws.join("d/a.txt");
        fs::hard_link(&a, ws.join("b.txt")).unwrap();
        // Two names at the step (the operator's own link): kept, and the
        // undo may write through both...
        let id = id_of(&a);
        assert_eq!(id.names, 2);
        write_file(&a, b"x", &ws.join(".s"), &Expect::Same(id.clone())).unwrap();
        assert_eq!(fs::read(ws.join("b.txt")).unwrap(), b"x");
        // ... but not through a third one added since.
        fs::hard_link(&a, ws.join("c.txt")).unwrap();
        let e = write_file(&a, b"y", &ws.join(".s"), &Expect::Same(id.clone())).unwrap_err();
        assert!(matches!(e, FileError::Names { now: 3, then: 2 }), "{e}");
        fs::remove_file(ws.join("c.txt")).unwrap();
        fs::remove_file(ws.join("b.txt")).unwrap();
        write_file(&a, b"z", &ws.join(".s"), &Expect::Same(id)).unwrap();
        // Without an identity, one name only.
        fs::hard_link(&a, ws.join("b.txt")).unwrap();
        let e = write_file(&a, b"w", &ws.join(".s"), &Expect::OneName).unwrap_err();
        assert!(matches!(e, FileError::Names { now: 2, then: 1 }), "{e}");
        assert_eq!(fs::read(&a).unwrap(), b"z");
        // A path the step creates must still be free.
        let e = write_file(&a, b"w", &ws.join(".s"), &Expect::Absent).unwrap_err();
        assert!(matches!(e, FileError::Occupied), "{e}");
        write_file(&ws.join("new"), b"n", &ws.join(".s"), &Expect::Absent).unwrap();
        assert!(remove_file(&ws.join("new"), &Expect::OneName).unwrap());
        assert!(!remove_file(&ws.join("new"), &Expect::OneName).unwrap());
    });
}
