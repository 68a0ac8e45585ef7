//! Rule 7: no function over `MAX_FN_LINES` lines without a note saying why.

use super::*;
use std::collections::BTreeSet;

/// The longest a function may be, lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 100;

/// What a comment just above a longer function starts with, followed by
/// why (a data table, one exhaustive match over a closed set).
const LONG_NOTE: &str = "// Over 100 lines:";

/// Functions over [`MAX_FN_LINES`] left to shorten, by crate, file and
/// name: in files other branches rewrite this session (issue 46), left to
/// them so that their merges go through: the store (one store with two
/// dialects), the information-flow decision (sinks) and the memory's
/// ranking. Never to join; one shortened must leave this list.
const KNOWN_LONG: &[(&str, &str, &str)] = &[
    (
        "store-suite",
        "suite/steps.rs",
        "a_stale_fencing_token_is_refused_by_the_database",
    ),
    (
        "store",
        "sqlite/tests.rs",
        "version_9_file_is_rebuilt_for_fewer_pages",
    ),
    ("flow", "decide.rs", "joined_findings"),
];

/// `text` with its comments and the insides of its string and character
/// literals blanked (newlines kept), so that braces in them do not count.
fn blank_non_code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let rest = &c[i..];
        let end = if rest.starts_with(&['/', '/']) {
            rest.iter().position(|&ch| ch == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if (rest[0] == 'r' || rest.starts_with(&['b', 'r']))
            && (i == 0 || !ident(c[i - 1]))
            && let Some(quote) = rest
                .iter()
                .skip(if rest[0] == 'b' { 2 } else { 1 })
                .position(|&ch| ch != '#')
                .map(|n| n + if rest[0] == 'b' { 2 } else { 1 })
                .filter(|&q| rest[q] == '"')
        {
            let hashes = quote - if rest[0] == 'b' { 2 } else { 1 };
            let mut j = quote + 1;
            while j < rest.len()
                && !(rest[j] == '"'
                    && rest[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes)
            {
                j += 1;
            }
            (j + 1 + hashes).min(rest.len())
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest[0] == '\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime.
            let close = if rest.get(1) == Some(&'\\') {
                rest.iter()
                    .skip(2)
                    .position(|&ch| ch == '\'')
                    .map(|n| n + 2)
            } else {
                Some(2).filter(|_| rest.get(2) == Some(&'\''))
            };
            close.map_or(0, |n| n + 1)
        } else {
            0
        };
        if end == 0 {
            out.push(c[i]);
            i += 1;
        } else {
            blank(&mut out, &rest[..end]);
            i += end;
        }
    }
    out
}

/// The functions of `text` over [`MAX_FN_LINES`] lines without the note
/// that says why: `(name, first line, lines)`.
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = blank_non_code(text);
    let lines: Vec<&str> = text.lines().collect();
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("fn ").map(|i| at + i) {
        at = i + 3;
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            continue;
        }
        let name: String = code[at..]
            .trim_start()
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        // The body's `{`, or the `;` of a declaration, outside the
        // signature's parentheses and brackets (`[u8; 4]`).
        let mut nest = 0usize;
        let Some(open) = bytes.iter().enumerate().skip(at).find_map(|(j, b)| {
            match b {
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest = nest.saturating_sub(1),
                b'{' | b';' if nest == 0 => return Some(j),
                _ => {}
            }
            None
        }) else {
            break;
        };
        if name.is_empty() || bytes[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let mut close = open;
        for (j, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = code[..i].matches('\n').count() + 1;
        let last = code[..close].matches('\n').count() + 1;
        let len = last - first + 1;
        // The comments and attributes just above the function: its note,
        // or a `clippy::too_many_lines` allowance with its reason.
        let above: Vec<&str> = lines[..first - 1]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| !l.is_empty() && !l.ends_with(['}', ';', '{']))
            .collect();
        let noted = above.iter().any(|l| l.starts_with(LONG_NOTE))
            || (above.iter().any(|l| l.contains("clippy::too_many_lines"))
                && above.iter().any(|l| l.contains("reason")));
        if len > MAX_FN_LINES && !noted {
            out.push((name, first, len));
        }
    }
    out
}

#[test]
fn no_function_is_over_100_lines() {
    let mut bad = Vec::new();
    let mut known_seen = BTreeSet::new();
    for (krate, dir) in all_crates() {
        for (file, text) in sources(&dir) {
            for (name, line, len) in long_functions(&text) {
                if KNOWN_LONG.contains(&(krate, file.as_str(), name.as_str())) {
                    known_seen.insert((krate, file.clone(), name));
                } else {
                    bad.push(format!("{krate}/{file}:{line}: fn {name}: {len} lines"));
                }
            }
        }
    }
    for (k, f, n) in KNOWN_LONG {
        if !known_seen.contains(&(*k, f.to_string(), n.to_string())) {
            bad.push(format!(
                "{k}/{f}: fn {n} is no longer over {MAX_FN_LINES} lines: remove it from KNOWN_LONG"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "functions over {MAX_FN_LINES} lines (extract steps, or say why in a `{LONG_NOTE}` comment above):\n{}",
        bad.join("\n")
    );
    // A planted long function is found; braces in strings, characters and
    // comments do not end it; one with the note, or of 100 lines, is not.
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let planted = format!(
        "fn tricky() {{\n    let s = \"}}\";\n    let r = r#\"}}\"#;\n    let c = '}}';\n    // }}\n{}}}\nfn after() {{}}\n",
        body(97)
    );
    assert_eq!(
        long_functions(&planted),
        vec![("tricky".to_string(), 1, 103)]
    );
    let noted = format!("{LONG_NOTE} a table.\n#[rustfmt::skip]\n{planted}");
    assert!(long_functions(&noted).is_empty());
    let allowed =
        format!("#[allow(\n    clippy::too_many_lines,\n    reason = \"a table\"\n)]\n{planted}");
    assert!(long_functions(&allowed).is_empty());
    let unexplained = format!("#[allow(clippy::too_many_lines)]\n{planted}");
    assert_eq!(long_functions(&unexplained).len(), 1);
    let above_another = format!("{LONG_NOTE} a table.\nfn other() {{}}\n{planted}");
    assert_eq!(long_functions(&above_another).len(), 1);
    let hundred = format!("pub async fn f<'a>(x: &'a str) {{\n{}}}\n", body(98));
    assert!(long_functions(&hundred).is_empty());
    let hundred_one = format!(
        "impl X {{\n    fn g(&self, b: [u8; 4]) {{\n{}    }}\n}}\n",
        body(99)
    );
    assert_eq!(
        long_functions(&hundred_one),
        vec![("g".to_string(), 2, 101)]
    );
}
