//! grep: the lines of files (or stdin) that match, searched over each whole
//! buffer with a [`LineMatcher`] (one regex scan per file, not one per
//! line).

use capsaga_sdk::fs::Follow;
use memchr::{memchr, memchr_iter};

use super::pattern::{LineMatcher, Syntax};
use super::{Input, Opts, getopt, inputs, walk};
use crate::shell::io::Io;
use crate::shell::{Flow, Shell};
use crate::vfs::Kind;

/// Bytes of output gathered before they are written to stdout.
const FLUSH_AT: usize = 64 * 1024;

/// What grep prints for each input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    /// The selected lines (`-o`: only the matched parts).
    Lines,
    /// How many lines were selected (`-c`).
    Count,
    /// The input's name when a line was selected (`-l`).
    NameIfAny,
    /// The input's name when no line was selected (`-L`).
    NameIfNone,
    /// Nothing: the exit status says it (`-q`).
    Quiet,
}

/// grep's options once parsed.
struct Grep {
    matcher: LineMatcher,
    invert: bool,
    numbers: bool,
    only: bool,
    names: bool,
    max: Option<usize>,
    report: Report,
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
    let syntax = Syntax {
        extended: o.has('E') || o.has('P'),
        fixed: o.has('F'),
        icase: o.has('i') || o.has('y'),
        word: o.has('w'),
        line: o.has('x'),
    };
    let matcher = match LineMatcher::new(&patterns, syntax) {
        Ok(m) => m,
        Err(e) => {
            io.warn(format!("grep: bad pattern: {e}"));
            return Ok(2);
        }
    };
    let recursive = o.has('r') || o.has('R');
    if recursive && rest.is_empty() {
        rest.push(".".into());
    }
    let (ins, st, many) = grep_inputs(sh, &o, &rest, recursive, io)?;
    let mut g = Grep {
        matcher,
        invert: o.has('v'),
        numbers: o.has('n'),
        only: o.has('o') && !o.has('v'),
        names: !o.has('h') && (o.has('H') || many || recursive),
        max: o.value('m').and_then(|m| m.parse::<usize>().ok()),
        report: report_of(&o),
    };
    let mut any = false;
    for i in ins {
        let found = g.search(&i, io)?;
        any |= found;
        if found && g.report == Report::Quiet {
            return Ok(0);
        }
    }
    if st != 0 && !(o.has('q') && any) {
        return Ok(2);
    }
    Ok(if any { 0 } else { 1 })
}

fn report_of(o: &Opts) -> Report {
    if o.has('q') {
        Report::Quiet
    } else if o.has('l') {
        Report::NameIfAny
    } else if o.has('L') {
        Report::NameIfNone
    } else if o.has('c') {
        Report::Count
    } else {
        Report::Lines
    }
}

/// The inputs of grep (directories expanded when recursive), the status so
/// far, and whether there is more than one file (names are then shown).
fn grep_inputs(
    sh: &mut Shell,
    o: &Opts,
    rest: &[String],
    recursive: bool,
    io: &Io,
) -> Result<(Vec<Input>, i32, bool), Flow> {
    let mut files: Vec<String> = Vec::new();
    if recursive {
        for r in rest {
            for (shown, _, kind, _) in walk(sh, "grep", r, usize::MAX, io)? {
                if kind == Kind::File {
                    files.push(shown);
                }
            }
        }
    } else {
        files.extend_from_slice(rest);
    }
    let many = files.len() > 1;
    if files.is_empty() && !recursive {
        let (i, s) = inputs(sh, "grep", &[], io);
        return Ok((i, s, many));
    }
    let mut v = Vec::new();
    let mut st = 0;
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
    Ok((v, st, many))
}

/// Walks the selected lines of a buffer: those that match, or with `-v`
/// those that do not.
#[derive(Default)]
struct Selected {
    /// Start of the next line to look at.
    pos: usize,
    /// Its number minus one (kept with `-n` or `-v` only).
    before: usize,
    /// The next matching line at or after `pos`, once searched.
    next_match: Option<Option<(usize, usize)>>,
}

impl Selected {
    /// The next selected line: (number, start, end without the newline).
    fn next(
        &mut self,
        m: &mut LineMatcher,
        hay: &[u8],
        invert: bool,
        numbers: bool,
    ) -> Option<(usize, usize, usize)> {
        if !invert {
            let (s, e) = m.next_line(hay, self.pos)?;
            if numbers {
                self.before += memchr_iter(b'\n', &hay[self.pos..s]).count();
            }
            self.pos = e + 1;
            self.before += 1;
            return Some((self.before, s, e));
        }
        loop {
            if self.pos >= hay.len() {
                return None;
            }
            let hit = match self.next_match {
                Some(Some((s, e))) if s >= self.pos => Some((s, e)),
                Some(None) => None,
                _ => {
                    let found = m.next_line(hay, self.pos);
                    self.next_match = Some(found);
                    found
                }
            };
            let s = self.pos;
            self.before += 1;
            if let Some((ms, me)) = hit
                && ms == s
            {
                self.pos = me + 1;
                continue;
            }
            let e = memchr(b'\n', &hay[s..]).map_or(hay.len(), |i| s + i);
            self.pos = e + 1;
            return Some((self.before, s, e));
        }
    }
}

impl Grep {
    /// Searches one input and prints what `report` asks; true when a line
    /// was selected.
    fn search(&mut self, input: &Input, io: &Io) -> Result<bool, Flow> {
        let name = if input.name == "-" {
            "(standard input)"
        } else {
            input.name.as_str()
        };
        let hay = input.data.as_slice();
        let stop_at_first = matches!(
            self.report,
            Report::Quiet | Report::NameIfAny | Report::NameIfNone
        );
        let max = if stop_at_first { Some(1) } else { self.max };
        let mut out = Vec::new();
        let mut selected = 0usize;
        let mut lines = Selected::default();
        while max.is_none_or(|m| selected < m)
            && let Some((line_no, s, e)) =
                lines.next(&mut self.matcher, hay, self.invert, self.numbers)
        {
            selected += 1;
            if self.report == Report::Lines {
                self.emit(&mut out, name, line_no, hay, (s, e), io)?;
            }
        }
        match self.report {
            Report::Lines => io.print(&out)?,
            Report::Count if self.names => io.print(format!("{name}:{selected}\n"))?,
            Report::Count => io.print(format!("{selected}\n"))?,
            Report::NameIfAny if selected > 0 => io.print(format!("{name}\n"))?,
            Report::NameIfNone if selected == 0 => io.print(format!("{name}\n"))?,
            _ => {}
        }
        Ok(selected > 0)
    }

    /// Adds the selected line `hay[s..e]` (or its matches, `-o`) to `out`,
    /// flushing `out` to stdout past [`FLUSH_AT`] bytes.
    fn emit(
        &self,
        out: &mut Vec<u8>,
        name: &str,
        line_no: usize,
        hay: &[u8],
        (s, e): (usize, usize),
        io: &Io,
    ) -> Result<(), Flow> {
        let prefix = |out: &mut Vec<u8>| {
            if self.names {
                out.extend_from_slice(name.as_bytes());
                out.push(b':');
            }
            if self.numbers {
                out.extend_from_slice(line_no.to_string().as_bytes());
                out.push(b':');
            }
        };
        if self.only {
            for (a, b) in self.matcher.matches_in(hay, s, e) {
                prefix(out);
                out.extend_from_slice(&hay[a..b]);
                out.push(b'\n');
            }
        } else {
            prefix(out);
            out.extend_from_slice(&hay[s..e]);
            out.push(b'\n');
        }
        if out.len() >= FLUSH_AT {
            io.print(&*out)?;
            out.clear();
        }
        Ok(())
    }
}
