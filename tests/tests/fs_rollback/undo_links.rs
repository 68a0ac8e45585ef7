//! Issue 45, item 4, from the attacker's side: someone outside the sandbox
//! (this test process) plants a link between a committed step and the
//! rollback a later failing step starts. A tool's own `compensate`
//! (`fs_write`, `fs_edit`, `shell_run`) must not write through it, with the
//! host's file rollback on (the tool's compensate runs first, lent the
//! journal) or off (its compensate is all there is); and the host's journal
//! must not let a lying compensate (`undo_garbage`) write through a hard
//! link either.

use super::*;
use capsaga_core::error::ErrorKind;
use capsaga_core::fsm::State;
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, symlink};
use std::path::PathBuf;

/// What each step writes over `d/a.txt`, and what the planted targets hold,
/// so that a compensate deciding by content would restore through them.
const WRITTEN: &str = "written by the step\n";
const BEFORE: &str = "before the step\n";
const TOOLS: [&str; 4] = ["fs_write", "fs_edit", "shell_run", "undo_garbage"];

struct Rig {
    ws: TestWorkspace,
    outside: PathBuf,
    /// `outside/secret`, `ws/other.txt` and `ws/d2/a.txt`, opened before
    /// anything is planted: whatever names they get later (a shape may
    /// rename one over `d/a.txt`), their bytes must stay [`WRITTEN`].
    held: Vec<(PathBuf, File)>,
}

impl Rig {
    /// `ws/d/a.txt` (one name) holding [`BEFORE`]; `outside/secret`,
    /// `ws/other.txt` and `ws/d2/a.txt` holding [`WRITTEN`].
    fn new(host_rollback: bool) -> Rig {
        let off = if host_rollback {
            ""
        } else {
            "host_rollback = false\n"
        };
        let policy: String = TOOLS
            .iter()
            .map(|t| format!("[tools.{t}]\ngrants = [\"fs:write:~/ws/**\"]\n{off}"))
            .collect();
        let ws = TestWorkspace::new(&TOOLS, &policy);
        let w = ws.ws();
        std::fs::create_dir_all(w.join("d")).unwrap();
        std::fs::create_dir_all(w.join("d2")).unwrap();
        std::fs::write(w.join("d/a.txt"), BEFORE).unwrap();
        std::fs::write(w.join("d2/a.txt"), WRITTEN).unwrap();
        std::fs::write(w.join("other.txt"), WRITTEN).unwrap();
        let outside = ws.root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), WRITTEN).unwrap();
        let held = [
            outside.join("secret"),
            w.join("other.txt"),
            w.join("d2/a.txt"),
        ]
        .into_iter()
        .map(|p| (p.clone(), File::open(&p).unwrap()))
        .collect();
        Rig { ws, outside, held }
    }

    fn a(&self) -> PathBuf {
        self.ws.ws().join("d/a.txt")
    }

    /// The step of `tool` that turns `d/a.txt` from [`BEFORE`] into [`WRITTEN`].
    fn step(&self, tool: &str) -> Value {
        let path = self.ws.ws_path("d/a.txt");
        match tool {
            "fs_write" => json!({"path": path, "content": WRITTEN}),
            "fs_edit" => {
                json!({"path": path, "old_string": "before the step", "new_string": "written by the step"})
            }
            "shell_run" => json!({"script": format!("echo 'written by the step' > {path}")}),
            _ => json!({"ops": [{"op": "write", "path": path, "content": WRITTEN}]}),
        }
    }
}

/// What the outsider plants, and what must be left as it is.
struct Shape {
    name: &'static str,
    plant: fn(&Rig),
    /// What must be left as it is, besides [`Rig::held`].
    kept: Kept,
}

/// What a shape's undo must leave as it is; every file of [`Rig::held`]
/// must keep its bytes too, whatever its name now.
enum Kept {
    /// This file (by name) still holds [`WRITTEN`].
    Bytes(fn(&Rig) -> PathBuf),
    /// `d/a.txt` is still of the kind planted.
    Kind(fn(&std::fs::FileType) -> bool),
    /// Only the held files (one was renamed to `d/a.txt`, whose name the
    /// host's restore may give a new file).
    Held,
}

fn gone(r: &Rig) {
    std::fs::remove_file(r.a()).unwrap();
}

const SHAPES: [Shape; 9] = [
    Shape {
        name: "a hard link to a file outside the grant",
        plant: |r| {
            gone(r);
            std::fs::hard_link(r.outside.join("secret"), r.a()).unwrap();
        },
        kept: Kept::Bytes(|r| r.outside.join("secret")),
    },
    Shape {
        name: "a hard link to another file of the grant",
        plant: |r| {
            gone(r);
            std::fs::hard_link(r.ws.ws().join("other.txt"), r.a()).unwrap();
        },
        kept: Kept::Bytes(|r| r.ws.ws().join("other.txt")),
    },
    Shape {
        name: "a second name given to the file itself",
        plant: |r| std::fs::hard_link(r.a(), r.ws.ws().join("alias")).unwrap(),
        kept: Kept::Bytes(|r| r.ws.ws().join("alias")),
    },
    Shape {
        name: "a symbolic link swapped in for the file",
        plant: |r| {
            gone(r);
            symlink("../other.txt", r.a()).unwrap();
        },
        kept: Kept::Bytes(|r| r.ws.ws().join("other.txt")),
    },
    Shape {
        name: "the file's directory swapped for a symbolic link",
        plant: |r| {
            let w = r.ws.ws();
            std::fs::rename(w.join("d"), w.join("d.old")).unwrap();
            symlink("d2", w.join("d")).unwrap();
        },
        kept: Kept::Bytes(|r| r.ws.ws().join("d2/a.txt")),
    },
    Shape {
        name: "a directory in the file's place",
        plant: |r| {
            gone(r);
            std::fs::create_dir(r.a()).unwrap();
        },
        kept: Kept::Kind(std::fs::FileType::is_dir),
    },
    Shape {
        name: "a FIFO in the file's place",
        plant: |r| {
            gone(r);
            let ok = std::process::Command::new("mkfifo")
                .arg(r.a())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "mkfifo {:?}", r.a());
        },
        kept: Kept::Kind(FileTypeExt::is_fifo),
    },
    Shape {
        name: "another file of the grant renamed over the file",
        plant: |r| std::fs::rename(r.ws.ws().join("other.txt"), r.a()).unwrap(),
        kept: Kept::Held,
    },
    Shape {
        name: "the file's directory renamed away and another renamed in",
        plant: |r| {
            let w = r.ws.ws();
            std::fs::rename(w.join("d"), w.join("d.old")).unwrap();
            std::fs::rename(w.join("d2"), w.join("d")).unwrap();
        },
        kept: Kept::Held,
    },
];

/// What the rollback did to step 0.
struct Seen {
    /// The step's compensation error (kind, message), if it failed.
    error: Option<(ErrorKind, String)>,
    /// The host's restore record's word on the tool's own compensate.
    tool_compensate: Option<String>,
    /// Which case, for messages.
    what: String,
}

/// Step 0 by `tool`, `shape` planted, step 1 fails (a write outside the
/// grant) and rolls the saga back: what the rollback did to step 0.
async fn planted_then_rolled_back(tool: &str, shape: &Shape, host_rollback: bool) -> (Rig, Seen) {
    let r = Rig::new(host_rollback);
    let host = r.ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let step = submit(&door, &mut saga, tool, r.step(tool)).await;
    assert!(
        matches!(step, Outcome::Committed { .. }),
        "{tool}: {step:?}"
    );
    assert_eq!(std::fs::read_to_string(r.a()).unwrap(), WRITTEN, "{tool}");
    (shape.plant)(&r);
    let outside = r.outside.join("x").to_string_lossy().into_owned();
    let fail = json!({"path": outside, "content": "x"});
    let rollback = match submit(&door, &mut saga, "fs_write", fail).await {
        Outcome::Failed { rollback, .. } => rollback,
        other => panic!("{tool}, {}: {other:?}", shape.name),
    };
    let what = format!("{tool}, {}, host rollback {host_rollback}", shape.name);
    if !host_rollback {
        // The tool's compensate is all there is: its refusal leaves the
        // step for the operator.
        assert_eq!(
            rollback.final_state,
            State::FailedRollbackPartial,
            "{what}: {rollback:#?}"
        );
    }
    let undo = rollback
        .undone
        .iter()
        .find(|u| u.seq == 0)
        .unwrap_or_else(|| panic!("{what}: step 0 not undone: {rollback:#?}"));
    let fs_restore = restores(&host, saga.id())
        .await
        .into_iter()
        .find(|d| d.get("tool_compensate").is_some());
    let seen = Seen {
        error: undo
            .result
            .as_ref()
            .err()
            .map(|e| (e.kind, e.message.clone())),
        tool_compensate: fs_restore.and_then(|d| d["tool_compensate"].as_str().map(str::to_owned)),
        what,
    };
    // Nothing was written through what was planted.
    match shape.kept {
        Kept::Bytes(victim) => {
            let v = victim(&r);
            let now = std::fs::read_to_string(&v).unwrap();
            assert_eq!(now, WRITTEN, "{}: written through {v:?}", seen.what);
        }
        Kept::Kind(is) => {
            let ft = std::fs::symlink_metadata(r.a()).unwrap().file_type();
            assert!(is(&ft), "{}: {ft:?}", seen.what);
        }
        Kept::Held => {}
    }
    for (name, file) in &r.held {
        if host_rollback && same_object(file, &r.a()) {
            // Renamed to `d/a.txt`, where it is the one name of the file
            // and holds what the step left: the host's restore rewrites
            // that path by its bytes (a file with one name only), after
            // the tool's own compensate refused (checked by the callers).
            continue;
        }
        let mut buf = vec![0; WRITTEN.len() + 64];
        let n = file.read_at(&mut buf, 0).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&buf[..n]),
            WRITTEN,
            "{}: written through the file first named {name:?}",
            seen.what
        );
    }
    assert!(
        !r.outside.join("x").exists(),
        "{}: the failing step wrote",
        seen.what
    );
    (r, seen)
}

/// Whether `file` is the object at `path` now.
fn same_object(file: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (held, now) = (file.metadata().unwrap(), std::fs::symlink_metadata(path));
    now.is_ok_and(|m| (m.dev(), m.ino()) == (held.dev(), held.ino()))
}

/// Every shape against `tool`'s own compensate, with the host's file
/// rollback on and off.
async fn tool_refuses_every_shape(tool: &str) {
    for (shape, host_rollback) in SHAPES.iter().flat_map(|s| [(s, true), (s, false)]) {
        let (_r, seen) = planted_then_rolled_back(tool, shape, host_rollback).await;
        if host_rollback {
            // The tool's compensate ran first and refused. The host's
            // restore then either left the path alone (someone else's now)
            // or, finding what the step left there by content, put a new
            // file in its place: never through the planted link.
            let t = seen.tool_compensate.clone().unwrap_or_default();
            assert!(t.starts_with("failed: "), "{}: {t:?}", seen.what);
        } else {
            assert_eq!(
                seen.error.as_ref().map(|e| e.0),
                Some(ErrorKind::Unrevertible),
                "{}: {:?}",
                seen.what,
                seen.error
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fs_write_undo_never_writes_through_a_link_planted_after_the_step() {
    tool_refuses_every_shape("fs_write").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fs_edit_undo_never_writes_through_a_link_planted_after_the_step() {
    tool_refuses_every_shape("fs_edit").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_run_undo_never_writes_through_a_link_planted_after_the_step() {
    tool_refuses_every_shape("shell_run").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lying_compensate_cannot_write_through_a_hard_link_planted_after_the_step() {
    // `undo_garbage` writes garbage over what it wrote, whatever is there,
    // and says it succeeded: the host's journal, lent to it, refuses to
    // open a file that has gained a name since the step (the first three
    // shapes), and the victim keeps its bytes (checked in
    // `planted_then_rolled_back`).
    for shape in &SHAPES[..3] {
        let (_r, seen) = planted_then_rolled_back("undo_garbage", shape, true).await;
        assert_eq!(seen.tool_compensate.as_deref(), Some("ok"), "{}", seen.what);
    }
}
