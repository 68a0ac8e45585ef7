//! Word expansion: tilde, parameters, command substitution, arithmetic,
//! field splitting, pathname expansion (globbing) and quote removal, in the
//! order POSIX gives (XCU 2.6). Parameter expansion itself is in
//! [`super::params`].

use std::path::PathBuf;

use brush_parser::word::{
    self, Parameter, ParameterExpr, SpecialParameter, WordPiece, WordPieceWithSource,
};
use capsaga_sdk::fs::Follow;

use super::io::Io;
use super::{Flow, Shell};
use crate::vfs::Kind;

/// Most paths one glob expands to.
pub const MAX_GLOB_MATCHES: usize = 10_000;

/// One piece of a field, quoted or not.
struct Seg {
    text: String,
    quoted: bool,
}

/// Fields under construction.
struct Fields {
    done: Vec<Vec<Seg>>,
    cur: Vec<Seg>,
    started: bool,
    split: bool,
}

impl Fields {
    fn new(split: bool) -> Fields {
        Fields {
            done: Vec::new(),
            cur: Vec::new(),
            started: false,
            split,
        }
    }

    fn quoted(&mut self, s: &str) {
        self.cur.push(Seg {
            text: s.to_owned(),
            quoted: true,
        });
        self.started = true;
    }

    fn literal(&mut self, s: &str) {
        self.cur.push(Seg {
            text: s.to_owned(),
            quoted: false,
        });
        self.started = true;
    }

    /// An unquoted expansion's result: split on blanks.
    fn expanded(&mut self, s: &str) {
        if !self.split {
            self.literal(s);
            return;
        }
        for (i, part) in s.split([' ', '\t', '\n']).enumerate() {
            if i > 0 {
                self.brk();
            }
            if !part.is_empty() {
                self.literal(part);
            }
        }
    }

    fn brk(&mut self) {
        if self.started {
            self.done.push(std::mem::take(&mut self.cur));
            self.started = false;
        }
    }

    fn finish(mut self) -> Vec<Vec<Seg>> {
        self.brk();
        self.done
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Escapes glob syntax in literal text.
fn escape_glob(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | ',') {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// Whether `text` matches the shell pattern `pattern` (`*`, `?`, `[...]`,
/// `{a,b}`, backslash escapes); `*` also matches `/`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    compile(pattern).is_some_and(|m| m.is_match(text))
}

/// A compiled shell pattern; `None` when it is malformed.
pub fn compile(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .empty_alternates(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Processes the escapes of `$'...'` text.
fn ansi_c(s: &str) -> String {
    let mut o = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            o.push(c);
            continue;
        }
        match it.next() {
            Some('n') => o.push('\n'),
            Some('t') => o.push('\t'),
            Some('r') => o.push('\r'),
            Some('0') => o.push('\0'),
            Some('\\') => o.push('\\'),
            Some('\'') => o.push('\''),
            Some('"') => o.push('"'),
            Some('e') => o.push('\u{1b}'),
            Some(other) => {
                o.push('\\');
                o.push(other);
            }
            None => o.push('\\'),
        }
    }
    o
}

impl Shell {
    fn parse_word(&self, w: &str, io: &Io) -> Result<Vec<WordPieceWithSource>, Flow> {
        word::parse(w, &self.opts).map_err(|e| {
            io.warn(format!("sh: bad word `{w}`: {e}"));
            Flow::Exit(2)
        })
    }

    fn fields(&mut self, w: &str, split: bool, io: &Io) -> Result<Vec<Vec<Seg>>, Flow> {
        let pieces = self.parse_word(w, io)?;
        let mut f = Fields::new(split);
        self.pieces(&pieces, false, &mut f, io)?;
        Ok(f.finish())
    }

    /// Expands a word into fields: splitting and globbing included.
    ///
    /// # Errors
    /// [`Flow::Exit`] for a bad word or a failed `${x?}`; limits.
    pub fn expand_word(&mut self, w: &str, io: &Io) -> Result<Vec<String>, Flow> {
        let mut out = Vec::new();
        for field in self.fields(w, true, io)? {
            let globbing = field.iter().any(|s| !s.quoted && has_glob(&s.text));
            if globbing {
                let pattern: String = field
                    .iter()
                    .map(|s| {
                        if s.quoted {
                            escape_glob(&s.text)
                        } else {
                            s.text.clone()
                        }
                    })
                    .collect();
                let matches = self.glob_paths(&pattern);
                if !matches.is_empty() {
                    out.extend(matches);
                    continue;
                }
            }
            out.push(field.into_iter().map(|s| s.text).collect());
        }
        Ok(out)
    }

    /// Expands a word into one string, without splitting or globbing
    /// (assignments, `case` words, redirection targets, here-documents).
    ///
    /// # Errors
    /// As for [`Shell::expand_word`].
    pub fn expand_single(&mut self, w: &str, io: &Io) -> Result<String, Flow> {
        let fields = self.fields(w, false, io)?;
        let v: Vec<String> = fields
            .into_iter()
            .map(|f| f.into_iter().map(|s| s.text).collect())
            .collect();
        Ok(v.join(" "))
    }

    /// Expands a word into a pattern: quoted parts match literally.
    ///
    /// # Errors
    /// As for [`Shell::expand_word`].
    pub fn expand_pattern(&mut self, w: &str, io: &Io) -> Result<String, Flow> {
        let fields = self.fields(w, false, io)?;
        let v: Vec<String> = fields
            .into_iter()
            .map(|f| {
                f.into_iter()
                    .map(|s| {
                        if s.quoted {
                            escape_glob(&s.text)
                        } else {
                            s.text
                        }
                    })
                    .collect()
            })
            .collect();
        Ok(v.join(" "))
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        f: &mut Fields,
        io: &Io,
    ) -> Result<(), Flow> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(s) => {
                    if quoted {
                        f.quoted(s);
                    } else {
                        f.literal(s);
                    }
                }
                WordPiece::SingleQuotedText(s) => f.quoted(s),
                WordPiece::AnsiCQuotedText(s) => f.quoted(&ansi_c(s)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    f.started = true;
                    self.pieces(inner, true, f, io)?;
                }
                WordPiece::TildePrefix(user) => {
                    let home = if user.is_empty() {
                        self.var("HOME").unwrap_or_else(|| "~".into())
                    } else {
                        format!("~{user}")
                    };
                    f.quoted(&home);
                }
                WordPiece::ParameterExpansion(expr) => {
                    if quoted
                        && let ParameterExpr::Parameter {
                            parameter:
                                Parameter::Special(SpecialParameter::AllPositionalParameters {
                                    concatenate: false,
                                }),
                            ..
                        } = expr
                    {
                        let args = self.positional.clone();
                        for (i, a) in args.iter().enumerate() {
                            if i > 0 {
                                f.brk();
                            }
                            f.quoted(a);
                        }
                        continue;
                    }
                    let v = self.parameter(expr, io)?;
                    if quoted {
                        f.quoted(&v);
                    } else {
                        f.expanded(&v);
                    }
                }
                WordPiece::CommandSubstitution(text)
                | WordPiece::BackquotedCommandSubstitution(text) => {
                    let v = self.command_subst(text, io)?;
                    if quoted {
                        f.quoted(&v);
                    } else {
                        f.expanded(&v);
                    }
                }
                WordPiece::EscapeSequence(s) => {
                    let c = s.strip_prefix('\\').unwrap_or(s);
                    if !quoted || c.starts_with(['$', '`', '"', '\\', '\n']) {
                        f.quoted(c);
                    } else {
                        f.quoted(s);
                    }
                }
                WordPiece::ArithmeticExpression(e) => {
                    let v = self.arith(&e.value, io)?.to_string();
                    if quoted {
                        f.quoted(&v);
                    } else {
                        f.expanded(&v);
                    }
                }
            }
        }
        Ok(())
    }
    /// Pathname expansion over the overlay: sorted matches, relative to the
    /// current directory for a relative pattern; empty when nothing matches.
    pub fn glob_paths(&self, pattern: &str) -> Vec<String> {
        let absolute = pattern.starts_with('/');
        let comps: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
        let mut cands: Vec<String> = vec![if absolute { "/".into() } else { String::new() }];
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let mut next = Vec::new();
            if has_glob(comp) {
                let Some(m) = compile(comp) else {
                    return Vec::new();
                };
                for c in &cands {
                    let dir = if c.is_empty() { "." } else { c.as_str() };
                    let Ok(resolved) = self.vfs.resolve(&self.cwd, dir, Follow::Final) else {
                        continue;
                    };
                    let Ok(entries) = self.vfs.list(&resolved) else {
                        continue;
                    };
                    for (name, kind) in entries {
                        if name.starts_with('.') && !comp.starts_with('.') {
                            continue;
                        }
                        if !last && !matches!(kind, Kind::Dir | Kind::Link) {
                            continue;
                        }
                        if m.is_match(&name) {
                            next.push(join(c, &name));
                        }
                    }
                }
            } else {
                let lit = comp.replace('\\', "");
                next = cands.iter().map(|c| join(c, &lit)).collect();
            }
            next.truncate(MAX_GLOB_MATCHES);
            cands = next;
            if cands.is_empty() {
                return cands;
            }
        }
        let mut out: Vec<String> = cands
            .into_iter()
            .filter(|c| {
                self.vfs
                    .resolve(&self.cwd, c, Follow::NoFinal)
                    .ok()
                    .and_then(|p| self.vfs.stat(&p).ok().flatten())
                    .is_some()
            })
            .collect();
        out.sort();
        out
    }

    /// The current directory joined with `raw` (for messages).
    pub fn abs(&self, raw: &str) -> PathBuf {
        if raw.starts_with('/') {
            PathBuf::from(raw)
        } else {
            self.cwd.join(raw)
        }
    }
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}
