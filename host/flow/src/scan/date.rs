//! Dates in a view (`2024-05-13`, `2024/05/13`, `13.05.2024`,
//! `05/13/2024`, `13 May 2024`, `May 13, 2024`; an ambiguous `05/06/2024`
//! yields both readings): atoms keyed `YYYY-MM-DD`. A date without a year,
//! a time (`10:30`) and an ordinal (`13th`) are not atoms, and their digits
//! are never read as numbers: the `13` of a date cannot stand for a file
//! 13.

use super::super::text::View;
use super::number::{digits_at, num, skip};
use super::{Atom, Kind, Marks, Role};
use capsaga_core::calendar::MONTH_NAMES as MONTHS;

fn date_key(y: u32, m: u32, d: u32) -> Option<String> {
    ((1..=12).contains(&m) && (1..=31).contains(&d) && (1000..=9999).contains(&y))
        .then(|| format!("{y:04}-{m:02}-{d:02}"))
}

fn month_at(c: &[char], i: usize) -> Option<(u32, usize)> {
    let n = c[i.min(c.len())..]
        .iter()
        .take_while(|x| x.is_alphabetic())
        .count();
    if !(3..=9).contains(&n) || !matches!(c[i], 'j' | 'f' | 'm' | 'a' | 's' | 'o' | 'n' | 'd') {
        return None;
    }
    let w = &c[i..i + n];
    let is = |m: &str| w.iter().copied().eq(m.chars());
    let m = MONTHS.iter().position(|m| {
        is(m)
            || (n == 3 && w.iter().copied().eq(m.chars().take(3)))
            || (n == 4 && *m == "september" && is("sept"))
    })?;
    Some((m as u32 + 1, n))
}

/// A day number with an optional ordinal suffix at `i`: (day, end).
fn day_at(c: &[char], i: usize) -> Option<(u32, usize)> {
    let n = digits_at(c, i);
    if !(1..=2).contains(&n) {
        return None;
    }
    let mut e = i + n;
    let suffix = [c.get(e).copied(), c.get(e + 1).copied()];
    let after = c.get(e + 2).is_some_and(|x| x.is_alphabetic());
    if !after
        && matches!(
            suffix,
            [Some('s'), Some('t')]
                | [Some('n'), Some('d')]
                | [Some('r'), Some('d')]
                | [Some('t'), Some('h')]
        )
    {
        e += 2;
    }
    Some((num(c, i, n), e))
}

fn emit_date(
    v: &View,
    a: usize,
    b: usize,
    keys: &[String],
    marks: &mut Marks,
    out: &mut Vec<Atom>,
) {
    for m in &mut marks.date[a..b] {
        *m = true;
    }
    for k in keys {
        out.push(Atom {
            kind: Kind::Date,
            key: k.clone(),
            loose: k.clone(),
            span: v.span(a, b),
            covers: true,
            role: Role::Whole,
            shown: v.string(a, b),
        });
    }
}

/// A numeric date at `c[i]` (its first number `n1` digits long):
/// `2024-05-13`, `13/05/2024` (also read `05/13/2024` when both could be
/// the month, but not with dots). Where it ends, and its date keys.
fn numeric_date(c: &[char], i: usize, n1: usize) -> Option<(usize, Vec<String>)> {
    let s1 = c.get(i + n1).copied()?;
    if !matches!(s1, '-' | '/' | '.') {
        return None;
    }
    let j = i + n1 + 1;
    let n2 = digits_at(c, j);
    if n2 == 0 || c.get(j + n2) != Some(&s1) {
        return None;
    }
    let k = j + n2 + 1;
    let n3 = digits_at(c, k);
    let end = k + n3;
    if n3 == 0 || c.get(end).is_some_and(|x| x.is_ascii_digit()) {
        return None;
    }
    let (a, b, d) = (num(c, i, n1), num(c, j, n2), num(c, k, n3));
    let mut keys = Vec::new();
    if n1 == 4 && n2 <= 2 && n3 <= 2 {
        keys.extend(date_key(a, b, d));
    } else if n1 <= 2 && n2 <= 2 && n3 == 4 {
        keys.extend(date_key(d, b, a));
        if s1 != '.' && a != b {
            keys.extend(date_key(d, a, b));
        }
    }
    (!keys.is_empty()).then_some((end, keys))
}

/// Dates (atoms), and times, ordinals and dates without a year (marked
/// only, so their digits are not read as numbers).
pub(crate) fn dates(v: &View, marks: &mut Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let mut i = 0;
    while i < c.len() {
        let boundary = i == 0 || !c[i - 1].is_alphanumeric();
        if !boundary {
            i += 1;
            continue;
        }
        let n1 = digits_at(c, i);
        if n1 > 0 {
            // Numeric dates.
            if let Some((end, keys)) = numeric_date(c, i, n1) {
                emit_date(v, i, end, &keys, marks, out);
                i = end;
                continue;
            }
            // Times `10:30`, `10:30:00`.
            if n1 <= 2 && c.get(i + n1) == Some(&':') && digits_at(c, i + n1 + 1) == 2 {
                let mut end = i + n1 + 3;
                if c.get(end) == Some(&':') && digits_at(c, end + 1) == 2 {
                    end += 3;
                }
                for m in &mut marks.date[i..end] {
                    *m = true;
                }
                i = end;
                continue;
            }
            // `13 May 2024`, `13th of May`, `13th`.
            if let Some((day, e)) = day_at(c, i) {
                let mut k = skip(c, e, &[' ']);
                if c.get(k) == Some(&'o')
                    && c.get(k + 1) == Some(&'f')
                    && !c.get(k + 2).is_some_and(|x| x.is_alphabetic())
                {
                    k = skip(c, k + 2, &[' ']);
                }
                if let Some((month, n)) = month_at(c, k) {
                    let y = skip(c, k + n, &[' ', ',']);
                    let end = if digits_at(c, y) == 4 { y + 4 } else { k + n };
                    let keys: Vec<String> = if end == y + 4 {
                        date_key(num(c, y, 4), month, day).into_iter().collect()
                    } else {
                        Vec::new()
                    };
                    emit_date(v, i, end, &keys, marks, out);
                    i = end;
                    continue;
                }
                if e > i + digits_at(c, i) {
                    for m in &mut marks.date[i..e] {
                        *m = true;
                    }
                    i = e;
                    continue;
                }
            }
        } else if let Some((month, n)) = month_at(c, i) {
            // `May 13, 2024`, `May 13`.
            let k = skip(c, i + n, &[' ', '.']);
            if let Some((day, e)) = day_at(c, k).filter(|_| k > i + n) {
                let y = skip(c, e, &[' ', ',']);
                let (end, keys) = if digits_at(c, y) == 4 && y > e {
                    (
                        y + 4,
                        date_key(num(c, y, 4), month, day).into_iter().collect(),
                    )
                } else {
                    (e, Vec::new())
                };
                emit_date(v, i, end, &keys, marks, out);
                i = end;
                continue;
            }
            i += n;
            continue;
        }
        i += 1;
    }
}
