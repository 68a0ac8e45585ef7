//! Viewing and counting: cat, head, tail, wc, and tee (stdin to files and
//! stdout).

use capsaga_sdk::fs::Follow;

use super::{getopt, inputs, lines};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

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
        // Only what is printed is counted.
        let want = |c: char| which.contains(&c);
        let counts = [
            if want('l') {
                memchr::memchr_iter(b'\n', d).count()
            } else {
                0
            },
            if want('w') {
                d.split(|b| b.is_ascii_whitespace())
                    .filter(|w| !w.is_empty())
                    .count()
            } else {
                0
            },
            if want('m') {
                String::from_utf8_lossy(d).chars().count()
            } else {
                0
            },
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
