//! URLs, e-mail addresses and host names in a view.
//!
//! - a **URL** starts at a token boundary with `http://`, `https://`,
//!   `ftp://`, `ftps://`, `sftp://`, `ws://`, `wss://` or `www.`, and runs to
//!   white space, a quote or a bracket; trailing punctuation is not part of
//!   it. It is parsed by the WHATWG parser (the `url` crate, as the net guard
//!   does), so `https://corp.example@evil.example/` has the host
//!   `evil.example`, `%65vil.example` is `evil.example`, a Unicode host is
//!   its punycode; the fragment is dropped (never sent) and a trailing dot
//!   of the host removed. Its key is the parsed URL; the parsed host is an
//!   atom of its own.
//! - an **e-mail address** is `local@host` around an `@` (a `mailto:`
//!   before it is not part of it); its key is the local part and the host in
//!   its ASCII (punycode) form, without a trailing dot.
//! - a **host** is a run of at least two labels whose last label is
//!   alphabetic and is a public suffix (Mozilla's list, compiled in) or a
//!   reserved top-level name (`example`, `test`, `invalid`, `localhost`,
//!   `local`, `internal`, `onion`, `arpa`), or a dotted IPv4 address; its key
//!   is the ASCII form, without a trailing dot. Inside a URL or an address
//!   too: `corp.example@evil.example` yields both hosts.

use super::super::text::{View, exact, loose};
use super::{Atom, Kind, Marks, Role};

const SCHEMES: [&str; 8] = [
    "https://", "http://", "ftps://", "ftp://", "sftp://", "wss://", "ws://", "www.",
];

/// Reserved or special-use top-level names (RFC 2606, 6761, 6762, 7686)
/// that Mozilla's list does not hold.
const RESERVED_TLDS: [&str; 8] = [
    "example",
    "test",
    "invalid",
    "localhost",
    "local",
    "internal",
    "onion",
    "arpa",
];

fn is_url_char(c: char) -> bool {
    !(c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '"' | '\'' | '<' | '>' | '`' | '{' | '}' | '|' | '^' | '[' | ']'
        ))
}

fn boundary_before(chars: &[char], i: usize) -> bool {
    i == 0 || !(chars[i - 1].is_alphanumeric() || matches!(chars[i - 1], '.' | '-' | '_'))
}

fn starts_with(chars: &[char], i: usize, pat: &str) -> bool {
    (i..)
        .zip(pat.chars())
        .all(|(k, p)| chars.get(k) == Some(&p))
}

/// The canonical key text of a parsed URL and its host, or `None` when it
/// has no host.
pub(crate) fn canonical_url(text: &str) -> Option<(String, String)> {
    let with_scheme;
    let text = if text.starts_with("www.") {
        with_scheme = format!("http://{text}");
        &with_scheme
    } else {
        text
    };
    let mut url = url::Url::parse(text).ok()?;
    url.set_fragment(None);
    let host = url.host_str()?.to_string();
    let trimmed = host.trim_end_matches('.');
    if trimmed.is_empty() {
        return None;
    }
    if trimmed != host {
        url.set_host(Some(trimmed)).ok()?;
    }
    let host = url.host_str()?.to_string();
    Some((url.as_str().to_string(), host))
}

/// The Unicode spelling of an ASCII host (itself unless a label is
/// punycode).
fn unicode_of(ascii: &str) -> std::borrow::Cow<'_, str> {
    if ascii.contains("xn--") {
        std::borrow::Cow::Owned(idna::domain_to_unicode(ascii).0)
    } else {
        std::borrow::Cow::Borrowed(ascii)
    }
}

/// The loose form of an ASCII (punycode) host: its Unicode spelling folded.
pub(crate) fn loose_host(ascii: &str) -> String {
    let unicode = unicode_of(ascii);
    if unicode.is_ascii() {
        return loose(&unicode, true);
    }
    loose(&exact(&unicode), true)
}

/// The ASCII key of a host name written `name` (already folded), or `None`
/// when it is not a host (see the module documentation).
pub(crate) fn host_key(name: &str, require_suffix: bool) -> Option<String> {
    let name = name.trim_end_matches('.');
    if name.split('.').count() == 4 && name.split('.').all(|l| l.parse::<u8>().is_ok()) {
        return Some(name.to_string());
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2
        || labels
            .iter()
            .any(|l| l.is_empty() || l.len() > 63 || l.starts_with('-') || l.ends_with('-'))
    {
        return None;
    }
    // A name of letters, digits and hyphens in lower case is its own ASCII
    // form (IDNA would only check punycode labels).
    let ascii = if name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.contains("xn--")
    {
        name.to_string()
    } else {
        idna::domain_to_ascii(name).ok()?
    };
    let tld = ascii.rsplit('.').next()?;
    if !(tld.starts_with("xn--")
        || (tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic())))
    {
        return None;
    }
    if require_suffix && !suffix_ok(&ascii) {
        // A top-level name spelled with lookalike letters (`.exаmple`,
        // Cyrillic `а`) reads as the name it imitates.
        if !suffix_ok(&loose(&exact(&unicode_of(&ascii)), false)) {
            return None;
        }
    }
    Some(ascii)
}

/// Whether a name ends in a public suffix or a reserved top-level name.
fn suffix_ok(name: &str) -> bool {
    let tld = name.rsplit('.').next().unwrap_or("");
    RESERVED_TLDS.contains(&tld) || psl::suffix(name.as_bytes()).is_some_and(|s| s.is_known())
}

fn host_atom(ascii: &str, span: (u32, u32), covers: bool, shown: String) -> Atom {
    Atom {
        kind: Kind::Host,
        key: ascii.to_string(),
        loose: loose_host(ascii),
        span,
        covers,
        role: Role::Whole,
        shown,
    }
}

/// URLs of the view, each followed by its parsed host; their character
/// ranges are marked in `marks.url`.
pub(crate) fn urls(v: &View, marks: &mut Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let mut i = 0;
    while i < c.len() {
        let Some(scheme) = (matches!(c[i], 'h' | 'f' | 's' | 'w') && boundary_before(c, i))
            .then(|| SCHEMES.iter().find(|s| starts_with(c, i, s)))
            .flatten()
        else {
            i += 1;
            continue;
        };
        let mut end = i + scheme.chars().count();
        while end < c.len() && is_url_char(c[end]) {
            end += 1;
        }
        let has_open = c[i..end].contains(&'(');
        while end > i
            && (matches!(c[end - 1], '.' | ',' | ';' | ':' | '!' | '?')
                || (c[end - 1] == ')' && !has_open))
        {
            end -= 1;
        }
        let text = v.string(i, end);
        if let Some((key, host)) = canonical_url(&text) {
            let span = v.span(i, end);
            let loose_url = loose(&exact(&key.replacen(&host, &unicode_of(&host), 1)), true);
            out.push(Atom {
                kind: Kind::Url,
                key,
                loose: loose_url,
                span,
                covers: true,
                role: Role::Container,
                shown: text.clone(),
            });
            if host_key(&host, false).is_some() || host.parse::<std::net::IpAddr>().is_ok() {
                out.push(host_atom(&host, span, false, host.clone()));
            }
            for m in &mut marks.url[i..end] {
                *m = true;
            }
        }
        i = end.max(i + 1);
    }
}

fn is_local_char(c: char) -> bool {
    c.is_ascii_lowercase()
        || c.is_ascii_digit()
        || matches!(c, '.' | '_' | '%' | '+' | '-')
        || (!c.is_ascii() && c.is_alphanumeric())
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_lowercase()
        || c.is_ascii_digit()
        || matches!(c, '.' | '-')
        || (!c.is_ascii() && c.is_alphanumeric())
}

/// E-mail addresses of the view; their ranges are marked in `marks.email`.
pub(crate) fn emails(v: &View, marks: &mut Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    for at in 0..c.len() {
        if c[at] != '@' {
            continue;
        }
        let mut a = at;
        while a > 0 && is_local_char(c[a - 1]) {
            a -= 1;
        }
        while a < at && c[a] == '.' {
            a += 1;
        }
        let mut b = at + 1;
        while b < c.len() && is_host_char(c[b]) {
            b += 1;
        }
        while b > at + 1 && matches!(c[b - 1], '.' | '-') {
            b -= 1;
        }
        if a == at || b == at + 1 {
            continue;
        }
        let local = v.string(a, at);
        let host = v.string(at + 1, b);
        let Some(ascii) = host_key(&host, false) else {
            continue;
        };
        let span = v.span(a, b);
        out.push(Atom {
            kind: Kind::Email,
            key: format!("{local}@{ascii}"),
            loose: format!("{}@{}", loose(&local, true), loose_host(&ascii)),
            span,
            covers: true,
            role: Role::Whole,
            shown: v.string(a, b),
        });
        for m in &mut marks.email[a..b] {
            *m = true;
        }
    }
}

/// Host names and IPv4 addresses of the view (also inside URLs and
/// addresses).
pub(crate) fn hosts(v: &View, marks: &Marks, out: &mut Vec<Atom>) {
    let c = &v.chars;
    let mut i = 0;
    while i < c.len() {
        if !is_host_char(c[i]) || (i > 0 && is_host_char(c[i - 1])) {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < c.len() && is_host_char(c[end]) {
            end += 1;
        }
        let (mut a, mut b) = (i, end);
        while a < b && matches!(c[a], '.' | '-') {
            a += 1;
        }
        while b > a && matches!(c[b - 1], '.' | '-') {
            b -= 1;
        }
        if c[a..b].contains(&'.') && !marks.date[a] {
            let name = v.string(a, b);
            if let Some(ascii) = host_key(&name, true) {
                out.push(host_atom(&ascii, v.span(a, b), true, name));
            }
        }
        i = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<(Kind, String)> {
        let v = View::raw(text);
        let mut marks = Marks::new(v.chars.len());
        let mut out = Vec::new();
        urls(&v, &mut marks, &mut out);
        emails(&v, &mut marks, &mut out);
        hosts(&v, &marks, &mut out);
        out.into_iter().map(|a| (a.kind, a.key)).collect()
    }

    #[test]
    fn urls_are_parsed_as_the_net_guard_parses_them() {
        let k = keys("see https://corp.example@evil.example/x#frag.");
        assert!(k.contains(&(Kind::Url, "https://corp.example@evil.example/x".into())));
        assert!(k.contains(&(Kind::Host, "evil.example".into())));
        assert!(k.contains(&(Kind::Host, "corp.example".into())));
        let k = keys("HTTPS://EVIL.EXAMPLE./A");
        assert!(
            k.contains(&(Kind::Url, "https://evil.example/a".into())),
            "{k:?}"
        );
        let k = keys("https://%65vil.example/");
        assert!(k.contains(&(Kind::Host, "evil.example".into())), "{k:?}");
        let k = keys("https://bücher.example/");
        assert!(
            k.contains(&(Kind::Host, "xn--bcher-kva.example".into())),
            "{k:?}"
        );
        let k = keys("(www.corp.example/path)");
        assert!(
            k.contains(&(Kind::Url, "http://www.corp.example/path".into())),
            "{k:?}"
        );
    }

    #[test]
    fn emails_and_hosts() {
        let k = keys("mailto:Alice@Corp.Example. or bob@bücher.example");
        assert!(
            k.contains(&(Kind::Email, "alice@corp.example".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(Kind::Email, "bob@xn--bcher-kva.example".into())),
            "{k:?}"
        );
        let k = keys("report.pdf, v1.2.3, 10.0.0.1 and news.bbc.co.uk.");
        assert!(!k.iter().any(|(_, s)| s == "report.pdf"), "{k:?}");
        assert!(k.contains(&(Kind::Host, "10.0.0.1".into())));
        assert!(k.contains(&(Kind::Host, "news.bbc.co.uk".into())));
    }
}
