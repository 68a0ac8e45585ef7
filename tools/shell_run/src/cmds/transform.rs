//! Selecting and translating: cut (fields, characters, bytes) and tr.

use std::collections::{HashMap, HashSet};

use super::{getopt, inputs, lines};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

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

/// A set of characters: a table for ASCII, a hash set for the rest.
struct Chars {
    ascii: [bool; 128],
    other: HashSet<char>,
}

impl Chars {
    fn new(list: &[char]) -> Chars {
        let mut s = Chars {
            ascii: [false; 128],
            other: HashSet::new(),
        };
        for &c in list {
            match usize::try_from(u32::from(c)) {
                Ok(i) if i < 128 => s.ascii[i] = true,
                _ => {
                    s.other.insert(c);
                }
            }
        }
        s
    }

    fn contains(&self, c: char) -> bool {
        match usize::try_from(u32::from(c)) {
            Ok(i) if i < 128 => self.ascii[i],
            _ => self.other.contains(&c),
        }
    }
}

/// What tr does, its sets turned into tables once.
struct Tr {
    delete: bool,
    squeeze: bool,
    complement: bool,
    set1: Chars,
    /// SET1's characters mapped to SET2's (the last mapping of a character
    /// wins, SET2 padded with its last character): ASCII in a table.
    map_ascii: [Option<char>; 128],
    map: HashMap<char, char>,
    /// SET2's last character (what a complemented SET1 maps to).
    last2: Option<char>,
    /// The characters squeezed: SET2 when given, else SET1.
    squeezed: Option<Chars>,
}

impl Tr {
    fn in1(&self, c: char) -> bool {
        self.set1.contains(c) != self.complement
    }

    fn squeezes(&self, c: char) -> bool {
        match &self.squeezed {
            Some(s) => s.contains(c),
            None => self.in1(c),
        }
    }

    /// The character `c` becomes, `None` when it is deleted.
    fn map(&self, c: char) -> Option<char> {
        if !self.in1(c) {
            return Some(c);
        }
        if self.delete {
            return None;
        }
        if self.complement {
            return Some(self.last2.unwrap_or(c));
        }
        let to = match usize::try_from(u32::from(c)) {
            Ok(i) if i < 128 => self.map_ascii[i],
            _ => self.map.get(&c).copied(),
        };
        Some(to.unwrap_or(c))
    }

    fn run(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last: Option<char> = None;
        for c in text.chars() {
            let Some(m) = self.map(c) else { continue };
            if self.squeeze && last == Some(m) && self.squeezes(m) {
                continue;
            }
            last = Some(m);
            out.push(m);
        }
        out
    }
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
    let list1 = tr_set(s1);
    let list2 = o.rest.get(1).map(|s| tr_set(s)).unwrap_or_default();
    let mut map = HashMap::new();
    let mut map_ascii = [None; 128];
    if !o.has('d') {
        for (i, &c) in list1.iter().enumerate() {
            let Some(&to) = list2.get(i).or(list2.last()) else {
                break;
            };
            match usize::try_from(u32::from(c)) {
                Ok(k) if k < 128 => map_ascii[k] = Some(to),
                _ => {
                    map.insert(c, to);
                }
            }
        }
    }
    let tr = Tr {
        delete: o.has('d'),
        squeeze: o.has('s'),
        complement: o.has('c') || o.has('C'),
        set1: Chars::new(&list1),
        map_ascii,
        map,
        last2: list2.last().copied(),
        squeezed: (!list2.is_empty()).then(|| Chars::new(&list2)),
    };
    let stdin = io.read_stdin();
    let out = match std::str::from_utf8(&stdin) {
        Ok(text) => tr.run(text),
        Err(_) => tr.run(&String::from_utf8_lossy(&stdin)),
    };
    io.print(out)?;
    Ok(0)
}
