//! Identifier-like tokens ("atoms") in a text, found the way a model reads
//! them, each with a key that two spellings of one identifier share.
//!
//! The kinds, in the order they are looked for (each file documents its
//! grammar): URLs, e-mail addresses and hosts ([`net`]); dates ([`date`]);
//! IBANs, numbers and amounts ([`number`]); then, here, file paths and
//! record ids.
//!
//! - a **path** starts at a token boundary with `/`, `~/`, `./`, `../` or
//!   a drive (`c:\`), or is a relative path with a `/` whose last segment
//!   has an extension (`docs/q3.pdf`), or a bare file name with an extension
//!   (`report.pdf`); backslashes read as `/`, `//` as `/`, `.` and `..`
//!   segments resolved lexically (a `..` above the root is kept). Path
//!   segments of a URL are not paths.
//! - an **id** is a run of ASCII letters, digits, `_` and `-` of six
//!   characters or more with at least two digits and one letter
//!   (`evt_8f2a9c`, `INV-2024-0042`, a UUID).
//!
//! Keys are the exact fold of [`super::text`] (case folded everywhere: an
//! identifier differing from a trusted one by case alone is taken as the
//! same one). Every atom also has a loose key (for attribution only).

pub(crate) mod date;
pub(crate) mod net;
pub(crate) mod number;

use super::text::{View, loose};
use serde::{Deserialize, Serialize};

/// The kind of an identifier-like token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `https://host/path?query`.
    Url,
    /// `local@host`.
    Email,
    /// A host name or an IPv4 address.
    Host,
    /// An IBAN.
    Iban,
    /// A number of five significant digits or more (amount, phone,
    /// account); shorter ones need a context (see [`number`]).
    Number,
    /// A calendar date.
    Date,
    /// A file path or file name.
    Path,
    /// A record id.
    Id,
    /// A short number matched through its context words.
    ShortNumber,
    /// A value with no identifier in it, matched as a phrase.
    Phrase,
}

impl Kind {
    /// The prefix of this kind's keys in the ledger's index.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Kind::Url => "u:",
            Kind::Email => "e:",
            Kind::Host => "h:",
            Kind::Iban => "i:",
            Kind::Number => "n:",
            Kind::Date => "d:",
            Kind::Path => "p:",
            Kind::Id => "t:",
            Kind::ShortNumber => "s:",
            Kind::Phrase => "w:",
        }
    }
}

/// How an atom's own finding counts in a value's provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It counts: the atom is the identifier.
    Whole,
    /// Only when found in untrusted data or as a lookalike: a URL not
    /// given whole is as trusted as its host and the identifiers inside it.
    Container,
}

/// An identifier-like token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Atom {
    pub(crate) kind: Kind,
    /// The exact key (without the kind's prefix).
    pub(crate) key: String,
    /// The loose key (without the prefix).
    pub(crate) loose: String,
    /// Byte range of the original text.
    pub(crate) span: (u32, u32),
    /// Whether, found trusted, it vouches for every atom inside its span.
    pub(crate) covers: bool,
    pub(crate) role: Role,
    /// The token as read (folded), for reports.
    pub(crate) shown: String,
}

/// A number of fewer than five significant digits and its context words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShortNumber {
    /// The value's key (see [`number::canon_number`]).
    pub(crate) key: String,
    /// Its context words.
    pub(crate) context: Vec<String>,
}

/// Which characters of a view an earlier pass took.
pub(crate) struct Marks {
    pub(crate) url: Vec<bool>,
    pub(crate) email: Vec<bool>,
    pub(crate) date: Vec<bool>,
    pub(crate) num: Vec<bool>,
}

impl Marks {
    pub(crate) fn new(n: usize) -> Marks {
        Marks {
            url: vec![false; n],
            email: vec![false; n],
            date: vec![false; n],
            num: vec![false; n],
        }
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) atoms: Vec<Atom>,
    pub(crate) shorts: Vec<ShortNumber>,
}

/// Scan one view for every kind.
pub(crate) fn scan_view(v: &View, out: &mut Scan) {
    // Every kind holds a digit, `.`, `@`, `/`, `\` or `:`: prose without
    // them has nothing to find.
    if !v
        .chars
        .iter()
        .any(|c| c.is_ascii_digit() || matches!(c, '.' | '@' | '/' | '\\' | ':'))
    {
        return;
    }
    let mut marks = Marks::new(v.chars.len());
    net::urls(v, &mut marks, &mut out.atoms);
    net::emails(v, &mut marks, &mut out.atoms);
    date::dates(v, &mut marks, &mut out.atoms);
    net::hosts(v, &marks, &mut out.atoms);
    number::ibans(v, &mut marks, &mut out.atoms);
    number::numbers(v, &marks, &mut out.atoms, &mut out.shorts);
    paths(v, &marks, &mut out.atoms);
    ids(v, &marks, &mut out.atoms);
}

/// Scan a text that has no original to point into (a derived text).
pub(crate) fn scan_str(text: &str, out: &mut Scan) {
    scan_view(&View::raw(text), out);
}

/// Scan a derived text for URLs, addresses and hosts only (what spelled-out
/// separators hide).
pub(crate) fn scan_net(text: &str, out: &mut Scan) {
    let v = View::raw(text);
    let mut marks = Marks::new(v.chars.len());
    net::urls(&v, &mut marks, &mut out.atoms);
    net::emails(&v, &mut marks, &mut out.atoms);
    net::hosts(&v, &marks, &mut out.atoms);
}

fn is_path_char(c: char) -> bool {
    !(c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '"' | '\''
                | '<'
                | '>'
                | '|'
                | '*'
                | '?'
                | ','
                | ';'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '`'
        ))
}

/// A path normalised lexically: `\` as `/`, empty and `.` segments
/// dropped, `..` resolved (kept above the root), no trailing `/`.
pub(crate) fn normalise_path(p: &str) -> String {
    let p = p.replace('\\', "/");
    let (prefix, rest) = if let Some(r) = p.strip_prefix('/') {
        ("/", r)
    } else if let Some(r) = p.strip_prefix("~/") {
        ("~/", r)
    } else {
        ("", p.as_str())
    };
    let mut segs: Vec<&str> = Vec::new();
    for s in rest.split('/') {
        match s {
            "" | "." => {}
            ".." if segs.last().is_some_and(|l| *l != "..") => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    format!("{prefix}{}", segs.join("/"))
}

/// Whether `name` is a file name with an extension: a letter in the stem
/// and a 1-5 character extension with a letter.
fn is_file_name(name: &str) -> bool {
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && stem.chars().count() >= 2
        && stem.chars().any(char::is_alphabetic)
        && (1..=5).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
}

fn path_atom(v: &View, a: usize, b: usize, out: &mut Vec<Atom>) {
    let shown = v.string(a, b);
    let key = normalise_path(&shown);
    if key.is_empty() || key == "/" || key == "~/" || !key.chars().any(char::is_alphanumeric) {
        return;
    }
    out.push(Atom {
        kind: Kind::Path,
        loose: loose(&key, true),
        key,
        span: v.span(a, b),
        covers: true,
        role: Role::Whole,
        shown,
    });
}

/// File paths and file names outside URLs and e-mail addresses.
fn paths(v: &View, marks: &Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let taken = |i: usize| marks.url[i] || marks.email[i] || marks.date[i];
    let mut i = 0;
    while i < c.len() {
        let boundary = i == 0
            || c[i - 1].is_whitespace()
            || matches!(
                c[i - 1],
                '"' | '\'' | '(' | '<' | '[' | '{' | '=' | ',' | ':' | ';' | '`'
            );
        if !boundary || taken(i) || !is_path_char(c[i]) {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < c.len() && is_path_char(c[end]) && !taken(end) {
            end += 1;
        }
        if !c[i..end].iter().any(|x| matches!(x, '/' | '\\' | '.')) {
            // No separator, no extension: nothing here or after a `:`.
            i = end.max(i + 1);
            continue;
        }
        while end > i && matches!(c[end - 1], '.' | ':' | '!') {
            end -= 1;
        }
        let s = v.string(i, end);
        let rooted = s.starts_with('/')
            || s.starts_with("~/")
            || s.starts_with("./")
            || s.starts_with("../")
            || s.starts_with('\\')
            || (s.len() > 3 && s.as_bytes()[1] == b':' && matches!(s.as_bytes()[2], b'\\' | b'/'));
        let last = s.rsplit(['/', '\\']).next().unwrap_or("");
        let relative = s.contains('/')
            && s.chars().next().is_some_and(char::is_alphabetic)
            && is_file_name(last);
        if rooted && s.chars().count() > 1 {
            let start = if s.as_bytes().get(1) == Some(&b':') {
                i + 2
            } else {
                i
            };
            path_atom(v, start, end, out);
            i = end.max(i + 1);
        } else if relative || (!s.contains(['/', '\\', '@']) && is_file_name(&s)) {
            path_atom(v, i, end, out);
            i = end.max(i + 1);
        } else {
            // Not a path from here: one may start after a `:` or `=` inside
            // (`fs:write:/ws/**`, `--out=/tmp/x`).
            i += 1;
        }
    }
}

/// Record ids (see the module documentation).
fn ids(v: &View, marks: &Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let id_char = |x: char| x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, '_' | '-');
    let mut i = 0;
    while i < c.len() {
        if !id_char(c[i]) || (i > 0 && (id_char(c[i - 1]) || c[i - 1].is_alphanumeric())) {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < c.len() && id_char(c[end]) {
            end += 1;
        }
        let (mut a, mut b) = (i, end);
        while a < b && matches!(c[a], '_' | '-') {
            a += 1;
        }
        while b > a && matches!(c[b - 1], '_' | '-') {
            b -= 1;
        }
        let run = &c[a..b];
        let digits = run.iter().filter(|x| x.is_ascii_digit()).count();
        let inside_other = (a..b).all(|k| marks.num[k] || marks.date[k] || marks.email[k]);
        let followed_by_letter = c
            .get(end)
            .is_some_and(|x| x.is_alphabetic() && !x.is_ascii());
        if run.len() >= 6
            && digits >= 2
            && run.iter().any(|x| x.is_ascii_lowercase())
            && !inside_other
            && !followed_by_letter
        {
            let key: String = run.iter().collect();
            out.push(Atom {
                kind: Kind::Id,
                loose: loose(&key, true),
                key: key.clone(),
                span: v.span(a, b),
                covers: true,
                role: Role::Whole,
                shown: key,
            });
        }
        i = end;
    }
}

/// Call `f` with each word of the view: a run of letters or digits of
/// three characters or more.
pub(crate) fn for_each_word(v: &View, mut f: impl FnMut(&[char])) {
    let c = &v.chars;
    let mut i = 0;
    while i < c.len() {
        if !c[i].is_alphanumeric() {
            i += 1;
            continue;
        }
        let s = i;
        while i < c.len() && c[i].is_alphanumeric() {
            i += 1;
        }
        if i - s >= 3 {
            f(&c[s..i]);
        }
    }
}

#[cfg(test)]
mod tests;
