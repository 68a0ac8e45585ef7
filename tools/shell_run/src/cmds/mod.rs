//! The commands of shell_run, each implemented here in Rust and run inside
//! the component (none is a program of the host), one module per family:
//! viewing and counting ([`view`]), searching ([`grep`]), ordering
//! ([`sort`]), selecting and translating ([`transform`]), editing
//! ([`sed`]; the regular expressions of grep and sed are in [`pattern`]),
//! comparing ([`diff`]), files ([`files`], [`find`]), printing ([`print`])
//! and the rest ([`misc`]).
//!
//! Each takes the shell (for the filesystem overlay, the current directory
//! and the variables), its arguments without the name, and its streams, and
//! returns its exit status. Options follow POSIX and the common GNU forms;
//! an unknown option is a usage error (status 2) naming the supported ones.

pub mod diff;
pub mod files;
pub mod find;
pub mod grep;
pub mod misc;
pub mod pattern;
pub mod print;
pub mod sed;
pub mod sort;
pub mod transform;
pub mod view;

use std::rc::Rc;

use capsaga_sdk::fs::Follow;

use crate::shell::Builtin;
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::Kind;

/// Names of the commands.
pub const NAMES: &[&str] = &[
    "basename", "cat", "cp", "cut", "date", "diff", "dirname", "echo", "env", "find", "grep",
    "head", "ls", "mkdir", "mv", "printf", "rm", "rmdir", "sed", "seq", "sort", "tail", "tee",
    "touch", "tr", "uniq", "wc", "xargs", "yes",
];

/// The command called `name`.
pub fn lookup(name: &str) -> Option<Builtin> {
    Some(match name {
        "cat" => view::cat,
        "head" => view::head,
        "tail" => view::tail,
        "wc" => view::wc,
        "grep" => grep::grep,
        "sort" => sort::sort,
        "uniq" => sort::uniq,
        "cut" => transform::cut,
        "tr" => transform::tr,
        "diff" => diff::diff,
        "tee" => view::tee,
        "sed" => sed::sed,
        "ls" => files::ls,
        "find" => find::find,
        "mkdir" => files::mkdir,
        "rmdir" => files::rmdir,
        "rm" => files::rm,
        "cp" => files::cp,
        "mv" => files::mv,
        "touch" => files::touch,
        "echo" => print::echo,
        "printf" => print::printf,
        "basename" => misc::basename,
        "dirname" => misc::dirname,
        "date" => misc::date,
        "env" => misc::env,
        "xargs" => misc::xargs,
        "yes" => misc::yes,
        "seq" => misc::seq,
        _ => return None,
    })
}

/// Parsed options: flags in order, option values, operands.
#[derive(Debug, Default)]
pub struct Opts {
    /// Flags seen (a flag with a value is listed too).
    pub flags: Vec<char>,
    /// Values of options that take one, in order.
    pub values: Vec<(char, String)>,
    /// Operands.
    pub rest: Vec<String>,
}

impl Opts {
    /// Whether flag `c` was given.
    pub fn has(&self, c: char) -> bool {
        self.flags.contains(&c)
    }

    /// The last value of option `c`.
    pub fn value(&self, c: char) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| *k == c)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of option `c`.
    pub fn all(&self, c: char) -> Vec<String> {
        self.values
            .iter()
            .filter(|(k, _)| *k == c)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// Parses `args`: `flags` are the options without a value, `valued` those
/// with one (`-n 5`, `-n5`); `--` ends the options; `-` is an operand;
/// options may follow operands. `long` maps long options to short ones.
///
/// # Errors
/// The usage status (2) after writing the message to stderr.
pub fn getopt(
    cmd: &str,
    args: &[String],
    flags: &str,
    valued: &str,
    long: &[(&str, char)],
    io: &Io,
) -> Result<Opts, i32> {
    let mut o = Opts::default();
    let mut it = args.iter();
    let usage = |what: &str| {
        io.warn(format!(
            "{cmd}: {what} (shell_run's {cmd} supports: {})",
            supported(flags, valued, long)
        ));
        2
    };
    while let Some(a) = it.next() {
        if a == "--" {
            o.rest.extend(it.cloned());
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            let (name, val) = match name.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (name, None),
            };
            let Some(&(_, c)) = long.iter().find(|(l, _)| *l == name) else {
                return Err(usage(&format!("unknown option --{name}")));
            };
            o.flags.push(c);
            if valued.contains(c) {
                let v = match val.or_else(|| it.next().cloned()) {
                    Some(v) => v,
                    None => return Err(usage(&format!("option --{name} needs a value"))),
                };
                o.values.push((c, v));
            }
            continue;
        }
        if a.len() < 2 || !a.starts_with('-') {
            o.rest.push(a.clone());
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if valued.contains(c) {
                let v: String = chars[i + 1..].iter().collect();
                let v = if v.is_empty() {
                    match it.next() {
                        Some(v) => v.clone(),
                        None => return Err(usage(&format!("option -{c} needs a value"))),
                    }
                } else {
                    v
                };
                o.flags.push(c);
                o.values.push((c, v));
                break;
            }
            if !flags.contains(c) {
                return Err(usage(&format!("unknown option -{c}")));
            }
            o.flags.push(c);
            i += 1;
        }
    }
    Ok(o)
}

fn supported(flags: &str, valued: &str, long: &[(&str, char)]) -> String {
    let mut v: Vec<String> = flags.chars().map(|c| format!("-{c}")).collect();
    v.extend(valued.chars().map(|c| format!("-{c} VALUE")));
    v.extend(long.iter().map(|(l, _)| format!("--{l}")));
    if v.is_empty() {
        "no options".into()
    } else {
        v.join(" ")
    }
}

/// One input of a filter.
pub struct Input {
    /// Its name (`-` for stdin).
    pub name: String,
    /// Its bytes.
    pub data: Rc<Vec<u8>>,
}

/// The inputs named by `files` (stdin when empty or `-`). Unreadable files
/// are reported on stderr and skipped; the status is then 1.
pub fn inputs(sh: &mut Shell, cmd: &str, files: &[String], io: &Io) -> (Vec<Input>, i32) {
    if files.is_empty() {
        return (
            vec![Input {
                name: "-".into(),
                data: Rc::new(io.read_stdin()),
            }],
            0,
        );
    }
    let mut out = Vec::new();
    let mut st = 0;
    for f in files {
        if f == "-" {
            out.push(Input {
                name: "-".into(),
                data: Rc::new(io.read_stdin()),
            });
            continue;
        }
        match sh
            .vfs
            .resolve(&sh.cwd, f, Follow::Final)
            .and_then(|p| sh.vfs.read(&p))
        {
            Ok(data) => out.push(Input {
                name: f.clone(),
                data,
            }),
            Err(e) => st = sh.fs_fail(cmd, &e, io),
        }
    }
    (out, st)
}

/// The lines of `data`, without their newlines (no empty last line for a
/// final newline).
pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = data.strip_suffix(b"\n").unwrap_or(data);
    let empty = data.is_empty();
    trimmed.split(|&b| b == b'\n').filter(move |_| !empty)
}

/// Every path under `start` (itself first), depth-first in name order, as
/// (display path, resolved path, kind, depth). Directories whose listing
/// fails are reported and skipped.
pub fn walk(
    sh: &mut Shell,
    cmd: &str,
    start: &str,
    max_depth: usize,
    io: &Io,
) -> Result<Vec<(String, std::path::PathBuf, Kind, usize)>, Flow> {
    let mut out = Vec::new();
    let root = match sh.vfs.resolve(&sh.cwd, start, Follow::Final) {
        Ok(p) => p,
        Err(e) => {
            sh.fs_fail(cmd, &e, io);
            return Ok(out);
        }
    };
    let kind = match sh.vfs.stat(&root) {
        Ok(Some(s)) => s.kind,
        Ok(None) => {
            io.warn(format!("{cmd}: {start}: No such file or directory"));
            return Ok(out);
        }
        Err(e) => {
            sh.fs_fail(cmd, &e, io);
            return Ok(out);
        }
    };
    let mut stack = vec![(start.to_owned(), root, kind, 0usize)];
    while let Some((shown, p, k, d)) = stack.pop() {
        sh.check_time()?;
        if out.len() >= 1_000_000 {
            io.warn(format!("{cmd}: stopped after 1000000 paths"));
            break;
        }
        out.push((shown.clone(), p.clone(), k, d));
        if k != Kind::Dir || d >= max_depth {
            continue;
        }
        let entries = match sh.vfs.list(&p) {
            Ok(e) => e,
            Err(e) => {
                sh.fs_fail(cmd, &e, io);
                continue;
            }
        };
        for (name, kind) in entries.into_iter().rev() {
            let child_shown = if shown.ends_with('/') {
                format!("{shown}{name}")
            } else {
                format!("{shown}/{name}")
            };
            // Links are listed, not followed.
            stack.push((child_shown, p.join(&name), kind, d + 1));
        }
    }
    Ok(out)
}
