use super::*;
use crate::preimage::hex;

fn prev(existed: bool, sha: Option<&str>) -> Previous {
    Previous {
        existed,
        content: sha.map(|_| "x".into()),
        encoding: sha.map(|_| Encoding::Utf8),
        sha256: sha.map(str::to_owned),
        id: None,
    }
}

fn file(sha: &str) -> Current {
    Current::File { sha256: sha.into() }
}

#[test]
fn decide_covers_every_case() {
    let new = prev(false, None);
    let old = prev(true, Some("old"));
    // Created a file.
    assert_eq!(decide(&new, "w", &Current::Absent), Plan::Nothing);
    assert_eq!(decide(&new, "w", &file("w")), Plan::Remove);
    assert_eq!(decide(&new, "w", &file("x")), Plan::Conflict);
    assert_eq!(decide(&new, "w", &Current::Other), Plan::Conflict);
    // Replaced a file.
    assert_eq!(decide(&old, "w", &file("old")), Plan::Nothing);
    assert_eq!(decide(&old, "w", &file("w")), Plan::Restore);
    assert_eq!(decide(&old, "w", &file("x")), Plan::Conflict);
    assert_eq!(decide(&old, "w", &Current::Absent), Plan::Conflict);
    assert_eq!(decide(&old, "w", &Current::Other), Plan::Conflict);
    // Wrote the same content it had.
    assert_eq!(decide(&old, "old", &file("old")), Plan::Nothing);
}

#[test]
fn sha_and_hex() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(hex(&[0x00, 0x0f, 0xf0, 0xff]), "000ff0ff");
}

#[test]
fn meta_is_valid() {
    let meta = capsaga_sdk::describe::<FsWrite>(env!("CARGO_PKG_VERSION"));
    assert_eq!(meta.check(), Ok(()));
    assert!(meta.has_side_effects && meta.idempotent && meta.supports_dry_run);
    assert_eq!(meta.risk, Risk::Medium);
    assert_eq!(meta.capabilities, ["fs:write:*"]);
    let schema = meta.args_schema.unwrap_or_default();
    assert_eq!(schema["required"], json!(["path", "content"]));
    assert_eq!(schema["properties"]["create_dirs"]["default"], false);
}

// Native end-to-end tests on a scratch directory.

struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("fs_write-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Scratch(dir)
    }
    fn path(&self, rel: &str) -> String {
        self.0.join(rel).display().to_string()
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn args(path: &str, content: &str, create_dirs: bool) -> Args {
    Args {
        path: path.into(),
        content: content.into(),
        create_dirs,
    }
}

fn run(a: &Args) -> Output {
    FsWrite::execute(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"))
}

fn undo(a: &Args, out: &Output) -> Result<(), ToolError> {
    FsWrite::compensate(&CallContext::default(), a.clone(), out)
}

fn read(p: &str) -> Option<Vec<u8>> {
    fs::read(p).ok()
}

#[test]
fn create_then_compensate_removes_file_and_dirs() {
    let s = Scratch::new("create");
    let p = s.path("sub/deeper/a.txt");
    let a = args(&p, "hello", true);
    let dry =
        FsWrite::dry_run(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(read(&p).is_none(), "dry run must not write");
    let out = run(&a);
    assert_eq!(read(&p).as_deref(), Some(&b"hello"[..]));
    let data: WriteData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
    let dry_data: WriteData = dry.data_as().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(data.previous, dry_data.previous);
    assert_eq!(data.written_sha256, dry_data.written_sha256);
    assert_eq!(data.created_dirs, dry_data.created_dirs);
    assert!(data.created && !data.dry_run && dry_data.dry_run);
    assert_eq!(data.created_dirs.len(), 2);
    assert!(
        out.effects
            .iter()
            .any(|e| e == &format!("wrote {p} (5 bytes)"))
    );

    undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
    assert!(read(&p).is_none());
    assert!(!s.0.join("sub").exists(), "created dirs removed");
    undo(&a, &out).unwrap_or_else(|e| panic!("idempotent: {e}"));
}

#[test]
fn replace_then_compensate_restores_binary_content() {
    let s = Scratch::new("replace");
    let p = s.path("a.bin");
    let original = vec![0u8, 0xff, 0xfe, b'x'];
    fs::write(&p, &original).unwrap_or_else(|e| panic!("{e}"));
    let a = args(&p, "new text", false);
    let out = run(&a);
    let data: WriteData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(data.previous.encoding, Some(Encoding::Base64));
    assert!(!data.created);
    assert_eq!(read(&p).as_deref(), Some(&b"new text"[..]));
    undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&p), Some(original.clone()));
    undo(&a, &out).unwrap_or_else(|e| panic!("idempotent: {e}"));
    assert_eq!(read(&p), Some(original));
}

#[test]
fn compensate_with_dry_run_output_tolerates_never_executed() {
    let s = Scratch::new("indoubt");
    let p = s.path("a.txt");
    fs::write(&p, "before").unwrap_or_else(|e| panic!("{e}"));
    let a = args(&p, "after", false);
    let dry =
        FsWrite::dry_run(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"));
    // Crash before execute: nothing to undo.
    undo(&a, &dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&p).as_deref(), Some(&b"before"[..]));
    // Crash after execute: the dry-run pre-image is enough to restore.
    run(&a);
    undo(&a, &dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&p).as_deref(), Some(&b"before"[..]));
}

#[test]
fn compensate_removes_a_temp_file_left_by_a_crash() {
    let s = Scratch::new("crash-tmp");
    let p = s.path("a.txt");
    let ctx = CallContext {
        idempotency_key: "saga:0:fs_write:abc".into(),
        ..CallContext::default()
    };
    let a = args(&p, "after", false);
    let dry = FsWrite::dry_run(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
    // The host was killed after the write, before the rename.
    let tmp = temp_path(Path::new(&p), &ctx, "execute").unwrap_or_default();
    fs::write(&tmp, "after").unwrap_or_else(|e| panic!("{e}"));
    FsWrite::compensate(&ctx, a.clone(), &dry).unwrap_or_else(|e| panic!("{e}"));
    assert!(!tmp.exists(), "temp file left behind");
    assert!(read(&p).is_none());
    // Another step's temp name differs; the same step's is stable.
    let other = CallContext {
        idempotency_key: "saga:1:fs_write:abc".into(),
        ..CallContext::default()
    };
    assert_ne!(
        temp_path(Path::new(&p), &other, "execute"),
        Some(tmp.clone())
    );
    assert_eq!(temp_path(Path::new(&p), &ctx, "execute"), Some(tmp));
}

#[test]
fn third_party_change_is_unrevertible() {
    let s = Scratch::new("conflict");
    let p = s.path("a.txt");
    let a = args(&p, "ours", false);
    let out = run(&a);
    fs::write(&p, "theirs").unwrap_or_else(|e| panic!("{e}"));
    let e = undo(&a, &out).err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(ErrorKind::Unrevertible));
    assert!(e.is_some_and(|e| e.message.contains("changed by someone else")));
    assert_eq!(read(&p).as_deref(), Some(&b"theirs"[..]), "left alone");
}

#[test]
fn same_content_is_left_unchanged() {
    let s = Scratch::new("same");
    let p = s.path("a.txt");
    fs::write(&p, "same").unwrap_or_else(|e| panic!("{e}"));
    let a = args(&p, "same", false);
    let out = run(&a);
    assert!(out.effects.iter().any(|e| e.contains("unchanged")));
    undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&p).as_deref(), Some(&b"same"[..]));
}

#[test]
fn refusals() {
    let s = Scratch::new("refuse");
    let kind = |a: Args| {
        FsWrite::execute(&CallContext::default(), a)
            .err()
            .map(|e| e.kind)
    };
    assert_eq!(
        kind(args("rel.txt", "x", false)),
        Some(ErrorKind::InvalidArgs)
    );
    assert_eq!(
        kind(args(&s.path("no/such/a.txt"), "x", false)),
        Some(ErrorKind::NotFound)
    );
    assert_eq!(
        kind(args(&s.path(""), "x", false)),
        Some(ErrorKind::InvalidArgs)
    );
    let big = s.path("big.txt");
    let size = usize::try_from(MAX_PRE_IMAGE_BYTES).unwrap_or(usize::MAX) + 1;
    fs::write(&big, vec![b'a'; size]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kind(args(&big, "x", false)), Some(ErrorKind::Unsupported));
    #[cfg(unix)]
    {
        let link = s.path("link");
        std::os::unix::fs::symlink(&big, &link).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kind(args(&link, "x", false)), Some(ErrorKind::Unsupported));
    }
    // Nothing left behind by the refusals, no temp files.
    let names: Vec<String> = fs::read_dir(&s.0)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        names.iter().all(|n| !n.contains("capsaga-tmp")),
        "{names:?}"
    );
}

#[cfg(unix)]
#[test]
fn outside_the_grant_is_permission_denied_and_untouched() {
    use capsaga_sdk::fs::with_granted_roots;
    use std::os::unix::fs::symlink;
    let s = Scratch::new("confine");
    let ws = s.0.join("ws");
    fs::create_dir_all(ws.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    let secret = s.0.join("secret.txt");
    fs::write(&secret, "TOP-SECRET").unwrap_or_else(|e| panic!("{e}"));
    fs::write(ws.join("inside.txt"), "inside").unwrap_or_else(|e| panic!("{e}"));
    symlink(&secret, ws.join("abs_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../secret.txt", ws.join("rel_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink(&s.0, ws.join("dir_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../missing_outside.txt", ws.join("dangling_out")).unwrap_or_else(|e| panic!("{e}"));
    symlink("inside.txt", ws.join("in_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink("sub", ws.join("sub_link")).unwrap_or_else(|e| panic!("{e}"));
    let before = fs::read_dir(&s.0).map(Iterator::count).unwrap_or_default();
    let w = ws.display().to_string();
    with_granted_roots([&ws], || {
        for p in [
            format!("{w}/../secret.txt"),
            format!("{w}/../new_outside.txt"),
            format!("{w}/sub/../../new_outside.txt"),
            secret.display().to_string(),
            format!("{w}/abs_link"),
            format!("{w}/rel_link"),
            format!("{w}/dir_link/secret.txt"),
            format!("{w}/dir_link/new_outside.txt"),
            format!("{w}/dangling_out"),
        ] {
            for create_dirs in [false, true] {
                let a = args(&p, "pwned", create_dirs);
                for r in [
                    FsWrite::execute(&CallContext::default(), a.clone()).err(),
                    FsWrite::dry_run(&CallContext::default(), a.clone()).err(),
                ] {
                    assert_eq!(r.map(|e| e.kind), Some(ErrorKind::PermissionDenied), "{p}");
                }
                // A forged output claiming that the step created the file:
                // compensate must not remove anything outside either. A
                // final link is left alone as a third party's change.
                let forged = WriteData {
                    path: p.clone(),
                    resolved_path: None,
                    bytes_written: 10,
                    created: true,
                    created_dirs: vec![s.0.display().to_string()],
                    previous: prev(false, None),
                    written_sha256: sha256_hex(b"TOP-SECRET"),
                    dry_run: false,
                };
                let e = undo(&a, &Output::new(&forged)).err().map(|e| e.kind);
                assert!(
                    matches!(
                        e,
                        Some(ErrorKind::PermissionDenied | ErrorKind::Unrevertible)
                    ),
                    "compensate {p}: {e:?}"
                );
            }
        }
        // A link inside the grant is not written through, and says where to.
        let e = FsWrite::execute(
            &CallContext::default(),
            args(&format!("{w}/in_link"), "x", false),
        )
        .err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(ErrorKind::Unsupported));
        assert!(e.is_some_and(|e| e.llm_hint.contains(&format!("{w}/inside.txt"))));
        // A link to a directory inside the grant is followed.
        let a = args(&format!("{w}/sub_link/new.txt"), "new", false);
        let out = run(&a);
        let data: WriteData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(data.resolved_path, Some(format!("{w}/sub/new.txt")));
        assert_eq!(
            read(&format!("{w}/sub/new.txt")).as_deref(),
            Some(&b"new"[..])
        );
        // Directories named in the output are checked again before removal.
        let outside_dir = s.0.join("empty_outside");
        fs::create_dir(&outside_dir).unwrap_or_else(|e| panic!("{e}"));
        let b = args(&format!("{w}/b.txt"), "b", false);
        let mut data: WriteData = run(&b).data_as().unwrap_or_else(|e| panic!("{e}"));
        data.created_dirs = vec![
            outside_dir.display().to_string(),
            format!("{w}/dir_link/empty_outside"),
        ];
        undo(&b, &Output::new(&data)).unwrap_or_else(|e| panic!("{e}"));
        assert!(read(&format!("{w}/b.txt")).is_none());
        assert!(
            outside_dir.is_dir(),
            "a directory outside the grant was removed"
        );
        fs::remove_dir(&outside_dir).unwrap_or_else(|e| panic!("{e}"));
        // The path now leads elsewhere: compensate refuses to guess.
        fs::remove_file(ws.join("sub_link")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir(ws.join("sub_link")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(ws.join("sub_link/new.txt"), "new").unwrap_or_else(|e| panic!("{e}"));
        let e = undo(&a, &out).err().map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::Unrevertible));
        assert_eq!(
            read(&format!("{w}/sub/new.txt")).as_deref(),
            Some(&b"new"[..])
        );
        assert_eq!(
            read(&format!("{w}/sub_link/new.txt")).as_deref(),
            Some(&b"new"[..])
        );
    });
    assert_eq!(
        read(&secret.display().to_string()).as_deref(),
        Some(&b"TOP-SECRET"[..])
    );
    assert!(!s.0.join("new_outside.txt").exists());
    assert!(!s.0.join("missing_outside.txt").exists());
    assert_eq!(
        fs::read_dir(&s.0).map(Iterator::count).unwrap_or_default(),
        before
    );
    assert_eq!(
        fs::read_link(ws.join("abs_link")).ok(),
        Some(secret.clone())
    );
}

#[test]
fn compensate_rejects_foreign_output() {
    let a = args("/w/a.txt", "x", false);
    let e = undo(&a, &Output::new(json!({"path": "/w/a.txt"}))).err();
    assert_eq!(e.map(|e| e.kind), Some(ErrorKind::InvalidArgs));
}

#[test]
fn replace_and_undo_keep_mode_inode_and_hard_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Scratch::new("modes");
    for mode in [0o600, 0o640, 0o700, 0o755, 0o604] {
        let p = s.path(&format!("f{mode:o}"));
        fs::write(&p, "TOKEN=secret\n").unwrap_or_else(|e| panic!("{e}"));
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap_or_else(|e| panic!("{e}"));
        let link = format!("{p}.link");
        fs::hard_link(&p, &link).unwrap_or_else(|e| panic!("{e}"));
        let meta = |p: &str| fs::metadata(p).unwrap_or_else(|e| panic!("{e}"));
        let ino = meta(&p).ino();
        let a = args(&p, "TOKEN=new\n", false);
        let out = run(&a);
        assert_eq!(meta(&p).permissions().mode() & 0o7777, mode, "{mode:o}");
        assert_eq!((meta(&p).ino(), meta(&p).nlink()), (ino, 2), "{mode:o}");
        assert_eq!(read(&link).as_deref(), Some(&b"TOKEN=new\n"[..]));
        undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p).as_deref(), Some(&b"TOKEN=secret\n"[..]));
        assert_eq!(
            meta(&p).permissions().mode() & 0o7777,
            mode,
            "undo {mode:o}"
        );
        assert_eq!(
            (meta(&p).ino(), meta(&p).nlink()),
            (ino, 2),
            "undo {mode:o}"
        );
    }
}

#[test]
fn a_write_interrupted_in_place_is_restored_by_compensate() {
    let s = Scratch::new("torn");
    let p = s.path("a.txt");
    fs::write(&p, "the previous content").unwrap_or_else(|e| panic!("{e}"));
    let ctx = CallContext {
        idempotency_key: "saga:0:fs_write:torn".into(),
        ..CallContext::default()
    };
    let a = args(&p, "the new content, longer", false);
    let dry = FsWrite::dry_run(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
    // Killed mid-write: the marker is there, the file holds a mix.
    let marker = temp_path(Path::new(&p), &ctx, "execute").unwrap_or_default();
    fs::write(&marker, "").unwrap_or_else(|e| panic!("{e}"));
    fs::write(&p, "the new contentntent").unwrap_or_else(|e| panic!("{e}"));
    FsWrite::compensate(&ctx, a.clone(), &dry).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&p).as_deref(), Some(&b"the previous content"[..]));
    assert!(!marker.exists());
    // Without a marker the same mix is a third party's change.
    fs::write(&p, "the new contentntent").unwrap_or_else(|e| panic!("{e}"));
    let e = FsWrite::compensate(&ctx, a, &dry).err().map(|e| e.kind);
    assert_eq!(e, Some(ErrorKind::Unrevertible));
}
