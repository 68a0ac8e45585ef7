//! Unit tests of the path guard (`super`).

use super::*;
use std::collections::HashMap;

struct MapFs(HashMap<PathBuf, PathBuf>);
impl FsView for MapFs {
    fn read_link(&self, p: &Path) -> Option<PathBuf> {
        self.0.get(p).cloned()
    }
}
fn links(v: &[(&str, &str)]) -> MapFs {
    MapFs(
        v.iter()
            .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
            .collect(),
    )
}
fn r(path: &str, fs: &impl FsView) -> Result<PathBuf, PathError> {
    resolve(Path::new("/ws"), path, Follow::Final, fs)
}

#[test]
fn plain_paths() {
    assert_eq!(
        r("a/b.txt", &NoLinks).unwrap(),
        PathBuf::from("/ws/a/b.txt")
    );
    assert_eq!(r("/ws/a/./b", &NoLinks).unwrap(), PathBuf::from("/ws/a/b"));
    assert_eq!(r("/ws", &NoLinks).unwrap(), PathBuf::from("/ws"));
    assert_eq!(r("a/../b", &NoLinks).unwrap(), PathBuf::from("/ws/b"));
    assert_eq!(r("a//b/", &NoLinks).unwrap(), PathBuf::from("/ws/a/b"));
}

#[test]
fn escapes_refused() {
    assert!(matches!(
        r("..", &NoLinks),
        Err(PathError::EscapesRoot { .. })
    ));
    assert!(matches!(
        r("a/../../etc/passwd", &NoLinks),
        Err(PathError::EscapesRoot { .. })
    ));
    assert!(matches!(
        r("/etc/passwd", &NoLinks),
        Err(PathError::OutsideRoot { .. })
    ));
    assert!(matches!(
        r("/wsx/a", &NoLinks),
        Err(PathError::OutsideRoot { .. })
    ));
    assert!(matches!(
        r("/ws/../etc", &NoLinks),
        Err(PathError::EscapesRoot { .. })
    ));
    assert!(matches!(
        r("a\0b", &NoLinks),
        Err(PathError::ControlCharacter)
    ));
    assert!(matches!(r("", &NoLinks), Err(PathError::Empty)));
}

#[test]
fn special_names_refused() {
    for bad in [
        "CON", "nul.txt", "Com1", "lpt9.log", "a:stream", "a\\b", "trail.", "trail ", "COM¹",
    ] {
        assert!(
            matches!(r(bad, &NoLinks), Err(PathError::SpecialName(_))),
            "{bad}"
        );
    }
    for fine in ["console", "com10", "nullable", ".hidden", "a.b.c"] {
        assert!(r(fine, &NoLinks).is_ok(), "{fine}");
    }
}

#[test]
fn symlinks_followed_inside_refused_outside() {
    let fs = links(&[
        ("/ws/in", "sub/target"),
        ("/ws/abs", "/etc"),
        ("/ws/up", "../etc"),
        ("/ws/sub/deep", "../../outside"),
        ("/ws/sub/ok", "../other"),
        ("/ws/loop", "loop"),
    ]);
    assert_eq!(r("in", &fs).unwrap(), PathBuf::from("/ws/sub/target"));
    assert!(matches!(
        r("abs/passwd", &fs),
        Err(PathError::SymlinkEscape { .. })
    ));
    assert!(matches!(
        r("up/passwd", &fs),
        Err(PathError::SymlinkEscape { .. })
    ));
    assert!(matches!(
        r("sub/deep", &fs),
        Err(PathError::SymlinkEscape { .. })
    ));
    assert_eq!(r("sub/ok/x", &fs).unwrap(), PathBuf::from("/ws/other/x"));
    assert!(matches!(r("loop", &fs), Err(PathError::TooManySymlinks)));
    // Not following the final component leaves the link itself.
    assert_eq!(
        resolve(Path::new("/ws"), "abs", Follow::NoFinal, &fs).unwrap(),
        PathBuf::from("/ws/abs")
    );
}

#[test]
fn trailing_slash_follows_the_final_link() {
    let fs = links(&[("/ws/d", "../../.."), ("/ws/in", "sub"), ("/ws/f", "sub/a")]);
    let nf = |p: &str| resolve(Path::new("/ws"), p, Follow::NoFinal, &fs);
    // The link itself, not followed.
    assert_eq!(nf("d").unwrap(), PathBuf::from("/ws/d"));
    assert_eq!(nf("/ws/d").unwrap(), PathBuf::from("/ws/d"));
    // Written as a directory, it is followed: `d/` leaves the root.
    for p in ["d/", "/ws/d/", "d/.", "d//", "/ws/d/./"] {
        assert!(matches!(nf(p), Err(PathError::SymlinkEscape { .. })), "{p}");
    }
    assert_eq!(nf("in/").unwrap(), PathBuf::from("/ws/sub"));
    assert_eq!(nf("f/.").unwrap(), PathBuf::from("/ws/sub/a"));
}

#[test]
fn no_detour_above_the_root() {
    for p in [
        "/ws/x/../../ws/ok",
        "x/../../ws/ok",
        "/ws/../ws",
        "a/b/../../../ws/a",
    ] {
        assert!(
            matches!(r(p, &NoLinks), Err(PathError::EscapesRoot { .. })),
            "{p}"
        );
    }
}

#[test]
fn choosing_the_granted_directory() {
    let roots = ["/g/ws", "/g/ws/sub", "/g/ro"];
    assert_eq!(candidate_roots(&roots, "/g/ws/sub/a").unwrap(), vec![1, 0]);
    assert_eq!(candidate_roots(&roots, "/g/ws/a").unwrap(), vec![0]);
    assert_eq!(candidate_roots(&roots, "/g/ro").unwrap(), vec![2]);
    for outside in ["/g/wsx/a", "/g", "//g/ws/a", "/g/./ws/a", "/g/ro/../ws"] {
        let e = candidate_roots(&roots, outside);
        if outside == "/g/ro/../ws" {
            // Under /g/ro literally; refused when resolved.
            assert_eq!(e.unwrap(), vec![2]);
            continue;
        }
        assert!(
            matches!(e, Err(PathError::OutsideRoots { .. })),
            "{outside}"
        );
    }
    assert!(matches!(
        candidate_roots(&roots, "a.txt"),
        Err(PathError::AmbiguousRelative { .. })
    ));
    assert_eq!(candidate_roots(&["/g/ws"], "a.txt").unwrap(), vec![0]);
    assert!(matches!(
        candidate_roots(&[], "a.txt"),
        Err(PathError::OutsideRoots { .. })
    ));
    assert!(matches!(candidate_roots(&roots, ""), Err(PathError::Empty)));
    for bad in ["/g/ws/a\0", "/g/ws/a\n", "a\u{85}"] {
        assert!(
            matches!(
                candidate_roots(&roots, bad),
                Err(PathError::ControlCharacter)
            ),
            "{bad:?}"
        );
    }
    // A link in the inner root leaving it is fine under the outer one.
    let fs = links(&[("/g/ws/sub/up", "..")]);
    assert_eq!(
        resolve_in_roots(&roots, "/g/ws/sub/up/a", Follow::Final, &fs).unwrap(),
        (0, PathBuf::from("/g/ws/a"))
    );
    // Never from one granted directory into another.
    let fs = links(&[("/g/ws/cross", "../ro/x")]);
    assert!(matches!(
        resolve_in_roots(&roots, "/g/ws/cross", Follow::Final, &fs),
        Err(PathError::SymlinkEscape { .. })
    ));
}

#[test]
fn unreadable_and_non_utf8_links_are_refused() {
    struct Odd;
    impl FsView for Odd {
        fn read_link(&self, _: &Path) -> Option<PathBuf> {
            None
        }
        fn link(&self, p: &Path) -> Link {
            if p.ends_with("u") {
                Link::Unreadable("not permitted".into())
            } else if p.ends_with("n") {
                use std::os::unix::ffi::OsStrExt;
                Link::Target(PathBuf::from(std::ffi::OsStr::from_bytes(b"a\xffb")))
            } else {
                Link::NotALink
            }
        }
    }
    assert_eq!(r("u/x", &Odd).unwrap_err().kind(), "symlink_escape");
    assert!(matches!(r("n", &Odd), Err(PathError::NotUtf8 { .. })));
    assert!(r("x", &Odd).is_ok());
}

#[test]
fn dotdot_after_symlink_is_physical() {
    // /ws/l -> a/b ; "l/.." is /ws/a (physical), not /ws (lexical).
    let fs = links(&[("/ws/l", "a/b")]);
    assert_eq!(r("l/../c", &fs).unwrap(), PathBuf::from("/ws/a/c"));
}

#[test]
fn bad_roots() {
    assert!(resolve(Path::new("ws"), "a", Follow::Final, &NoLinks).is_err());
    assert!(resolve(Path::new("/ws/../x"), "a", Follow::Final, &NoLinks).is_err());
    assert!(resolve(Path::new("/"), "etc/x", Follow::Final, &NoLinks).is_ok());
}

#[test]
fn real_fs_symlink_escape() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
    std::os::unix::fs::symlink("../", root.join("parent")).unwrap();
    let root_c = root.canonicalize().unwrap();
    assert!(resolve(&root_c, "etc/passwd", Follow::Final, &RealFs).is_err());
    assert!(resolve(&root_c, "parent/x", Follow::Final, &RealFs).is_err());
    assert!(resolve(&root_c, "plain.txt", Follow::Final, &RealFs).is_ok());
}

proptest::proptest! {
    #[test]
    fn result_always_under_root(path in "[a-z./]{0,30}") {
        let fs = links(&[("/ws/a", "../b"), ("/ws/b", "a/..")]);
        if let Ok(p) = r(&path, &fs) {
            proptest::prop_assert!(p.starts_with("/ws"));
            proptest::prop_assert!(!p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)));
        }
    }
}
