//! grep, and the regular expressions of grep and sed (POSIX basic and
//! extended syntax on top of the `regex` crate).

use capsaga_sdk::fs::Follow;
use regex::bytes::{Regex, RegexBuilder};

use super::{getopt, inputs, lines, walk};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::Kind;

/// A POSIX basic regular expression rewritten in the `regex` crate's syntax.
pub fn bre_to_ere(p: &str) -> String {
    let mut o = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => o.push(n),
                Some('<' | '>') => o.push_str("\\b"),
                Some(n) => {
                    o.push('\\');
                    o.push(n);
                }
                None => o.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                o.push('\\');
                o.push(c);
            }
            '*' if at_start => o.push_str("\\*"),
            '[' => {
                o.push('[');
                if chars.peek() == Some(&'^') {
                    o.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    o.push_str("\\]");
                    chars.next();
                }
                for n in chars.by_ref() {
                    if n == ']' {
                        break;
                    }
                    if n == '\\' {
                        o.push('\\');
                    }
                    o.push(n);
                }
                o.push(']');
            }
            _ => o.push(c),
        }
        at_start = o.ends_with('(') || o.ends_with('|') || (o.ends_with('^') && o.len() == 1);
    }
    o
}

/// Builds the regex of grep or sed.
///
/// # Errors
/// The regex crate's message.
pub fn build_regex(
    patterns: &[String],
    extended: bool,
    fixed: bool,
    icase: bool,
    word: bool,
    line: bool,
) -> Result<Regex, String> {
    let alts: Vec<String> = patterns
        .iter()
        .map(|p| {
            let p = if fixed {
                regex::escape(p)
            } else if extended {
                p.clone()
            } else {
                bre_to_ere(p)
            };
            if word {
                format!("\\b(?:{p})\\b")
            } else if line {
                format!("^(?:{p})$")
            } else {
                format!("(?:{p})")
            }
        })
        .collect();
    RegexBuilder::new(&alts.join("|"))
        .case_insensitive(icase)
        .multi_line(false)
        .size_limit(32 * 1024 * 1024)
        .build()
        .map_err(|e| e.to_string())
}

/// `grep [-iEFvcnlLowxrRhHqs] [-e PATTERN]... [-m N] PATTERN [FILE]...`
pub fn grep(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "grep",
        args,
        "iEFGvcnlLowxrRhHqsyP",
        "em",
        &[
            ("ignore-case", 'i'),
            ("count", 'c'),
            ("invert-match", 'v'),
            ("line-number", 'n'),
            ("files-with-matches", 'l'),
            ("recursive", 'r'),
            ("quiet", 'q'),
            ("only-matching", 'o'),
            ("extended-regexp", 'E'),
            ("fixed-strings", 'F'),
            ("word-regexp", 'w'),
            ("max-count", 'm'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let mut rest = o.rest.clone();
    let mut patterns = o.all('e');
    if patterns.is_empty() {
        if rest.is_empty() {
            io.warn("grep: no pattern given (usage: grep [OPTION]... PATTERN [FILE]...)");
            return Ok(2);
        }
        patterns.push(rest.remove(0));
    }
    let patterns: Vec<String> = patterns
        .iter()
        .flat_map(|p| p.split('\n').map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let re = match build_regex(
        &patterns,
        o.has('E') || o.has('P'),
        o.has('F'),
        o.has('i') || o.has('y'),
        o.has('w'),
        o.has('x'),
    ) {
        Ok(r) => r,
        Err(e) => {
            io.warn(format!("grep: bad pattern: {e}"));
            return Ok(2);
        }
    };
    let max = o.value('m').and_then(|m| m.parse::<usize>().ok());
    let recursive = o.has('r') || o.has('R');
    if recursive && rest.is_empty() {
        rest.push(".".into());
    }
    let mut st = 0;
    // Expand directories when recursive.
    let mut files: Vec<String> = Vec::new();
    if recursive {
        for r in &rest {
            for (shown, _, kind, _) in walk(sh, "grep", r, usize::MAX, io)? {
                if kind == Kind::File {
                    files.push(shown);
                }
            }
        }
    } else {
        files.clone_from(&rest);
    }
    let show_names = !o.has('h') && (o.has('H') || files.len() > 1 || recursive);
    let mut any = false;
    let ins = if files.is_empty() && !recursive {
        let (i, s) = inputs(sh, "grep", &[], io);
        st = s;
        i
    } else {
        let mut v = Vec::new();
        for f in &files {
            if let Ok(p) = sh.vfs.resolve(&sh.cwd, f, Follow::Final)
                && let Ok(Some(s)) = sh.vfs.stat(&p)
                && s.kind == Kind::Dir
            {
                if !o.has('s') {
                    io.warn(format!("grep: {f}: Is a directory"));
                }
                continue;
            }
            let (mut i, s) = inputs(sh, "grep", std::slice::from_ref(f), io);
            if s != 0 {
                st = 2;
            }
            v.append(&mut i);
        }
        v
    };
    for i in ins {
        let name = if i.name == "-" {
            "(standard input)"
        } else {
            i.name.as_str()
        };
        let mut n_match = 0usize;
        for (ln, line) in lines(&i.data).enumerate() {
            if max.is_some_and(|m| n_match >= m) {
                break;
            }
            let hit = re.is_match(line) != o.has('v');
            if !hit {
                continue;
            }
            n_match += 1;
            any = true;
            if o.has('q') {
                return Ok(0);
            }
            if o.has('c') || o.has('l') || o.has('L') {
                continue;
            }
            let prefix = format!(
                "{}{}",
                if show_names {
                    format!("{name}:")
                } else {
                    String::new()
                },
                if o.has('n') {
                    format!("{}:", ln + 1)
                } else {
                    String::new()
                }
            );
            if o.has('o') && !o.has('v') {
                for m in re.find_iter(line) {
                    if m.as_bytes().is_empty() {
                        continue;
                    }
                    io.print(&prefix)?;
                    io.print(m.as_bytes())?;
                    io.print(b"\n")?;
                }
            } else {
                io.print(&prefix)?;
                io.print(line)?;
                io.print(b"\n")?;
            }
        }
        if o.has('c') {
            if show_names {
                io.print(format!("{name}:{n_match}\n"))?;
            } else {
                io.print(format!("{n_match}\n"))?;
            }
        }
        if o.has('l') && n_match > 0 {
            io.print(format!("{name}\n"))?;
        }
        if o.has('L') && n_match == 0 {
            io.print(format!("{name}\n"))?;
        }
    }
    if st != 0 && !(o.has('q') && any) {
        return Ok(2);
    }
    Ok(if any { 0 } else { 1 })
}
