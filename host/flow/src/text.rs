//! Views of a text as the matcher reads it, each character keeping the byte
//! range of the original text it came from.
//!
//! - the **raw view**: the text itself, each character folded the
//!   meaning-preserving way ([`exact_char`]): ASCII lower case, NFKC and
//!   lower case for the rest, invisible characters dropped;
//! - the **decoded view**: the text after the decoding layers of
//!   [`capsaga_untrusted`] (HTML character references, percent-encodings,
//!   backslash escapes, in layers), folded the same way;
//! - for untrusted sources only, **derived texts** with no spans: the
//!   base64 runs of the text decoded ([`base64_texts`]), and the decoded view
//!   with spelled-out separators rewritten ([`deobfuscated`]:
//!   `alice [at] evil [dot] example`, `hxxps://`, `evil[.]example`).
//!
//! A key built from a view is *exact*: two spellings give one key only when
//! they name the same thing for the systems that use them (case, NFKC
//! compatibility forms, invisible characters). The *loose* form
//! ([`loose`]) adds the confusable skeleton of [`capsaga_untrusted`] and a few
//! ASCII lookalikes (`0`/`o`, `1`/`l`/`i`, `rn`/`m`, `vv`/`w`): it names
//! what a model may read as the same text, and is used only to attribute a
//! value to untrusted data or to flag a lookalike of a trusted value, never
//! to trust one.

use base64::Engine;
use capsaga_untrusted::decode::decoded_units;
use capsaga_untrusted::{fold, is_invisible};
use unicode_normalization::UnicodeNormalization;

/// The longest text a source or a value is read to, bytes (1 MiB). Past it
/// nothing is indexed: a value found only there is `nowhere`, which a sink
/// that needs trusted values refuses like untrusted data.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The zero of every run of ten decimal digits (general category Nd) of
/// Unicode 14.0 outside ASCII (Arabic-Indic, Devanagari, Thai, fullwidth,
/// mathematical, ...), sorted: `zero + k` is the digit `k`. Generated with
/// Python's `unicodedata` (UCD 14.0.0, as `untrusted::tables`).
const DIGIT_ZEROS: [u32; 65] = [
    0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6,
    0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50,
    0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The ASCII digit a decimal digit of another script stands for.
fn digit_of(c: char) -> Option<char> {
    let cp = u32::from(c);
    let i = DIGIT_ZEROS.partition_point(|z| *z <= cp);
    let zero = DIGIT_ZEROS.get(i.checked_sub(1)?)?;
    (cp - zero < 10).then(|| char::from(b'0' + (cp - zero) as u8))
}

/// Push the meaning-preserving fold of `c`: ASCII lower case; a decimal
/// digit of any script as its ASCII digit (`٥` is 5); otherwise NFKC then
/// lower case, the ideographic full stop as `.` (IDNA reads `evil。example`
/// as `evil.example`); invisible characters (format characters, soft
/// hyphens, variation selectors, ...) read as nothing.
pub(crate) fn exact_char(c: char, mut push: impl FnMut(char)) {
    if c.is_ascii() {
        push(c.to_ascii_lowercase());
        return;
    }
    if is_invisible(c) {
        return;
    }
    if let Some(d) = digit_of(c) {
        push(d);
        return;
    }
    for n in std::iter::once(c).nfkc() {
        if n == '\u{3002}' {
            push('.');
            continue;
        }
        for l in n.to_lowercase() {
            push(l);
        }
    }
}

/// The exact fold of a whole string (see [`exact_char`]).
pub(crate) fn exact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        exact_char(c, |x| out.push(x));
    }
    out
}

/// The loose form of an exact key: each character folded as
/// [`capsaga_untrusted`] folds it for a model (confusable skeleton, marks
/// dropped), then ASCII lookalikes mapped (`0`→`o`, `1`/`i`/`|`→`l`,
/// `rn`→`m`, `vv`→`w`) when `lookalikes` is set (names, not numbers).
pub(crate) fn loose(s: &str, lookalikes: bool) -> String {
    let mut out = String::with_capacity(s.len());
    loose_each(s.chars(), lookalikes, |c| out.push(c));
    out
}

/// [`loose`], one character at a time, without building the string (the
/// words of a page are hashed this way).
pub(crate) fn loose_each(
    chars: impl Iterator<Item = char>,
    lookalikes: bool,
    mut f: impl FnMut(char),
) {
    let mut pending: Option<char> = None;
    let mut step = |c: char, f: &mut dyn FnMut(char)| {
        if !lookalikes {
            f(c);
            return;
        }
        let c = match c {
            '0' => 'o',
            '1' | 'i' | '|' => 'l',
            c => c,
        };
        match (pending.take(), c) {
            (Some('r'), 'n') => f('m'),
            (Some('v'), 'v') => f('w'),
            (p, c) => {
                if let Some(p) = p {
                    f(p);
                }
                if matches!(c, 'r' | 'v') {
                    pending = Some(c);
                } else {
                    f(c);
                }
            }
        }
    };
    for c in chars {
        if c.is_ascii() {
            step(c.to_ascii_lowercase(), &mut f);
        } else {
            for x in fold(c).chars() {
                step(x, &mut f);
            }
        }
    }
    if let Some(p) = pending {
        f(p);
    }
}

/// A view: folded characters and, for each, the byte range of the original
/// text it came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    /// The folded characters.
    pub(crate) chars: Vec<char>,
    /// `(start, end)` byte offsets in the original text, one per character.
    pub(crate) spans: Vec<(u32, u32)>,
}

impl View {
    fn push_folded(&mut self, c: char, start: usize, end: usize) {
        let span = (start as u32, end as u32);
        exact_char(c, |x| {
            self.chars.push(x);
            self.spans.push(span);
        });
    }

    /// The raw view of `text` (at most [`MAX_TEXT_BYTES`] of it).
    pub(crate) fn raw(text: &str) -> View {
        let text = clip(text);
        let mut v = View {
            chars: Vec::with_capacity(text.len()),
            spans: Vec::with_capacity(text.len()),
        };
        for (i, c) in text.char_indices() {
            v.push_folded(c, i, i + c.len_utf8());
        }
        v
    }

    /// The decoded view of `text`, or `None` when decoding changes nothing
    /// (no character reference, percent-encoding or escape in it).
    pub(crate) fn decoded(text: &str) -> Option<View> {
        let text = clip(text);
        if !may_decode(text) {
            return None;
        }
        let (units, _converged) = decoded_units(text);
        if units.len() == text.chars().count() {
            return None;
        }
        let mut v = View::default();
        for u in units {
            v.push_folded(u.c, u.start, u.end);
        }
        Some(v)
    }

    /// The skeleton view of `text`: letters of the scripts that imitate
    /// Latin (Greek, Cyrillic, Armenian, Cherokee, letterlike and enclosed
    /// symbols, mathematical letters, ...) folded to what a model reads
    /// (`untrusted`'s confusable fold), the rest as in the raw view; `None`
    /// when that changes nothing. For untrusted sources only: a page's
    /// `DЕ89...` (Cyrillic `Е`) is the IBAN a model will copy as `DE89...`.
    pub(crate) fn skeleton(text: &str) -> Option<View> {
        let text = clip(text);
        if text.is_ascii() {
            return None;
        }
        let imitates = |c: char| {
            matches!(u32::from(c),
                0x80..=0x58F | 0x13A0..=0x13FF | 0x1D00..=0x1DBF | 0x1E00..=0x1FFF
                | 0x2000..=0x2BFF | 0xA640..=0xA69F | 0xFF00..=0xFFEF
                | 0x1D400..=0x1D7FF | 0x1F100..=0x1F1FF)
        };
        let mut cache: std::collections::HashMap<char, String> = std::collections::HashMap::new();
        let mut v = View::default();
        let mut changed = false;
        for (i, c) in text.char_indices() {
            let span = (i as u32, (i + c.len_utf8()) as u32);
            if c.is_ascii() || !imitates(c) || digit_of(c).is_some() {
                v.push_folded(c, i, i + c.len_utf8());
                continue;
            }
            let f = cache.entry(c).or_insert_with(|| fold(c));
            let mut plain = String::new();
            exact_char(c, |x| plain.push(x));
            changed |= *f != plain;
            for x in f.chars() {
                v.chars.push(x);
                v.spans.push(span);
            }
        }
        changed.then_some(v)
    }

    /// The original byte range of the characters `a..b` of the view.
    pub(crate) fn span(&self, a: usize, b: usize) -> (u32, u32) {
        match (
            self.spans.get(a),
            b.checked_sub(1).and_then(|e| self.spans.get(e)),
        ) {
            (Some(s), Some(e)) => (s.0, e.1),
            _ => (0, 0),
        }
    }

    /// The characters `a..b` as a string.
    pub(crate) fn string(&self, a: usize, b: usize) -> String {
        self.chars[a.min(b)..b.min(self.chars.len())]
            .iter()
            .collect()
    }
}

/// Whether `text` holds something the decoder of [`capsaga_untrusted`]
/// may decode: `&` before a letter or `#`, `%` before two hex digits, `\`
/// before `u`, `x`, `U`, an octal digit or another `\`.
fn may_decode(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        let next = b.get(i + 1).copied().unwrap_or(0);
        match c {
            b'&' => next.is_ascii_alphabetic() || next == b'#',
            b'%' => next.is_ascii_hexdigit() && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit),
            b'\\' => matches!(next, b'u' | b'x' | b'U' | b'0'..=b'7' | b'\\'),
            _ => false,
        }
    })
}

/// `text` cut to at most [`MAX_TEXT_BYTES`], on a character boundary.
pub(crate) fn clip(text: &str) -> &str {
    if text.len() <= MAX_TEXT_BYTES {
        return text;
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Shortest run of base64 characters decoded (16 characters: 12 bytes).
const MIN_BASE64: usize = 16;
/// Most base64 runs decoded per text.
const MAX_BASE64_RUNS: usize = 256;

/// A base64 character (padding `=` ends a run: `to=ZXZp...` is a query
/// parameter's name, then base64).
fn is_b64(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '-' | '_')
}

/// The texts hidden in base64 runs of `text` (standard or URL-safe
/// alphabet, padded or not), each with the byte range of its run: each run
/// of at least 16 base64 characters, with a digit or a capital, that
/// decodes to UTF-8 text of printable characters. A page that hands the
/// model an address in base64 for it to decode; an argument that carries
/// one to a server that will.
pub(crate) fn base64_texts(text: &str) -> Vec<((u32, u32), String)> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let text = clip(text);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_BASE64_RUNS {
        if !is_b64(bytes[i] as char) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_b64(bytes[i] as char) {
            i += 1;
        }
        if i - start < MIN_BASE64 {
            continue;
        }
        // Base64 characters are ASCII: the run is a `str` slice.
        let run = &text[start..i];
        // A run of lower-case letters alone is a word far more often.
        if !run
            .bytes()
            .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        {
            continue;
        }
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let Ok(decoded) = engine.decode(run) else {
                continue;
            };
            let Ok(s) = String::from_utf8(decoded) else {
                continue;
            };
            if !s.trim().is_empty() && s.chars().all(|c| !c.is_control() || c.is_whitespace()) {
                out.push(((start as u32, i as u32), s));
                break;
            }
        }
    }
    out
}

/// Spelled-out separators and what a model reads for them.
const MARKED: [(&str, &str); 9] = [
    ("[at]", "@"),
    ("(at)", "@"),
    ("{at}", "@"),
    ("[dot]", "."),
    ("(dot)", "."),
    ("{dot}", "."),
    ("[.]", "."),
    ("(.)", "."),
    ("hxxp", "http"),
];
const BARE: [(&str, &str); 2] = [(" at ", "@"), (" dot ", ".")];
/// Bytes kept on each side of a rewritten separator.
const WINDOW: usize = 160;
/// Bytes kept on each side of a bare ` at ` or ` dot `.
const BARE_WINDOW: usize = 64;

/// The exact fold of `text` around its spelled-out separators, rewritten
/// the way a model reads them: `[at]`, `(at)`, `{at}` → `@`; `[dot]`,
/// `(dot)`, `[.]`, `(.)` → `.`; `hxxp` → `http`; and, when `bare`, ` at ` →
/// `@` and ` dot ` → `.`. Each piece is the rewritten text within 160
/// bytes of a separator (64 of a bare one) (pieces that touch are merged); `None` when
/// there is none. Untrusted sources are read with `bare` (it can only add
/// untrusted keys); arguments without it (`look at corp.example` is no
/// address).
pub(crate) fn deobfuscated(text: &str, bare: bool) -> Option<String> {
    let text = clip(text);
    let lower = |pat: &str| {
        text.as_bytes()
            .windows(pat.len())
            .any(|w| w.eq_ignore_ascii_case(pat.as_bytes()))
    };
    let marked = text.contains(['[', '(', '{', '［', '（', '｛']) || lower("hxxp");
    let spaced = || {
        text.as_bytes()
            .windows(5)
            .any(|w| w[0] == b' ' && w[1] != b' ' && w[2] == b' ' && w[3] != b' ' && w[4] == b' ')
    };
    if !marked && !(bare && (lower(" at ") || lower(" dot ") || spaced())) {
        return None;
    }
    let folded = exact(text);
    let pats: Vec<&(&str, &str)> = MARKED
        .iter()
        .chain(if bare { &BARE[..] } else { &[] })
        .collect();
    // Byte ranges of the folded text around each separator, merged.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (k, (from, _)) in pats.iter().enumerate() {
        // A bare ` at ` or ` dot ` only joins the words next to it.
        let w = if k < MARKED.len() {
            WINDOW
        } else {
            BARE_WINDOW
        };
        for (i, _) in folded.match_indices(*from) {
            let mut a = i.saturating_sub(w);
            while !folded.is_char_boundary(a) {
                a -= 1;
            }
            let mut b = (i + from.len() + w).min(folded.len());
            while !folded.is_char_boundary(b) {
                b += 1;
            }
            ranges.push((a, b));
        }
    }
    if bare {
        spaced_runs(&folded, &mut ranges);
    }
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut out = String::new();
    for (a, b) in merged {
        let mut piece = if bare {
            join_spaced(&folded[a..b])
        } else {
            folded[a..b].to_string()
        };
        for (from, to) in &pats {
            if piece.contains(*from) {
                piece = piece.replace(*from, to);
            }
        }
        if piece.contains(" @ ") || piece.contains(" . ") {
            piece = piece.replace(" @ ", "@").replace(" . ", ".");
        }
        out.push_str(&piece);
        out.push('\n');
    }
    Some(out)
}

/// Shortest run of single characters between single spaces that is read
/// as one word (`e v i l . e x a m p l e`).
const MIN_SPACED: usize = 5;

/// Byte ranges of `s` holding runs of single characters separated by
/// single spaces (at least [`MIN_SPACED`]).
fn spaced_runs(s: &str, out: &mut Vec<(usize, usize)>) {
    let mut run_start = None;
    let mut count = 0;
    let mut last_end = 0;
    let cs: Vec<(usize, char)> = s.char_indices().collect();
    let mut k = 0;
    while k < cs.len() {
        let (i, c) = cs[k];
        let single = !c.is_whitespace()
            && (k == 0 || cs[k - 1].1 == ' ')
            && cs.get(k + 1).is_none_or(|n| !n.1.is_alphanumeric());
        if single {
            if run_start.is_none() {
                run_start = Some(i);
                count = 0;
            }
            count += 1;
            last_end = i + c.len_utf8();
            k += 2;
            continue;
        }
        if let Some(a) = run_start.take()
            && count >= MIN_SPACED
        {
            out.push((a, last_end));
        }
        k += 1;
    }
    if let Some(a) = run_start
        && count >= MIN_SPACED
    {
        out.push((a, last_end));
    }
}

/// `piece` with its runs of spaced single characters joined.
fn join_spaced(piece: &str) -> String {
    let mut ranges = Vec::new();
    spaced_runs(piece, &mut ranges);
    if ranges.is_empty() {
        return piece.to_string();
    }
    let mut out = String::with_capacity(piece.len());
    let mut pos = 0;
    for (a, b) in ranges {
        out.push_str(&piece[pos..a]);
        out.extend(piece[a..b].chars().filter(|c| *c != ' '));
        pos = b;
    }
    out.push_str(&piece[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_fold_is_meaning_preserving() {
        assert_eq!(exact("Alice@Corp.EXAMPLE"), "alice@corp.example");
        // Fullwidth letters are the same letters (NFKC); invisible ones vanish.
        assert_eq!(exact("ｅｖｉｌ.example"), "evil.example");
        assert_eq!(exact("ev\u{200B}il.exam\u{AD}ple"), "evil.example");
        assert_eq!(
            exact("evil\u{3002}example\u{FF61}org\u{FF0E}"),
            "evil.example.org."
        );
        // A Cyrillic `а` stays what it is: another letter, another name.
        assert_ne!(exact("evil.ex\u{0430}mple"), "evil.example");
        assert_eq!(loose(&exact("evil.ex\u{0430}mple"), true), "evll.example");
        assert_eq!(loose("paypa1.com", true), loose("paypal.com", true));
        assert_eq!(loose("rnicrosoft.com", true), loose("microsoft.com", true));
    }

    #[test]
    fn views_keep_original_spans() {
        let v = View::decoded("to: alice%40corp.example").unwrap();
        let s: String = v.chars.iter().collect();
        assert_eq!(s, "to: alice@corp.example");
        let at = s.find('@').unwrap();
        assert_eq!(v.spans[at], (9, 12));
        assert!(View::decoded("plain text").is_none());
    }

    #[test]
    fn base64_and_spelled_out_separators() {
        let t = base64_texts("pay here: YXR0YWNrZXJAZXZpbC5leGFtcGxl thanks");
        assert_eq!(t, vec![((10, 38), "attacker@evil.example".to_string())]);
        assert!(base64_texts("internationalization incomprehensibilities").is_empty());
        let t = base64_texts("https://a.example/?to=ZXZpbC5leGFtcGxl&x=1");
        assert_eq!(t, vec![((22, 38), "evil.example".to_string())]);
        assert_eq!(
            deobfuscated("write to Alice [at] evil [dot] example", false).as_deref(),
            Some("write to alice@evil.example\n")
        );
        assert_eq!(
            deobfuscated("alice at evil dot example", true).as_deref(),
            Some("alice@evil.example\n")
        );
        assert_eq!(
            deobfuscated("hxxps://evil[.]example/x", false).as_deref(),
            Some("https://evil.example/x\n")
        );
        // Far apart: two pieces, only what is near a separator.
        let long = format!("a [at] b.example {} c [dot] d", "x ".repeat(400));
        let d = deobfuscated(&long, false).unwrap();
        assert!(
            d.contains("a@b.example") && d.contains("c.d") && d.len() < 700,
            "{d}"
        );
        assert!(deobfuscated("nothing here", true).is_none());
        let d = deobfuscated(
            "send to a t t a c k e r @ e v i l . e x a m p l e now",
            true,
        )
        .unwrap();
        assert!(d.contains("attacker@evil.example"), "{d}");
        assert!(deobfuscated("a b c d", true).is_none());
        assert!(deobfuscated("look at corp.example", false).is_none());
    }
}
