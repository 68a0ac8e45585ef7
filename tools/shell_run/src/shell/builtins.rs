//! Builtins that need the shell's own state (`cd`, variables, control
//! flow, `read`, `eval`; `test` and `[` are in [`super::test`]).

use capsaga_sdk::fs::Follow;

use super::io::Io;
use super::{Flow, Shell, test};
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
        "test" => |sh, a, io| test::test(sh, a, io, "test"),
        "[" => |sh, a, io| {
            if a.last().map(String::as_str) != Some("]") {
                io.warn("sh: [: missing `]'");
                return Ok(2);
            }
            test::test(sh, &a[..a.len() - 1], io, "[")
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
