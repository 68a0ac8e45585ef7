//! The decoding view of untrusted content: how a model may decode what it
//! reads (HTML character references, percent-encodings, backslash escapes),
//! in layers, each decoded character keeping the byte range of the original
//! text it came from so that neutralisation can rewrite the original.

use super::tables::ENTITIES;

/// One character of a decoding layer and the byte range of the original text
/// it came from.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    pub c: char,
    pub start: usize,
    pub end: usize,
}

/// A named character reference: the WHATWG table, exact case first, then
/// the name in lower case (a model reads `&LSAQUO;` as `&lsaquo;`).
fn named_entity(name: &str) -> Option<char> {
    let find = |n: &str| {
        ENTITIES
            .binary_search_by(|(k, _)| k.as_bytes().cmp(n.as_bytes()))
            .ok()
            .map(|i| ENTITIES[i].1)
    };
    find(name).or_else(|| find(&name.to_ascii_lowercase()))
}

/// Longest entity name read (the longest WHATWG name has 31 characters).
const MAX_ENTITY_NAME: usize = 32;

fn hex_val(c: char) -> Option<u32> {
    c.to_digit(16)
}

/// Try to decode an encoded character starting at `u[i]`. Returns the
/// decoded character and the number of units consumed.
fn decode_at(u: &[Unit], i: usize) -> Option<(char, usize)> {
    match u.get(i)?.c {
        '&' => decode_reference(u, i),
        '%' => decode_percent(u, i),
        '\\' => decode_backslash(u, i),
        _ => None,
    }
}

/// A numeric or named character reference at `u[i]` (`&`).
fn decode_reference(u: &[Unit], i: usize) -> Option<(char, usize)> {
    let at = |k: usize| u.get(k).map(|x| x.c);
    // Numeric or named character reference, `;` optional.
    let mut k = i + 1;
    if at(k) == Some('#') {
        k += 1;
        let hex = matches!(at(k), Some('x' | 'X'));
        if hex {
            k += 1;
        }
        let start = k;
        let mut v: u32 = 0;
        while let Some(d) = at(k).and_then(|c| if hex { hex_val(c) } else { c.to_digit(10) }) {
            // Any number of digits (leading zeros included), as
            // HTML decoders read them; the value saturates.
            v = v
                .saturating_mul(if hex { 16 } else { 10 })
                .saturating_add(d);
            k += 1;
        }
        if k == start {
            return None;
        }
        if at(k) == Some(';') {
            k += 1;
        }
        return char::from_u32(v).map(|c| (c, k - i));
    }
    let start = k;
    while at(k).is_some_and(|c| c.is_ascii_alphanumeric()) && k - start < MAX_ENTITY_NAME {
        k += 1;
    }
    if k == start {
        return None;
    }
    // Longest name that is known (`&lt` followed by letters is still `<`).
    let name: String = u[start..k].iter().map(|x| x.c).collect();
    for len in (2..=name.len()).rev() {
        if let Some(c) = named_entity(&name[..len]) {
            let mut end = start + len;
            if at(end) == Some(';') {
                end += 1;
            }
            return Some((c, end - i));
        }
    }
    None
}

/// One or more `%XX` at `u[i]` forming one UTF-8 character.
fn decode_percent(u: &[Unit], i: usize) -> Option<(char, usize)> {
    let at = |k: usize| u.get(k).map(|x| x.c);
    // One or more %XX forming one UTF-8 character.
    let byte_at = |k: usize| -> Option<u8> {
        if at(k)? != '%' {
            return None;
        }
        let h = hex_val(at(k + 1)?)?;
        let l = hex_val(at(k + 2)?)?;
        Some((h * 16 + l) as u8)
    };
    let first = byte_at(i)?;
    let len = match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let mut bytes = vec![first];
    for n in 1..len {
        bytes.push(byte_at(i + 3 * n)?);
    }
    let s = std::str::from_utf8(&bytes).ok()?;
    s.chars().next().map(|c| (c, 3 * len))
}

/// A backslash escape at `u[i]`.
fn decode_backslash(u: &[Unit], i: usize) -> Option<(char, usize)> {
    let at = |k: usize| u.get(k).map(|x| x.c);
    // Any number of backslashes, then `u`/`x`/`U` escapes (braced
    // `\u{...}` and `\x{...}` with any number of digits) or three
    // octal digits (`\074`).
    let mut k = i;
    while at(k) == Some('\\') {
        k += 1;
    }
    if let Some(v) = octal3(&[at(k), at(k + 1), at(k + 2)]) {
        return char::from_u32(v).map(|c| (c, k + 3 - i));
    }
    let braced = matches!(at(k), Some('u' | 'x')) && at(k + 1) == Some('{');
    let digits = match at(k)? {
        _ if braced => usize::MAX,
        'u' => 4,
        'x' => 2,
        'U' => 8,
        _ => return None,
    };
    k += if braced { 2 } else { 1 };
    let start = k;
    let mut v: u32 = 0;
    while k - start < digits {
        match at(k).and_then(hex_val) {
            Some(d) => {
                v = v.saturating_mul(16).saturating_add(d);
                k += 1;
            }
            None => break,
        }
    }
    if braced {
        if k == start || at(k) != Some('}') {
            return None;
        }
        k += 1;
    } else if k - start != digits {
        return None;
    }
    char::from_u32(v).map(|c| (c, k - i))
}

/// The value of exactly three octal digits (`074` is `<`), at most 0o377.
fn octal3(d: &[Option<char>; 3]) -> Option<u32> {
    let mut v = 0;
    for c in d {
        v = v * 8 + (*c)?.to_digit(8)?;
    }
    (v <= 0o377).then_some(v)
}

/// One decoding layer over `u`.
fn decode_layer(u: &[Unit]) -> (Vec<Unit>, bool) {
    let mut out = Vec::with_capacity(u.len());
    let mut changed = false;
    let mut i = 0;
    while i < u.len() {
        match decode_at(u, i) {
            Some((c, n)) if n > 0 => {
                out.push(Unit {
                    c,
                    start: u[i].start,
                    end: u[i + n - 1].end,
                });
                changed = true;
                i += n;
            }
            _ => {
                out.push(u[i]);
                i += 1;
            }
        }
    }
    (out, changed)
}

/// Decoding layers applied at most this many times (an encoding of an
/// encoding of an encoding...). Text still changing after that many is not
/// read at all: the caller treats it as hostile (see `converged`).
const MAX_LAYERS: usize = 32;

/// The decoded view of `text` and whether decoding reached a fixed point
/// within [`MAX_LAYERS`] layers.
pub fn decoded_units(text: &str) -> (Vec<Unit>, bool) {
    let mut u: Vec<Unit> = text
        .char_indices()
        .map(|(start, c)| Unit {
            c,
            start,
            end: start + c.len_utf8(),
        })
        .collect();
    for _ in 0..MAX_LAYERS {
        let (next, changed) = decode_layer(&u);
        u = next;
        if !changed {
            return (u, true);
        }
    }
    let converged = !decode_layer(&u).1;
    (u, converged)
}
