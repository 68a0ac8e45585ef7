//! Provenance of a value: for the value and each identifier-like token in
//! it, whether it appears in a trusted source of the ledger, only in
//! untrusted data (which sources), or nowhere. Computed by the host from
//! what entered the turn, never from the model's word (the idea of
//! tracking where each value of a call came from is CaMeL's, Debenedetti
//! et al. 2025; labelling by source and integrity, FIDES', Costa et al.
//! 2025; here it is done on text, after the fact, because the host sees the
//! model's calls and not its reasoning).
//!
//! Rules, in order:
//!
//! 1. **Reading.** The value's raw and decoded views (`text`) are scanned
//!    for atoms (`scan`): a token hidden in a longer string, in a URL's
//!    query, percent- or entity-encoded, is an atom like any other.
//! 2. **Exact match trusts.** An atom is trusted when its exact key is in a
//!    trusted source. Exact keys fold only what does not change the thing
//!    named (case, NFKC, invisible characters, IDNA's two spellings of a
//!    host, a host's trailing dot, an IBAN's or a phone's separators, an
//!    amount's grouping): a homoglyph of a trusted value is *not* that value.
//! 3. **Found in both → trusted.** Trust is checked first: a value the user
//!    gave is the user's even if a page repeats it. A value vouched for
//!    only by a **trusted field** of an untrusted output (a system's id) is
//!    weaker: found in untrusted data too (anywhere else: an e-mail naming
//!    that id), it is untrusted; otherwise trusted.
//! 4. **Loose match attributes.** An atom not trusted whose exact or loose
//!    key is in untrusted data is `untrusted`, naming the sources; one whose
//!    loose key is only in trusted sources is a `lookalike` of a trusted
//!    value (`pаypal.com`, `paypa1.com`); otherwise `nowhere`.
//! 5. **Containers.** An atom found trusted vouches for every atom inside its
//!    span (a URL the user gave whole, with its query). A URL not given whole
//!    is as trusted as its host and the identifiers inside it: its own miss
//!    counts only as untrusted data or a lookalike.
//! 6. **Paths.** A path not found whole is trusted when one of its
//!    directories (not `/` or `~`) and its file name are trusted
//!    (`/ws` from the operator's grant, `q3.pdf` from the user).
//! 7. **The value.** A value's origin is the worst of its atoms'
//!    (`untrusted`, then `lookalike`, `nowhere`, `trusted`). A value without atoms is a
//!    number or a phrase: a number of five significant digits or more is an
//!    atom; a shorter one matches only through a context word its argument's
//!    name shares with the source (`file_id` = 13 is vouched for by "file
//!    13", not by "2024-05-13" nor "room 13"); a phrase (three characters or
//!    more) is trusted when it occurs in a trusted text between word
//!    boundaries (the user's messages, endorsements, trusted tool results,
//!    not the operator's files) or is a trusted field's whole value,
//!    untrusted when every word of it occurs in one untrusted source,
//!    nowhere otherwise.
//!
//! **Who vouches** ([`Vouch`]). The rules above take any trusted source:
//! the user's message, the operator's files, an approval, a trusted tool
//! output, a trusted field (weakly). An `endorsed` sink (see `sink`) takes
//! only a principal's word: the user's message, the operator's files (and
//! facts the operator approved) and approvals. A value such a sink does not
//! take only because it was found in a tool's output, trusted as a whole or
//! as a field, is [`Origin::Output`]: the output proves the value is real
//! (a file the drive listed), not that the user chose it ("delete the five
//! largest files" picks among real ids without naming one).
//!
//! `nowhere` means the model made the value up or composed it. Once
//! untrusted data is in the context, a composed value may be the attacker's
//! (split in halves, spelled backwards, described in words): it cannot be
//! shown to come from the user, so a sink that needs trusted values treats
//! it as untrusted (see `sink`). Before any untrusted data is read, nothing
//! can have been steered, and the door allows everything.

use super::label::Label;
use super::ledger::{EntryId, Hits, Ledger, collapse, number_key, whole_number};
use super::scan::number::significant;
use super::scan::{Atom, Kind, Role, Scan, scan_str, scan_view};
use super::text::{View, base64_texts, deobfuscated, exact};
use serde::{Deserialize, Serialize};

/// Where a value, or a token in it, was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "found", rename_all = "snake_case", deny_unknown_fields)]
pub enum Origin {
    /// In a trusted source.
    Trusted {
        /// The sources (at most [`super::ledger::MAX_HITS`]).
        sources: Vec<Label>,
    },
    /// Not in a trusted source; in untrusted data.
    Untrusted {
        /// The sources.
        sources: Vec<Label>,
    },
    /// Nowhere as written, but it reads like a trusted value (confusable
    /// letters, `0`/`o`, `rn`/`m`): another identifier dressed as the
    /// user's.
    Lookalike {
        /// The trusted sources of the value it imitates.
        of: Vec<Label>,
    },
    /// In no source of the ledger.
    Nowhere,
    /// Found only in tool outputs the host trusts (a whole output or a
    /// trusted field), never in what a principal gave: what an `endorsed`
    /// sink refuses (see [`Vouch::Principal`]).
    Output {
        /// The outputs that hold it.
        sources: Vec<Label>,
    },
}

/// Which trusted sources vouch for a value (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vouch {
    /// Any trusted source (the `identifiers` and `trusted` sinks).
    #[default]
    Trusted,
    /// Only a principal: the user's message, the operator's files and the
    /// facts it approved, an approval; never a tool's output (the
    /// `endorsed` sink).
    Principal,
}

impl Vouch {
    /// Whether entry `id`, trusted, vouches under this rule.
    fn accepts(self, ledger: &Ledger, id: EntryId) -> bool {
        self == Vouch::Trusted || ledger.endorser(id)
    }

    /// The trusted entries of `h` that vouch under this rule.
    fn trusted(self, h: &Hits) -> &[EntryId] {
        match self {
            Vouch::Trusted => &h.trusted,
            Vouch::Principal => &h.endorsed,
        }
    }

    /// The trusted entries of `h` that do not vouch under this rule (tool
    /// outputs and fields under [`Vouch::Principal`]); the fields are
    /// weak and come after the untrusted check either way.
    fn output(self, h: &Hits) -> Vec<EntryId> {
        let mut out = Vec::new();
        if self == Vouch::Principal {
            union(&mut out, &h.trusted);
            union(&mut out, &h.field);
        }
        out
    }
}

impl Origin {
    /// Whether it is [`Origin::Trusted`].
    pub fn is_trusted(&self) -> bool {
        matches!(self, Origin::Trusted { .. })
    }
}

/// One token of a value and where it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFinding {
    /// Its kind.
    pub kind: Kind,
    /// The token as read (folded).
    pub token: String,
    /// Where it was found.
    pub origin: Origin,
}

/// The provenance of one scalar value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The value's origin (rule 7).
    pub origin: Origin,
    /// Whether the value holds identifier-like tokens (atoms).
    pub identifiers: bool,
    /// Whether the value is exactly one identifier found as such in some
    /// source, trusted or not (a link copied verbatim).
    pub copied: bool,
    /// The tokens that decided, with their origins.
    pub tokens: Vec<TokenFinding>,
}

/// Internal finding: class rank and entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// 0 trusted, 1 nowhere, 2 output, 3 lookalike, 4 untrusted.
    pub(crate) rank: u8,
    pub(crate) ids: Vec<EntryId>,
}

/// Most identifiers judged in one value; a value with more is `nowhere`.
pub const MAX_ATOMS: usize = 4096;

const TRUSTED: u8 = 0;
const NOWHERE: u8 = 1;
const OUTPUT: u8 = 2;
const LOOKALIKE: u8 = 3;
const UNTRUSTED: u8 = 4;

impl Found {
    fn new(rank: u8, ids: Vec<EntryId>) -> Found {
        Found { rank, ids }
    }

    /// The public form, labels resolved.
    pub(crate) fn origin(&self, ledger: &Ledger) -> Origin {
        let labels = || {
            self.ids
                .iter()
                .filter_map(|i| ledger.label(*i).cloned())
                .collect::<Vec<_>>()
        };
        match self.rank {
            TRUSTED => Origin::Trusted { sources: labels() },
            LOOKALIKE => Origin::Lookalike { of: labels() },
            UNTRUSTED => Origin::Untrusted { sources: labels() },
            OUTPUT => Origin::Output { sources: labels() },
            _ => Origin::Nowhere,
        }
    }
}

fn union(a: &mut Vec<EntryId>, b: &[EntryId]) {
    for x in b {
        if a.len() < super::ledger::MAX_HITS && !a.contains(x) {
            a.push(*x);
        }
    }
}

/// Look up one atom (rules 2-4, 6), vouched for as `vouch` says.
pub(crate) fn lookup(ledger: &Ledger, kind: Kind, key: &str, lkey: &str, vouch: Vouch) -> Found {
    let hits = ledger.exact_hits(kind, &[key]);
    if let Some(h) = hits.filter(|h| !vouch.trusted(h).is_empty()) {
        return Found::new(TRUSTED, vouch.trusted(h).to_vec());
    }
    if kind == Kind::Path
        && let Some(ids) = path_composite(ledger, key, vouch)
    {
        return Found::new(TRUSTED, ids);
    }
    let lhits = ledger.loose_hits(kind, &[lkey]);
    // A source that holds the value only after the model wrote it in one
    // of its calls echoes the model's own value (a tool returning the path
    // it was given, a page quoting the query): it is not where the value
    // came from. Only untrusted sources that held it before the model's
    // first call holding it count (as for `Ledger::copied`).
    let first_call = hits.and_then(|h| h.model.first().copied());
    let before: Vec<EntryId> = hits
        .into_iter()
        .chain(lhits)
        .flat_map(|h| h.untrusted.iter().copied())
        .filter(|id| first_call.is_none_or(|m| *id < m))
        .collect();
    let mut un = Vec::new();
    union(&mut un, &before);
    if !un.is_empty() {
        return Found::new(UNTRUSTED, un);
    }
    if let Some(h) = hits {
        if vouch == Vouch::Trusted && !h.field.is_empty() {
            return Found::new(TRUSTED, h.field.clone());
        }
        let out = vouch.output(h);
        if !out.is_empty() {
            return Found::new(OUTPUT, out);
        }
    }
    if let Some(h) = lhits.filter(|h| !h.trusted.is_empty() || !h.field.is_empty()) {
        let mut of = h.trusted.clone();
        union(&mut of, &h.field);
        return Found::new(LOOKALIKE, of);
    }
    Found::new(NOWHERE, Vec::new())
}

/// Rule 6: a trusted directory (not the root or `~`) and a trusted file
/// name.
fn path_composite(ledger: &Ledger, key: &str, vouch: Vouch) -> Option<Vec<EntryId>> {
    let (mut dir, base) = key.rsplit_once('/')?;
    let trusted = |k: &str| {
        ledger
            .exact_hits(Kind::Path, &[k])
            .map(|h| vouch.trusted(h))
            .filter(|t| !t.is_empty())
            .map(<[EntryId]>::to_vec)
    };
    let mut ids = trusted(base)?;
    while !dir.is_empty() && dir != "~" && dir != "." && dir != ".." {
        if let Some(d) = trusted(dir) {
            union(&mut ids, &d);
            return Some(ids);
        }
        dir = dir.rsplit_once('/').map_or("", |(d, _)| d);
    }
    None
}

/// A short number through the context words `ctx` (rule 7).
fn lookup_short(ledger: &Ledger, key: &str, ctx: &[String], vouch: Vouch) -> Found {
    let mut tr = Vec::new();
    let mut un = Vec::new();
    let mut out = Vec::new();
    let mut field = Vec::new();
    for w in ctx {
        if let Some(h) = ledger.exact_hits(Kind::ShortNumber, &[key, "#", w]) {
            union(&mut tr, vouch.trusted(h));
            union(&mut un, &h.untrusted);
            union(&mut out, &vouch.output(h));
            union(&mut field, &h.field);
        }
    }
    if !tr.is_empty() {
        Found::new(TRUSTED, tr)
    } else if !un.is_empty() {
        Found::new(UNTRUSTED, un)
    } else if !out.is_empty() {
        Found::new(OUTPUT, out)
    } else if !field.is_empty() {
        Found::new(TRUSTED, field)
    } else {
        Found::new(NOWHERE, Vec::new())
    }
}

/// A number's key through rule 7.
fn lookup_number(ledger: &Ledger, key: &str, ctx: &[String], vouch: Vouch) -> Found {
    if significant(key) >= 5 {
        lookup(ledger, Kind::Number, key, key, vouch)
    } else {
        lookup_short(ledger, key, ctx, vouch)
    }
}

/// Whether `hay` holds `needle` between word boundaries.
fn contains_word_bounded(hay: &str, needle: &str) -> bool {
    let first = needle.chars().next().is_some_and(char::is_alphanumeric);
    let last = needle.chars().last().is_some_and(char::is_alphanumeric);
    hay.match_indices(needle).any(|(i, m)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + m.len()..].chars().next();
        let glued_before = first && before.is_some_and(char::is_alphanumeric);
        let glued_after = last && after.is_some_and(char::is_alphanumeric);
        !glued_before && !glued_after
    })
}

/// A phrase (rule 7).
fn lookup_phrase(ledger: &Ledger, value: &str, vouch: Vouch) -> Found {
    let f = collapse(&exact(value));
    if f.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
        return Found::new(NOWHERE, Vec::new());
    }
    let mut tr = Vec::new();
    // Trusted texts that do not vouch under `vouch` (tool outputs).
    let mut out = Vec::new();
    for (id, text) in &ledger.trusted_text {
        if tr.len() < super::ledger::MAX_HITS && contains_word_bounded(text, &f) {
            if vouch.accepts(ledger, *id) {
                union(&mut tr, &[*id]);
            } else {
                union(&mut out, &[*id]);
            }
        }
    }
    if !tr.is_empty() {
        return Found::new(TRUSTED, tr);
    }
    // A trusted field's whole value vouches weakly: unless untrusted data
    // holds its words too.
    let mut field = ledger.trusted_values.get(&f).cloned().unwrap_or_default();
    if vouch == Vouch::Principal {
        union(&mut out, &field);
        field.clear();
    }
    let words: Vec<String> = f
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_string)
        .collect();
    let un = if words.is_empty() {
        Vec::new()
    } else {
        ledger.entries_with_words(&words)
    };
    if !un.is_empty() {
        Found::new(
            UNTRUSTED,
            un.into_iter().take(super::ledger::MAX_HITS).collect(),
        )
    } else if !field.is_empty() {
        Found::new(TRUSTED, field)
    } else if !out.is_empty() {
        Found::new(OUTPUT, out)
    } else {
        Found::new(NOWHERE, Vec::new())
    }
}

/// The atoms of a value: its raw view's, its decoded view's, then those
/// of the texts hidden in its base64 runs or behind bracketed separators
/// (`evil[.]example`), which vouch for nothing and carry the span of what
/// hid them.
pub(crate) fn atoms_of(value: &str) -> Vec<Atom> {
    let mut s = Scan::default();
    scan_view(&View::raw(value), &mut s);
    if let Some(d) = View::decoded(value) {
        scan_view(&d, &mut s);
    }
    let mut hidden = base64_texts(value);
    if let Some(d) = deobfuscated(value, false) {
        hidden.push(((0, value.len() as u32), d));
    }
    for (span, text) in hidden {
        let mut b = Scan::default();
        scan_str(&text, &mut b);
        s.atoms.extend(b.atoms.into_iter().map(|mut a| {
            a.span = span;
            a.covers = false;
            a
        }));
    }
    s.atoms
}

/// Judge a list of atoms (rules 5 and 7): the worst finding among those
/// that count, and the findings that decided.
pub(crate) fn judge(ledger: &Ledger, atoms: &[Atom], vouch: Vouch) -> (Found, Vec<(usize, Found)>) {
    let finds: Vec<Found> = atoms
        .iter()
        .map(|a| lookup(ledger, a.kind, &a.key, &a.loose, vouch))
        .collect();
    // Spans of the atoms found trusted that vouch for what lies inside them,
    // sorted, with the furthest end reached so far: an atom is covered when
    // a trusted span starting at or before it ends at or after it (its own
    // span included: the same text read two ways).
    let mut cover: Vec<(u32, u32)> = atoms
        .iter()
        .zip(&finds)
        .filter(|(a, f)| a.covers && f.rank == TRUSTED)
        .map(|(a, _)| a.span)
        .collect();
    cover.sort_unstable();
    let mut reach = Vec::with_capacity(cover.len());
    let mut m = 0;
    for c in &cover {
        m = m.max(c.1);
        reach.push(m);
    }
    let covered = |i: usize| {
        let a = &atoms[i];
        let k = cover.partition_point(|c| c.0 <= a.span.0);
        k > 0 && reach[k - 1] >= a.span.1
    };
    let mut seen = std::collections::HashSet::new();
    let mut worst: Option<Found> = None;
    let mut trusted_ids = Vec::new();
    let mut decided = Vec::new();
    for (i, a) in atoms.iter().enumerate() {
        let f = &finds[i];
        if f.rank == TRUSTED {
            union(&mut trusted_ids, &f.ids);
        }
        if covered(i) || (a.role == Role::Container && f.rank < LOOKALIKE) {
            continue;
        }
        if seen.insert((a.kind, a.key.as_str())) {
            decided.push((i, f.clone()));
        }
        match &mut worst {
            Some(w) if w.rank == f.rank => union(&mut w.ids, &f.ids),
            Some(w) if w.rank > f.rank => {}
            _ => worst = Some(f.clone()),
        }
    }
    let worst = worst.unwrap_or_else(|| {
        if trusted_ids.is_empty() {
            Found::new(NOWHERE, Vec::new())
        } else {
            Found::new(TRUSTED, trusted_ids)
        }
    });
    (worst, decided)
}

/// The provenance of a string value. `ctx`: the context words of the
/// argument holding it (its name's and its parent's; see
/// `scan::number::name_words`).
pub fn of_str(ledger: &Ledger, value: &str, ctx: &[String]) -> Provenance {
    of_str_by(ledger, value, ctx, Vouch::Trusted)
}

/// [`of_str`], with only the sources `vouch` takes vouching.
pub fn of_str_by(ledger: &Ledger, value: &str, ctx: &[String], vouch: Vouch) -> Provenance {
    let atoms = atoms_of(value);
    if atoms.len() > MAX_ATOMS {
        // More identifiers than any real argument holds: not read one by
        // one, and not vouched for.
        return Provenance {
            origin: Origin::Nowhere,
            identifiers: true,
            copied: false,
            tokens: Vec::new(),
        };
    }
    if atoms.is_empty() {
        if let Some(key) = whole_number(value) {
            return of_number_key(ledger, &key, ctx, vouch);
        }
        let f = lookup_phrase(ledger, value, vouch);
        let origin = f.origin(ledger);
        return Provenance {
            tokens: vec![TokenFinding {
                kind: Kind::Phrase,
                token: collapse(&exact(value)).chars().take(120).collect(),
                origin: origin.clone(),
            }],
            origin,
            identifiers: false,
            copied: false,
        };
    }
    let (worst, decided) = judge(ledger, &atoms, vouch);
    let trimmed = value.trim();
    let lead = (value.len() - value.trim_start().len()) as u32;
    let whole = (lead, lead + trimmed.len() as u32);
    let copied = atoms
        .iter()
        .any(|a| a.covers && a.span == whole && ledger.copied(a.kind, &[&a.key]));
    Provenance {
        origin: worst.origin(ledger),
        identifiers: true,
        copied,
        tokens: decided
            .into_iter()
            .map(|(i, f)| TokenFinding {
                kind: atoms[i].kind,
                token: atoms[i].shown.chars().take(120).collect(),
                origin: f.origin(ledger),
            })
            .collect(),
    }
}

fn of_number_key(ledger: &Ledger, key: &str, ctx: &[String], vouch: Vouch) -> Provenance {
    let long = significant(key) >= 5;
    let f = lookup_number(ledger, key, ctx, vouch);
    let origin = f.origin(ledger);
    let copied = if long {
        ledger.copied(Kind::Number, &[key])
    } else {
        ctx.iter()
            .any(|w| ledger.copied(Kind::ShortNumber, &[key, "#", w]))
    };
    Provenance {
        tokens: vec![TokenFinding {
            kind: if long {
                Kind::Number
            } else {
                Kind::ShortNumber
            },
            token: key.to_string(),
            origin: origin.clone(),
        }],
        origin,
        identifiers: long,
        copied,
    }
}

/// The provenance of a JSON number value (`ctx` as in [`of_str`]).
pub fn of_number(ledger: &Ledger, n: &serde_json::Number, ctx: &[String]) -> Provenance {
    of_number_by(ledger, n, ctx, Vouch::Trusted)
}

/// [`of_number`], with only the sources `vouch` takes vouching.
pub fn of_number_by(
    ledger: &Ledger,
    n: &serde_json::Number,
    ctx: &[String],
    vouch: Vouch,
) -> Provenance {
    of_number_key(ledger, &number_key(n), ctx, vouch)
}

#[cfg(test)]
mod field_tests;
#[cfg(test)]
mod tests;
