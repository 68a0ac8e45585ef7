//! Builtins that need the shell's own state (`cd`, variables, control
//! flow, `read`, `eval`, `test`), and redirections.

use std::path::PathBuf;

use brush_parser::ast::{
    self, BinaryPredicate as BP, ExtendedTestExpr, IoFileRedirectKind as RK,
    IoFileRedirectTarget as RT, TestExpr, UnaryPredicate as UP,
};
use capsaga_sdk::fs::Follow;

use super::io::{Io, Sink, SinkRef, input, sink};
use super::{FILE_CAP, Flow, Shell, expand};
use crate::vfs::Kind;

/// A builtin or command: the shell, the arguments (without the name), the
/// streams; returns the exit status.
pub type Builtin = fn(&mut Shell, &[String], &Io) -> Result<i32, Flow>;

/// Names of the builtins.
pub const NAMES: &[&str] = &[
    ":", "[", "break", "cd", "continue", "eval", "exec", "exit", "export", "false", "local", "pwd",
    "read", "return", "set", "shift", "test", "true", "unset",
];

/// The builtin called `name`.
pub fn lookup(name: &str) -> Option<Builtin> {
    Some(match name {
        ":" | "true" => |_, _, _| Ok(0),
        "false" => |_, _, _| Ok(1),
        "cd" => cd,
        "pwd" => |sh, _, io| {
            io.print(format!("{}\n", sh.cwd.display()))?;
            Ok(0)
        },
        "exit" => |sh, a, io| Err(Flow::Exit(status_arg(sh, a, io, "exit"))),
        "return" => |sh, a, io| Err(Flow::Return(status_arg(sh, a, io, "return"))),
        "break" => |_, a, _| Err(Flow::Break(level(a))),
        "continue" => |_, a, _| Err(Flow::Continue(level(a))),
        "export" => export,
        "unset" => |sh, a, _| {
            for n in a.iter().filter(|n| !n.starts_with('-')) {
                sh.vars.remove(n);
                sh.exported.remove(n);
                sh.funcs.remove(n);
            }
            Ok(0)
        },
        "local" => local,
        "set" => set,
        "shift" => |sh, a, _| {
            let n = a.first().and_then(|s| s.parse::<usize>().ok()).unwrap_or(1);
            if n > sh.positional.len() {
                return Ok(1);
            }
            sh.positional.drain(..n);
            Ok(0)
        },
        "read" => read,
        "eval" => |sh, a, io| {
            let text = a.join(" ");
            sh.enter("eval")?;
            let r = match sh.parse(&text) {
                Ok(p) => sh.run_program(&p, io),
                Err(e) => {
                    io.warn(format!("sh: eval: {e}"));
                    Ok(2)
                }
            };
            sh.depth -= 1;
            r
        },
        "exec" => |_, a, io| {
            if a.is_empty() {
                return Ok(0);
            }
            io.warn("sh: exec: shell_run cannot replace itself with a program (there is no exec)");
            Ok(126)
        },
        "test" => |sh, a, io| test(sh, a, io, "test"),
        "[" => |sh, a, io| {
            if a.last().map(String::as_str) != Some("]") {
                io.warn("sh: [: missing `]'");
                return Ok(2);
            }
            test(sh, &a[..a.len() - 1], io, "[")
        },
        _ => return None,
    })
}

fn status_arg(sh: &Shell, a: &[String], io: &Io, what: &str) -> i32 {
    match a.first() {
        None => sh.last_status,
        Some(s) => s.parse::<i64>().map_or_else(
            |_| {
                io.warn(format!("sh: {what}: {s}: numeric argument required"));
                2
            },
            |v| i32::try_from(v & 0xff).unwrap_or(2),
        ),
    }
}

fn level(a: &[String]) -> u32 {
    a.first()
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

fn cd(sh: &mut Shell, a: &[String], io: &Io) -> Result<i32, Flow> {
    let target = match a.iter().find(|s| !s.starts_with('-') || s.as_str() == "-") {
        Some(t) if t == "-" => sh
            .var("OLDPWD")
            .unwrap_or_else(|| sh.cwd.display().to_string()),
        Some(t) => t.clone(),
        None => sh
            .var("HOME")
            .unwrap_or_else(|| sh.cwd.display().to_string()),
    };
    let p = match sh.vfs.resolve(&sh.cwd, &target, Follow::Final) {
        Ok(p) => p,
        Err(e) => return Ok(sh.fs_fail("cd", &e, io)),
    };
    if !sh.vfs.roots().iter().any(|r| p.starts_with(&r.path)) {
        let msg = format!(
            "{target}: permission denied: outside the directories granted to shell_run \
             (granted: {})",
            sh.vfs.granted_list()
        );
        sh.refuse(&msg);
        io.warn(format!("cd: {msg}"));
        return Ok(1);
    }
    match sh.vfs.stat(&p) {
        Ok(Some(s)) if s.kind == Kind::Dir => {}
        Ok(Some(_)) => {
            io.warn(format!("cd: {target}: Not a directory"));
            return Ok(1);
        }
        Ok(None) => {
            io.warn(format!("cd: {target}: No such file or directory"));
            return Ok(1);
        }
        Err(e) => return Ok(sh.fs_fail("cd", &e, io)),
    }
    let old = sh.cwd.display().to_string();
    sh.vars.insert("OLDPWD".into(), old);
    sh.vars.insert("PWD".into(), p.display().to_string());
    sh.cwd = p;
    Ok(0)
}

fn export(sh: &mut Shell, a: &[String], io: &Io) -> Result<i32, Flow> {
    if a.is_empty() || a.iter().all(|s| s == "-p") {
        for (k, v) in sh.environment() {
            io.print(format!("export {k}='{}'\n", v.replace('\'', "'\\''")))?;
        }
        return Ok(0);
    }
    for arg in a.iter().filter(|s| !s.starts_with('-')) {
        match arg.split_once('=') {
            Some((k, v)) => {
                sh.vars.insert(k.to_owned(), v.to_owned());
                sh.exported.insert(k.to_owned());
            }
            None => {
                sh.exported.insert(arg.clone());
            }
        }
    }
    Ok(0)
}

fn local(sh: &mut Shell, a: &[String], io: &Io) -> Result<i32, Flow> {
    if sh.locals.is_empty() {
        io.warn("sh: local: can only be used in a function");
        return Ok(1);
    }
    for arg in a {
        let (k, v) = match arg.split_once('=') {
            Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
            None => (arg.clone(), None),
        };
        let old = sh.vars.get(&k).cloned();
        if let Some(frame) = sh.locals.last_mut() {
            frame.push((k.clone(), old));
        }
        sh.vars.insert(k, v.unwrap_or_default());
    }
    Ok(0)
}

fn set(sh: &mut Shell, a: &[String], io: &Io) -> Result<i32, Flow> {
    let mut it = a.iter().peekable();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--" => {
                sh.positional = it.cloned().collect();
                return Ok(0);
            }
            "-e" => sh.errexit = true,
            "+e" => sh.errexit = false,
            "-o" | "+o" => {
                let on = arg == "-o";
                match it.next().map(String::as_str) {
                    Some("errexit") => sh.errexit = on,
                    Some("pipefail" | "nounset" | "xtrace" | "noglob") => {}
                    other => {
                        io.warn(format!("sh: set: unsupported option {other:?}"));
                        return Ok(2);
                    }
                }
            }
            s if s.starts_with(['-', '+']) && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        'e' => sh.errexit = s.starts_with('-'),
                        'u' | 'x' | 'f' | 'v' => {}
                        _ => {
                            io.warn(format!("sh: set: unsupported option -{c}"));
                            return Ok(2);
                        }
                    }
                }
            }
            _ => {
                sh.positional = std::iter::once(arg).chain(it).cloned().collect();
                return Ok(0);
            }
        }
    }
    Ok(0)
}

fn read(sh: &mut Shell, a: &[String], io: &Io) -> Result<i32, Flow> {
    let raw = a.iter().any(|s| s == "-r");
    let names: Vec<&String> = a.iter().filter(|s| !s.starts_with('-')).collect();
    let Some(line) = io.stdin.borrow_mut().read_line() else {
        for n in &names {
            sh.set_var(n, String::new());
        }
        return Ok(1);
    };
    let mut line = String::from_utf8_lossy(&line).into_owned();
    if !raw {
        line = line
            .replace("\\\\", "\u{0}")
            .replace('\\', "")
            .replace('\u{0}', "\\");
    }
    if names.is_empty() {
        sh.set_var("REPLY", line);
        return Ok(0);
    }
    let mut rest = line.trim_start_matches([' ', '\t']);
    for (i, n) in names.iter().enumerate() {
        if i + 1 == names.len() {
            sh.set_var(n, rest.trim_end_matches([' ', '\t']).to_owned());
        } else {
            let end = rest.find([' ', '\t']).unwrap_or(rest.len());
            sh.set_var(n, rest[..end].to_owned());
            rest = rest[end..].trim_start_matches([' ', '\t']);
        }
    }
    Ok(0)
}

// --- test / [ / [[ ]] ---------------------------------------------------------

fn test(sh: &mut Shell, a: &[String], io: &Io, name: &str) -> Result<i32, Flow> {
    match brush_parser::test_command::parse(a) {
        Ok(expr) => Ok(i32::from(!eval_test(sh, &expr, io)?)),
        Err(e) => {
            io.warn(format!("sh: {name}: {e}"));
            Ok(2)
        }
    }
}

fn eval_test(sh: &mut Shell, e: &TestExpr, io: &Io) -> Result<bool, Flow> {
    Ok(match e {
        TestExpr::False => false,
        TestExpr::Literal(s) => !s.is_empty(),
        TestExpr::And(a, b) => eval_test(sh, a, io)? && eval_test(sh, b, io)?,
        TestExpr::Or(a, b) => eval_test(sh, a, io)? || eval_test(sh, b, io)?,
        TestExpr::Not(a) => !eval_test(sh, a, io)?,
        TestExpr::Parenthesized(a) => eval_test(sh, a, io)?,
        TestExpr::UnaryTest(p, s) => unary(sh, p, s, io)?,
        TestExpr::BinaryTest(p, l, r) => binary(sh, p, l, r, io)?,
    })
}

/// Evaluates `[[ ... ]]`; its words are expanded without splitting.
///
/// # Errors
/// Expansion errors and limits.
pub fn eval_extended(sh: &mut Shell, e: &ExtendedTestExpr, io: &Io) -> Result<bool, Flow> {
    Ok(match e {
        ExtendedTestExpr::And(a, b) => eval_extended(sh, a, io)? && eval_extended(sh, b, io)?,
        ExtendedTestExpr::Or(a, b) => eval_extended(sh, a, io)? || eval_extended(sh, b, io)?,
        ExtendedTestExpr::Not(a) => !eval_extended(sh, a, io)?,
        ExtendedTestExpr::Parenthesized(a) => eval_extended(sh, a, io)?,
        ExtendedTestExpr::UnaryTest(p, w) => {
            let s = sh.expand_single(&w.value, io)?;
            unary(sh, p, &s, io)?
        }
        ExtendedTestExpr::BinaryTest(p, l, r) => {
            let l = sh.expand_single(&l.value, io)?;
            let r = match p {
                BP::StringExactlyMatchesPattern | BP::StringDoesNotExactlyMatchPattern => {
                    sh.expand_pattern(&r.value, io)?
                }
                _ => sh.expand_single(&r.value, io)?,
            };
            binary(sh, p, &l, &r, io)?
        }
    })
}

fn file_kind(sh: &mut Shell, s: &str, follow: Follow) -> Option<crate::vfs::Stat> {
    let p = sh.vfs.resolve(&sh.cwd, s, follow).ok()?;
    sh.vfs.stat(&p).ok().flatten()
}

fn unary(sh: &mut Shell, p: &UP, s: &str, io: &Io) -> Result<bool, Flow> {
    Ok(match p {
        UP::StringHasZeroLength => s.is_empty(),
        UP::StringHasNonZeroLength => !s.is_empty(),
        UP::FileExists | UP::FileExistsAndIsReadable => file_kind(sh, s, Follow::Final).is_some(),
        UP::FileExistsAndIsWritable => file_kind(sh, s, Follow::Final).is_some_and(|_| {
            sh.vfs
                .roots()
                .iter()
                .any(|r| r.writable && sh.abs(s).starts_with(&r.path))
        }),
        UP::FileExistsAndIsExecutable => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::Dir)
        }
        UP::FileExistsAndIsDir => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::Dir)
        }
        UP::FileExistsAndIsRegularFile => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind == Kind::File)
        }
        UP::FileExistsAndIsNotZeroLength => {
            file_kind(sh, s, Follow::Final).is_some_and(|k| k.kind != Kind::File || k.len > 0)
        }
        UP::FileExistsAndIsSymlink => {
            file_kind(sh, s, Follow::NoFinal).is_some_and(|k| k.kind == Kind::Link)
        }
        UP::ShellVariableIsSetAndAssigned => sh.vars.contains_key(s),
        UP::FdIsOpenTerminal => false,
        UP::FileExistsAndIsBlockSpecialFile
        | UP::FileExistsAndIsCharSpecialFile
        | UP::FileExistsAndIsSetgid
        | UP::FileExistsAndHasStickyBit
        | UP::FileExistsAndIsFifo
        | UP::FileExistsAndIsSetuid
        | UP::FileExistsAndOwnedByEffectiveGroupId
        | UP::FileExistsAndModifiedSinceLastRead
        | UP::FileExistsAndOwnedByEffectiveUserId
        | UP::FileExistsAndIsSocket
        | UP::ShellOptionEnabled
        | UP::ShellVariableIsSetAndNameRef => {
            let _ = io;
            false
        }
    })
}

fn num(s: &str, io: &Io) -> Result<i64, Flow> {
    s.trim().parse::<i64>().map_err(|_| {
        io.warn(format!("sh: test: {s}: integer expression expected"));
        Flow::Exit(2)
    })
}

fn binary(sh: &mut Shell, p: &BP, l: &str, r: &str, io: &Io) -> Result<bool, Flow> {
    Ok(match p {
        BP::StringExactlyMatchesString => l == r,
        BP::StringDoesNotExactlyMatchString => l != r,
        BP::StringExactlyMatchesPattern => expand::glob_match(r, l),
        BP::StringDoesNotExactlyMatchPattern => !expand::glob_match(r, l),
        BP::StringMatchesRegex => regex::Regex::new(r).is_ok_and(|re| re.is_match(l)),
        BP::StringContainsSubstring => l.contains(r),
        BP::LeftSortsBeforeRight => l < r,
        BP::LeftSortsAfterRight => l > r,
        BP::ArithmeticEqualTo => num(l, io)? == num(r, io)?,
        BP::ArithmeticNotEqualTo => num(l, io)? != num(r, io)?,
        BP::ArithmeticLessThan => num(l, io)? < num(r, io)?,
        BP::ArithmeticLessThanOrEqualTo => num(l, io)? <= num(r, io)?,
        BP::ArithmeticGreaterThan => num(l, io)? > num(r, io)?,
        BP::ArithmeticGreaterThanOrEqualTo => num(l, io)? >= num(r, io)?,
        BP::LeftFileIsNewerOrExistsWhenRightDoesNot
        | BP::LeftFileIsOlderOrDoesNotExistWhenRightDoes => {
            let a = file_kind(sh, l, Follow::Final).and_then(|s| s.modified);
            let b = file_kind(sh, r, Follow::Final).and_then(|s| s.modified);
            if matches!(p, BP::LeftFileIsNewerOrExistsWhenRightDoesNot) {
                match (a, b) {
                    (Some(a), Some(b)) => a > b,
                    (Some(_), None) => true,
                    _ => false,
                }
            } else {
                match (a, b) {
                    (Some(a), Some(b)) => a < b,
                    (None, Some(_)) => true,
                    _ => false,
                }
            }
        }
        BP::FilesReferToSameDeviceAndInodeNumbers => {
            let a = sh.vfs.resolve(&sh.cwd, l, Follow::Final).ok();
            a.is_some() && a == sh.vfs.resolve(&sh.cwd, r, Follow::Final).ok()
        }
    })
}

// --- redirections ---------------------------------------------------------------

/// Files to write after the command: path, sink, append.
pub type FileOuts = Vec<(PathBuf, SinkRef, bool)>;

/// Applies `redirs` to `io`. `Ok(Err(status))` when a redirection failed
/// (the command must not run).
///
/// # Errors
/// Expansion errors and limits.
pub fn redirect(
    sh: &mut Shell,
    redirs: &[ast::IoRedirect],
    io: &Io,
) -> Result<Result<(Io, FileOuts), i32>, Flow> {
    let mut rio = io.clone();
    let mut files: FileOuts = Vec::new();
    for r in redirs {
        match r {
            ast::IoRedirect::File(fd, kind, target) => {
                let fd = fd.unwrap_or(match kind {
                    RK::Read | RK::ReadAndWrite | RK::DuplicateInput => 0,
                    _ => 1,
                });
                match (kind, target) {
                    (RK::Write | RK::Clobber | RK::Append, RT::Filename(w)) => {
                        let name = sh.expand_single(&w.value, io)?;
                        let Some(out) =
                            open_out(sh, &name, matches!(kind, RK::Append), io, &mut files)
                        else {
                            return Ok(Err(1));
                        };
                        if !set_fd(&mut rio, fd, out, io) {
                            return Ok(Err(2));
                        }
                    }
                    (RK::Read, RT::Filename(w)) => {
                        let name = sh.expand_single(&w.value, io)?;
                        if fd != 0 {
                            io.warn(format!(
                                "sh: redirection of descriptor {fd} is not supported"
                            ));
                            return Ok(Err(2));
                        }
                        if name == "/dev/null" {
                            rio.stdin = input(Vec::new());
                            continue;
                        }
                        let data = match sh
                            .vfs
                            .resolve(&sh.cwd, &name, Follow::Final)
                            .and_then(|p| sh.vfs.read(&p))
                        {
                            Ok(d) => d,
                            Err(e) => return Ok(Err(sh.fs_fail("sh", &e, io))),
                        };
                        rio.stdin = input(data.as_ref().clone());
                    }
                    (RK::DuplicateOutput, RT::Fd(n)) => {
                        if !dup(&mut rio, fd, &n.to_string(), io) {
                            return Ok(Err(2));
                        }
                    }
                    (RK::DuplicateOutput, RT::Duplicate(w)) => {
                        let to = sh.expand_single(&w.value, io)?;
                        if !dup(&mut rio, fd, &to, io) {
                            return Ok(Err(2));
                        }
                    }
                    (RK::DuplicateInput, _) => {}
                    _ => {
                        io.warn("sh: this redirection is not supported by shell_run");
                        return Ok(Err(2));
                    }
                }
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                let text = if doc.requires_expansion {
                    sh.expand_single(&here_quote(&doc.doc.value), io)?
                } else {
                    doc.doc.value.clone()
                };
                let text = if doc.remove_tabs {
                    text.lines()
                        .map(|l| l.trim_start_matches('\t'))
                        .collect::<Vec<_>>()
                        .join("\n")
                        + if text.ends_with('\n') { "\n" } else { "" }
                } else {
                    text
                };
                rio.stdin = input(text.into_bytes());
            }
            ast::IoRedirect::HereString(_, w) => {
                let text = sh.expand_single(&w.value, io)? + "\n";
                rio.stdin = input(text.into_bytes());
            }
            ast::IoRedirect::OutputAndError(w, append) => {
                let name = sh.expand_single(&w.value, io)?;
                let Some(out) = open_out(sh, &name, *append, io, &mut files) else {
                    return Ok(Err(1));
                };
                rio.out = out.clone();
                rio.err = out;
            }
        }
    }
    Ok(Ok((rio, files)))
}

/// Here-document text is expanded like a double-quoted word, but double
/// quotes in it are literal.
fn here_quote(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('"');
    for c in text.chars() {
        if c == '"' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

fn set_fd(rio: &mut Io, fd: i32, out: SinkRef, io: &Io) -> bool {
    match fd {
        1 => rio.out = out,
        2 => rio.err = out,
        _ => {
            io.warn(format!(
                "sh: redirection of descriptor {fd} is not supported"
            ));
            return false;
        }
    }
    true
}

fn dup(rio: &mut Io, fd: i32, to: &str, io: &Io) -> bool {
    let target = match to {
        "1" => rio.out.clone(),
        "2" => rio.err.clone(),
        "-" => sink(Sink::null()),
        _ => {
            io.warn(format!(
                "sh: {fd}>&{to}: only descriptors 1 and 2 exist in shell_run"
            ));
            return false;
        }
    };
    set_fd(rio, fd, target, io)
}

fn open_out(
    sh: &mut Shell,
    name: &str,
    append: bool,
    io: &Io,
    files: &mut FileOuts,
) -> Option<SinkRef> {
    if name == "/dev/null" {
        return Some(sink(Sink::null()));
    }
    if name == "/dev/stdout" {
        return Some(io.out.clone());
    }
    if name == "/dev/stderr" {
        return Some(io.err.clone());
    }
    let path = match sh.vfs.resolve(&sh.cwd, name, Follow::Final) {
        Ok(p) => p,
        Err(e) => {
            sh.fs_fail("sh", &e, io);
            return None;
        }
    };
    // Create or truncate now, as a shell does before running the command.
    let r = if append {
        sh.vfs.append(&path, b"")
    } else {
        sh.vfs.write(&path, Vec::new())
    };
    if let Err(e) = r {
        sh.fs_fail("sh", &e, io);
        return None;
    }
    let out = sink(Sink::hard(FILE_CAP));
    files.push((path, out.clone(), append));
    Some(out)
}
