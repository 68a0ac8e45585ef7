//! The decoding view of untrusted content: how a model may decode what it
//! reads (HTML character references, percent-encodings, backslash escapes),
//! in layers, each decoded character keeping the byte range of the original
//! text it came from so that neutralisation can rewrite the original.

/// One character of a decoding layer and the byte range of the original text
/// it came from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit {
    pub(super) c: char,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// Named character references a model is likely to decode.
fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "sol" => '/',
        "bsol" => '\\',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{A0}',
        "shy" => '\u{AD}',
        "zwj" => '\u{200D}',
        "zwnj" => '\u{200C}',
        "lrm" => '\u{200E}',
        "rlm" => '\u{200F}',
        "lsaquo" => '‹',
        "lang" | "langle" => '⟨',
        "percnt" => '%',
        "num" => '#',
        "colon" => ':',
        "equals" => '=',
        "excl" => '!',
        _ => return None,
    })
}

fn hex_val(c: char) -> Option<u32> {
    c.to_digit(16)
}

/// Try to decode an encoded character starting at `u[i]`. Returns the
/// decoded character and the number of units consumed.
fn decode_at(u: &[Unit], i: usize) -> Option<(char, usize)> {
    let at = |k: usize| u.get(k).map(|x| x.c);
    match at(i)? {
        '&' => {
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
                while let Some(d) =
                    at(k).and_then(|c| if hex { hex_val(c) } else { c.to_digit(10) })
                {
                    v = v
                        .saturating_mul(if hex { 16 } else { 10 })
                        .saturating_add(d);
                    k += 1;
                    if k - start > 8 {
                        return None;
                    }
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
            while at(k).is_some_and(|c| c.is_ascii_alphabetic()) && k - start < 8 {
                k += 1;
            }
            if k == start {
                return None;
            }
            // Longest name that is known (`&lt` followed by letters is still `<`).
            let name: String = u[start..k]
                .iter()
                .map(|x| x.c.to_ascii_lowercase())
                .collect();
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
        '%' => {
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
        '\\' => {
            // Any number of backslashes, then u/x/U escapes.
            let mut k = i;
            while at(k) == Some('\\') {
                k += 1;
            }
            let (digits, braced) = match at(k)? {
                'u' if at(k + 1) == Some('{') => (6, true),
                'u' => (4, false),
                'x' => (2, false),
                'U' => (8, false),
                _ => return None,
            };
            k += if braced { 2 } else { 1 };
            let start = k;
            let mut v: u32 = 0;
            while k - start < digits {
                match at(k).and_then(hex_val) {
                    Some(d) => {
                        v = v * 16 + d;
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
        _ => None,
    }
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
/// encoding of an encoding...).
const MAX_LAYERS: usize = 4;

pub(super) fn decoded_units(text: &str) -> Vec<Unit> {
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
            break;
        }
    }
    u
}
