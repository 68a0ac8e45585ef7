//! basename, dirname, date, env, xargs, yes, seq.

use super::getopt;
use crate::shell::io::{Io, input};
use crate::shell::{Flow, Shell};

/// `basename NAME [SUFFIX]`
pub fn basename(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let Some(name) = args.first() else {
        io.warn("basename: missing operand");
        return Ok(1);
    };
    let t = name.trim_end_matches('/');
    let mut b = if t.is_empty() && name.starts_with('/') {
        "/".to_owned()
    } else {
        t.rsplit('/').next().unwrap_or("").to_owned()
    };
    if let Some(suf) = args.get(1)
        && b.len() > suf.len()
        && b.ends_with(suf.as_str())
    {
        b.truncate(b.len() - suf.len());
    }
    io.print(b + "\n")?;
    Ok(0)
}

/// `dirname NAME...`
pub fn dirname(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    if args.is_empty() {
        io.warn("dirname: missing operand");
        return Ok(1);
    }
    for name in args {
        let t = name.trim_end_matches('/');
        let d = match t.rfind('/') {
            Some(0) => "/".to_owned(),
            Some(i) => t[..i].trim_end_matches('/').to_owned(),
            None if name.starts_with('/') => "/".to_owned(),
            None => ".".to_owned(),
        };
        io.print(d + "\n")?;
    }
    Ok(0)
}

/// `date [-u] [-I] [-d @SECONDS|TIME] [+FORMAT]`: UTC (the sandbox has no
/// time zone).
pub fn date(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let mut fmt = "%a %b %e %H:%M:%S UTC %Y".to_owned();
    let mut when = jiff::Timestamp::now();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-u" | "--utc" | "-R" => {}
            "-I" | "--iso-8601" => fmt = "%Y-%m-%d".into(),
            "-d" | "--date" => {
                let Some(v) = it.next() else {
                    io.warn("date: option -d needs a value");
                    return Ok(1);
                };
                let parsed = match v.strip_prefix('@') {
                    Some(secs) => secs
                        .parse::<i64>()
                        .ok()
                        .and_then(|s| jiff::Timestamp::from_second(s).ok()),
                    None => v.parse::<jiff::Timestamp>().ok(),
                };
                match parsed {
                    Some(t) => when = t,
                    None => {
                        io.warn(format!(
                            "date: invalid date '{v}' (use @SECONDS or RFC 3339)"
                        ));
                        return Ok(1);
                    }
                }
            }
            f if f.starts_with('+') => fmt = f[1..].to_owned(),
            other => {
                io.warn(format!("date: unsupported argument {other:?}"));
                return Ok(1);
            }
        }
    }
    let zoned = when.to_zoned(jiff::tz::TimeZone::UTC);
    match jiff::fmt::strtime::format(fmt.as_str(), &zoned) {
        Ok(t) => io.print(t + "\n")?,
        Err(e) => {
            io.warn(format!("date: bad format {fmt:?}: {e}"));
            return Ok(1);
        }
    }
    Ok(0)
}

/// `env [NAME=VALUE]... [COMMAND [ARG]...]`
pub fn env(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let mut k = 0;
    let mut assigns = Vec::new();
    while k < args.len() {
        if args[k] == "-i" || args[k] == "-" {
            k += 1;
            continue;
        }
        match args[k].split_once('=') {
            Some((n, v)) if !n.is_empty() => assigns.push((n.to_owned(), v.to_owned())),
            _ => break,
        }
        k += 1;
    }
    if k >= args.len() {
        let mut vars = sh.environment();
        for (n, v) in assigns {
            vars.retain(|(k, _)| *k != n);
            vars.push((n, v));
        }
        vars.sort();
        for (n, v) in vars {
            io.print(format!("{n}={v}\n"))?;
        }
        return Ok(0);
    }
    let saved: Vec<(String, Option<String>)> = assigns
        .iter()
        .map(|(n, _)| (n.clone(), sh.var(n)))
        .collect();
    for (n, v) in assigns {
        sh.set_var(&n, v);
    }
    let r = sh.dispatch(&args[k], &args[k + 1..], io);
    for (n, old) in saved {
        match old {
            Some(v) => sh.set_var(&n, v),
            None => sh.set_var(&n, String::new()),
        }
    }
    r
}

/// Splits xargs input into items (blanks and newlines; quotes group).
fn xargs_items(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    any = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    items.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        items.push(cur);
    }
    items
}

/// `xargs [-n N] [-I REPLACE] [-0] [-d DELIM] [-r] [COMMAND [ARG]...]`: runs
/// the command (one of shell_run's) with arguments read from stdin.
pub fn xargs(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    // Options stop at the command name.
    let mut split = 0;
    while split < args.len() && args[split].starts_with('-') && args[split].len() > 1 {
        let a = args[split].as_str();
        split += if matches!(a, "-n" | "-I" | "-d" | "-L" | "-P" | "-s") {
            2
        } else {
            1
        };
    }
    let split = split.min(args.len());
    let o = match getopt(
        "xargs",
        &args[..split],
        "0rtx",
        "nIdLPs",
        &[("null", '0')],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let mut cmd: Vec<String> = o.rest.clone();
    cmd.extend(args[split..].iter().cloned());
    if cmd.is_empty() {
        cmd.push("echo".into());
    }
    let text = String::from_utf8_lossy(&io.read_stdin()).into_owned();
    let items: Vec<String> = if o.has('0') {
        text.split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    } else if let Some(d) = o.value('d') {
        let d = if d == "\\n" { "\n" } else { d };
        text.split(d)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    } else if o.value('I').is_some() || o.value('L').is_some() {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .collect()
    } else {
        xargs_items(&text)
    };
    if items.is_empty() && (o.has('r') || o.value('I').is_some()) {
        return Ok(0);
    }
    let per = if let Some(r) = o.value('I') {
        let _ = r;
        1
    } else {
        o.value('n')
            .or(o.value('L'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX)
    };
    let mut st = 0;
    let batches: Vec<Vec<String>> = if items.is_empty() {
        vec![Vec::new()]
    } else {
        items
            .chunks(per.min(items.len().max(1)))
            .map(<[String]>::to_vec)
            .collect()
    };
    for batch in batches {
        sh.step()?;
        let argv: Vec<String> = match o.value('I') {
            Some(r) => cmd
                .iter()
                .map(|a| a.replace(r, batch.first().map_or("", String::as_str)))
                .collect(),
            None => cmd.iter().cloned().chain(batch).collect(),
        };
        let sub = Io {
            stdin: input(Vec::new()),
            out: io.out.clone(),
            err: io.err.clone(),
        };
        let s = sh.dispatch(&argv[0], &argv[1..], &sub)?;
        if s == 127 || s == 126 {
            return Ok(s);
        }
        if s != 0 {
            st = 123;
        }
    }
    Ok(st)
}

/// `yes [STRING]`: repeats until its output is full (a pipe, the script's
/// output limit) or the script's time runs out.
pub fn yes(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let line = if args.is_empty() {
        "y".to_owned()
    } else {
        args.join(" ")
    };
    let one = format!("{line}\n");
    let mut chunk = String::with_capacity(64 * 1024);
    while chunk.len() < 64 * 1024 - one.len() {
        chunk.push_str(&one);
    }
    loop {
        if io.out.borrow().is_full() {
            return Ok(0);
        }
        io.print(&chunk)?;
        sh.check_time()?;
    }
}

/// `seq [-s SEP] [-w] [FIRST [INCREMENT]] LAST`: integers.
pub fn seq(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt("seq", args, "w", "sf", &[("separator", 's')], io) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let nums: Result<Vec<i64>, _> = o.rest.iter().map(|s| s.parse::<i64>()).collect();
    let Ok(nums) = nums else {
        io.warn("seq: shell_run's seq takes integers");
        return Ok(1);
    };
    let (first, inc, last) = match nums.as_slice() {
        [l] => (1, 1, *l),
        [f, l] => (*f, 1, *l),
        [f, i, l] => (*f, *i, *l),
        _ => {
            io.warn("seq: usage: seq [FIRST [INCREMENT]] LAST");
            return Ok(1);
        }
    };
    if inc == 0 {
        io.warn("seq: the increment must not be 0");
        return Ok(1);
    }
    let sep = o.value('s').unwrap_or("\n").to_owned();
    let width = if o.has('w') {
        first.to_string().len().max(last.to_string().len())
    } else {
        0
    };
    let mut out = String::new();
    let mut v = first;
    let mut n = 0u64;
    while (inc > 0 && v <= last) || (inc < 0 && v >= last) {
        if n > 0 {
            out.push_str(&sep);
        }
        out.push_str(&format!("{v:0width$}"));
        n += 1;
        if n.is_multiple_of(65536) {
            io.print(&out)?;
            out.clear();
            sh.check_time()?;
        }
        v = match v.checked_add(inc) {
            Some(x) => x,
            None => break,
        };
    }
    if n > 0 {
        out.push('\n');
    }
    io.print(out)?;
    Ok(0)
}
