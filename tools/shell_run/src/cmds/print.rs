//! Printing: echo and printf.

use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

/// Largest field width or precision of printf (1 MiB): a larger one would
/// only exhaust the component's memory.
const MAX_WIDTH: usize = 1024 * 1024;

/// Backslash escapes of `echo -e` and printf's format, as bytes (`\NNN`
/// and `\xHH` are bytes, not characters); `\c` stops output: the flag is
/// returned.
fn escapes(s: &str, octal_needs_zero: bool) -> (Vec<u8>, bool) {
    let mut o = Out(Vec::with_capacity(s.len()));
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i >= chars.len() {
            o.push(c);
            continue;
        }
        let n = chars[i];
        i += 1;
        match n {
            'n' => o.push('\n'),
            't' => o.push('\t'),
            'r' => o.push('\r'),
            'a' => o.push('\u{7}'),
            'b' => o.push('\u{8}'),
            'f' => o.push('\u{c}'),
            'v' => o.push('\u{b}'),
            'e' => o.push('\u{1b}'),
            '\\' => o.push('\\'),
            '"' => o.push('"'),
            'c' => return (o.0, true),
            '0'..='7' => {
                let mut v = if octal_needs_zero && n != '0' {
                    o.push('\\');
                    o.push(n);
                    continue;
                } else if n == '0' && octal_needs_zero {
                    0
                } else {
                    n.to_digit(8).unwrap_or(0)
                };
                let mut k = 0;
                while k < 3 && i < chars.len() && chars[i].is_digit(8) {
                    v = v * 8 + chars[i].to_digit(8).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                o.0.push(u8::try_from(v & 0xff).unwrap_or(b'?'));
            }
            'x' => {
                let mut v = 0;
                let mut k = 0;
                while k < 2 && i < chars.len() && chars[i].is_ascii_hexdigit() {
                    v = v * 16 + chars[i].to_digit(16).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                o.0.push(u8::try_from(v).unwrap_or(b'?'));
            }
            other => {
                o.push('\\');
                o.push(other);
            }
        }
    }
    (o.0, false)
}

/// Bytes being built from characters.
struct Out(Vec<u8>);

impl Out {
    fn push(&mut self, c: char) {
        let mut b = [0u8; 4];
        self.0.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    }
}

/// `echo [-neE] [STRING]...`
pub fn echo(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let (mut newline, mut interpret) = (true, false);
    let mut k = 0;
    for a in args {
        if a.len() > 1 && a.starts_with('-') && a[1..].chars().all(|c| "neE".contains(c)) {
            for c in a[1..].chars() {
                match c {
                    'n' => newline = false,
                    'e' => interpret = true,
                    _ => interpret = false,
                }
            }
            k += 1;
        } else {
            break;
        }
    }
    let text = args[k..].join(" ");
    let (mut text, stop) = if interpret {
        escapes(&text, true)
    } else {
        (text.into_bytes(), false)
    };
    if newline && !stop {
        text.push(b'\n');
    }
    io.print(text)?;
    Ok(0)
}

/// One conversion of printf.
fn convert(spec: &str, conv: char, arg: Option<&String>, io: &Io) -> Vec<u8> {
    let a = arg.map_or("", String::as_str);
    let (flags, rest): (String, String) = {
        let f: String = spec.chars().take_while(|c| "-+ #0".contains(*c)).collect();
        (f.clone(), spec[f.len()..].to_owned())
    };
    let (width, prec) = match rest.split_once('.') {
        Some((w, p)) => (
            w.parse::<usize>().ok(),
            Some(p.parse::<usize>().unwrap_or(0)),
        ),
        None => (rest.parse::<usize>().ok(), None),
    };
    let (width, prec) = (
        width.map(|w| w.min(MAX_WIDTH)),
        prec.map(|p| p.min(MAX_WIDTH)),
    );
    let int = |a: &str| -> i64 {
        let t = a.trim();
        if let Some(c) = t.strip_prefix('\'').or_else(|| t.strip_prefix('"')) {
            return c.chars().next().map_or(0, |c| i64::from(u32::from(c)));
        }
        if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            return i64::from_str_radix(h, 16).unwrap_or(0);
        }
        t.parse::<i64>().unwrap_or_else(|_| {
            if !t.is_empty() {
                io.warn(format!("printf: {t}: invalid number"));
            }
            0
        })
    };
    let body: Vec<u8> = match conv {
        'b' => escapes(a, true).0,
        _ => convert_text(conv, a, &flags, prec, &int).into_bytes(),
    };
    let Some(w) = width else { return body };
    let len = String::from_utf8_lossy(&body).chars().count();
    if len >= w {
        return body;
    }
    let pad = w - len;
    let mut out = Vec::with_capacity(body.len() + pad);
    if flags.contains('-') {
        out.extend_from_slice(&body);
        out.resize(out.len() + pad, b' ');
    } else if flags.contains('0') && "diuxXofFeEgG".contains(conv) {
        let sign = usize::from(body.first().is_some_and(|b| *b == b'-' || *b == b'+'));
        out.extend_from_slice(&body[..sign]);
        out.resize(out.len() + pad, b'0');
        out.extend_from_slice(&body[sign..]);
    } else {
        out.resize(pad, b' ');
        out.extend_from_slice(&body);
    }
    out
}

/// The text of conversion `conv` (all but `%b`) of argument `a`.
fn convert_text(
    conv: char,
    a: &str,
    flags: &str,
    prec: Option<usize>,
    int: &dyn Fn(&str) -> i64,
) -> String {
    match conv {
        's' => match prec {
            Some(p) => a.chars().take(p).collect(),
            None => a.to_owned(),
        },
        'c' => a.chars().next().map(String::from).unwrap_or_default(),
        'd' | 'i' | 'u' => {
            let v = int(a);
            let s = v.unsigned_abs().to_string();
            let s = match prec {
                Some(p) if s.len() < p => format!("{}{s}", "0".repeat(p - s.len())),
                _ => s,
            };
            let sign = if v < 0 {
                "-"
            } else if flags.contains('+') {
                "+"
            } else if flags.contains(' ') {
                " "
            } else {
                ""
            };
            format!("{sign}{s}")
        }
        'x' => format!("{:x}", int(a)),
        'X' => format!("{:X}", int(a)),
        'o' => format!("{:o}", int(a)),
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
            let v: f64 = a.trim().parse().unwrap_or(0.0);
            let p = prec.unwrap_or(6);
            let s = match conv {
                'e' | 'E' => format!("{v:.p$e}"),
                'g' | 'G' => {
                    let s = format!("{v}");
                    s
                }
                _ => format!("{v:.p$}"),
            };
            if flags.contains('+') && v >= 0.0 {
                format!("+{s}")
            } else {
                s
            }
        }
        _ => String::new(),
    }
}

/// `printf FORMAT [ARGUMENT]...`: the format is reused while arguments remain.
pub fn printf(_sh: &mut Shell, args: &[String], io: &Io) -> Result<i32, Flow> {
    let Some(fmt) = args.first() else {
        io.warn("printf: usage: printf FORMAT [ARGUMENT]...");
        return Ok(2);
    };
    let args = &args[1..];
    let (fmt, _) = escapes(fmt, false);
    let mut next = 0usize;
    let mut out: Vec<u8> = Vec::new();
    loop {
        let mut used = false;
        let mut i = 0;
        while i < fmt.len() {
            let c = fmt[i];
            i += 1;
            if c != b'%' {
                out.push(c);
                continue;
            }
            if fmt.get(i) == Some(&b'%') {
                out.push(b'%');
                i += 1;
                continue;
            }
            let start = i;
            while i < fmt.len() && b"-+ #0123456789.".contains(&fmt[i]) {
                i += 1;
            }
            let spec = String::from_utf8_lossy(&fmt[start..i]).into_owned();
            let Some(&conv) = fmt.get(i) else {
                out.push(b'%');
                out.extend_from_slice(spec.as_bytes());
                break;
            };
            i += 1;
            let conv = char::from(conv);
            if !"sbcdiuxXofFeEgG".contains(conv) {
                io.warn(format!("printf: %{conv}: invalid conversion"));
                io.print(out)?;
                return Ok(1);
            }
            out.extend_from_slice(&convert(&spec, conv, args.get(next), io));
            next += 1;
            used = true;
        }
        if !used || next >= args.len() {
            break;
        }
    }
    io.print(out)?;
    Ok(0)
}
