//! Text filters: cat, head, tail, wc, grep, sort, uniq, cut, tr, diff, tee.

use std::cmp::Ordering;

use capsaga_sdk::fs::Follow;
use regex::bytes::{Regex, RegexBuilder};

use super::{getopt, inputs, lines, walk};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::Kind;

/// `cat [-n] [FILE]...`
pub fn cat(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("cat", args, "nu", "", &[("number", 'n')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let (ins, st) = inputs(sh, "cat", &o.rest, io);
    let mut n = 0usize;
    for i in ins {
        if o.has('n') {
            for l in lines(&i.data) {
                n += 1;
                io.print(format!("{n:6}\t"))?;
                io.print(l)?;
                io.print(b"\n")?;
            }
        } else {
            io.print(i.data.as_slice())?;
        }
    }
    Ok(st)
}

/// A count like `-n 5`, `-n -5` (all but the last 5) or `+5` (from line 5).
fn count(s: &str) -> Option<(bool, bool, usize)> {
    let (minus, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (plus, rest) = match rest.strip_prefix('+') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let mult = match rest.chars().last() {
        Some('k' | 'K') => 1024,
        Some('M') => 1024 * 1024,
        _ => 1,
    };
    let digits = rest.trim_end_matches(['k', 'K', 'M']);
    digits
        .parse::<usize>()
        .ok()
        .map(|n| (minus, plus, n.saturating_mul(mult)))
}

/// `-5` → `-n 5` for head and tail.
fn numeric_shorthand(args: &[String]) -> Vec<String> {
    args.iter()
        .flat_map(|a| {
            if a.len() > 1 && a.starts_with('-') && a[1..].chars().all(|c| c.is_ascii_digit()) {
                vec!["-n".to_owned(), a[1..].to_owned()]
            } else {
                vec![a.clone()]
            }
        })
        .collect()
}

fn header(io: &Io, many: bool, first: bool, name: &str) -> Result<(), Flow> {
    if many {
        let name = if name == "-" { "standard input" } else { name };
        io.print(format!("{}==> {name} <==\n", if first { "" } else { "\n" }))?;
    }
    Ok(())
}

/// `head [-n N|-N] [-c N] [FILE]...`
pub fn head(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let args = numeric_shorthand(args);
    let o = match getopt(
        "head",
        &args,
        "qv",
        "nc",
        &[("lines", 'n'), ("bytes", 'c')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let (ins, st) = inputs(sh, "head", &o.rest, io);
    let many = ins.len() > 1 && !o.has('q');
    for (k, i) in ins.iter().enumerate() {
        header(io, many, k == 0, &i.name)?;
        if let Some(c) = o.value('c') {
            let Some((minus, _, n)) = count(c) else {
                io.warn(format!("head: invalid number of bytes: {c}"));
                return Ok(1);
            };
            let end = if minus {
                i.data.len().saturating_sub(n)
            } else {
                n.min(i.data.len())
            };
            io.print(&i.data[..end])?;
            continue;
        }
        let spec = o.value('n').unwrap_or("10");
        let Some((minus, _, n)) = count(spec) else {
            io.warn(format!("head: invalid number of lines: {spec}"));
            return Ok(1);
        };
        let data = i.data.as_slice();
        let end = if minus {
            let total = lines(data).count();
            nth_line_end(data, total.saturating_sub(n))
        } else {
            nth_line_end(data, n)
        };
        io.print(&data[..end])?;
    }
    Ok(st)
}

/// Byte offset just after the `n`-th newline (or the end).
fn nth_line_end(data: &[u8], n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let mut seen = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    data.len()
}

/// `tail [-n N|-n +N|-N] [-c N] [FILE]...`
pub fn tail(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let args = numeric_shorthand(args);
    let o = match getopt(
        "tail",
        &args,
        "qv",
        "nc",
        &[("lines", 'n'), ("bytes", 'c')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let (ins, st) = inputs(sh, "tail", &o.rest, io);
    let many = ins.len() > 1 && !o.has('q');
    for (k, i) in ins.iter().enumerate() {
        header(io, many, k == 0, &i.name)?;
        let data = i.data.as_slice();
        if let Some(c) = o.value('c') {
            let Some((_, plus, n)) = count(c) else {
                io.warn(format!("tail: invalid number of bytes: {c}"));
                return Ok(1);
            };
            let start = if plus {
                n.saturating_sub(1).min(data.len())
            } else {
                data.len().saturating_sub(n)
            };
            io.print(&data[start..])?;
            continue;
        }
        let spec = o.value('n').unwrap_or("10");
        let Some((_, plus, n)) = count(spec) else {
            io.warn(format!("tail: invalid number of lines: {spec}"));
            return Ok(1);
        };
        let total = lines(data).count();
        let skip = if plus {
            n.saturating_sub(1)
        } else {
            total.saturating_sub(n)
        };
        io.print(&data[nth_line_end(data, skip)..])?;
    }
    Ok(st)
}

/// `wc [-l] [-w] [-c] [-m] [FILE]...`
pub fn wc(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "wc",
        args,
        "lwcm",
        "",
        &[
            ("lines", 'l'),
            ("words", 'w'),
            ("bytes", 'c'),
            ("chars", 'm'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let which: Vec<char> = if o.flags.is_empty() {
        vec!['l', 'w', 'c']
    } else {
        ['l', 'w', 'm', 'c']
            .into_iter()
            .filter(|c| o.has(*c))
            .collect()
    };
    let (ins, st) = inputs(sh, "wc", &o.rest, io);
    let mut total = [0usize; 4];
    let n_inputs = ins.len();
    for i in &ins {
        let d = i.data.as_slice();
        let counts = [
            d.iter().filter(|&&b| b == b'\n').count(),
            d.split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .count(),
            String::from_utf8_lossy(d).chars().count(),
            d.len(),
        ];
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
        print_counts(
            io,
            &which,
            &counts,
            (i.name != "-").then_some(i.name.as_str()),
        )?;
    }
    if n_inputs > 1 {
        print_counts(io, &which, &total, Some("total"))?;
    }
    Ok(st)
}

fn print_counts(io: &Io, which: &[char], c: &[usize; 4], name: Option<&str>) -> Result<(), Flow> {
    let mut parts: Vec<String> = which
        .iter()
        .map(|w| match w {
            'l' => c[0],
            'w' => c[1],
            'm' => c[2],
            _ => c[3],
        })
        .map(|n| n.to_string())
        .collect();
    if let Some(n) = name {
        parts.push(n.to_owned());
    }
    io.print(parts.join(" ") + "\n")
}

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

/// A sort key specification (`-k`).
#[derive(Clone, Copy)]
struct Key {
    start: usize,
    end: Option<usize>,
    numeric: bool,
    reverse: bool,
}

fn parse_key(s: &str) -> Option<Key> {
    let (a, b) = match s.split_once(',') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let field = |x: &str| -> Option<(usize, String)> {
        let digits: String = x.chars().take_while(char::is_ascii_digit).collect();
        let rest: String = x.chars().skip_while(char::is_ascii_digit).collect();
        let rest = match rest.split_once('.') {
            Some((_, r)) => r
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .to_owned(),
            None => rest,
        };
        Some((digits.parse().ok()?, rest))
    };
    let (start, m1) = field(a)?;
    let (end, m2) = match b {
        Some(b) => {
            let (e, m) = field(b)?;
            (Some(e), m)
        }
        None => (None, String::new()),
    };
    let mods = m1 + &m2;
    Some(Key {
        start: start.max(1),
        end,
        numeric: mods.contains('n') || mods.contains('g') || mods.contains('h'),
        reverse: mods.contains('r'),
    })
}

fn fields_of(line: &[u8], sep: Option<u8>) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    match sep {
        Some(s) => {
            let mut start = 0;
            for (i, &b) in line.iter().enumerate() {
                if b == s {
                    v.push((start, i));
                    start = i + 1;
                }
            }
            v.push((start, line.len()));
        }
        None => {
            // Blank-separated; each field includes its leading blanks.
            let mut i = 0;
            while i < line.len() {
                let start = i;
                while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
                    i += 1;
                }
                while i < line.len() && line[i] != b' ' && line[i] != b'\t' {
                    i += 1;
                }
                v.push((start, i));
            }
        }
    }
    v
}

fn key_slice<'a>(line: &'a [u8], k: &Key, sep: Option<u8>) -> &'a [u8] {
    let f = fields_of(line, sep);
    let Some(&(s, _)) = f.get(k.start - 1) else {
        return &[];
    };
    let e = match k.end {
        Some(e) => f.get(e.max(1) - 1).map_or(line.len(), |&(_, e)| e),
        None => line.len(),
    };
    &line[s..e.max(s)]
}

fn leading_number(s: &[u8]) -> f64 {
    let t = String::from_utf8_lossy(s);
    let t = t.trim_start();
    let end = t
        .char_indices()
        .take_while(|&(i, c)| c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+')))
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    t[..end].parse::<f64>().unwrap_or(0.0)
}

/// `sort [-rnufu] [-t SEP] [-k KEY]... [-o FILE] [FILE]...`
pub fn sort(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "sort",
        args,
        "rnufbsgh",
        "tko",
        &[
            ("reverse", 'r'),
            ("numeric-sort", 'n'),
            ("unique", 'u'),
            ("ignore-case", 'f'),
            ("key", 'k'),
            ("output", 'o'),
            ("field-separator", 't'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let sep = match o.value('t') {
        Some(t) if t.len() == 1 => Some(t.as_bytes()[0]),
        Some("\\t") => Some(b'\t'),
        Some(t) => {
            io.warn(format!("sort: the separator must be one character: {t:?}"));
            return Ok(2);
        }
        None => None,
    };
    let mut keys = Vec::new();
    for k in o.all('k') {
        match parse_key(&k) {
            Some(k) => keys.push(k),
            None => {
                io.warn(format!("sort: invalid key {k:?}"));
                return Ok(2);
            }
        }
    }
    let (ins, st) = inputs(sh, "sort", &o.rest, io);
    let mut all: Vec<&[u8]> = Vec::new();
    for i in &ins {
        all.extend(lines(&i.data));
    }
    let numeric = o.has('n') || o.has('g') || o.has('h');
    let fold = o.has('f');
    let cmp_one = |a: &[u8], b: &[u8], numeric: bool| -> Ordering {
        if numeric {
            leading_number(a).total_cmp(&leading_number(b))
        } else if fold {
            a.to_ascii_lowercase().cmp(&b.to_ascii_lowercase())
        } else {
            a.cmp(b)
        }
    };
    let cmp = |a: &&[u8], b: &&[u8]| -> Ordering {
        if keys.is_empty() {
            let c = cmp_one(a, b, numeric);
            return if numeric && c == Ordering::Equal {
                a.cmp(b)
            } else {
                c
            };
        }
        for k in &keys {
            let c = cmp_one(
                key_slice(a, k, sep),
                key_slice(b, k, sep),
                k.numeric || numeric,
            );
            let c = if k.reverse { c.reverse() } else { c };
            if c != Ordering::Equal {
                return c;
            }
        }
        a.cmp(b)
    };
    all.sort_by(|a, b| {
        let c = cmp(a, b);
        if o.has('r') { c.reverse() } else { c }
    });
    if o.has('u') {
        all.dedup_by(|a, b| {
            if keys.is_empty() {
                cmp_one(a, b, numeric) == Ordering::Equal
            } else {
                keys.iter().all(|k| {
                    cmp_one(
                        key_slice(a, k, sep),
                        key_slice(b, k, sep),
                        k.numeric || numeric,
                    ) == Ordering::Equal
                })
            }
        });
    }
    let mut out = Vec::with_capacity(all.iter().map(|l| l.len() + 1).sum());
    for l in all {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    if let Some(file) = o.value('o') {
        let r = sh
            .vfs
            .resolve(&sh.cwd, file, Follow::Final)
            .and_then(|p| sh.vfs.write(&p, out));
        if let Err(e) = r {
            return Ok(sh.fs_fail("sort", &e, io));
        }
    } else {
        io.print(&out)?;
    }
    Ok(st)
}

/// `uniq [-c] [-d] [-u] [-i] [FILE]`
pub fn uniq(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "uniq",
        args,
        "cdui",
        "",
        &[
            ("count", 'c'),
            ("repeated", 'd'),
            ("unique", 'u'),
            ("ignore-case", 'i'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let (ins, st) = inputs(sh, "uniq", &o.rest[..o.rest.len().min(1)], io);
    let eq = |a: &[u8], b: &[u8]| {
        if o.has('i') {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    for i in ins {
        let mut groups: Vec<(&[u8], usize)> = Vec::new();
        for l in lines(&i.data) {
            match groups.last_mut() {
                Some((prev, n)) if eq(prev, l) => *n += 1,
                _ => groups.push((l, 1)),
            }
        }
        for (l, n) in groups {
            if (o.has('d') && n < 2) || (o.has('u') && n > 1) {
                continue;
            }
            if o.has('c') {
                io.print(format!("{n:7} "))?;
            }
            io.print(l)?;
            io.print(b"\n")?;
        }
    }
    Ok(st)
}

/// A list like `1,3-5,7-`: 1-based inclusive ranges.
fn parse_list(s: &str) -> Option<Vec<(usize, usize)>> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                if a.is_empty() { 1 } else { a.parse().ok()? },
                if b.is_empty() {
                    usize::MAX
                } else {
                    b.parse().ok()?
                },
            ),
            None => {
                let n = part.parse().ok()?;
                (n, n)
            }
        };
        if a == 0 || b < a {
            return None;
        }
        v.push((a, b));
    }
    Some(v)
}

fn in_list(list: &[(usize, usize)], n: usize) -> bool {
    list.iter().any(|&(a, b)| n >= a && n <= b)
}

/// `cut (-f LIST [-d C] [-s] | -c LIST | -b LIST) [FILE]...`
pub fn cut(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "cut",
        args,
        "s",
        "fdcb",
        &[
            ("fields", 'f'),
            ("delimiter", 'd'),
            ("characters", 'c'),
            ("bytes", 'b'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let (mode, spec) = if let Some(f) = o.value('f') {
        ('f', f)
    } else if let Some(c) = o.value('c') {
        ('c', c)
    } else if let Some(b) = o.value('b') {
        ('b', b)
    } else {
        io.warn("cut: you must specify a list of bytes, characters, or fields (-b, -c or -f)");
        return Ok(2);
    };
    let Some(list) = parse_list(spec) else {
        io.warn(format!("cut: invalid list {spec:?}"));
        return Ok(2);
    };
    let delim = match o.value('d') {
        Some(d) if d.chars().count() == 1 => d.to_owned(),
        Some(d) => {
            io.warn(format!(
                "cut: the delimiter must be a single character: {d:?}"
            ));
            return Ok(2);
        }
        None => "\t".into(),
    };
    let (ins, st) = inputs(sh, "cut", &o.rest, io);
    for i in ins {
        for l in lines(&i.data) {
            let line = String::from_utf8_lossy(l);
            let out: String = match mode {
                'f' => {
                    if !line.contains(delim.as_str()) {
                        if o.has('s') {
                            continue;
                        }
                        line.into_owned()
                    } else {
                        line.split(delim.as_str())
                            .enumerate()
                            .filter(|(k, _)| in_list(&list, k + 1))
                            .map(|(_, f)| f)
                            .collect::<Vec<_>>()
                            .join(&delim)
                    }
                }
                'c' => line
                    .chars()
                    .enumerate()
                    .filter(|(k, _)| in_list(&list, k + 1))
                    .map(|(_, c)| c)
                    .collect(),
                _ => String::from_utf8_lossy(
                    &l.iter()
                        .enumerate()
                        .filter(|(k, _)| in_list(&list, k + 1))
                        .map(|(_, &b)| b)
                        .collect::<Vec<u8>>(),
                )
                .into_owned(),
            };
            io.print(out + "\n")?;
        }
    }
    Ok(st)
}

/// Expands a `tr` set: ranges, classes, escapes.
fn tr_set(s: &str) -> Vec<char> {
    let mut raw: Vec<char> = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '['
            && chars.get(i + 1) == Some(&':')
            && let Some(end) = s[s.char_indices().nth(i).map_or(0, |x| x.0)..].find(":]")
        {
            let start_b = s.char_indices().nth(i).map_or(0, |x| x.0);
            let class = &s[start_b + 2..start_b + end];
            let set: Vec<char> = match class {
                "lower" => ('a'..='z').collect(),
                "upper" => ('A'..='Z').collect(),
                "digit" => ('0'..='9').collect(),
                "alpha" => ('a'..='z').chain('A'..='Z').collect(),
                "alnum" => ('a'..='z').chain('A'..='Z').chain('0'..='9').collect(),
                "space" => vec![' ', '\t', '\n', '\r', '\x0b', '\x0c'],
                "blank" => vec![' ', '\t'],
                "punct" => (33u8..=126)
                    .map(char::from)
                    .filter(char::is_ascii_punctuation)
                    .collect(),
                _ => Vec::new(),
            };
            raw.extend(set);
            i += s[start_b..start_b + end + 2].chars().count();
            continue;
        }
        let c = if chars[i] == '\\' && i + 1 < chars.len() {
            i += 1;
            match chars[i] {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '\\' => '\\',
                other => other,
            }
        } else {
            chars[i]
        };
        if chars.get(i + 1) == Some(&'-') && i + 2 < chars.len() {
            let end = chars[i + 2];
            if end >= c {
                raw.extend(c..=end);
                i += 3;
                continue;
            }
        }
        raw.push(c);
        i += 1;
    }
    raw
}

/// `tr [-d] [-s] [-c] SET1 [SET2]`
pub fn tr(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "tr",
        args,
        "dscC",
        "",
        &[
            ("delete", 'd'),
            ("squeeze-repeats", 's'),
            ("complement", 'c'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let Some(s1) = o.rest.first() else {
        io.warn("tr: missing operand");
        return Ok(2);
    };
    let set1 = tr_set(s1);
    let set2 = o.rest.get(1).map(|s| tr_set(s)).unwrap_or_default();
    let complement = o.has('c') || o.has('C');
    let in1 = |c: char| set1.contains(&c) != complement;
    let text = String::from_utf8_lossy(&io.read_stdin()).into_owned();
    let mut out = String::with_capacity(text.len());
    let mut last: Option<char> = None;
    for c in text.chars() {
        let mapped = if o.has('d') {
            if in1(c) {
                continue;
            }
            c
        } else if !set2.is_empty() && in1(c) {
            if complement {
                *set2.last().unwrap_or(&c)
            } else {
                let idx = set1.iter().position(|&x| x == c).unwrap_or(0);
                *set2.get(idx).or(set2.last()).unwrap_or(&c)
            }
        } else {
            c
        };
        let squeeze_set = if set2.is_empty() || o.has('d') {
            &set1
        } else {
            &set2
        };
        if o.has('s') && last == Some(mapped) && squeeze_set.contains(&mapped) {
            continue;
        }
        last = Some(mapped);
        out.push(mapped);
    }
    io.print(out)?;
    Ok(0)
}

/// `diff [-u] [-q] FILE1 FILE2`: unified format (also without `-u`).
pub fn diff(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "diff",
        args,
        "uqaNb",
        "U",
        &[("unified", 'u'), ("brief", 'q')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    if o.rest.len() != 2 {
        io.warn("diff: expected two files");
        return Ok(2);
    }
    let (ins, st) = inputs(sh, "diff", &o.rest, io);
    if st != 0 || ins.len() != 2 {
        return Ok(2);
    }
    let a = String::from_utf8_lossy(&ins[0].data).into_owned();
    let b = String::from_utf8_lossy(&ins[1].data).into_owned();
    if a == b {
        return Ok(0);
    }
    if o.has('q') {
        io.print(format!("Files {} and {} differ\n", o.rest[0], o.rest[1]))?;
        return Ok(1);
    }
    let ctx = o.value('U').and_then(|u| u.parse().ok()).unwrap_or(3);
    let d = similar::TextDiff::from_lines(&a, &b);
    let text = d
        .unified_diff()
        .context_radius(ctx)
        .header(&o.rest[0], &o.rest[1])
        .to_string();
    io.print(text)?;
    Ok(1)
}

/// `tee [-a] [FILE]...`
pub fn tee(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("tee", args, "a", "", &[("append", 'a')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let data = io.read_stdin();
    let mut st = 0;
    for f in &o.rest {
        let r = sh.vfs.resolve(&sh.cwd, f, Follow::Final).and_then(|p| {
            if o.has('a') {
                sh.vfs.append(&p, &data)
            } else {
                sh.vfs.write(&p, data.clone())
            }
        });
        if let Err(e) = r {
            st = sh.fs_fail("tee", &e, io);
        }
    }
    io.print(&data)?;
    Ok(st)
}
