//! Selecting and translating: cut (fields, characters, bytes) and tr.

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
