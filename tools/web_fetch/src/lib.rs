//! `web_fetch`: reads a web page or document over HTTPS and returns its text.
//!
//! Arguments: `{"url": "https://...", "method": "GET", "max_bytes": 262144,
//! "max_chars": 20000, "follow_redirects": true}`.
//!
//! Sends a GET (or HEAD) through the host's net guard, follows up to five
//! redirects with a new request per hop (each checked by the host again, so
//! a redirect to a host that is not granted, or to a private address, is
//! refused), reads at most `max_bytes` of the body, and returns:
//!
//! ```json
//! {"url": "https://a.example/x", "final_url": "https://a.example/y",
//!  "redirects": ["https://a.example/x"], "status": 200,
//!  "content_type": "text/html; charset=utf-8", "title": "...",
//!  "text": "...", "bytes": 5120, "truncated": false}
//! ```
//!
//! HTML is turned into plain text (html2text: scripts and styles dropped,
//! links kept as numbered references); `text/*`, JSON and XML bodies are
//! returned as text; other types only report their size. `text` is cut at
//! `max_chars` characters (`truncated` is then true). A status of 400 or more
//! is an `external-error` carrying the start of the body.
//!
//! No side effects, risk low, idempotent; its output is content from outside
//! and is marked untrusted. Needs `net:https:*` (HTTPS only: the operator
//! grants hosts, e.g. `net:https:docs.rs` or `net:https:*.wikipedia.org`).

use capsaga_sdk::http::{Method, Request, Response};
use capsaga_sdk::prelude::*;

/// Most redirects followed.
pub const MAX_REDIRECTS: usize = 5;
/// Default and largest `max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024;
/// Largest `max_bytes` accepted.
pub const LIMIT_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// Default `max_chars`.
pub const DEFAULT_MAX_CHARS: usize = 20_000;

/// GET or HEAD.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum FetchMethod {
    /// Fetch the body.
    #[default]
    Get,
    /// Status and headers only.
    Head,
}

/// Arguments of `web_fetch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute https:// URL to fetch.
    pub url: String,
    /// GET (default) or HEAD.
    #[serde(default)]
    pub method: FetchMethod,
    /// Most bytes of the body to read (default 262144, at most 4194304).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Most characters of text to return (default 20000).
    #[serde(default)]
    pub max_chars: Option<usize>,
    /// Follow redirects, each checked again by the host (default true, at most 5).
    #[serde(default = "yes")]
    pub follow_redirects: bool,
}

fn yes() -> bool {
    true
}

/// The component.
pub struct WebFetch;

impl Tool for WebFetch {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "web_fetch",
            "Fetches a web page or document over HTTPS (GET or HEAD) and returns its status, content type and readable text. Only hosts the operator granted are reachable.",
        )
        .risk(Risk::Low)
        .returns_untrusted(true)
        .idempotent(true)
        .capability("net:https:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/bytes")
        .trusted_field("/truncated")
        .untrusted_field("/url")
        .untrusted_field("/final_url")
        .untrusted_field("/redirects")
        .untrusted_field("/status")
        .untrusted_field("/content_type")
        .untrusted_field("/title")
        .untrusted_field("/text")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        if !args.url.to_ascii_lowercase().starts_with("https://") {
            return Err(
                ToolError::invalid_args(format!("`{}` is not an https:// URL", args.url))
                    .hint("web_fetch reads https:// URLs only."),
            );
        }
        let max_bytes = args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        if max_bytes == 0 || max_bytes > LIMIT_MAX_BYTES {
            return Err(ToolError::invalid_args(format!(
                "max_bytes must be 1..={LIMIT_MAX_BYTES}"
            )));
        }
        let max_chars = args.max_chars.unwrap_or(DEFAULT_MAX_CHARS).max(1);
        let method = match args.method {
            FetchMethod::Get => Method::Get,
            FetchMethod::Head => Method::Head,
        };
        let req = Request::new(method, args.url.clone())
            .header(
                "accept",
                "text/html, text/plain;q=0.9, application/json;q=0.8, */*;q=0.5",
            )
            .max_body_bytes(max_bytes);
        let (resp, redirects) = if args.follow_redirects {
            req.send_following(MAX_REDIRECTS)?
        } else {
            (req.send()?, Vec::new())
        };
        render(&args.url, &resp, redirects, max_chars)
    }
}

/// Build the output (or the error for a 4xx/5xx) from a response.
///
/// # Errors
/// `external-error` for a status of 400 or more.
pub fn render(
    url: &str,
    resp: &Response,
    redirects: Vec<String>,
    max_chars: usize,
) -> Result<Output, ToolError> {
    let content_type = resp.header("content-type").unwrap_or("").to_string();
    let ct = content_type.to_ascii_lowercase();
    let (title, text) = if resp.body.is_empty() {
        (None, String::new())
    } else if ct.contains("html") || (ct.is_empty() && looks_like_html(&resp.body)) {
        (html_title(&resp.body), html_to_text(&resp.body))
    } else if ct.starts_with("text/") || ct.contains("json") || ct.contains("xml") || ct.is_empty()
    {
        (None, resp.text())
    } else {
        (
            None,
            format!("[{} bytes of {content_type}, not shown]", resp.body.len()),
        )
    };
    let (text, cut) = clip_chars(&text, max_chars);
    if resp.status >= 400 {
        let (head, _) = clip_chars(&text, 500);
        return Err(
            ToolError::external(format!("{} answered {}", resp.url, resp.status))
                .hint(if resp.status == 404 || resp.status == 410 {
                    "The page does not exist; check the URL."
                } else if resp.status >= 500 {
                    "The server failed; try again later."
                } else {
                    "The server refused the request; check the URL."
                })
                .retriable(resp.status >= 500)
                .details(json!({"status": resp.status, "url": resp.url, "body_start": head})),
        );
    }
    let summary = format!(
        "{} {} ({} bytes{})",
        resp.status,
        resp.url,
        resp.body.len(),
        if resp.truncated || cut {
            ", truncated"
        } else {
            ""
        }
    );
    Ok(Output::new(json!({
        "url": url,
        "final_url": resp.url,
        "redirects": redirects,
        "status": resp.status,
        "content_type": content_type,
        "title": title,
        "text": text,
        "bytes": resp.body.len(),
        "truncated": resp.truncated || cut,
    }))
    .summary(summary))
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}

/// Plain text of an HTML document (scripts and styles dropped).
pub fn html_to_text(body: &[u8]) -> String {
    html2text::config::plain()
        .string_from_read(body, 100)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned())
}

/// The `<title>` of an HTML document, whitespace collapsed.
pub fn html_title(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]);
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let end = open_end + lower[open_end..].find("</title")?;
    let title: String = text[open_end..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then_some(title)
}

/// At most `max` characters of `s`, and whether it was cut.
pub fn clip_chars(s: &str, max: usize) -> (String, bool) {
    match s.char_indices().nth(max) {
        Some((i, _)) => (s[..i].to_string(), true),
        None => (s.to_string(), false),
    }
}

capsaga_sdk::export_tool!(WebFetch);

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(ct: &str, body: &str, status: u16) -> Response {
        Response {
            url: "https://a.example/x".into(),
            status,
            headers: vec![("content-type".into(), ct.into())],
            body: body.as_bytes().to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn html_becomes_text_without_scripts() {
        let html = "<!doctype html><html><head><title> Hello\n World </title><script>steal()</script><style>p{}</style></head><body><h1>Heading</h1><p>Some <b>bold</b> text.</p></body></html>";
        let out = render("u", &resp("text/html", html, 200), vec![], 1000).unwrap();
        let d: capsaga_sdk::serde_json::Value = out.data_as().unwrap();
        assert_eq!(d["title"], "Hello World");
        let text = d["text"].as_str().unwrap();
        assert!(text.contains("Heading") && text.contains("bold"), "{text}");
        assert!(!text.contains("steal()"), "{text}");
    }

    #[test]
    fn limits_and_errors() {
        let out = render("u", &resp("text/plain", "abcdef", 200), vec![], 3).unwrap();
        let d: capsaga_sdk::serde_json::Value = out.data_as().unwrap();
        assert_eq!(d["text"], "abc");
        assert_eq!(d["truncated"], true);
        let e = render("u", &resp("text/plain", "gone", 404), vec![], 10).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ExternalError);
        let out = render("u", &resp("image/png", "\u{89}PNG", 200), vec![], 100).unwrap();
        let d: capsaga_sdk::serde_json::Value = out.data_as().unwrap();
        assert!(d["text"].as_str().unwrap().contains("not shown"));
    }

    #[test]
    fn meta_is_valid_and_https_only() {
        let m = capsaga_sdk::describe::<WebFetch>("0.1.0");
        assert_eq!(m.check(), Ok(()));
        let e = WebFetch::execute(
            &CallContext::default(),
            Args {
                url: "http://a.example/".into(),
                method: FetchMethod::Get,
                max_bytes: None,
                max_chars: None,
                follow_redirects: true,
            },
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgs);
    }
}
