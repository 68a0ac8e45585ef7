use super::*;
use crate::ErrorKind;
use std::collections::HashMap;

/// Symbolic links without a filesystem. A target `UNREADABLE` is a link
/// whose target cannot be read (what WASI answers for an absolute target).
struct MapFs(HashMap<PathBuf, PathBuf>);

impl FsView for MapFs {
    fn read_link(&self, p: &Path) -> Option<PathBuf> {
        self.0.get(p).cloned()
    }

    fn link(&self, p: &Path) -> Link {
        match self.0.get(p) {
            None => Link::NotALink,
            Some(t) if t.as_os_str() == "UNREADABLE" => {
                Link::Unreadable("operation not permitted".into())
            }
            Some(t) => Link::Target(t.clone()),
        }
    }
}

fn links(v: &[(&str, &str)]) -> MapFs {
    MapFs(
        v.iter()
            .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
            .collect(),
    )
}

fn r_with(
    roots: &[&str],
    path: &str,
    follow: Follow,
    fs: &impl FsView,
) -> Result<PathBuf, ToolError> {
    let roots = normalise_roots(roots.iter().map(|r| r.to_string()));
    resolve_with(&roots, path, follow, fs)
}

fn r(path: &str, fs: &impl FsView) -> Result<PathBuf, ToolError> {
    r_with(&["/g/ws", "/g/other"], path, Follow::Final, fs)
}

fn kind(res: Result<PathBuf, ToolError>) -> Option<ErrorKind> {
    res.err().map(|e| e.kind)
}

/// No symbolic links at all.
struct NoLinks;

impl FsView for NoLinks {
    fn read_link(&self, _: &Path) -> Option<PathBuf> {
        None
    }
}

const NONE: NoLinks = NoLinks;

#[test]
fn plain_paths_are_normalised() {
    let ok = |p: &str| r(p, &NONE).map(|p| p.display().to_string());
    assert_eq!(ok("/g/ws"), Ok("/g/ws".into()));
    assert_eq!(ok("/g/ws/"), Ok("/g/ws".into()));
    assert_eq!(ok("/g/ws/a/./b//c/"), Ok("/g/ws/a/b/c".into()));
    assert_eq!(ok("/g/ws/a/../b"), Ok("/g/ws/b".into()));
    // A relative path is relative to the only granted directory.
    assert_eq!(
        r_with(&["/g/ws"], "a/./b", Follow::Final, &NONE).map(|p| p.display().to_string()),
        Ok("/g/ws/a/b".into())
    );
}

#[test]
fn escapes_are_permission_denied() {
    // Under no granted directory.
    for p in [
        "/g/secret.txt",
        "/etc/passwd",
        "/",
        "/g",
        "/g/wsx/a",
        "//g/./ws/x",
        "/g/./ws/x",
    ] {
        let e = r(p, &NONE).err();
        assert_eq!(
            e.as_ref().map(|e| e.kind),
            Some(ErrorKind::PermissionDenied),
            "{p}"
        );
        let e = e.unwrap_or_else(|| ToolError::unknown(""));
        assert_eq!(
            e.message,
            format!("{p} is outside the directories granted to this tool")
        );
        assert!(e.llm_hint.contains("/g/other, /g/ws"), "{}", e.llm_hint);
        let d = e.details.unwrap_or_default();
        assert_eq!(d["granted"], json!(["/g/other", "/g/ws"]));
    }
    // `..` above the granted directory, even to come back (cap-std's rule).
    for p in [
        "/g/ws/..",
        "/g/ws/../secret.txt",
        "/g/ws/sub/../../secret.txt",
        "/g/ws/../../../../../../etc/passwd",
        "/g/ws/../ws/x",
        "/g/ws/x/../../ws/ok",
        "/g/ws/../other/x",
    ] {
        let e = r(p, &NONE).err();
        assert_eq!(
            e.as_ref().map(|e| e.kind),
            Some(ErrorKind::PermissionDenied),
            "{p}"
        );
        assert!(
            e.is_some_and(|e| e.message.contains("climbs above the granted directory")),
            "{p}"
        );
    }
}

#[test]
fn no_roots_grants_nothing() {
    let e = r_with(&[], "/g/ws/a", Follow::Final, &NONE).err();
    assert_eq!(
        e.as_ref().map(|e| e.kind),
        Some(ErrorKind::PermissionDenied)
    );
    assert!(e.is_some_and(|e| e.llm_hint.contains("no directory")));
    // `/` as a root grants everything.
    assert!(r_with(&["/"], "/etc/passwd", Follow::Final, &NONE).is_ok());
}

#[test]
fn bad_input_is_invalid_args() {
    let long = format!("/g/ws/{}", "a".repeat(MAX_PATH_LEN));
    for p in [
        "",
        "relative.txt",
        "./g/ws/a",
        "g/ws",
        "/g/ws/a\0b",
        "/g/ws/a\nb",
        long.as_str(),
    ] {
        assert_eq!(kind(r(p, &NONE)), Some(ErrorKind::InvalidArgs), "{p:?}");
    }
    // Relative with two granted directories: ambiguous.
    let e = r("rel", &NONE).err();
    assert!(
        e.is_some_and(|e| e.message.contains("several directories are granted")
            && e.llm_hint.contains("/g/ws"))
    );
}

#[test]
fn special_names_are_invalid_args() {
    for bad in [
        "CON",
        "con",
        "NUL.txt",
        "nul.tar.gz",
        "Com1",
        "lpt9.log",
        "AUX",
        "PRN",
        "a:b",
        "a:stream",
        "a\\b",
        "trail.",
        "trail ",
        "COM¹",
        "conin$",
    ] {
        assert_eq!(
            kind(r(&format!("/g/ws/{bad}"), &NONE)),
            Some(ErrorKind::InvalidArgs),
            "{bad}"
        );
        assert_eq!(
            kind(r(&format!("/g/ws/{bad}/x.txt"), &NONE)),
            Some(ErrorKind::InvalidArgs),
            "{bad}/x.txt"
        );
    }
    for fine in [
        "console", "com10", "nullable", ".hidden", "a.b.c", "..", ".",
    ] {
        assert!(check_component(fine).is_ok(), "{fine}");
        assert!(r(&format!("/g/ws/sub/{fine}"), &NONE).is_ok(), "{fine}");
    }
    // The roots' own components are not judged.
    assert!(r_with(&["/g/CON"], "/g/CON/a", Follow::Final, &NONE).is_ok());
}

#[test]
fn symlinks_inside_are_followed() {
    let fs = links(&[
        ("/g/ws/rel", "sub/target"),
        ("/g/ws/sub/up_in", "../other_dir"),
        ("/g/ws/d", "sub"),
    ]);
    let ok = |p: &str| r(p, &fs).map(|p| p.display().to_string());
    assert_eq!(ok("/g/ws/rel"), Ok("/g/ws/sub/target".into()));
    assert_eq!(ok("/g/ws/sub/up_in/f"), Ok("/g/ws/other_dir/f".into()));
    // NoFinal leaves the final link, still follows the ones before it...
    assert_eq!(
        r_with(&["/g/ws"], "/g/ws/rel", Follow::NoFinal, &fs).map(|p| p.display().to_string()),
        Ok("/g/ws/rel".into())
    );
    // ... unless it is written as a directory, `link/`, which the kernel follows.
    assert_eq!(
        r_with(&["/g/ws"], "/g/ws/d/", Follow::NoFinal, &fs).map(|p| p.display().to_string()),
        Ok("/g/ws/sub".into())
    );
}

#[test]
fn dotdot_after_symlink_is_physical() {
    // /g/ws/l -> a/b: "l/.." is /g/ws/a (physical), not /g/ws (lexical).
    let fs = links(&[("/g/ws/l", "a/b")]);
    let ok = |p: &str| r(p, &fs).map(|p| p.display().to_string());
    assert_eq!(ok("/g/ws/l/../c"), Ok("/g/ws/a/c".into()));
    // Lexically this climbs out of /g/ws; physically it stays inside.
    assert_eq!(
        ok("/g/ws/l/../../secret.txt"),
        Ok("/g/ws/secret.txt".into())
    );
}

#[test]
fn symlinks_leading_out_are_permission_denied_naming_the_link() {
    let fs = links(&[
        ("/g/ws/abs_link", "/g/secret.txt"),
        ("/g/ws/abs_in", "/g/ws/sub"),
        ("/g/ws/rel_link", "../secret.txt"),
        ("/g/ws/dir_link", "/g"),
        ("/g/ws/sub/deep", "../../x"),
        ("/g/ws/etc", "/etc"),
        ("/g/ws/empty", ""),
        // Into another granted directory: cap-std does not follow it either.
        ("/g/ws/cross", "../other/x"),
        // Each hop stays inside, the last `..` is physical and leaves.
        ("/g/ws/hop", "a/b"),
        ("/g/ws/a/b", "../.."),
        // What WASI answers for a link with an absolute target.
        ("/g/ws/unreadable", "UNREADABLE"),
        // Written as a directory, a final link is followed even with NoFinal.
        ("/g/ws/up3", "../../.."),
    ]);
    for (p, link, follow) in [
        ("/g/ws/abs_link", "/g/ws/abs_link", Follow::Final),
        ("/g/ws/abs_in/x", "/g/ws/abs_in", Follow::Final),
        ("/g/ws/rel_link", "/g/ws/rel_link", Follow::Final),
        ("/g/ws/dir_link/secret.txt", "/g/ws/dir_link", Follow::Final),
        ("/g/ws/dir_link", "/g/ws/dir_link", Follow::Final),
        ("/g/ws/dir_link/new.txt", "/g/ws/dir_link", Follow::Final),
        ("/g/ws/sub/deep", "/g/ws/sub/deep", Follow::Final),
        ("/g/ws/etc/passwd", "/g/ws/etc", Follow::Final),
        ("/g/ws/empty", "/g/ws/empty", Follow::Final),
        ("/g/ws/cross", "/g/ws/cross", Follow::Final),
        ("/g/ws/hop/../secret.txt", "/g/ws/a/b", Follow::Final),
        ("/g/ws/unreadable/x", "/g/ws/unreadable", Follow::Final),
        ("/g/ws/up3/", "/g/ws/up3", Follow::NoFinal),
        ("/g/ws/up3/.", "/g/ws/up3", Follow::NoFinal),
    ] {
        let e = r_with(&["/g/ws", "/g/other"], p, follow, &fs).err();
        assert_eq!(
            e.as_ref().map(|e| e.kind),
            Some(ErrorKind::PermissionDenied),
            "{p}"
        );
        let e = e.unwrap_or_else(|| ToolError::unknown(""));
        assert!(
            e.message
                .contains(&format!("symbolic link {link} points outside"))
                || e.message
                    .contains(&format!("symbolic link {link} cannot be followed")),
            "{p}: {}",
            e.message
        );
        assert_eq!(e.details.unwrap_or_default()["link"], link);
    }
    // With NoFinal a final link pointing out is the link itself, inside.
    assert!(r_with(&["/g/ws"], "/g/ws/abs_link", Follow::NoFinal, &fs).is_ok());
    assert!(r_with(&["/g/ws"], "/g/ws/up3", Follow::NoFinal, &fs).is_ok());
    assert!(r_with(&["/g/ws"], "/g/ws/dir_link/x", Follow::NoFinal, &fs).is_err());
}

#[test]
fn link_loops_are_invalid_args() {
    let fs = links(&[("/g/ws/loop", "loop"), ("/g/ws/a", "b"), ("/g/ws/b", "a")]);
    for p in ["/g/ws/loop", "/g/ws/a/x"] {
        let e = r(p, &fs).err();
        assert_eq!(
            e.as_ref().map(|e| e.kind),
            Some(ErrorKind::InvalidArgs),
            "{p}"
        );
        assert!(e.is_some_and(|e| e.message.contains("too many levels")));
    }
    // A chain of exactly MAX_SYMLINK_EXPANSIONS links is fine.
    let chain: Vec<(String, String)> = (0..MAX_SYMLINK_EXPANSIONS)
        .map(|i| (format!("/g/ws/l{i}"), format!("l{}", i + 1)))
        .collect();
    let fs = MapFs(
        chain
            .iter()
            .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
            .collect(),
    );
    assert_eq!(
        r("/g/ws/l0", &fs).map(|p| p.display().to_string()),
        Ok(format!("/g/ws/l{MAX_SYMLINK_EXPANSIONS}"))
    );
}

#[test]
fn roots_are_normalised() {
    let roots = normalise_roots(
        ["/b/", "/a/./x/..", "relative", "/b", "//c//d"]
            .into_iter()
            .map(String::from),
    );
    assert_eq!(roots, [PathBuf::from("/a"), "/b".into(), "/c/d".into()]);
}

#[test]
fn with_granted_roots_overrides_and_restores() {
    assert_eq!(granted_roots(), [PathBuf::from("/")]);
    let inner = with_granted_roots(["/srv/b/", "/srv/a"], || {
        let nested = with_granted_roots(Vec::<PathBuf>::new(), granted_roots);
        (granted_roots(), nested)
    });
    assert_eq!(inner.0, [PathBuf::from("/srv/a"), "/srv/b".into()]);
    assert!(inner.1.is_empty());
    assert_eq!(granted_roots(), [PathBuf::from("/")]);
}

// --- with real files and planted links ---------------------------------

/// A fresh directory under the system's temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let base = std::env::temp_dir()
            .canonicalize()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = base.join(format!("capsaga-sdk-fs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("secret.txt"), "secret").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("ws/inside.txt"), "inside").unwrap_or_else(|e| panic!("{e}"));
        Scratch(dir)
    }
    fn ws(&self) -> PathBuf {
        self.0.join("ws")
    }
    fn s(&self, rel: &str) -> String {
        format!("{}/{rel}", self.0.display())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(unix)]
#[test]
fn real_files_and_planted_links() {
    use std::os::unix::fs::symlink;
    let s = Scratch::new("links");
    let ws = s.ws();
    let plant = |target: &str, link: &str| {
        symlink(target, ws.join(link)).unwrap_or_else(|e| panic!("{e}"));
    };
    plant(&s.s("secret.txt"), "abs_link");
    plant("../secret.txt", "rel_link");
    plant(&s.0.display().to_string(), "dir_link");
    plant("sub", "sub_link");
    plant(&s.s("ws/inside.txt"), "abs_in");
    plant("loop", "loop");
    plant("../../secret.txt", "sub/deep");
    std::fs::create_dir(ws.join("sub/inner")).unwrap_or_else(|e| panic!("{e}"));
    plant("sub/inner", "deep_link");

    let res = |p: &str, follow| with_granted_roots([&ws], || resolve(p, follow));
    let kind = |p: &str| res(p, Follow::Final).err().map(|e| e.kind);
    for p in [
        s.s("ws/../secret.txt"),
        s.s("ws/sub/../../secret.txt"),
        s.s("secret.txt"),
        "/etc/passwd".to_owned(),
        s.s("ws/abs_link"),
        s.s("ws/rel_link"),
        s.s("ws/dir_link/secret.txt"),
        s.s("ws/dir_link"),
        s.s("ws/dir_link/new_outside.txt"),
        s.s("ws/sub/deep"),
        s.s("ws/sub_link/deep"),
        s.s("ws/sub_link/../../secret.txt"),
        // An absolute target inside: cap-std does not follow it; neither do we.
        s.s("ws/abs_in"),
        s.s("ws/../ws/inside.txt"),
    ] {
        assert_eq!(kind(&p), Some(ErrorKind::PermissionDenied), "{p}");
    }
    assert_eq!(kind(&s.s("ws/loop")), Some(ErrorKind::InvalidArgs));
    assert_eq!(kind(&s.s("ws/NUL.txt")), Some(ErrorKind::InvalidArgs));

    let ok = |p: &str, follow| res(p, follow).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(
        ok(&s.s("ws/inside.txt"), Follow::Final),
        ws.join("inside.txt")
    );
    assert_eq!(ok("inside.txt", Follow::Final), ws.join("inside.txt"));
    assert_eq!(
        ok(&s.s("ws/sub_link/new.txt"), Follow::Final),
        ws.join("sub/new.txt")
    );
    // Physical `..`: deep_link/.. is ws/sub (the target's parent), not ws.
    assert_eq!(
        ok(&s.s("ws/deep_link/../x.txt"), Follow::Final),
        ws.join("sub/x.txt")
    );
    assert_eq!(
        ok(&s.s("ws/abs_link"), Follow::NoFinal),
        ws.join("abs_link")
    );
    assert_eq!(
        ok(&s.s("ws/missing/x"), Follow::Final),
        ws.join("missing/x")
    );
    // The native default (no override) grants `/`: a relative link resolves.
    assert_eq!(
        resolve(&s.s("ws/rel_link"), Follow::Final).ok(),
        Some(s.0.join("secret.txt"))
    );
}
