//! Ordering: sort and uniq.

use std::borrow::Cow;
use std::cmp::Ordering;

use capsaga_sdk::fs::Follow;

use super::{getopt, inputs, lines};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

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

/// One part of a line's sort key, computed once per line.
enum Part<'a> {
    /// A leading number (`-n`).
    Num(f64),
    /// Bytes, folded to lower case with `-f`.
    Text(Cow<'a, [u8]>),
}

impl Part<'_> {
    fn cmp(&self, other: &Part<'_>) -> Ordering {
        match (self, other) {
            (Part::Num(a), Part::Num(b)) => a.total_cmp(b),
            (Part::Text(a), Part::Text(b)) => a.cmp(b),
            // The same key of two lines is always of the same kind.
            (Part::Num(_), Part::Text(_)) => Ordering::Less,
            (Part::Text(_), Part::Num(_)) => Ordering::Greater,
        }
    }
}

/// How sort orders lines.
struct How {
    keys: Vec<Key>,
    sep: Option<u8>,
    numeric: bool,
    fold: bool,
    reverse: bool,
}

impl How {
    fn part<'a>(&self, s: &'a [u8], numeric: bool) -> Part<'a> {
        if numeric {
            Part::Num(leading_number(s))
        } else if self.fold && s.iter().any(u8::is_ascii_uppercase) {
            Part::Text(Cow::Owned(s.to_ascii_lowercase()))
        } else {
            Part::Text(Cow::Borrowed(s))
        }
    }

    /// Appends the key of `line` to `out`: one part per `-k` key, or the
    /// whole line.
    fn push_key<'a>(&self, line: &'a [u8], out: &mut Vec<Part<'a>>) {
        if self.keys.is_empty() {
            out.push(self.part(line, self.numeric));
            return;
        }
        for k in &self.keys {
            out.push(self.part(key_slice(line, k, self.sep), k.numeric || self.numeric));
        }
    }

    fn cmp_keys(&self, a: &[Part<'_>], b: &[Part<'_>]) -> Ordering {
        for (i, (pa, pb)) in a.iter().zip(b).enumerate() {
            let c = pa.cmp(pb);
            let c = if self.keys.get(i).is_some_and(|k| k.reverse) {
                c.reverse()
            } else {
                c
            };
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    }

    /// `lines` in order (keys computed once per line, the whole line as
    /// the last resort); with `unique`, the first line (in input order) of
    /// each run of equal keys.
    fn sorted<'a>(&self, mut lines: Vec<&'a [u8]>, unique: bool) -> Vec<&'a [u8]> {
        if self.keys.is_empty() && !self.numeric && !self.fold {
            // Whole lines, byte by byte: equal lines are identical, so an
            // unstable sort gives the same result.
            lines.sort_unstable();
            if self.reverse {
                lines.reverse();
            }
            if unique {
                lines.dedup();
            }
            return lines;
        }
        let width = self.keys.len().max(1);
        let mut parts: Vec<Part<'a>> = Vec::with_capacity(lines.len() * width);
        for l in &lines {
            self.push_key(l, &mut parts);
        }
        let key = |i: usize| &parts[i * width..(i + 1) * width];
        let mut order: Vec<usize> = (0..lines.len()).collect();
        // With -u there is no last resort: the first line of a run of
        // equal keys, in input order, is the one kept (as GNU sort does).
        order.sort_by(|&a, &b| {
            let c = self.cmp_keys(key(a), key(b));
            let c = if unique {
                c
            } else {
                c.then_with(|| lines[a].cmp(lines[b]))
            };
            if self.reverse { c.reverse() } else { c }
        });
        if unique {
            order.dedup_by(|a, b| self.cmp_keys(key(*a), key(*b)) == Ordering::Equal);
        }
        order.into_iter().map(|i| lines[i]).collect()
    }
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
    let how = How {
        keys,
        sep,
        numeric: o.has('n') || o.has('g') || o.has('h'),
        fold: o.has('f'),
        reverse: o.has('r'),
    };
    let all = how.sorted(all, o.has('u'));
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
