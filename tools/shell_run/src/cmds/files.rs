//! File commands: ls, mkdir, rmdir, rm, cp, mv, touch (find is in
//! [`super::find`]). Every change
//! goes to the overlay ([`crate::vfs`]); nothing touches the real files
//! before the script ends.

use std::path::{Path, PathBuf};

use capsaga_sdk::fs::Follow;

use super::getopt;
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::{FsError, FsErrorKind, Kind};

fn type_char(k: Kind) -> char {
    match k {
        Kind::Dir => 'd',
        Kind::Link => 'l',
        Kind::File => '-',
        Kind::Other => '?',
    }
}

fn long_line(sh: &Shell, p: &Path, name: &str) -> String {
    let st = sh.vfs.stat(p).ok().flatten();
    let (k, len, m) = st.map_or((Kind::Other, 0, None), |s| (s.kind, s.len, s.modified));
    let when = m
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map_or_else(
            || "-".repeat(16),
            |t| t.strftime("%Y-%m-%d %H:%M").to_string(),
        );
    format!("{} {len:>10} {when} {name}", type_char(k))
}

/// `ls [-1laARdF] [PATH]...`: one name per line; `-l` adds the type, size
/// and modification time.
pub fn ls(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "ls",
        args,
        "1laARdFhrtS",
        "",
        &[("all", 'a'), ("recursive", 'R')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let paths = if o.rest.is_empty() {
        vec![".".to_owned()]
    } else {
        o.rest.clone()
    };
    let all = o.has('a') || o.has('A');
    let mut st = 0;
    let many = paths.len() > 1 || o.has('R');
    let mut first = true;
    let mut queue: Vec<String> = paths;
    let mut i = 0;
    while i < queue.len() {
        let raw = queue[i].clone();
        i += 1;
        let p = match sh.vfs.resolve(&sh.cwd, &raw, Follow::Final) {
            Ok(p) => p,
            Err(e) => {
                st = sh.fs_fail("ls", &e, io);
                continue;
            }
        };
        let kind = match sh.vfs.stat(&p) {
            Ok(Some(s)) => s.kind,
            Ok(None) => {
                io.warn(format!(
                    "ls: cannot access '{raw}': No such file or directory"
                ));
                st = 2;
                continue;
            }
            Err(e) => {
                st = sh.fs_fail("ls", &e, io);
                continue;
            }
        };
        if kind != Kind::Dir || o.has('d') {
            let line = if o.has('l') {
                long_line(sh, &p, &raw)
            } else {
                raw.clone()
            };
            io.print(line + "\n")?;
            continue;
        }
        let entries = match sh.vfs.list(&p) {
            Ok(e) => e,
            Err(e) => {
                st = sh.fs_fail("ls", &e, io);
                continue;
            }
        };
        if many {
            io.print(format!("{}{raw}:\n", if first { "" } else { "\n" }))?;
        }
        first = false;
        let mut names: Vec<(String, Kind)> = entries
            .into_iter()
            .filter(|(n, _)| all || !n.starts_with('.'))
            .collect();
        if o.has('r') {
            names.reverse();
        }
        for (name, k) in &names {
            let shown = if o.has('F') && *k == Kind::Dir {
                format!("{name}/")
            } else {
                name.clone()
            };
            let line = if o.has('l') {
                long_line(sh, &p.join(name), &shown)
            } else {
                shown
            };
            io.print(line + "\n")?;
        }
        if o.has('R') {
            let base = raw.trim_end_matches('/');
            let mut subs: Vec<String> = names
                .iter()
                .filter(|(_, k)| *k == Kind::Dir)
                .map(|(n, _)| format!("{base}/{n}"))
                .collect();
            // Depth-first: insert the children right after this directory.
            let tail = queue.split_off(i);
            queue.append(&mut subs);
            queue.extend(tail);
        }
    }
    Ok(st)
}

/// `mkdir [-p] DIR...`
pub fn mkdir(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("mkdir", args, "pv", "m", &[("parents", 'p')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let mut st = 0;
    for d in &o.rest {
        let r = sh.vfs.resolve(&sh.cwd, d, Follow::Final).and_then(|p| {
            if !o.has('p') {
                return sh.vfs.mkdir(&p);
            }
            let mut todo = Vec::new();
            let mut cur = Some(p.as_path());
            while let Some(c) = cur {
                match sh.vfs.stat(c)? {
                    Some(s) if s.kind == Kind::Dir => break,
                    Some(_) => {
                        return Err(FsError::new(
                            FsErrorKind::Exists,
                            format!("{}: File exists", c.display()),
                        ));
                    }
                    None => todo.push(c.to_path_buf()),
                }
                cur = c.parent();
            }
            for c in todo.iter().rev() {
                sh.vfs.mkdir(c)?;
            }
            Ok(())
        });
        if let Err(e) = r {
            st = sh.fs_fail("mkdir", &e, io);
        }
    }
    Ok(st)
}

/// `rmdir DIR...`
pub fn rmdir(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let mut st = 0;
    for d in args {
        let r = sh
            .vfs
            .resolve(&sh.cwd, d, Follow::NoFinal)
            .and_then(|p| sh.vfs.rmdir(&p));
        if let Err(e) = r {
            st = sh.fs_fail("rmdir", &e, io);
        }
    }
    Ok(st)
}

/// Removes `p` and everything under it from the overlay.
fn remove_tree(sh: &mut Shell, p: &Path) -> Result<(), FsError> {
    if sh.vfs.is_root(p) {
        return Err(FsError::new(
            FsErrorKind::Denied,
            format!(
                "{}: is a granted directory itself; shell_run does not remove it (remove its \
                 contents instead)",
                p.display()
            ),
        ));
    }
    let mut stack = vec![(p.to_path_buf(), false)];
    let mut count = 0usize;
    while let Some((d, visited)) = stack.pop() {
        count += 1;
        if count > 200_000 {
            return Err(FsError::new(
                FsErrorKind::TooBig,
                "too many files to remove",
            ));
        }
        let kind = sh.vfs.stat(&d)?.map(|s| s.kind);
        match kind {
            Some(Kind::Dir) if !visited => {
                stack.push((d.clone(), true));
                for (name, _) in sh.vfs.list(&d)? {
                    stack.push((d.join(name), false));
                }
            }
            Some(Kind::Dir) => sh.vfs.rmdir(&d)?,
            Some(_) => sh.vfs.remove_file(&d)?,
            None => {}
        }
    }
    Ok(())
}

/// `rm [-rRf] PATH...`
pub fn rm(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "rm",
        args,
        "rRfvid",
        "",
        &[("recursive", 'r'), ("force", 'f')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let recursive = o.has('r') || o.has('R');
    let mut st = 0;
    for f in &o.rest {
        let r = sh.vfs.resolve(&sh.cwd, f, Follow::NoFinal).and_then(|p| {
            match sh.vfs.stat(&p)?.map(|s| s.kind) {
                None => Err(FsError::new(
                    FsErrorKind::NotFound,
                    format!("cannot remove '{f}': No such file or directory"),
                )),
                Some(Kind::Dir) if recursive => remove_tree(sh, &p),
                Some(Kind::Dir) if o.has('d') => sh.vfs.rmdir(&p),
                Some(Kind::Dir) => Err(FsError::new(
                    FsErrorKind::IsDir,
                    format!("cannot remove '{f}': Is a directory (use -r)"),
                )),
                Some(_) => sh.vfs.remove_file(&p),
            }
        });
        match r {
            Ok(()) => {}
            Err(e) if e.kind == FsErrorKind::NotFound && o.has('f') => {}
            Err(e) => st = sh.fs_fail("rm", &e, io),
        }
    }
    Ok(st)
}

/// Copies the file or tree `src` to `dst` in the overlay.
fn copy_tree(sh: &mut Shell, src: &Path, dst: &Path, recursive: bool) -> Result<(), FsError> {
    match sh.vfs.stat(src)?.map(|s| s.kind) {
        None => Err(FsError::new(
            FsErrorKind::NotFound,
            format!("{}: No such file or directory", src.display()),
        )),
        Some(Kind::Dir) => {
            if !recursive {
                return Err(FsError::new(
                    FsErrorKind::IsDir,
                    format!("-r not specified; omitting directory '{}'", src.display()),
                ));
            }
            if dst.starts_with(src) {
                return Err(FsError::new(
                    FsErrorKind::Invalid,
                    format!("cannot copy a directory, '{}', into itself", src.display()),
                ));
            }
            if sh.vfs.stat(dst)?.is_none() {
                sh.vfs.mkdir(dst)?;
            }
            for (name, _) in sh.vfs.list(src)? {
                copy_tree(sh, &src.join(&name), &dst.join(&name), true)?;
            }
            Ok(())
        }
        Some(Kind::File) => {
            let data = sh.vfs.read(src)?;
            sh.vfs.write(dst, data.as_ref().clone())
        }
        Some(_) => Err(FsError::new(
            FsErrorKind::Unsupported,
            format!("{}: not a regular file or directory", src.display()),
        )),
    }
}

/// Sources and the destination of cp/mv: (src, dst) pairs.
fn pairs(
    sh: &Shell,
    cmd: &str,
    ops: &[String],
    follow: Follow,
) -> Result<Vec<(PathBuf, PathBuf)>, FsError> {
    if ops.len() < 2 {
        return Err(FsError::new(
            FsErrorKind::Invalid,
            format!("missing destination operand (usage: {cmd} SOURCE... DEST)"),
        ));
    }
    let (srcs, dst) = ops.split_at(ops.len() - 1);
    let dst_p = sh.vfs.resolve(&sh.cwd, &dst[0], Follow::Final)?;
    let dst_is_dir = sh.vfs.stat(&dst_p)?.is_some_and(|s| s.kind == Kind::Dir);
    if srcs.len() > 1 && !dst_is_dir {
        return Err(FsError::new(
            FsErrorKind::NotDir,
            format!("target '{}' is not a directory", dst[0]),
        ));
    }
    let mut v = Vec::new();
    for s in srcs {
        let sp = sh.vfs.resolve(&sh.cwd, s, follow)?;
        let target = if dst_is_dir {
            let name = sp.file_name().map(|n| n.to_owned()).unwrap_or_default();
            dst_p.join(name)
        } else {
            dst_p.clone()
        };
        v.push((sp, target));
    }
    Ok(v)
}

/// `cp [-rRapf] SOURCE... DEST`
pub fn cp(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("cp", args, "rRapfvn", "", &[("recursive", 'r')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let recursive = o.has('r') || o.has('R') || o.has('a');
    let ps = match pairs(sh, "cp", &o.rest, Follow::Final) {
        Ok(p) => p,
        Err(e) => return Ok(sh.fs_fail("cp", &e, io)),
    };
    let mut st = 0;
    for (s, d) in ps {
        if o.has('n') && sh.vfs.stat(&d).ok().flatten().is_some() {
            continue;
        }
        if let Err(e) = copy_tree(sh, &s, &d, recursive) {
            st = sh.fs_fail("cp", &e, io);
        }
    }
    Ok(st)
}

/// `mv [-fn] SOURCE... DEST`
pub fn mv(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("mv", args, "fnvT", "", &[("force", 'f')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let ps = match pairs(sh, "mv", &o.rest, Follow::NoFinal) {
        Ok(p) => p,
        Err(e) => return Ok(sh.fs_fail("mv", &e, io)),
    };
    let mut st = 0;
    for (s, d) in ps {
        if s == d {
            continue;
        }
        if o.has('n') && sh.vfs.stat(&d).ok().flatten().is_some() {
            continue;
        }
        let r = (|| {
            if sh.vfs.is_root(&s) {
                return Err(FsError::new(
                    FsErrorKind::Denied,
                    format!(
                        "{}: is a granted directory itself; shell_run does not move it",
                        s.display()
                    ),
                ));
            }
            if sh.vfs.stat(&s)?.is_some_and(|x| x.kind == Kind::Link) {
                return Err(FsError::new(
                    FsErrorKind::Unsupported,
                    format!(
                        "{}: is a symbolic link; shell_run does not move links",
                        s.display()
                    ),
                ));
            }
            if sh.vfs.stat(&d)?.is_some_and(|x| x.kind == Kind::Dir)
                && sh.vfs.stat(&s)?.is_some_and(|x| x.kind != Kind::Dir)
            {
                return Err(FsError::new(
                    FsErrorKind::IsDir,
                    format!("cannot overwrite directory '{}' with a file", d.display()),
                ));
            }
            copy_tree(sh, &s, &d, true)?;
            remove_tree(sh, &s)
        })();
        if let Err(e) = r {
            st = sh.fs_fail("mv", &e, io);
        }
    }
    Ok(st)
}

/// `touch [-c] FILE...`: creates missing files (times of existing files are
/// left as they are).
pub fn touch(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("touch", args, "cam", "dt", &[("no-create", 'c')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let mut st = 0;
    for f in &o.rest {
        let r = sh.vfs.resolve(&sh.cwd, f, Follow::Final).and_then(|p| {
            if sh.vfs.stat(&p)?.is_none() && !o.has('c') {
                sh.vfs.write(&p, Vec::new())
            } else {
                Ok(())
            }
        });
        if let Err(e) = r {
            st = sh.fs_fail("touch", &e, io);
        }
    }
    Ok(st)
}
