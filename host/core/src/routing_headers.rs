//! The HTTP headers the server routes or authenticates on: each sent once,
//! and, for those that restate the body (MCP 2026-07-28, SEP-2243), saying
//! what the body says (issue 45 item 3).
//!
//! A proxy in front of capsaga may keep the last copy of a repeated header
//! (or join the copies with commas, or read the request-target's authority
//! rather than `Host`) where capsaga's libraries read the first: the two
//! would then act on two different requests (route a `tools/call` as a
//! `tools/list`, check one `Origin` or token and let another through). So:
//!
//! - **Single** ([`rule`]): `Host`, `Origin`, `Authorization`,
//!   `Content-Type`, `Mcp-Session-Id`, `MCP-Protocol-Version`,
//!   `Mcp-Method`, `Mcp-Name`, every other `Mcp-*` (the `Mcp-Param-*`
//!   headers included), `Last-Event-ID`, `traceparent`, `Sec-Fetch-Site`:
//!   refused when sent more than once (header names are case-insensitive:
//!   `mcp-method` and `MCP-METHOD` are two copies), empty, or holding bytes
//!   outside visible ASCII (a client wraps other text in `=?base64?...?=`);
//!   and one of their names spelled with `_` for `-` (`Mcp_Method`,
//!   `Last_Event_ID`) is refused, sent alone or not: gateways
//!   that map headers to CGI-style variables read it as the real one.
//!   Those whose value is one token are also refused when it holds a comma
//!   (the form a proxy folding two copies writes): all of them but
//!   `Mcp-Name` and `Mcp-Param-*`, whose value is a client's text (a
//!   resource URI may hold a comma) compared whole with the body.
//! - **Lists** keep HTTP's folding: `Accept` and `tracestate` may be sent
//!   several times (every reader reads them all); `Cookie` too, but the
//!   console's session cookie may appear only once in all of them, under
//!   any case of its name ([`cookie_once`]).
//! - **Agreement** ([`agree`]), for a JSON-RPC message whatever its
//!   revision: `Mcp-Method` is the body's `method` (and is refused on a
//!   message that has none: a response); `Mcp-Name` is the body's tool or
//!   prompt name, resource URI or task id (and is refused for a method
//!   that names none); `MCP-Protocol-Version` is the version the body
//!   states (`initialize`'s `params.protocolVersion`, a request's
//!   `_meta["io.modelcontextprotocol/protocolVersion"]`), when it states
//!   one. rmcp checks the 2026 requests too; this rule makes it hold for
//!   every revision, a 2025-11-25 session's requests included.
//!
//! Pure: the server applies it to each request before anything reads a
//! header (`serve::wire` in the runtime).

use serde_json::Value;

/// How a header may appear in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Once; its value is one token (no comma).
    Token,
    /// Once; its value is text compared whole (may hold a comma).
    Text,
}

/// Why a request's headers were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderRefusal {
    /// Sent more than once.
    #[error("the {0} header is sent more than once: send it once")]
    Repeated(String),
    /// A comma in a header whose value is one token (two values folded).
    #[error("the {0} header holds a list (a comma): send one value")]
    Folded(String),
    /// Empty.
    #[error("the {0} header is empty")]
    Empty(String),
    /// A name that is a routing or authentication header's with `_` for
    /// `-` (`Mcp_Method`): a proxy or gateway that maps both to one name
    /// (CGI's `HTTP_MCP_METHOD`) would read it where capsaga does not.
    #[error(
        "the {0} header is spelled with `_` for `-`: send the routing header under its own name"
    )]
    Lookalike(String),
    /// Bytes outside visible ASCII.
    #[error("the {0} header holds bytes outside visible ASCII (wrap other text as =?base64?...?=)")]
    NotText(String),
    /// The request-target names another authority than `Host`.
    #[error("the request target names another host than the Host header")]
    TargetHost,
    /// The header says something else than the body.
    #[error("the {name} header does not say what the body says ({why})")]
    Disagrees {
        /// The header.
        name: String,
        /// What differs.
        why: String,
    },
}

/// The console's session cookie (`capsaga-console`'s name for it).
pub const CONSOLE_COOKIE: &str = "capsaga_console";

/// How header `name` (lower case) may appear; `None`: not one the server
/// routes or authenticates on (or a list, which may repeat).
pub fn rule(name: &str) -> Option<Rule> {
    match name {
        "host"
        | "origin"
        | "authorization"
        | "content-type"
        | "mcp-session-id"
        | "mcp-protocol-version"
        | "mcp-method"
        | "last-event-id"
        | "traceparent"
        | "sec-fetch-site" => Some(Rule::Token),
        n if n.starts_with("mcp-") => Some(Rule::Text),
        _ => None,
    }
}

/// Whether `v` is a header value of visible ASCII, spaces and tabs.
fn visible(v: &[u8]) -> bool {
    v.iter()
        .all(|b| (0x21..=0x7e).contains(b) || *b == b' ' || *b == b'\t')
}

/// Check every header of a request (`(lower-case name, value)` pairs, in
/// order, repeated names repeated) against [`rule`], and the console's
/// session cookie against [`cookie_once`].
///
/// # Errors
/// The first [`HeaderRefusal`] found.
pub fn single<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<(), HeaderRefusal> {
    let mut seen: Vec<&str> = Vec::new();
    let mut cookies: Vec<&[u8]> = Vec::new();
    for (name, value) in headers {
        if name == "cookie" {
            cookies.push(value);
            continue;
        }
        let Some(rule) = rule(name) else {
            if name.contains('_') && rule(&name.replace('_', "-")).is_some() {
                return Err(HeaderRefusal::Lookalike(name.to_string()));
            }
            continue;
        };
        if seen.contains(&name) {
            return Err(HeaderRefusal::Repeated(name.to_string()));
        }
        seen.push(name);
        if !visible(value) {
            return Err(HeaderRefusal::NotText(name.to_string()));
        }
        if value.iter().all(|b| *b == b' ' || *b == b'\t') {
            return Err(HeaderRefusal::Empty(name.to_string()));
        }
        if rule == Rule::Token && value.contains(&b',') {
            return Err(HeaderRefusal::Folded(name.to_string()));
        }
    }
    cookie_once(cookies)
}

/// The console's session cookie appears at most once in all the `Cookie`
/// headers of a request, whatever the case of its name (two copies: which
/// one a reader takes is up to it).
///
/// # Errors
/// [`HeaderRefusal::Repeated`].
pub fn cookie_once<'a>(cookies: impl IntoIterator<Item = &'a [u8]>) -> Result<(), HeaderRefusal> {
    let named = cookies
        .into_iter()
        .flat_map(|c| c.split(|b| *b == b';'))
        .filter(|pair| {
            let name = pair.split(|b| *b == b'=').next().unwrap_or_default();
            name.trim_ascii()
                .eq_ignore_ascii_case(CONSOLE_COOKIE.as_bytes())
        })
        .count();
    if named > 1 {
        return Err(HeaderRefusal::Repeated(format!("cookie {CONSOLE_COOKIE}")));
    }
    Ok(())
}

/// Whether the request-target's `authority` (absolute form: `GET
/// http://a/mcp`) names the same host as the `Host` header (case
/// insensitive).
///
/// # Errors
/// [`HeaderRefusal::TargetHost`].
pub fn target_agrees(authority: Option<&str>, host: Option<&[u8]>) -> Result<(), HeaderRefusal> {
    match (authority, host) {
        (None, _) => Ok(()),
        (Some(a), Some(h)) if a.as_bytes().eq_ignore_ascii_case(h.trim_ascii()) => Ok(()),
        _ => Err(HeaderRefusal::TargetHost),
    }
}

/// Methods whose `Mcp-Name` is `params.name`, `params.uri`, `params.taskId`
/// (SEP-2243 and the tasks extension).
const NAME_FROM: &[(&str, &str)] = &[
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
    ("resources/subscribe", "uri"),
    ("resources/unsubscribe", "uri"),
    ("tasks/get", "taskId"),
    ("tasks/update", "taskId"),
    ("tasks/cancel", "taskId"),
];

/// The `Mcp-Name` the body of `message` implies, if its method names one.
fn name_of(message: &Value) -> Option<&str> {
    let method = message.get("method")?.as_str()?;
    let key = NAME_FROM.iter().find(|(m, _)| *m == method)?.1;
    message.get("params")?.get(key)?.as_str()
}

/// The protocol version `message` states: `initialize`'s
/// `params.protocolVersion`, else `params._meta`'s.
fn version_of(message: &Value) -> Option<&str> {
    let params = message.get("params")?;
    if message.get("method").and_then(Value::as_str) == Some("initialize") {
        return params.get("protocolVersion")?.as_str();
    }
    params
        .get("_meta")?
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()
}

/// A SEP-2243 header value decoded: `=?base64?...?=` is Base64 of UTF-8
/// text, anything else is itself; `None` for a bad Base64 wrapping.
fn decoded(v: &str) -> Option<String> {
    use base64::Engine as _;
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(inner) => base64::engine::general_purpose::STANDARD
            .decode(inner)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_string()),
    }
}

fn disagrees(name: &str, why: String) -> HeaderRefusal {
    HeaderRefusal::Disagrees {
        name: name.to_string(),
        why,
    }
}

/// Whether the routing headers present (`header(name)`: the one value of a
/// lower-case name, trimmed; [`single`] made sure there is one) say what
/// the JSON-RPC `message` says (see the module doc).
///
/// # Errors
/// [`HeaderRefusal::Disagrees`].
pub fn agree<'a>(
    header: impl Fn(&str) -> Option<&'a str>,
    message: &Value,
) -> Result<(), HeaderRefusal> {
    let method = message.get("method").and_then(Value::as_str);
    if let Some(h) = header("mcp-method") {
        match method {
            Some(m) if m == h => {}
            Some(m) => {
                return Err(disagrees("Mcp-Method", format!("`{h}` for `{m}`")));
            }
            None => {
                return Err(disagrees(
                    "Mcp-Method",
                    format!("`{h}` on a message without a method"),
                ));
            }
        }
    }
    if let Some(h) = header("mcp-name") {
        let said =
            decoded(h).ok_or_else(|| disagrees("Mcp-Name", "its Base64 does not decode".into()))?;
        match name_of(message) {
            Some(n) if n == said => {}
            Some(_) => {
                return Err(disagrees(
                    "Mcp-Name",
                    "it names another target than the body".into(),
                ));
            }
            None => {
                return Err(disagrees(
                    "Mcp-Name",
                    "the body names no target for this method".into(),
                ));
            }
        }
    }
    if let (Some(h), Some(v)) = (header("mcp-protocol-version"), version_of(message))
        && h != v
    {
        return Err(disagrees(
            "MCP-Protocol-Version",
            format!("`{h}` for `{v}`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "routing_headers_tests.rs"]
mod tests;
