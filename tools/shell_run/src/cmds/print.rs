//! Printing: echo and printf.

use crate::shell::io::Io;
use crate::shell::{Flow, Shell};

/// Backslash escapes of `echo -e` and printf's format (`\c` stops output:
/// the flag is returned).
fn escapes(s: &str, octal_needs_zero: bool) -> (String, bool) {
    let mut o = String::with_capacity(s.len());
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
            'c' => return (o, true),
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
                o.push(char::from_u32(v & 0xff).unwrap_or('?'));
            }
            'x' => {
                let mut v = 0;
                let mut k = 0;
                while k < 2 && i < chars.len() && chars[i].is_ascii_hexdigit() {
                    v = v * 16 + chars[i].to_digit(16).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                o.push(char::from_u32(v).unwrap_or('?'));
            }
            other => {
                o.push('\\');
                o.push(other);
            }
        }
    }
    (o, false)
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
        (text, false)
    };
    if newline && !stop {
        text.push('\n');
    }
    io.print(text)?;
    Ok(0)
}

/// One conversion of printf.
fn convert(spec: &str, conv: char, arg: Option<&String>, io: &Io) -> String {
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
    let body = match conv {
        's' => match prec {
            Some(p) => a.chars().take(p).collect(),
            None => a.to_owned(),
        },
        'b' => escapes(a, true).0,
        'c' => a.chars().next().map(String::from).unwrap_or_default(),
        'd' | 'i' | 'u' => {
            let v = int(a);
            let s = v.abs().to_string();
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
    };
    let Some(w) = width else { return body };
    let len = body.chars().count();
    if len >= w {
        return body;
    }
    let pad = w - len;
    if flags.contains('-') {
        format!("{body}{}", " ".repeat(pad))
    } else if flags.contains('0') && "diuxXofFeEgG".contains(conv) {
        let (sign, digits) = match body.strip_prefix(['-', '+']) {
            Some(d) => (&body[..1], d),
            None => ("", body.as_str()),
        };
        format!("{sign}{}{digits}", "0".repeat(pad))
    } else {
        format!("{}{body}", " ".repeat(pad))
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
    let chars: Vec<char> = fmt.chars().collect();
    let mut next = 0usize;
    let mut out = String::new();
    loop {
        let mut used = false;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            if c != '%' {
                out.push(c);
                continue;
            }
            if chars.get(i) == Some(&'%') {
                out.push('%');
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && "-+ #0123456789.".contains(chars[i]) {
                i += 1;
            }
            let spec: String = chars[start..i].iter().collect();
            let Some(&conv) = chars.get(i) else {
                out.push('%');
                out.push_str(&spec);
                break;
            };
            i += 1;
            if !"sbcdiuxXofFeEgG".contains(conv) {
                io.warn(format!("printf: %{conv}: invalid conversion"));
                io.print(out)?;
                return Ok(1);
            }
            out.push_str(&convert(&spec, conv, args.get(next), io));
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
