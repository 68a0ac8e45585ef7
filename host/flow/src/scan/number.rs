//! IBANs, numbers and amounts in a view, and the context words of short
//! numbers (dates are in [`super::date`]).
//!
//! - an **IBAN** is two letters, two digits and 11 to 30 letters or digits,
//!   written whole or in groups of four separated by one space or dash; the
//!   longest reading whose last group holds a digit is the IBAN (a shorter
//!   one whose mod-97 check holds while the longest's does not is kept as a
//!   second reading that vouches for nothing). Its key is the letters and
//!   digits.
//! - a **number**: digits with one kind of thousands separator (`,` `.`
//!   space `'`) and an optional decimal part (`1,000.00`, `1.000,00`,
//!   `1 000`) is a value, keyed without grouping, leading zeros or trailing
//!   fractional zeros (`1000`, `12.5`); `1,000` alone yields both `1000` and
//!   `1`. Digits joined by dashes, dots, spaces, parentheses or a leading `+`
//!   with seven digits or more (`+1 (555) 123-4567`, `0044 20 7946 0958`)
//!   are a phone or account number, keyed by its digits.
//! - a number of **five significant digits or more** is an atom. A shorter
//!   one is too common to mean anything alone: it is kept with its
//!   **context words** (up to three words before it in the same sentence,
//!   the word after it, `#` read as `id`, money words and currencies read as
//!   `$`, a plural `s` dropped), and matches an argument only through a word
//!   of the argument's name (see `provenance`).

use super::super::text::View;
use super::{Atom, Kind, Marks, Role, ShortNumber};

/// Words that make a short number an amount of money (context `$`).
const MONEY_WORDS: [&str; 30] = [
    "amount", "price", "total", "sum", "cost", "fee", "pay", "paid", "payment", "balance",
    "transfer", "salary", "rent", "charge", "refund", "money", "budget", "usd", "eur", "gbp",
    "chf", "jpy", "cny", "inr", "cad", "aud", "dollar", "euro", "pound", "buck",
];
/// Currency signs (context `$`).
const CURRENCY_SIGNS: [char; 14] = [
    '$', '€', '£', '¥', '₹', '₽', '₩', '₺', '₫', '₪', '฿', '₴', '₦', '¢',
];
/// Words that make a short number an identifier (context `id`).
const ID_WORDS: [&str; 8] = [
    "id",
    "no",
    "nr",
    "num",
    "number",
    "numero",
    "index",
    "identifier",
];

/// The context form of a word: `$` for money, `id` for numbering words, a
/// plural `s` dropped; `None` for a word of one letter.
pub(crate) fn context_word(w: &str) -> Option<String> {
    let w = if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        &w[..w.len() - 1]
    } else {
        w
    };
    if MONEY_WORDS.contains(&w) {
        return Some("$".into());
    }
    if ID_WORDS.contains(&w) || w == "ids" {
        return Some("id".into());
    }
    (w.chars().count() >= 2).then(|| w.to_string())
}

/// The context words of an argument's name (`file_id`, `fileId`,
/// `recipient-iban`).
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_alphabetic() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let mut out: Vec<String> = words.iter().filter_map(|w| context_word(w)).collect();
    out.sort();
    out.dedup();
    out
}

pub(super) fn word_at(c: &[char], i: usize) -> (String, usize) {
    let n = c[i.min(c.len())..]
        .iter()
        .take_while(|x| x.is_alphabetic())
        .count();
    (c[i..i + n].iter().collect(), n)
}

pub(super) fn skip(c: &[char], mut i: usize, set: &[char]) -> usize {
    while i < c.len() && set.contains(&c[i]) {
        i += 1;
    }
    i
}

pub(super) fn digits_at(c: &[char], i: usize) -> usize {
    c[i.min(c.len())..]
        .iter()
        .take_while(|x| x.is_ascii_digit())
        .count()
}

pub(super) fn num(c: &[char], a: usize, n: usize) -> u32 {
    c[a..a + n].iter().fold(0u32, |v, d| {
        v.saturating_mul(10)
            .saturating_add(d.to_digit(10).unwrap_or(0))
    })
}

/// The ISO 13616 check: the IBAN moved by four characters, letters as
/// numbers, is 1 modulo 97.
fn iban_valid(s: &str) -> bool {
    let moved = s[4..].chars().chain(s[..4].chars());
    let mut r: u32 = 0;
    for ch in moved {
        let Some(d) = ch.to_digit(36) else {
            return false;
        };
        r = if d >= 10 {
            (r * 100 + d) % 97
        } else {
            (r * 10 + d) % 97
        };
    }
    r == 1
}

/// IBANs of the view; their ranges are marked in `marks.num`.
pub(crate) fn ibans(v: &View, marks: &mut Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let alnum = |x: char| x.is_ascii_lowercase() || x.is_ascii_digit();
    let mut i = 0;
    while i + 4 <= c.len() {
        let head = i == 0 || !c[i - 1].is_alphanumeric();
        if !(head
            && c[i].is_ascii_lowercase()
            && c[i + 1].is_ascii_lowercase()
            && c[i + 2].is_ascii_digit()
            && c[i + 3].is_ascii_digit())
        {
            i += 1;
            continue;
        }
        // Groups: the first run, then runs after one space or dash.
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut k = i;
        loop {
            let s = k;
            while k < c.len() && alnum(c[k]) {
                k += 1;
            }
            groups.push((s, k));
            let total: usize = groups.iter().map(|(a, b)| b - a).sum();
            if total > 34 || !(k + 1 < c.len() && matches!(c[k], ' ' | '-') && alnum(c[k + 1])) {
                break;
            }
            k += 1;
        }
        // Readings that keep the grouping rules, shortest first.
        let mut readings: Vec<(usize, String)> = Vec::new();
        for n in 1..=groups.len() {
            let g = &groups[..n];
            let spaced_ok = n == 1
                || (g[..n - 1].iter().all(|(a, b)| b - a == 4)
                    && (1..=4).contains(&(g[n - 1].1 - g[n - 1].0)));
            let text: String = g.iter().flat_map(|&(a, b)| c[a..b].iter()).collect();
            let last = g[n - 1];
            if spaced_ok
                && (15..=34).contains(&text.len())
                && c[last.0..last.1].iter().any(|x| x.is_ascii_digit())
            {
                readings.push((last.1, text));
            }
        }
        let Some((end, key)) = readings.last().cloned() else {
            i += 1;
            continue;
        };
        for m in &mut marks.num[i..end] {
            *m = true;
        }
        let atom = |end: usize, key: String, whole: bool| Atom {
            kind: Kind::Iban,
            loose: key.clone(),
            key,
            span: v.span(i, end),
            covers: whole,
            role: if whole { Role::Whole } else { Role::Container },
            shown: v.string(i, end),
        };
        // The longest reading is the IBAN; a shorter one whose check holds
        // while the longest's does not (an IBAN followed by a group of
        // four, `... 7034 2024`) is kept too, as a reading that vouches for
        // nothing and counts only when found in untrusted data.
        if !iban_valid(&key)
            && let Some((vend, vkey)) = readings.iter().rev().find(|(_, k)| iban_valid(k)).cloned()
        {
            out.push(atom(vend, vkey, false));
        }
        out.push(atom(end, key, true));
        i = end;
    }
}

/// A numeric value's key: no grouping, no leading zeros, no trailing
/// fractional zeros (`0012.500` → `12.5`, `7.0` → `7`).
pub(crate) fn canon_number(int: &str, frac: &str) -> String {
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    }
}

/// Significant digits of a key from [`canon_number`].
pub(crate) fn significant(key: &str) -> usize {
    key.trim_start_matches(['0', '.'])
        .chars()
        .filter(char::is_ascii_digit)
        .count()
}

/// The values a run of digit groups and separators can mean.
fn readings(groups: &[String], seps: &[char], phone_marks: bool) -> Vec<String> {
    let digits: String = groups.concat();
    let k = groups.len();
    if k == 1 {
        let mut r = vec![canon_number(&digits, "")];
        if digits.starts_with('0') && digits.len() >= 5 {
            r.push(digits);
        }
        return r;
    }
    let thousands = |st: char, gs: &[String]| {
        (1..=3).contains(&gs[0].len()) && gs[1..].iter().all(|g| g.len() == 3) && seps_eq(seps, st)
    };
    let amountish = !phone_marks
        && seps
            .iter()
            .all(|s| matches!(s, ',' | '.' | ' ' | '\'' | '’'));
    if amountish {
        let sd = seps[k - 2];
        let mut r = Vec::new();
        // Grouping only.
        if thousands(seps[0], groups) {
            r.push(canon_number(&digits, ""));
        }
        // A decimal part after grouped (or plain) digits.
        if matches!(sd, '.' | ',') {
            let head = &groups[..k - 1];
            let ok = if k == 2 {
                true
            } else {
                let st = seps[0];
                st != sd
                    && seps[..k - 2].iter().all(|s| *s == st)
                    && (1..=3).contains(&head[0].len())
                    && head[1..].iter().all(|g| g.len() == 3)
            };
            if ok {
                r.push(canon_number(&head.concat(), &groups[k - 1]));
            }
        }
        if !r.is_empty() {
            r.dedup();
            return r;
        }
    }
    if digits.len() >= 7 {
        return vec![digits];
    }
    Vec::new()
}

fn seps_eq(seps: &[char], st: char) -> bool {
    seps.iter().all(|s| *s == st)
}

/// The context words of the number at `a..b` (see the module
/// documentation).
fn context(c: &[char], a: usize, b: usize) -> Vec<String> {
    let mut ctx = Vec::new();
    let before = |i: usize| if i == 0 { None } else { c.get(i - 1).copied() };
    let mut i = a;
    // Sign or `#` right before.
    let mut j = i;
    while j > 0 && c[j - 1] == ' ' {
        j -= 1;
    }
    if let Some(x) = before(j) {
        if x == '#' {
            ctx.push("id".to_string());
        }
        if CURRENCY_SIGNS.contains(&x) {
            ctx.push("$".to_string());
        }
    }
    let mut words = 0;
    while i > 0 && words < 3 && a - i < 48 {
        let x = c[i - 1];
        if x.is_alphabetic() {
            let e = i;
            while i > 0 && c[i - 1].is_alphabetic() {
                i -= 1;
            }
            let w: String = c[i..e].iter().collect();
            ctx.extend(context_word(&w));
            words += 1;
            continue;
        }
        if matches!(x, '!' | '?' | ';' | '\n') {
            break;
        }
        if x == '.' && c.get(i).is_some_and(|n| *n == ' ') {
            let (w, _) = {
                let mut s = i - 1;
                while s > 0 && c[s - 1].is_alphabetic() {
                    s -= 1;
                }
                (c[s..i - 1].iter().collect::<String>(), ())
            };
            if !matches!(w.as_str(), "no" | "nr" | "num") {
                break;
            }
        }
        i -= 1;
    }
    // The word after, and a sign right after.
    let k = skip(c, b, &[' ']);
    if c.get(k).is_some_and(|x| CURRENCY_SIGNS.contains(x)) {
        ctx.push("$".to_string());
    }
    let (w, _) = word_at(c, k);
    ctx.extend(context_word(&w));
    ctx.sort();
    ctx.dedup();
    ctx
}

/// Numbers, amounts and phone or account numbers of the view outside
/// dates, IBANs and e-mail addresses: long ones as atoms, short ones with
/// their context words.
pub(crate) fn numbers(v: &View, marks: &Marks, out: &mut Vec<Atom>, shorts: &mut Vec<ShortNumber>) {
    let c = &v.chars;
    let free = |i: usize| !(marks.date[i] || marks.num[i] || marks.email[i]);
    let mut i = 0;
    while i < c.len() {
        let lead = matches!(c[i], '+' | '(') && c.get(i + 1).is_some_and(|x| x.is_ascii_digit());
        let prev_ok = i == 0
            || !(c[i - 1].is_alphanumeric()
                || (matches!(c[i - 1], '.' | ',') && i >= 2 && c[i - 2].is_ascii_digit()));
        if !(free(i) && prev_ok && (c[i].is_ascii_digit() || lead)) {
            i += 1;
            continue;
        }
        let start = i;
        let mut phone_marks = lead;
        if lead {
            i += 1;
        }
        let mut groups: Vec<String> = Vec::new();
        let mut seps: Vec<char> = Vec::new();
        loop {
            let n = digits_at(c, i);
            if n == 0 || !(i..i + n).all(free) {
                break;
            }
            groups.push(c[i..i + n].iter().collect());
            i += n;
            // One separator (or `) ` / ` (`), then digits.
            let sep = c.get(i).copied();
            let mut next = i + 1;
            if matches!(sep, Some(')')) && c.get(next) == Some(&' ') {
                next += 1;
            }
            if matches!(sep, Some(' ')) && c.get(next) == Some(&'(') {
                next += 1;
            }
            let joinable = matches!(sep, Some(',' | '.' | ' ' | '-' | '\'' | '’' | '(' | ')'))
                && c.get(next).is_some_and(|x| x.is_ascii_digit())
                && free(next);
            if !joinable {
                break;
            }
            let s = sep.unwrap_or(' ');
            if matches!(s, '-' | '(' | ')') {
                phone_marks = true;
            }
            seps.push(s);
            i = next;
        }
        let end = i;
        if groups.is_empty() {
            i = start + 1;
            continue;
        }
        let mut values = readings(&groups, &seps, phone_marks);
        if values.is_empty() {
            // Separate numbers.
            values = groups.iter().map(|g| canon_number(g, "")).collect();
        }
        for key in values {
            if significant(&key) >= 5 || (key.starts_with('0') && key.len() >= 5) {
                out.push(Atom {
                    kind: Kind::Number,
                    loose: key.clone(),
                    key,
                    span: v.span(start, end),
                    covers: true,
                    role: Role::Whole,
                    shown: v.string(start, end),
                });
            } else {
                shorts.push(ShortNumber {
                    key,
                    context: context(c, start, end),
                });
            }
        }
        i = end.max(start + 1);
    }
}

#[cfg(test)]
mod tests;
