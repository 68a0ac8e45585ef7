//! Text scrubbed of secrets before it leaves the host through an
//! observability sink (issue 45 item 5): the log output, exported spans and
//! span events, metric labels, the audit export, the console's pages.
//!
//! Two nets, applied in this order by [`Scrubber::scrub`]:
//!
//! 1. **Known values**: every exact occurrence of a secret the process
//!    knows (a token, a provider key, a `secret:` grant's value, a
//!    database password, ...), anywhere in the text, in the forms a sink or
//!    a tool commonly writes a whole value in ([`variants`]): as it is,
//!    JSON- or `Debug`-escaped, HTML-escaped, percent-encoded (upper- or
//!    lower-case hex), and Base64 (standard and URL-safe alphabets) whether
//!    the value was encoded alone or inside a longer text (every alignment:
//!    `Basic` credentials, a Base64 blob that holds it). Values shorter
//!    than [`MIN_KNOWN_LEN`] bytes are not matched by value (they would
//!    redact ordinary words); the shapes below still catch them where the
//!    text says what they are.
//! 2. **Shapes** ([`shapes`]): credentials recognised by their format,
//!    known to the host or not: capsaga's named tokens (`csg_...`), model
//!    providers' and common services' key formats (`sk-...`,
//!    `sk_live_...`, `ghp_...`, `xoxb-...`, `AKIA...`, `AIza...`,
//!    `glpat-...`, `hf_...`), JWTs, PEM private keys, the value after
//!    `Authorization:` / `Proxy-Authorization:` anywhere in a longer text,
//!    `Bearer`/`Basic` credentials, the password of a URL's userinfo
//!    (`postgres://user:PASSWORD@host`), and the value of a member or
//!    variable whose name names a secret (`password=`, `"api_key": "..."`,
//!    `CAPSAGA_KEK=`, `cookie:`), in plain text, JSON or HTML.
//!
//! Between the two, **pieces** ([`fragments`]): a known value cut into
//! parts (two log fields, two span attributes, two members of a JSON
//! text, two lines of wrapped Base64) leaves each part: every run of at
//! least [`MIN_FRAGMENT`] bytes of a known value (of
//! [`MIN_BASE64_NEEDLE`] characters of one of its Base64 forms) is
//! redacted wherever it appears, the overlapping runs joined, so a part
//! of that length or more is redacted whole. Only values that look like
//! keys (token characters, a letter and a digit, not a path) are cut into
//! pieces: a secret-named variable holding a path or a sentence would
//! redact ordinary text.
//!
//! What is replaced becomes [`REDACTED`]; the rest of the text stays as it
//! was, so a log line or a page keeps its meaning. Scrubbing is idempotent.
//!
//! Out of scope, said in THREAT_MODEL.md: a secret the host does not know
//! and whose shape is not one of these, a known one transformed otherwise
//! (hex, reversed, case-changed, encoded twice), or split into parts
//! shorter than [`MIN_FRAGMENT`] bytes.

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Shortest known value matched by value, bytes.
pub const MIN_KNOWN_LEN: usize = 8;

/// Shortest Base64 needle derived from a known value, characters (shorter
/// ones would match unrelated Base64 text).
pub const MIN_BASE64_NEEDLE: usize = 12;

/// Shortest piece of a known value redacted on its own, bytes.
pub const MIN_FRAGMENT: usize = 8;

/// The known secrets of a process, ready to scrub text with.
#[derive(Clone, Default)]
pub struct Scrubber {
    known: Option<AhoCorasick>,
    /// Every piece of [`fragments`] (overlapping matches).
    pieces: Option<AhoCorasick>,
    /// One [`REDACTED`] per needle (what `replace_all` takes).
    with: Vec<&'static str>,
    count: usize,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scrubber({} known secrets)", self.count)
    }
}

impl Scrubber {
    /// A scrubber of `secrets` (each with its [`variants`]; values shorter
    /// than [`MIN_KNOWN_LEN`] are left to the shapes) and of every shape.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Scrubber {
        let mut needles: Vec<String> = Vec::new();
        let mut pieces: Vec<String> = Vec::new();
        let mut count = 0;
        for s in secrets {
            if s.len() < MIN_KNOWN_LEN {
                continue;
            }
            count += 1;
            needles.extend(variants(s));
            pieces.extend(fragments(s));
        }
        needles.sort();
        needles.dedup();
        pieces.sort();
        pieces.dedup();
        let pieces = (!pieces.is_empty())
            .then(|| AhoCorasick::new(&pieces).ok())
            .flatten();
        // Leftmost-longest: of two needles starting at one byte the longer
        // wins, so a value is never half-replaced by a shorter variant.
        let known = (!needles.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&needles)
                    .ok()
            })
            .flatten();
        let with = vec![REDACTED; needles.len()];
        Scrubber {
            known,
            pieces,
            with,
            count,
        }
    }

    /// How many known secrets it matches by value.
    pub fn known(&self) -> usize {
        self.count
    }

    /// `text` with every known secret and every shape replaced by
    /// [`REDACTED`] (borrowed when nothing was).
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let known: Cow<'t, str> = match &self.known {
            Some(ac) if ac.is_match(text) => Cow::Owned(ac.replace_all(text, &self.with)),
            _ => Cow::Borrowed(text),
        };
        let known = match self.pieces.as_ref().map(|p| joined(p, &known)) {
            Some(Some(t)) => Cow::Owned(t),
            _ => known,
        };
        match known {
            Cow::Borrowed(t) => shapes(t),
            Cow::Owned(t) => Cow::Owned(shapes(&t).into_owned()),
        }
    }

    /// [`Scrubber::scrub`] of bytes that may not be UTF-8: a text is
    /// scrubbed; other bytes are scrubbed in their UTF-8 runs' lossy
    /// reading only when that reading changes (the result is then text).
    pub fn scrub_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        match std::str::from_utf8(bytes) {
            Ok(t) => match self.scrub(t) {
                Cow::Borrowed(_) => Cow::Borrowed(bytes),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
            Err(_) => {
                let lossy = String::from_utf8_lossy(bytes);
                match self.scrub(&lossy) {
                    Cow::Borrowed(_) => Cow::Borrowed(bytes),
                    Cow::Owned(s) => Cow::Owned(s.into_bytes()),
                }
            }
        }
    }
}

/// The forms of `secret` that are matched by value: itself, JSON/`Debug`
/// escaped, HTML-escaped (`&<>"'`), percent-encoded (upper and lower hex;
/// the reserved bytes only, or every byte),
/// and the Base64 runs (standard and URL-safe) that any Base64 encoding of a
/// text holding it contains, whatever its offset in that text.
pub fn variants(secret: &str) -> Vec<String> {
    let mut v = vec![secret.to_string()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    if let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
        v.push(inner.to_string());
    }
    v.push(format!("{secret:?}").trim_matches('"').to_string());
    v.push(html(secret));
    v.push(percent(secret, false));
    v.push(percent(secret, true));
    // Every byte escaped, as some encoders (and evasions) write it.
    for lower in [false, true] {
        v.push(
            secret
                .bytes()
                .map(|b| {
                    if lower {
                        format!("%{b:02x}")
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect(),
        );
    }
    let b = secret.as_bytes();
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        // Encoded alone (with its padding, or its last partial group).
        v.push(engine.encode(b));
        // Inside a longer text: at offset k (mod 3) of the encoded text the
        // groups that hold only the secret's bytes start after its first
        // (3 - k) % 3 bytes.
        for skip in 0..3 {
            let rest = b.get(skip..).unwrap_or_default();
            let whole = rest.len() / 3 * 3;
            let needle = engine.encode(&rest[..whole]);
            if needle.len() >= MIN_BASE64_NEEDLE {
                v.push(needle);
            }
        }
    }
    v.retain(|n| n.len() >= MIN_KNOWN_LEN);
    v.sort();
    v.dedup();
    v
}

/// Whether `secret` looks like a key (cut into [`fragments`]): token
/// characters only, a letter and a digit, not a path.
fn key_like(secret: &str) -> bool {
    let b = secret.as_bytes();
    b.iter()
        .all(|c| c.is_ascii_alphanumeric() || b"+/=_-.~".contains(c))
        && b.iter().any(u8::is_ascii_alphabetic)
        && b.iter().any(u8::is_ascii_digit)
        && !matches!(b.first(), Some(b'/' | b'.' | b'~'))
}

/// The pieces of `secret` redacted on their own: every run of
/// [`MIN_FRAGMENT`] bytes of it, and of [`MIN_BASE64_NEEDLE`] characters
/// of each of its Base64 forms, each one that is not plain text on its own
/// (a raw piece holds a letter and a digit; a Base64 one is mixed case or
/// holds a digit); none when the value does not look like a key.
pub fn fragments(secret: &str) -> Vec<String> {
    if !key_like(secret) {
        return Vec::new();
    }
    // A raw piece holds a letter and a digit: a word inside a known value
    // ("operator" in `alice-operator-secret-0123`) is plain text on its own
    // and stays readable wherever it is written.
    let mut v: Vec<String> = secret
        .as_bytes()
        .windows(MIN_FRAGMENT)
        .filter(|w| w.iter().any(u8::is_ascii_alphabetic) && w.iter().any(u8::is_ascii_digit))
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    for b64 in variants(secret)
        .into_iter()
        .filter(|n| n.len() >= MIN_BASE64_NEEDLE && !n.contains(secret))
    {
        // A Base64 piece is mixed case or holds a digit (not a word).
        v.extend(
            b64.as_bytes()
                .windows(MIN_BASE64_NEEDLE)
                .filter(|w| {
                    w.iter().any(u8::is_ascii_digit)
                        || (w.iter().any(u8::is_ascii_uppercase)
                            && w.iter().any(u8::is_ascii_lowercase))
                })
                .map(|w| String::from_utf8_lossy(w).into_owned()),
        );
    }
    // Never a piece of the replacement itself (scrubbing stays idempotent).
    v.retain(|p| !REDACTED.contains(p.as_str()));
    v.sort();
    v.dedup();
    v
}

/// `text` with every span covered by overlapping matches of `pieces`
/// joined and replaced by one [`REDACTED`]; `None` when nothing matched.
fn joined(pieces: &AhoCorasick, text: &str) -> Option<String> {
    // Overlapping matches come by their end: sorted by start to be joined.
    let mut found: Vec<(usize, usize)> = pieces
        .try_find_overlapping_iter(text)
        .ok()?
        .map(|m| (m.start(), m.end()))
        .collect();
    found.sort_unstable();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for m in found {
        let (start, end) = m;
        match spans.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => spans.push((start, end)),
        }
    }
    if spans.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to) in spans {
        // Pieces are ASCII (a key-like value and its Base64 forms).
        out.push_str(text.get(at..from)?);
        out.push_str(REDACTED);
        at = to;
    }
    out.push_str(text.get(at..)?);
    Some(out)
}

fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn percent(s: &str, lower: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Start of a shape: the text's start, a character that is not a letter or
/// digit, or a percent-escape (`%3D` before a key in a URL).
const START: &str = r"(^|[^A-Za-z0-9]|%[0-9A-Fa-f]{2})";

/// A quote in plain text, escaped in JSON, or HTML-escaped.
const QUOTE: &str = r#"(?:\\?["']|&quot;|&#34;|&#39;)"#;

/// What a shape's match is, for the rules of what to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A key format, a PEM key, a URL's password: always a secret.
    Format,
    /// The value after `Authorization:`.
    Authorization,
    /// The value of a member or variable whose name names a secret.
    Named,
    /// A `Bearer`/`Basic` credential.
    Scheme,
}

/// The shapes: a pattern whose group `secret` is what is replaced.
static SHAPES: LazyLock<Vec<(Kind, Regex)>> = LazyLock::new(|| {
    let key_prefixes = [
        // capsaga's named tokens: `csg_` + 32 random bytes, Base64url.
        r"csg_[A-Za-z0-9_\-]{20,}",
        // OpenAI (`sk-`, `sk-proj-`), Anthropic (`sk-ant-`), OpenRouter...
        r"sk-[A-Za-z0-9_\-]{20,}",
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
        r"gh[pousr]_[A-Za-z0-9]{30,}",
        r"github_pat_[A-Za-z0-9_]{30,}",
        r"xox[abposr]-[A-Za-z0-9\-]{10,}",
        r"AKIA[0-9A-Z]{16}",
        r"AIza[0-9A-Za-z_\-]{35}",
        r"glpat-[A-Za-z0-9_\-]{20,}",
        r"hf_[A-Za-z0-9]{30,}",
        // A JWT: a JSON header and payload (`eyJ`), and a signature.
        r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ]
    .join("|");
    let names = [
        r"password",
        r"passwd",
        r"secret",
        r"api[_\-]?key",
        r"[_\-.]key",
        r"token",
        r"kek",
        r"credentials?",
        r"cookie",
    ]
    .join("|");
    let shapes = [
        (Kind::Format, format!(r"{START}(?P<secret>{key_prefixes})")),
        // A PEM private key, to its end (or the text's).
        (
            Kind::Format,
            r"(?P<secret>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z))"
                .to_string(),
        ),
        // The password of a URL's userinfo.
        (
            Kind::Format,
            r#"(?i)\b[a-z][a-z0-9+.\-]*://[^\s/:@"'<>\\]*:(?P<secret>[^\s/@"'<>\\]+)@"#.to_string(),
        ),
        // An Authorization header written in a longer text.
        (
            Kind::Authorization,
            format!(
                r#"(?i)\b(?:proxy-)?authorization{QUOTE}?\s*[:=]\s*{QUOTE}?(?P<secret>[^"'\\\r\n<>&,;{{}}]+)"#
            ),
        ),
        // A member or variable whose name names a secret.
        (
            Kind::Named,
            format!(
                r#"(?i){START}(?P<name>[A-Za-z0-9_.\-]*?(?:{names}))(?P<q1>{QUOTE})?(?P<sep>\s*[:=]\s*)(?P<q2>{QUOTE})?(?P<secret>[^\s"'\\<>&,;{{}}\[\]]+)"#
            ),
        ),
        // A Bearer or Basic credential.
        (
            Kind::Scheme,
            r"(?i)\b(?:bearer|basic)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)".to_string(),
        ),
    ];
    shapes
        .into_iter()
        .map(|(kind, p)| {
            // The patterns are constants, checked by the tests.
            let re = Regex::new(&p).expect("a shape's pattern compiles");
            (kind, re)
        })
        .collect()
});

/// Whether a `Bearer`/`Basic` word is followed by a credential rather than
/// by prose ("bearer authentication"): a digit or a symbol of the token
/// alphabet, or 32 characters and more.
fn credential_like(s: &str) -> bool {
    s.len() >= 32
        || s.bytes().any(|b| {
            b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
        })
}

/// Whether a match is not a secret after all.
fn keep(kind: Kind, c: &Captures<'_>, secret: &str) -> bool {
    let s = secret.trim();
    if s.is_empty() || s == REDACTED {
        return true;
    }
    match kind {
        Kind::Format => false,
        // A bare scheme (`Authorization: Bearer <token>` in a help text,
        // `Sensitive` in a header map's `Debug`).
        Kind::Authorization => ["bearer", "basic", "sensitive"]
            .iter()
            .any(|w| s.eq_ignore_ascii_case(w)),
        // The host's own words written with a bare colon: `token:alice` (a
        // principal), `secret:api@host` (a capability).
        Kind::Named => {
            let name = c.name("name").map_or("", |m| m.as_str());
            let bare = c.name("q1").is_none()
                && c.name("q2").is_none()
                && c.name("sep").is_some_and(|m| m.as_str() == ":");
            bare && (name.eq_ignore_ascii_case("token") || name.eq_ignore_ascii_case("secret"))
        }
        Kind::Scheme => !credential_like(s),
    }
}

/// `text` with every [shape](self) of credential replaced by [`REDACTED`]
/// (borrowed when none was found).
pub fn shapes(text: &str) -> Cow<'_, str> {
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    for (kind, re) in SHAPES.iter() {
        if !re.is_match(&out) {
            continue;
        }
        let replaced = re
            .replace_all(&out, |c: &Captures<'_>| {
                let whole = c.get(0).map_or("", |m| m.as_str());
                let (Some(m), Some(secret)) = (c.get(0), c.name("secret")) else {
                    return whole.to_string();
                };
                if keep(*kind, c, secret.as_str()) {
                    return whole.to_string();
                }
                let from = secret.start() - m.start();
                let to = secret.end() - m.start();
                format!("{}{REDACTED}{}", &whole[..from], &whole[to..])
            })
            .into_owned();
        if replaced != *out {
            out = Cow::Owned(replaced);
        }
    }
    out
}

#[cfg(test)]
#[path = "scrub_tests.rs"]
mod tests;
