//! `sed [-n] [-E|-r] [-i] (-e SCRIPT | SCRIPT) [FILE]...`: the stream
//! editor's commands `s///` (flags `g`, `p`, `i`, a number), `p`, `d`,
//! `q`, `=` and `y///`, with addresses (a line number, `$`, `/regex/`,
//! `A,B` ranges, `!`), separated by `;` or newlines. `-i` edits the files in
//! place (through the overlay, so the change is recorded and undoable).

use capsaga_sdk::fs::Follow;
use regex::bytes::Regex;

use super::{getopt, inputs, lines};
use crate::cmds::pattern::{Syntax, build_regex};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

#[derive(Debug, Clone)]
enum Addr {
    Line(usize),
    Last,
    Re(Regex),
}

#[derive(Debug, Clone)]
enum Cmd {
    Subst {
        re: Regex,
        rep: Vec<Rep>,
        global: bool,
        nth: usize,
        print: bool,
    },
    Print,
    Delete,
    Quit,
    LineNo,
    Translit(Vec<char>, Vec<char>),
}

#[derive(Debug, Clone)]
enum Rep {
    Lit(Vec<u8>),
    Group(usize),
}

#[derive(Debug, Clone)]
struct Item {
    a1: Option<Addr>,
    a2: Option<Addr>,
    negate: bool,
    cmd: Cmd,
    in_range: bool,
}

struct P<'a> {
    s: &'a [char],
    i: usize,
    extended: bool,
}

impl P<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
    }

    /// Text up to the unescaped delimiter `d` (consumed); `\d` becomes `d`.
    fn until(&mut self, d: char) -> Result<String, String> {
        let mut o = String::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == d {
                return Ok(o);
            }
            if c == '\\' {
                match self.peek() {
                    Some(n) if n == d => {
                        o.push(n);
                        self.i += 1;
                    }
                    Some('n') if d != 'n' => {
                        o.push('\n');
                        self.i += 1;
                    }
                    Some(n) => {
                        o.push('\\');
                        o.push(n);
                        self.i += 1;
                    }
                    None => o.push('\\'),
                }
            } else {
                o.push(c);
            }
        }
        Err(format!("unterminated expression (missing `{d}`)"))
    }

    fn regex(&self, p: &str, icase: bool) -> Result<Regex, String> {
        build_regex(
            &[p.to_owned()],
            Syntax {
                extended: self.extended,
                icase,
                ..Syntax::default()
            },
        )
    }

    fn addr(&mut self) -> Result<Option<Addr>, String> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                let mut n = 0usize;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    self.i += 1;
                }
                Ok(Some(Addr::Line(n)))
            }
            Some('$') => {
                self.i += 1;
                Ok(Some(Addr::Last))
            }
            Some('/') => {
                self.i += 1;
                let p = self.until('/')?;
                Ok(Some(Addr::Re(self.regex(&p, false)?)))
            }
            Some('\\') => {
                self.i += 1;
                let d = self.peek().ok_or("bad address")?;
                self.i += 1;
                let p = self.until(d)?;
                Ok(Some(Addr::Re(self.regex(&p, false)?)))
            }
            _ => Ok(None),
        }
    }

    fn parse(&mut self) -> Result<Vec<Item>, String> {
        let mut items = Vec::new();
        loop {
            while matches!(self.peek(), Some(' ' | '\t' | '\n' | ';')) {
                self.i += 1;
            }
            if self.peek().is_none() {
                return Ok(items);
            }
            let a1 = self.addr()?;
            let a2 = if a1.is_some() && self.peek() == Some(',') {
                self.i += 1;
                Some(self.addr()?.ok_or("missing second address")?)
            } else {
                None
            };
            self.skip_ws();
            let mut negate = false;
            while self.peek() == Some('!') {
                negate = !negate;
                self.i += 1;
                self.skip_ws();
            }
            let c = self.peek().ok_or("missing command")?;
            self.i += 1;
            let cmd = match c {
                'p' => Cmd::Print,
                'd' => Cmd::Delete,
                'q' => Cmd::Quit,
                '=' => Cmd::LineNo,
                's' => self.subst()?,
                'y' => {
                    let d = self.peek().ok_or("missing delimiter")?;
                    self.i += 1;
                    let a: Vec<char> = self.until(d)?.chars().collect();
                    let b: Vec<char> = self.until(d)?.chars().collect();
                    if a.len() != b.len() {
                        return Err("y: strings for `y' command are different lengths".into());
                    }
                    Cmd::Translit(a, b)
                }
                other => {
                    return Err(format!(
                        "unknown or unsupported command `{other}` (shell_run's sed runs s, p, d, \
                         q, =, y)"
                    ));
                }
            };
            items.push(Item {
                a1,
                a2,
                negate,
                cmd,
                in_range: false,
            });
            self.skip_ws();
            match self.peek() {
                None | Some(';' | '\n') => {}
                Some('}') => return Err("blocks `{ }` are not supported".into()),
                Some(other) => return Err(format!("extra characters after command: `{other}`")),
            }
        }
    }

    fn subst(&mut self) -> Result<Cmd, String> {
        let d = self.peek().ok_or("unterminated `s' command")?;
        if d == '\\' || d == '\n' {
            return Err("bad delimiter for `s'".into());
        }
        self.i += 1;
        let pat = self.until(d)?;
        let rep_text = self.until(d)?;
        let (mut global, mut print, mut icase, mut nth) = (false, false, false, 1usize);
        while let Some(c) = self.peek() {
            match c {
                'g' => global = true,
                'p' => print = true,
                'i' | 'I' => icase = true,
                c if c.is_ascii_digit() => nth = c.to_digit(10).map_or(1, |v| v as usize).max(1),
                _ => break,
            }
            self.i += 1;
        }
        let re = self.regex(&pat, icase)?;
        Ok(Cmd::Subst {
            re,
            rep: parse_rep(&rep_text),
            global,
            nth,
            print,
        })
    }
}

fn parse_rep(s: &str) -> Vec<Rep> {
    let mut out = Vec::new();
    let mut lit = Vec::new();
    let mut it = s.chars();
    let flush = |lit: &mut Vec<u8>, out: &mut Vec<Rep>| {
        if !lit.is_empty() {
            out.push(Rep::Lit(std::mem::take(lit)));
        }
    };
    while let Some(c) = it.next() {
        match c {
            '&' => {
                flush(&mut lit, &mut out);
                out.push(Rep::Group(0));
            }
            '\\' => match it.next() {
                Some(d @ '0'..='9') => {
                    flush(&mut lit, &mut out);
                    out.push(Rep::Group(d as usize - '0' as usize));
                }
                Some('n') => lit.push(b'\n'),
                Some('t') => lit.push(b'\t'),
                Some(o) => {
                    let mut b = [0u8; 4];
                    lit.extend_from_slice(o.encode_utf8(&mut b).as_bytes());
                }
                None => lit.push(b'\\'),
            },
            _ => {
                let mut b = [0u8; 4];
                lit.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    flush(&mut lit, &mut out);
    out
}

fn substitute(line: &[u8], re: &Regex, rep: &[Rep], global: bool, nth: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(line.len());
    let mut last = 0;
    let mut n = 0;
    let mut done = false;
    for caps in re.captures_iter(line) {
        let Some(m) = caps.get(0) else { continue };
        n += 1;
        if n < nth {
            continue;
        }
        out.extend_from_slice(&line[last..m.start()]);
        for r in rep {
            match r {
                Rep::Lit(b) => out.extend_from_slice(b),
                Rep::Group(g) => {
                    if let Some(x) = caps.get(*g) {
                        out.extend_from_slice(x.as_bytes());
                    }
                }
            }
        }
        last = m.end();
        done = true;
        if !global {
            break;
        }
    }
    if !done {
        return None;
    }
    out.extend_from_slice(&line[last..]);
    Some(out)
}

fn addr_hit(a: &Addr, ln: usize, last: bool, line: &[u8]) -> bool {
    match a {
        Addr::Line(n) => *n == ln,
        Addr::Last => last,
        Addr::Re(r) => r.is_match(line),
    }
}

fn selected(it: &mut Item, ln: usize, last: bool, line: &[u8]) -> bool {
    let hit = match (&it.a1, &it.a2) {
        (None, _) => true,
        (Some(a), None) => addr_hit(a, ln, last, line),
        (Some(a), Some(b)) => {
            if it.in_range {
                let end = match b {
                    Addr::Line(n) => ln >= *n,
                    _ => addr_hit(b, ln, last, line),
                };
                if end {
                    it.in_range = false;
                }
                true
            } else if addr_hit(a, ln, last, line) {
                let end_now = matches!(b, Addr::Line(n) if *n <= ln);
                it.in_range = !end_now;
                true
            } else {
                false
            }
        }
    };
    hit != it.negate
}

/// Runs `items` over `data`.
fn run(items: &mut [Item], data: &[u8], quiet: bool, out: &mut Vec<u8>) {
    let all: Vec<&[u8]> = lines(data).collect();
    let n = all.len();
    'lines: for (k, line) in all.iter().enumerate() {
        let ln = k + 1;
        let last = ln == n;
        let mut ps = line.to_vec();
        for it in items.iter_mut() {
            if !selected(it, ln, last, &ps) {
                continue;
            }
            match &it.cmd {
                Cmd::Print => {
                    out.extend_from_slice(&ps);
                    out.push(b'\n');
                }
                Cmd::Delete => continue 'lines,
                Cmd::Quit => {
                    if !quiet {
                        out.extend_from_slice(&ps);
                        out.push(b'\n');
                    }
                    return;
                }
                Cmd::LineNo => out.extend_from_slice(format!("{ln}\n").as_bytes()),
                Cmd::Subst {
                    re,
                    rep,
                    global,
                    nth,
                    print,
                } => {
                    if let Some(new) = substitute(&ps, re, rep, *global, *nth) {
                        ps = new;
                        if *print {
                            out.extend_from_slice(&ps);
                            out.push(b'\n');
                        }
                    }
                }
                Cmd::Translit(a, b) => {
                    let s: String = String::from_utf8_lossy(&ps)
                        .chars()
                        .map(|c| a.iter().position(|&x| x == c).map_or(c, |i| b[i]))
                        .collect();
                    ps = s.into_bytes();
                }
            }
        }
        if !quiet {
            out.extend_from_slice(&ps);
            out.push(b'\n');
        }
    }
}

/// `sed`
pub fn sed(sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let o = match getopt(
        "sed",
        args,
        "nErsiz",
        "e",
        &[
            ("quiet", 'n'),
            ("regexp-extended", 'E'),
            ("in-place", 'i'),
            ("expression", 'e'),
        ],
        io,
    ) {
        Ok(o) => o,
        Err(s) => return Ok(s),
    };
    let mut rest = o.rest.clone();
    let mut scripts = o.all('e');
    if scripts.is_empty() {
        if rest.is_empty() {
            io.warn("sed: no script given (usage: sed [-n] [-E] [-i] SCRIPT [FILE]...)");
            return Ok(1);
        }
        scripts.push(rest.remove(0));
    }
    let text: Vec<char> = scripts.join("\n").chars().collect();
    let mut p = P {
        s: &text,
        i: 0,
        extended: o.has('E') || o.has('r'),
    };
    let mut items = match p.parse() {
        Ok(i) => i,
        Err(e) => {
            io.warn(format!("sed: -e expression: {e}"));
            return Ok(1);
        }
    };
    if o.has('i') {
        if rest.is_empty() {
            io.warn("sed: -i needs files to edit");
            return Ok(1);
        }
        let mut st = 0;
        for f in &rest {
            let r = sh.vfs.resolve(&sh.cwd, f, Follow::Final).and_then(|path| {
                let data = sh.vfs.read(&path)?;
                let mut out = Vec::with_capacity(data.len());
                let mut fresh = items.clone();
                run(&mut fresh, &data, o.has('n'), &mut out);
                if out != *data {
                    sh.vfs.write(&path, out)?;
                }
                Ok(())
            });
            if let Err(e) = r {
                st = sh.fs_fail("sed", &e, io);
            }
        }
        return Ok(st);
    }
    let (ins, st) = inputs(sh, "sed", &rest, io);
    let mut data = Vec::new();
    for i in ins {
        data.extend_from_slice(&i.data);
        if !data.is_empty() && !data.ends_with(b"\n") {
            data.push(b'\n');
        }
    }
    let mut out = Vec::with_capacity(data.len());
    run(&mut items, &data, o.has('n'), &mut out);
    io.print(&out)?;
    Ok(st)
}
