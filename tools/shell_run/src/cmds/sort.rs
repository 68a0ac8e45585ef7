//! Ordering: sort and uniq.

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
