//! A turn's (or an MCP session's) ledger of sources: every text that
//! entered it, with its label, append-only, and an index of the
//! identifier-like tokens in them.
//!
//! What is indexed, per source:
//!
//! | | trusted source | untrusted source |
//! |---|---|---|
//! | views read | the raw text only | raw, decoded (HTML, percent, escapes), skeleton (letters imitating Latin folded), base64 runs decoded, spelled-out separators and spaced letters rewritten |
//! | atoms (see `scan`) | exact and loose keys | exact and loose keys |
//! | a path's file name | yes | yes |
//! | short numbers | with their context words | with their context words |
//! | words | the folded text, for phrase search | loose words |
//!
//! A trusted source is read strictly (a key that was not written there
//! could vouch for an attacker's value); an untrusted one generously (an
//! extra key can only make a value *more* suspect: a value found in both
//! is trusted). A JSON source is walked: each string is a text, each number
//! a value whose context words are the names of its field and of the
//! field's parent (`{"files":[{"id":13}]}`: `13` with `id` and `file`),
//! object keys are text of the object's integrity, and field labels
//! ([`OutputLabels`]) decide each scalar's integrity.
//!
//! A trusted field in an untrusted output (a system-assigned id in a
//! search result) vouches only for its whole value, one token (its
//! identifier, its number, its word), and only **weakly**: its keys go to
//! a list of their own ([`Hits`]'s `field`), and a value that untrusted
//! data also mentions anywhere else (an e-mail saying "delete file 13")
//! is untrusted (see `provenance`): the field proves the id is real, not
//! that the user chose it; a text someone else wrote that names it is the
//! attacker choosing among real ids. The user's message, the operator's
//! files, a trusted output and an approval vouch strongly (found in both
//! is trusted). The principals' entries among them (every one but a
//! tool's output) are also kept apart, for the `endorsed` sinks that take
//! only a principal's word.
//!
//! Keys are 64-bit SipHash values keyed per ledger (a random key from the
//! standard library's `RandomState`): no string is built per lookup, and
//! no one outside the process can choose a value whose key collides with
//! a trusted one. Costs: indexing is linear in the text (see the `flow`
//! bench); a lookup is a few hash probes. Each key keeps at most
//! [`MAX_HITS`] trusted and untrusted entries.

use super::label::{Integrity, Label, OutputLabels, Source, pointer};
use super::scan::number::{canon_number, name_words, significant};
use super::scan::{Atom, Kind, Scan, for_each_word, scan_net, scan_str, scan_view};
use super::text::{View, base64_texts, deobfuscated, exact, loose, loose_each};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

/// An entry's index in its ledger.
pub type EntryId = u32;

/// Most entries remembered per key and integrity.
pub const MAX_HITS: usize = 4;

#[derive(Debug, Clone, Default)]
pub(crate) struct Hits {
    pub(crate) trusted: Vec<EntryId>,
    pub(crate) untrusted: Vec<EntryId>,
    /// Calls of the model that held the key (see [`Ledger::add_call`]).
    pub(crate) model: Vec<EntryId>,
    /// Trusted fields of untrusted outputs holding the key as their whole
    /// value (weak trust: see the module documentation).
    pub(crate) field: Vec<EntryId>,
    /// The trusted entries among `trusted` that are a principal's word (see
    /// [`Ledger::endorser`]), kept apart so that outputs listed first do
    /// not crowd them out.
    pub(crate) endorsed: Vec<EntryId>,
}

/// Which list of [`Hits`] a key goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Data(Integrity),
    Model,
    Field,
    Endorsed,
}

impl Hits {
    fn add(&mut self, id: EntryId, class: Class) {
        let list = match class {
            Class::Data(Integrity::Trusted) => &mut self.trusted,
            Class::Data(Integrity::Untrusted) => &mut self.untrusted,
            Class::Model => &mut self.model,
            Class::Field => &mut self.field,
            Class::Endorsed => &mut self.endorsed,
        };
        if list.len() < MAX_HITS && list.last() != Some(&id) && !list.contains(&id) {
            list.push(id);
        }
    }
}

/// The ledger (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Vec<Label>,
    seed: RandomState,
    exact: HashMap<u64, Hits>,
    loose: HashMap<u64, Hits>,
    /// Loose words of untrusted sources.
    words: HashMap<u64, Vec<EntryId>>,
    /// The folded text of each trusted source, whitespace collapsed (the
    /// user's messages, endorsements, trusted tool results; not the
    /// operator's files, whose prose would vouch for any word in it).
    pub(crate) trusted_text: Vec<(EntryId, String)>,
    /// Whole values of trusted fields of untrusted outputs, folded.
    pub(crate) trusted_values: HashMap<String, Vec<EntryId>>,
    tainted: bool,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// The labels of the entries, in order ([`EntryId`] is the index).
    pub fn entries(&self) -> &[Label] {
        &self.entries
    }

    /// The label of an entry.
    pub fn label(&self, id: EntryId) -> Option<&Label> {
        self.entries.get(id as usize)
    }

    /// Whether anything untrusted entered (the context is then tainted: a
    /// final answer written now is marked as such; strict mode asks a
    /// human for every side effect).
    pub fn has_untrusted(&self) -> bool {
        self.tainted
    }

    /// The index key of a kind's key given in `parts`.
    fn key(&self, kind: Kind, parts: &[&str]) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(kind.prefix().as_bytes());
        for p in parts {
            h.write(p.as_bytes());
            h.write_u8(0xff);
        }
        h.finish()
    }

    /// The sources holding the exact key `parts` of `kind`.
    pub(crate) fn exact_hits(&self, kind: Kind, parts: &[&str]) -> Option<&Hits> {
        self.exact.get(&self.key(kind, parts))
    }

    /// The sources holding the loose key `parts` of `kind`.
    pub(crate) fn loose_hits(&self, kind: Kind, parts: &[&str]) -> Option<&Hits> {
        self.loose.get(&self.key(kind, parts))
    }

    /// The key of a word (its loose form, built as it is hashed).
    fn word_key(&self, w: impl Iterator<Item = char>) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(b"w:");
        loose_each(w, true, |c| h.write_u32(c as u32));
        h.finish()
    }

    fn push(&mut self, label: Label) -> EntryId {
        self.entries.push(label);
        (self.entries.len() - 1) as EntryId
    }

    /// Add a text (a user's message, an operator's file, a tool's text
    /// output) with its label; an untrusted one taints the context.
    pub fn add_text(&mut self, label: Label, text: &str) -> EntryId {
        let integrity = label.integrity;
        let id = self.push(label);
        if integrity == Integrity::Untrusted {
            self.tainted = true;
        }
        self.index_text(id, integrity, text, &[]);
        id
    }

    /// Add a tool's JSON output: `labels` gives each scalar's integrity
    /// ([`OutputLabels::combine`]); the entry's own label says the
    /// integrity of the output as a whole (`labels.whole`). The same as
    /// [`Ledger::add_output`] with no call arguments.
    pub fn add_json(&mut self, label: Label, value: &Value, labels: &OutputLabels) -> EntryId {
        self.add_output(label, value, labels, &Value::Null).0
    }

    /// Add a tool's JSON output as [`Ledger::add_json`] does, for a call
    /// with arguments `args`; also says whether untrusted data entered with
    /// it (it then taints the context).
    ///
    /// Untrusted data is what someone outside may have written: a string
    /// or a number at an untrusted place of the output, or an object key
    /// there. Not: a string that is one of the call's own argument strings
    /// verbatim (the tool echoing the model's value: it carries nothing the
    /// model did not write, and a copy of it is the model's, see
    /// `provenance`), an object key that the tool's declared field paths
    /// name literally (`previous` and `content` of `/previous/content`: the
    /// tool's schema, not data; a key at a `*` is data), `null` and
    /// booleans. So an output whose untrusted parts are all absent or
    /// echoes (a file written, whose trusted fields the operator confirmed)
    /// leaves the context clean; its label still says what the host holds
    /// it to be as a whole.
    pub fn add_output(
        &mut self,
        label: Label,
        value: &Value,
        labels: &OutputLabels,
        args: &Value,
    ) -> (EntryId, bool) {
        let id = self.push(label);
        let mut echoes = Vec::new();
        strings(args, &mut echoes);
        let mut w = Walk {
            labels,
            echoes: &echoes,
            untrusted: false,
        };
        let mut at = Vec::new();
        self.walk(id, value, &mut w, &mut at);
        if w.untrusted {
            self.tainted = true;
        }
        (id, w.untrusted)
    }

    /// Record the arguments of a call the model made (`source`: a
    /// [`Source::Model`]), after the door decided on it. They are neither
    /// trusted nor untrusted data and do not taint the context; they only
    /// tell a value the model copied from a source (a link on a page) from
    /// one it wrote first and read back (a composed link written to a file,
    /// then read): a value counts as copied only when a source held it
    /// before any call of the model did.
    pub fn add_call(&mut self, source: Source, args: &Value) -> EntryId {
        self.entries.push(Label::untrusted(source));
        let id = (self.entries.len() - 1) as EntryId;
        let mut texts = Vec::new();
        strings(args, &mut texts);
        for t in texts {
            let mut s = Scan::default();
            scan_view(&View::raw(t), &mut s);
            for a in &s.atoms {
                let k = self.key(a.kind, &[&a.key]);
                self.exact.entry(k).or_default().add(id, Class::Model);
            }
        }
        id
    }

    /// Whether the exact key `parts` of `kind` was in a source before any
    /// call of the model held it.
    pub(crate) fn copied(&self, kind: Kind, parts: &[&str]) -> bool {
        let Some(h) = self.exact_hits(kind, parts) else {
            return false;
        };
        let first_data = [h.trusted.first(), h.untrusted.first(), h.field.first()]
            .into_iter()
            .flatten()
            .min()
            .copied();
        match (first_data, h.model.first()) {
            (Some(d), Some(m)) => d < *m,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Record an operator's endorsement: the approved argument value is
    /// trusted for the rest of the ledger's life (`label`'s integrity is
    /// made trusted).
    pub fn endorse(&mut self, mut label: Label, value: &Value) -> EntryId {
        label.integrity = Integrity::Trusted;
        self.add_json(label, value, &OutputLabels::whole(Integrity::Trusted))
    }

    fn walk(&mut self, id: EntryId, v: &Value, w: &mut Walk, at: &mut Vec<String>) {
        let labels = w.labels;
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let integrity = labels.at(at, false);
                    if integrity == Integrity::Untrusted && !declares_key(labels, at, k) {
                        w.untrusted = true;
                    }
                    self.index_text(id, integrity, k, &[]);
                    at.push(k.clone());
                    self.walk(id, x, w, at);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    at.push(i.to_string());
                    self.walk(id, x, w, at);
                    at.pop();
                }
            }
            Value::String(s) => {
                let integrity = labels.at(at, super::label::is_token(s));
                let ctx = field_context(at);
                if integrity == Integrity::Trusted && labels.whole == Integrity::Untrusted {
                    self.index_whole_value(id, s, &ctx);
                } else {
                    if integrity == Integrity::Untrusted
                        && !s.trim().is_empty()
                        && !w.echoes.contains(&s.as_str())
                    {
                        w.untrusted = true;
                    }
                    self.index_text(id, integrity, s, &ctx);
                }
            }
            Value::Number(n) => {
                let integrity = labels.at(at, true);
                let key = number_key(n);
                let ctx = field_context(at);
                let class =
                    if integrity == Integrity::Trusted && labels.whole == Integrity::Untrusted {
                        Class::Field
                    } else {
                        if integrity == Integrity::Untrusted {
                            w.untrusted = true;
                        }
                        Class::Data(integrity)
                    };
                self.index_number(id, class, &key, &ctx);
            }
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn add_key(&mut self, id: EntryId, class: Class, kind: Kind, key: &[&str], lkey: &[&str]) {
        let (e, l) = (self.key(kind, key), self.key(kind, lkey));
        let endorsed = class == Class::Data(Integrity::Trusted) && self.endorser(id);
        for (map, k) in [(&mut self.exact, e), (&mut self.loose, l)] {
            let hits = map.entry(k).or_default();
            hits.add(id, class);
            if endorsed {
                hits.add(id, Class::Endorsed);
            }
        }
    }

    /// Whether entry `id` is a principal's word when trusted: the user's
    /// message, an operator's file, a fact the operator approved, an
    /// approval; not a tool's output, trusted or not (what an `endorsed`
    /// sink takes, see `sink`).
    pub(crate) fn endorser(&self, id: EntryId) -> bool {
        matches!(
            self.entries.get(id as usize).map(|l| &l.source),
            Some(
                Source::User { .. }
                    | Source::Operator { .. }
                    | Source::Approval { .. }
                    | Source::Memory { approved: true, .. }
            )
        )
    }

    fn add_atom(&mut self, id: EntryId, class: Class, a: &Atom) {
        self.add_key(id, class, a.kind, &[&a.key], &[&a.loose]);
        if a.kind == Kind::Path
            && let Some(base) = a
                .key
                .rsplit('/')
                .next()
                .filter(|b| *b != a.key && !b.is_empty())
        {
            self.add_key(id, class, Kind::Path, &[base], &[&loose(base, true)]);
        }
    }

    fn add_short(&mut self, id: EntryId, class: Class, key: &str, word: &str) {
        let parts = [key, "#", word];
        self.add_key(id, class, Kind::ShortNumber, &parts, &parts);
    }

    fn index_number(&mut self, id: EntryId, class: Class, key: &str, ctx: &[String]) {
        if significant(key) >= 5 {
            self.add_key(id, class, Kind::Number, &[key], &[key]);
        } else {
            for w in ctx {
                self.add_short(id, class, key, w);
            }
        }
    }

    fn index_scan(&mut self, id: EntryId, integrity: Integrity, s: &Scan, ctx: &[String]) {
        let class = Class::Data(integrity);
        for a in &s.atoms {
            self.add_atom(id, class, a);
        }
        for n in &s.shorts {
            for w in n.context.iter().chain(ctx) {
                self.add_short(id, class, &n.key, w);
            }
        }
    }

    fn index_words(&mut self, id: EntryId, v: &View) {
        let mut keys = Vec::new();
        for_each_word(v, |w| keys.push(self.word_key(w.iter().copied())));
        for k in keys {
            let list = self.words.entry(k).or_default();
            if list.last() != Some(&id) && list.len() < 64 {
                list.push(id);
            }
        }
    }

    /// Index a text: see the module documentation. `ctx`: context words
    /// of the field holding it (JSON), added to its short numbers.
    fn index_text(&mut self, id: EntryId, integrity: Integrity, text: &str, ctx: &[String]) {
        let s = self.scan_text(id, integrity, text, true);
        self.index_scan(id, integrity, &s, ctx);
    }

    /// Read a text as its integrity says (see the module documentation):
    /// its atoms and short numbers; a trusted text's folded form is kept
    /// for phrases, an untrusted one's words when `words`.
    fn scan_text(&mut self, id: EntryId, integrity: Integrity, text: &str, words: bool) -> Scan {
        let mut s = Scan::default();
        match integrity {
            Integrity::Trusted => {
                scan_view(&View::raw(text), &mut s);
                let operator = matches!(
                    self.entries.get(id as usize).map(|l| &l.source),
                    Some(Source::Operator { .. })
                );
                if !operator {
                    self.trusted_text.push((id, collapse(&exact(text))));
                }
            }
            Integrity::Untrusted => {
                let raw = View::raw(text);
                scan_view(&raw, &mut s);
                if words {
                    self.index_words(id, &raw);
                }
                let decoded = View::decoded(text);
                if let Some(d) = &decoded {
                    scan_view(d, &mut s);
                }
                if let Some(k) = View::skeleton(text) {
                    scan_view(&k, &mut s);
                }
                for (_, t) in base64_texts(text) {
                    scan_str(&t, &mut s);
                    if let Some(d) = deobfuscated(&t, true) {
                        scan_net(&d, &mut s);
                    }
                }
                let plain: Option<String> = decoded.as_ref().map(|d| d.chars.iter().collect());
                if let Some(d) = deobfuscated(plain.as_deref().unwrap_or(text), true) {
                    scan_net(&d, &mut s);
                }
            }
        }
        s
    }

    /// A trusted field of an untrusted output (one token, see
    /// [`super::label::is_token`]): only the value as a whole (an atom
    /// spanning all of it, a number, or the word) is vouched for, weakly
    /// ([`Class::Field`]); what else a reader finds in it (a base64 run
    /// decoded, a token inside) is indexed as untrusted, its words are not
    /// (the word is the value).
    fn index_whole_value(&mut self, id: EntryId, text: &str, ctx: &[String]) {
        let trimmed = text.trim();
        let mut s = Scan::default();
        scan_view(&View::raw(trimmed), &mut s);
        let whole = |a: &Atom| a.span == (0, trimmed.len() as u32);
        let mut keys: Vec<(Kind, String)> = Vec::new();
        for a in s.atoms.iter().filter(|a| whole(a)) {
            self.add_atom(id, Class::Field, a);
            keys.push((a.kind, a.key.clone()));
        }
        let number = whole_number(trimmed);
        if let Some(key) = &number {
            self.index_number(id, Class::Field, key, ctx);
        }
        let list = self
            .trusted_values
            .entry(collapse(&exact(trimmed)))
            .or_default();
        if list.len() < MAX_HITS {
            list.push(id);
        }
        let mut rest = self.scan_text(id, Integrity::Untrusted, text, false);
        let is_whole = |a: &Atom| {
            keys.iter().any(|(k, key)| *k == a.kind && *key == a.key)
                || (a.kind == Kind::Number && number.as_deref() == Some(a.key.as_str()))
        };
        rest.atoms.retain(|a| !is_whole(a));
        rest.shorts
            .retain(|n| number.as_deref() != Some(n.key.as_str()));
        self.index_scan(id, Integrity::Untrusted, &rest, ctx);
    }

    /// Entries holding every word of `words` (loose), in order.
    pub(crate) fn entries_with_words(&self, words: &[String]) -> Vec<EntryId> {
        let mut acc: Option<Vec<EntryId>> = None;
        for w in words {
            let Some(list) = self.words.get(&self.word_key(w.chars())) else {
                return Vec::new();
            };
            acc = Some(match acc {
                None => list.clone(),
                Some(a) => a.into_iter().filter(|x| list.contains(x)).collect(),
            });
        }
        acc.unwrap_or_default()
    }
}

/// A JSON output being added ([`Ledger::add_output`]).
struct Walk<'a> {
    labels: &'a OutputLabels,
    /// The call's argument strings (echoes of them bring nothing in).
    echoes: &'a [&'a str],
    /// Whether untrusted data was found.
    untrusted: bool,
}

/// Whether a path the tool declared (confirmed or not: the key's text is
/// then the declaration's own) names the key `key` of the object at `at`
/// literally: the key is the tool's schema, not data (a `*` there is any
/// key, so data).
fn declares_key(labels: &OutputLabels, at: &[String], key: &str) -> bool {
    labels.declared.iter().any(|p| {
        use super::label::Segment;
        let seg = p.segments();
        seg.len() > at.len()
            && seg.iter().zip(at).all(|(s, a)| match s {
                Segment::Any => true,
                Segment::Key(k) => k == a,
            })
            && matches!(&seg[at.len()], Segment::Key(k) if k == key)
    })
}

/// Every string of a JSON value: object keys and string scalars.
pub(crate) fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                strings(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::String(s) => out.push(s),
        _ => {}
    }
}

/// Whitespace runs as one space, trimmed.
pub(crate) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The key of a JSON number ([`canon_number`] of its decimal form).
pub(crate) fn number_key(n: &serde_json::Number) -> String {
    let s = n.to_string();
    let s = s.trim_start_matches('-');
    if s.contains(['e', 'E']) {
        // Exponent form: through f64, printed in full.
        let f = n.as_f64().unwrap_or(0.0).abs();
        let t = format!("{f}");
        let (i, fr) = t.split_once('.').unwrap_or((&t, ""));
        return canon_number(i, fr);
    }
    let (i, fr) = s.split_once('.').unwrap_or((s, ""));
    canon_number(i, fr)
}

/// The key of a string that is one plain number (`13`, `1,000.00`, ` 42 `),
/// else `None`.
pub(crate) fn whole_number(s: &str) -> Option<String> {
    let t = s.trim();
    if t.is_empty() || !t.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | ' ' | '\''))
    {
        return None;
    }
    let mut scan = Scan::default();
    scan_view(&View::raw(t), &mut scan);
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    match (scan.atoms.first(), scan.shorts.first()) {
        (Some(a), _) if a.kind == Kind::Number => Some(a.key.clone()),
        (None, Some(n)) => Some(n.key.clone()),
        _ => Some(canon_number(&digits, "")),
    }
}

/// The context words of a JSON field: its name's and its parent's
/// (array indexes skipped).
pub(crate) fn field_context(at: &[String]) -> Vec<String> {
    let names: Vec<&String> = at
        .iter()
        .rev()
        .filter(|s| !s.chars().all(|c| c.is_ascii_digit()))
        .take(2)
        .collect();
    let mut out: Vec<String> = names.iter().flat_map(|n| name_words(n)).collect();
    out.sort();
    out.dedup();
    out
}

/// A JSON Pointer to `at` (re-exported for the door's reports).
pub fn field_pointer(at: &[String]) -> String {
    pointer(at)
}

#[cfg(test)]
mod tests;
