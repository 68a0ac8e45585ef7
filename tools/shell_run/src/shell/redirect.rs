//! Redirections: `<`, `>`, `>>`, `&>`, `2>&1`, `>&2`, here-documents and
//! here-strings. Output to a file goes to a capped buffer that is written
//! to the overlay when the command ends; `/dev/null`, `/dev/stdout` and
//! `/dev/stderr` are the only device paths (anything else is a path like
//! any other, checked by the guard).
//!
//! Every redirection of a command is checked (descriptor, kind, path)
//! before any file is created or truncated: an unsupported one (`3>a.txt`,
//! `2>&5`, `<>f`) fails with nothing written, so a dry run lists no change
//! for it either.

use std::path::PathBuf;

use brush_parser::ast::{self, IoFileRedirectKind as RK, IoFileRedirectTarget as RT};
use capsaga_sdk::fs::Follow;

use super::io::{Io, Sink, SinkRef, input, sink};
use super::{FILE_CAP, Flow, Shell};

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
    if let Some(why) = redirs.iter().find_map(unsupported) {
        io.warn(why);
        return Ok(Err(2));
    }
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
                        match read_in(sh, &name, &files) {
                            Ok(d) => rio.stdin = input(d),
                            Err(e) => return Ok(Err(sh.fs_fail("sh", &e, io))),
                        }
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
    // Create or truncate the files now, as a shell does before running the
    // command, once every redirection is known to be valid.
    for (path, _, append) in &files {
        let r = if *append {
            sh.vfs.append(path, b"")
        } else {
            sh.vfs.write(path, Vec::new())
        };
        if let Err(e) = r {
            sh.fs_fail("sh", &e, io);
            return Ok(Err(1));
        }
    }
    Ok(Ok((rio, files)))
}

/// Why `r` cannot be done by shell_run, decided before anything runs: a
/// descriptor other than 0 (input) or 1 and 2 (output), a literal
/// duplication target other than 1, 2 or `-`, or a kind it lacks.
fn unsupported(r: &ast::IoRedirect) -> Option<String> {
    let ast::IoRedirect::File(fd, kind, target) = r else {
        return None;
    };
    let fd = fd.unwrap_or(match kind {
        RK::Read | RK::ReadAndWrite | RK::DuplicateInput => 0,
        _ => 1,
    });
    let fd_ok = match kind {
        RK::Read | RK::DuplicateInput => fd == 0,
        RK::ReadAndWrite => true,
        _ => fd == 1 || fd == 2,
    };
    if !fd_ok {
        return Some(format!(
            "sh: redirection of descriptor {fd} is not supported"
        ));
    }
    match (kind, target) {
        (RK::Write | RK::Clobber | RK::Append | RK::Read, RT::Filename(_))
        | (RK::DuplicateOutput, RT::Duplicate(_))
        | (RK::DuplicateInput, _) => None,
        (RK::DuplicateOutput, RT::Fd(n)) if *n == 1 || *n == 2 => None,
        (RK::DuplicateOutput, RT::Fd(n)) => Some(format!(
            "sh: {fd}>&{n}: only descriptors 1 and 2 exist in shell_run"
        )),
        _ => Some("sh: this redirection is not supported by shell_run".to_owned()),
    }
}

/// The content `<` reads from `name`: a file this command's redirections
/// truncate reads empty (the shell truncated it first).
fn read_in(sh: &Shell, name: &str, files: &FileOuts) -> Result<Vec<u8>, crate::vfs::FsError> {
    let p = sh.vfs.resolve(&sh.cwd, name, Follow::Final)?;
    match files.iter().rev().find(|(f, _, _)| *f == p) {
        Some((_, _, false)) => Ok(Vec::new()),
        Some((_, _, true)) if sh.vfs.stat(&p)?.is_none() => Ok(Vec::new()),
        _ => Ok(sh.vfs.read(&p)?.as_ref().clone()),
    }
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
    let out = sink(Sink::hard(FILE_CAP));
    files.push((path, out.clone(), append));
    Some(out)
}
