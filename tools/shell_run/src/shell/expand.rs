//! Word expansion: tilde, parameters, command substitution, arithmetic,
//! field splitting, pathname expansion (globbing) and quote removal, in the
//! order POSIX gives (XCU 2.6).

use std::path::PathBuf;

use brush_parser::word::{
    self, Parameter, ParameterExpr, ParameterTestType, SpecialParameter, SubstringMatchKind,
    WordPiece, WordPieceWithSource,
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

    fn param_value(&self, p: &Parameter) -> Option<String> {
        match p {
            Parameter::Positional(0) => Some("sh".into()),
            Parameter::Positional(n) => self
                .positional
                .get(usize::try_from(*n).ok()?.checked_sub(1)?)
                .cloned(),
            Parameter::Special(s) => match s {
                SpecialParameter::AllPositionalParameters { .. } => Some(self.positional.join(" ")),
                SpecialParameter::PositionalParameterCount => {
                    Some(self.positional.len().to_string())
                }
                SpecialParameter::LastExitStatus => Some(self.last_status.to_string()),
                SpecialParameter::CurrentOptionFlags => Some(if self.errexit {
                    "e".into()
                } else {
                    String::new()
                }),
                SpecialParameter::ProcessId => Some("1".into()),
                SpecialParameter::LastBackgroundProcessId => None,
                SpecialParameter::ShellName => Some("sh".into()),
            },
            Parameter::Named(n) => self.var(n),
            Parameter::NamedWithIndex { name, .. } => self.var(name),
            Parameter::NamedWithAllIndices { name, .. } => self.var(name),
        }
    }

    fn param_name(p: &Parameter) -> String {
        match p {
            Parameter::Positional(n) => n.to_string(),
            Parameter::Special(_) => "special parameter".into(),
            Parameter::Named(n)
            | Parameter::NamedWithIndex { name: n, .. }
            | Parameter::NamedWithAllIndices { name: n, .. } => n.clone(),
        }
    }

    fn unset_or_null(&self, p: &Parameter, t: &ParameterTestType) -> (bool, String) {
        let v = self.param_value(p);
        let missing = match t {
            ParameterTestType::UnsetOrNull => v.as_deref().is_none_or(str::is_empty),
            ParameterTestType::Unset => v.is_none(),
        };
        (missing, v.unwrap_or_default())
    }

    fn opt_single(&mut self, w: Option<&String>, io: &Io) -> Result<String, Flow> {
        match w {
            Some(w) => self.expand_single(w, io),
            None => Ok(String::new()),
        }
    }

    #[allow(clippy::too_many_lines)]
    fn parameter(&mut self, expr: &ParameterExpr, io: &Io) -> Result<String, Flow> {
        use ParameterExpr as E;
        let unsupported = |io: &Io, what: &str| {
            io.warn(format!("sh: {what} is not supported by shell_run"));
            Err(Flow::Exit(2))
        };
        match expr {
            E::Parameter {
                parameter,
                indirect,
            } => {
                if *indirect {
                    return unsupported(io, "indirect expansion (${!name})");
                }
                Ok(self.param_value(parameter).unwrap_or_default())
            }
            E::UseDefaultValues {
                parameter,
                test_type,
                default_value,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    self.opt_single(default_value.as_ref(), io)
                } else {
                    Ok(v)
                }
            }
            E::AssignDefaultValues {
                parameter,
                test_type,
                default_value,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    let d = self.opt_single(default_value.as_ref(), io)?;
                    if let Parameter::Named(n) = parameter {
                        self.set_var(n, d.clone());
                    }
                    Ok(d)
                } else {
                    Ok(v)
                }
            }
            E::IndicateErrorIfNullOrUnset {
                parameter,
                test_type,
                error_message,
                ..
            } => {
                let (missing, v) = self.unset_or_null(parameter, test_type);
                if missing {
                    let m = self.opt_single(error_message.as_ref(), io)?;
                    let m = if m.is_empty() {
                        "parameter null or not set".into()
                    } else {
                        m
                    };
                    io.warn(format!("sh: {}: {m}", Self::param_name(parameter)));
                    return Err(Flow::Exit(1));
                }
                Ok(v)
            }
            E::UseAlternativeValue {
                parameter,
                test_type,
                alternative_value,
                ..
            } => {
                let (missing, _) = self.unset_or_null(parameter, test_type);
                if missing {
                    Ok(String::new())
                } else {
                    self.opt_single(alternative_value.as_ref(), io)
                }
            }
            E::ParameterLength { parameter, .. } => Ok(self
                .param_value(parameter)
                .unwrap_or_default()
                .chars()
                .count()
                .to_string()),
            E::RemoveSmallestSuffixPattern {
                parameter, pattern, ..
            }
            | E::RemoveLargestSuffixPattern {
                parameter, pattern, ..
            }
            | E::RemoveSmallestPrefixPattern {
                parameter, pattern, ..
            }
            | E::RemoveLargestPrefixPattern {
                parameter, pattern, ..
            } => {
                let v = self.param_value(parameter).unwrap_or_default();
                let pat = match pattern {
                    Some(p) => self.expand_pattern(p, io)?,
                    None => return Ok(v),
                };
                let Some(m) = compile(&pat) else { return Ok(v) };
                let cuts: Vec<usize> = v
                    .char_indices()
                    .map(|(i, _)| i)
                    .chain(std::iter::once(v.len()))
                    .collect();
                let r = match expr {
                    E::RemoveSmallestSuffixPattern { .. } => cuts
                        .iter()
                        .rev()
                        .find(|&&i| m.is_match(&v[i..]))
                        .map(|&i| v[..i].to_owned()),
                    E::RemoveLargestSuffixPattern { .. } => cuts
                        .iter()
                        .find(|&&i| m.is_match(&v[i..]))
                        .map(|&i| v[..i].to_owned()),
                    E::RemoveSmallestPrefixPattern { .. } => cuts
                        .iter()
                        .find(|&&i| m.is_match(&v[..i]))
                        .map(|&i| v[i..].to_owned()),
                    _ => cuts
                        .iter()
                        .rev()
                        .find(|&&i| m.is_match(&v[..i]))
                        .map(|&i| v[i..].to_owned()),
                };
                Ok(r.unwrap_or(v))
            }
            E::Substring {
                parameter,
                offset,
                length,
                ..
            } => {
                let v: Vec<char> = self
                    .param_value(parameter)
                    .unwrap_or_default()
                    .chars()
                    .collect();
                let len = i64::try_from(v.len()).unwrap_or(i64::MAX);
                let mut off = self.arith(&offset.value, io)?;
                if off < 0 {
                    off = (len + off).max(0);
                }
                let off = off.min(len);
                let end = match length {
                    Some(l) => {
                        let l = self.arith(&l.value, io)?;
                        if l < 0 {
                            (len + l).max(off)
                        } else {
                            (off + l).min(len)
                        }
                    }
                    None => len,
                };
                let (a, b) = (
                    usize::try_from(off).unwrap_or(0),
                    usize::try_from(end).unwrap_or(0),
                );
                Ok(v[a..b.max(a)].iter().collect())
            }
            E::ReplaceSubstring {
                parameter,
                pattern,
                replacement,
                match_kind,
                ..
            } => {
                let v = self.param_value(parameter).unwrap_or_default();
                let pat = self.expand_pattern(pattern, io)?;
                let rep = self.opt_single(replacement.as_ref(), io)?;
                Ok(replace(&v, &pat, &rep, match_kind))
            }
            E::UppercaseFirstChar { parameter, .. } => {
                let v = self.param_value(parameter).unwrap_or_default();
                let mut c = v.chars();
                Ok(c.next()
                    .map_or(String::new(), |f| f.to_uppercase().chain(c).collect()))
            }
            E::UppercasePattern { parameter, .. } => Ok(self
                .param_value(parameter)
                .unwrap_or_default()
                .to_uppercase()),
            E::LowercaseFirstChar { parameter, .. } => {
                let v = self.param_value(parameter).unwrap_or_default();
                let mut c = v.chars();
                Ok(c.next()
                    .map_or(String::new(), |f| f.to_lowercase().chain(c).collect()))
            }
            E::LowercasePattern { parameter, .. } => Ok(self
                .param_value(parameter)
                .unwrap_or_default()
                .to_lowercase()),
            E::Transform { .. } => unsupported(io, "${name@op}"),
            E::VariableNames { .. } => unsupported(io, "${!prefix*}"),
            E::MemberKeys { .. } => unsupported(io, "${!name[@]}"),
        }
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

fn replace(v: &str, pat: &str, rep: &str, kind: &SubstringMatchKind) -> String {
    let Some(m) = compile(pat) else {
        return v.to_owned();
    };
    let idx: Vec<usize> = v
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(v.len()))
        .collect();
    match kind {
        SubstringMatchKind::Prefix => {
            for &j in idx.iter().rev() {
                if m.is_match(&v[..j]) {
                    return format!("{rep}{}", &v[j..]);
                }
            }
            v.to_owned()
        }
        SubstringMatchKind::Suffix => {
            for &i in &idx {
                if m.is_match(&v[i..]) {
                    return format!("{}{rep}", &v[..i]);
                }
            }
            v.to_owned()
        }
        SubstringMatchKind::FirstOccurrence | SubstringMatchKind::Anywhere => {
            let all = matches!(kind, SubstringMatchKind::Anywhere);
            let mut out = String::new();
            let mut k = 0;
            let mut replaced = false;
            while k < idx.len() - 1 {
                let i = idx[k];
                let hit = if replaced && !all {
                    None
                } else {
                    idx[k + 1..]
                        .iter()
                        .rev()
                        .find(|&&j| m.is_match(&v[i..j]))
                        .copied()
                };
                if let Some(j) = hit {
                    out.push_str(rep);
                    replaced = true;
                    k = idx.iter().position(|&x| x == j).unwrap_or(idx.len() - 1);
                } else {
                    let next = idx[k + 1];
                    out.push_str(&v[i..next]);
                    k += 1;
                }
            }
            out
        }
    }
}
