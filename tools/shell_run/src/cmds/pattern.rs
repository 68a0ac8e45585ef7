//! The regular expressions of grep and sed: POSIX basic and extended syntax
//! rewritten for the `regex` crates, and [`LineMatcher`], which finds the
//! lines of a whole buffer that match without cutting it into lines first.
//!
//! A line matcher searches the buffer, not each line: the pattern is parsed
//! (`regex-syntax`) in multi-line mode and rewritten so that it can never
//! match a newline (a newline is removed from every class, a literal holding
//! one matches nothing, `\A` and `\z` become line anchors, as in ripgrep's
//! `grep-regex`). Then every match lies inside one line, and the line that
//! holds the leftmost match is the next matching line: the regex engine
//! (prefilters, lazy DFA) runs once over the buffer instead of being
//! restarted on each line.

use memchr::{memchr, memrchr};
use regex::bytes::{Regex, RegexBuilder};
use regex_automata::Input;
use regex_automata::meta::{self, Cache};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange};
use regex_syntax::hir::{Hir, HirKind, Look};

/// Most bytes of compiled regex program (32 MiB).
const SIZE_LIMIT: usize = 32 * 1024 * 1024;

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

/// How grep and sed read their patterns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Syntax {
    /// POSIX extended syntax (`-E`); basic otherwise.
    pub extended: bool,
    /// Fixed strings (`-F`).
    pub fixed: bool,
    /// Case-insensitive (`-i`).
    pub icase: bool,
    /// Whole words only (`-w`).
    pub word: bool,
    /// Whole lines only (`-x`).
    pub line: bool,
}

/// The alternation of `patterns` in the `regex` crates' syntax.
fn source(patterns: &[String], s: Syntax) -> String {
    let alts: Vec<String> = patterns
        .iter()
        .map(|p| {
            let p = if s.fixed {
                regex::escape(p)
            } else if s.extended {
                p.clone()
            } else {
                bre_to_ere(p)
            };
            if s.word {
                format!("\\b(?:{p})\\b")
            } else if s.line {
                format!("^(?:{p})$")
            } else {
                format!("(?:{p})")
            }
        })
        .collect();
    alts.join("|")
}

/// Builds the regex of sed, matched against one line at a time.
///
/// # Errors
/// The regex crate's message.
pub fn build_regex(patterns: &[String], s: Syntax) -> Result<Regex, String> {
    RegexBuilder::new(&source(patterns, s))
        .case_insensitive(s.icase)
        .multi_line(false)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())
}

/// `hir` changed so that it never matches a newline: `\n` is removed from
/// every class, a literal holding one matches nothing, and the text anchors
/// `\A` `\z` become line anchors.
fn line_only(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => {
            if lit.0.contains(&b'\n') {
                Hir::fail()
            } else {
                Hir::literal(lit.0)
            }
        }
        HirKind::Class(Class::Unicode(mut c)) => {
            c.difference(&ClassUnicode::new([ClassUnicodeRange::new('\n', '\n')]));
            Hir::class(Class::Unicode(c))
        }
        HirKind::Class(Class::Bytes(mut c)) => {
            c.difference(&ClassBytes::new([ClassBytesRange::new(b'\n', b'\n')]));
            Hir::class(Class::Bytes(c))
        }
        HirKind::Look(look) => Hir::look(match look {
            Look::Start => Look::StartLF,
            Look::End => Look::EndLF,
            other => other,
        }),
        HirKind::Repetition(mut r) => {
            r.sub = Box::new(line_only(*r.sub));
            Hir::repetition(r)
        }
        HirKind::Capture(mut c) => {
            c.sub = Box::new(line_only(*c.sub));
            Hir::capture(c)
        }
        HirKind::Concat(v) => Hir::concat(v.into_iter().map(line_only).collect()),
        HirKind::Alternation(v) => Hir::alternation(v.into_iter().map(line_only).collect()),
    }
}

/// A regex over a buffer of lines (see the module's documentation).
pub struct LineMatcher {
    re: meta::Regex,
    cache: Cache,
}

impl LineMatcher {
    /// Compiles `patterns` (any of them may match).
    ///
    /// # Errors
    /// The parser's or the compiler's message.
    pub fn new(patterns: &[String], s: Syntax) -> Result<LineMatcher, String> {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(s.icase)
            .multi_line(true)
            .utf8(false)
            .build()
            .parse(&source(patterns, s))
            .map_err(|e| e.to_string())?;
        let re = meta::Builder::new()
            .configure(
                meta::Config::new()
                    .utf8_empty(false)
                    .nfa_size_limit(Some(SIZE_LIMIT)),
            )
            .build_from_hir(&line_only(hir))
            .map_err(|e| e.to_string())?;
        let cache = re.create_cache();
        Ok(LineMatcher { re, cache })
    }

    /// The next line of `hay` at or after `pos` (the start of a line) that
    /// matches, as the range of its bytes without the newline.
    pub fn next_line(&mut self, hay: &[u8], pos: usize) -> Option<(usize, usize)> {
        if pos >= hay.len() {
            return None;
        }
        let m = self
            .re
            .search_with(&mut self.cache, &Input::new(hay).range(pos..))?;
        let at = m.start();
        // An empty match after the final newline is not on a line.
        if at == hay.len() && hay.last() == Some(&b'\n') {
            return None;
        }
        let start = memrchr(b'\n', &hay[pos..at]).map_or(pos, |i| pos + i + 1);
        let end = memchr(b'\n', &hay[at..]).map_or(hay.len(), |i| at + i);
        Some((start, end))
    }

    /// The non-empty matches inside `hay[start..end]` (one line).
    pub fn matches_in(&self, hay: &[u8], start: usize, end: usize) -> Vec<(usize, usize)> {
        self.re
            .find_iter(Input::new(hay).range(start..end))
            .filter(|m| !m.is_empty())
            .map(|m| (m.start(), m.end()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(pattern: &str, s: Syntax, hay: &str) -> Vec<String> {
        let mut m = LineMatcher::new(&[pattern.to_owned()], s).unwrap_or_else(|e| panic!("{e}"));
        let mut pos = 0;
        let mut out = Vec::new();
        while let Some((a, b)) = m.next_line(hay.as_bytes(), pos) {
            out.push(hay[a..b].to_owned());
            pos = b + 1;
        }
        out
    }

    #[test]
    fn matches_never_cross_lines_and_anchors_are_per_line() {
        let ere = Syntax {
            extended: true,
            ..Syntax::default()
        };
        let hay = "foo x\nbar;\nfoo;\n\nlast";
        assert_eq!(lines_of("foo[^;]*;", ere, hay), ["foo;"]);
        assert_eq!(lines_of("o\\s*b", ere, "foo\nbar\n"), Vec::<String>::new());
        assert_eq!(lines_of("^$", ere, hay), [""]);
        assert_eq!(lines_of("^$", ere, "a\n"), Vec::<String>::new());
        assert_eq!(lines_of("\\Ab", ere, hay), ["bar;"]);
        assert_eq!(lines_of("t\\z", ere, hay), ["last"]);
        assert_eq!(lines_of("x*", ere, "a\nb\n"), ["a", "b"]);
        assert_eq!(lines_of("a\\nb", ere, "a\nb\n"), Vec::<String>::new());
        let bre = Syntax::default();
        assert_eq!(lines_of("b\\(a\\)r", bre, hay), ["bar;"]);
        let word = Syntax {
            word: true,
            ..Syntax::default()
        };
        assert_eq!(lines_of("foo", word, "food\nfoo x\n"), ["foo x"]);
    }
}
