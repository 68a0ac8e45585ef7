//! `http_request`: sends a POST, PUT, PATCH or DELETE to an HTTPS API, and
//! undoes it when the API allows it.
//!
//! Arguments: `{"method": "POST", "url": "https://api.example/items",
//! "headers": {"accept": "application/json"}, "json": {...}}` (or `"body":
//! "text"` for a non-JSON body).
//!
//! `execute` sends the request through the host's net guard (the host adds
//! the operator's credentials for the host, if granted; the tool never sees
//! them) with an `Idempotency-Key` header set to the step's idempotency key,
//! so an API that honours it does not apply a retried step twice. A status
//! of 400 or more is an `external-error`. The output:
//!
//! ```json
//! {"method": "POST", "url": "...", "status": 201,
//!  "location": "https://api.example/items/7", "content_type": "application/json",
//!  "body": "...", "undo": {"method": "DELETE", "url": "https://api.example/items/7"},
//!  "dry_run": false}
//! ```
//!
//! `undo` is derived from the exchange, only where HTTP semantics define the
//! inverse:
//! - POST answered `201 Created` with a `Location` on the same origin →
//!   DELETE that location (a `Location` on another origin is ignored, so a
//!   server cannot point the undo at someone else's resource);
//! - PUT: the tool GETs the URL first; a `200` with a body up to 1 MiB is the
//!   previous representation → PUT it back; a `404`/`410` → DELETE the URL
//!   (the PUT created it);
//! - anything else (PATCH, DELETE, a POST without `201` + `Location`) → no
//!   undo: `compensate` answers `unrevertible`.
//!
//! `compensate` sends the undo request; a DELETE answered `404`/`410` counts
//! as done (idempotent). `dry_run` (where the host allows only GET and HEAD)
//! reads the URL's current state for PUT, PATCH and DELETE, and describes
//! the request without sending it; for a PUT its undo is already known.
//!
//! Side effects, risk high (a human approves each call), not idempotent in
//! general, supports dry-run; the response body is content from outside and
//! is marked untrusted. Needs `net:https:*` (HTTPS only).

use capsaga_sdk::http::{Method, Request, Response};
use capsaga_sdk::prelude::*;
use std::collections::BTreeMap;

/// Largest previous representation kept for a PUT's undo.
pub const MAX_PREVIOUS_BYTES: u64 = 1024 * 1024;
/// Largest response body read.
pub const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;
/// Most characters of the response body returned.
pub const MAX_BODY_CHARS: usize = 20_000;

/// The methods this tool sends.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum WriteMethod {
    /// Create (or act).
    Post,
    /// Replace.
    Put,
    /// Modify.
    Patch,
    /// Remove.
    Delete,
}

impl WriteMethod {
    fn sdk(self) -> Method {
        match self {
            WriteMethod::Post => Method::Post,
            WriteMethod::Put => Method::Put,
            WriteMethod::Patch => Method::Patch,
            WriteMethod::Delete => Method::Delete,
        }
    }
}

/// Arguments of `http_request`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// POST, PUT, PATCH or DELETE.
    pub method: WriteMethod,
    /// Absolute https:// URL.
    pub url: String,
    /// Extra request headers (Host, routing and hop-by-hop headers are refused by the host).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A JSON body (sent with content-type application/json).
    #[serde(default)]
    pub json: Option<capsaga_sdk::serde_json::Value>,
    /// A text body (when `json` is not given).
    #[serde(default)]
    pub body: Option<String>,
}

/// An undo request, derived from the exchange.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct Undo {
    /// `DELETE` or `PUT`.
    pub method: String,
    /// Where.
    pub url: String,
    /// Body to send (the previous representation, for PUT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Its content type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// The part of the output `compensate` reads.
#[derive(Debug, Deserialize)]
pub struct UndoData {
    /// The undo request, if the API allows one.
    pub undo: Option<Undo>,
    /// Whether the output comes from a dry run.
    #[serde(default)]
    pub dry_run: bool,
}

/// The component.
pub struct HttpRequest;

fn check_url(url: &str) -> Result<(), ToolError> {
    if url.to_ascii_lowercase().starts_with("https://") {
        Ok(())
    } else {
        Err(
            ToolError::invalid_args(format!("`{url}` is not an https:// URL"))
                .hint("http_request sends to https:// URLs only."),
        )
    }
}

/// `scheme://authority` of a URL, lowercase.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, authority, _) = capsaga_sdk::http::split_url(url).ok()?;
    Some(format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase()
    ))
}

/// What the URL holds now (for PUT's undo): `Some(undo)` when known.
fn previous_state(url: &str) -> Result<Option<Undo>, ToolError> {
    let resp = Request::get(url)
        .max_body_bytes(MAX_PREVIOUS_BYTES + 1)
        .send()?;
    Ok(undo_for_put(url, &resp))
}

/// The undo of a PUT to `url`, given a GET of it before.
pub fn undo_for_put(url: &str, before: &Response) -> Option<Undo> {
    match before.status {
        200 if !before.truncated && before.body.len() as u64 <= MAX_PREVIOUS_BYTES => {
            let body = String::from_utf8(before.body.clone()).ok()?;
            Some(Undo {
                method: "PUT".into(),
                url: url.to_string(),
                body: Some(body),
                content_type: before.header("content-type").map(str::to_string),
            })
        }
        404 | 410 => Some(Undo {
            method: "DELETE".into(),
            url: url.to_string(),
            body: None,
            content_type: None,
        }),
        _ => None,
    }
}

/// The undo of a POST answered with `resp`: DELETE of a `201`'s same-origin
/// `Location`.
pub fn undo_for_post(url: &str, resp: &Response) -> Option<Undo> {
    if resp.status != 201 {
        return None;
    }
    let loc = resp.header("location")?;
    let abs = capsaga_sdk::http::resolve_reference(url, loc.trim());
    if origin(&abs)? != origin(url)? {
        return None;
    }
    Some(Undo {
        method: "DELETE".into(),
        url: abs,
        body: None,
        content_type: None,
    })
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}[... truncated]", &s[..i]),
        None => s.to_string(),
    }
}

impl Tool for HttpRequest {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "http_request",
            "Sends a POST, PUT, PATCH or DELETE with an optional JSON or text body to an HTTPS API the operator granted, and returns the status and response body. Undone afterwards when the API allows it (DELETE of a created resource, PUT of the previous representation).",
        )
        .side_effects(true)
        .risk(Risk::High)
        .returns_untrusted(true)
        .dry_run(true)
        .capability("net:https:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/dry_run")
        .untrusted_field("/method")
        .untrusted_field("/url")
        .untrusted_field("/status")
        .untrusted_field("/location")
        .untrusted_field("/content_type")
        .untrusted_field("/body")
        .untrusted_field("/undo")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        check_url(&args.url)?;
        let undo_before = if args.method == WriteMethod::Put {
            previous_state(&args.url)?
        } else {
            None
        };
        let mut req =
            Request::new(args.method.sdk(), args.url.clone()).max_body_bytes(MAX_RESPONSE_BYTES);
        for (k, v) in &args.headers {
            req = req.header(k.clone(), v.clone());
        }
        if !ctx.idempotency_key.is_empty()
            && !args
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("idempotency-key"))
        {
            req = req.header("idempotency-key", ctx.idempotency_key.clone());
        }
        req = match (&args.json, &args.body) {
            (Some(j), _) => req.json(j),
            (None, Some(b)) => req.body(b.clone()),
            (None, None) => req,
        };
        let resp = req.send()?;
        let text = clip(&resp.text(), MAX_BODY_CHARS);
        if resp.status >= 400 {
            return Err(ToolError::external(format!(
                "{} {} answered {}",
                args.method.sdk().as_str(),
                args.url,
                resp.status
            ))
            .hint("Read the response body in the details; fix the request or ask the user.")
            .retriable(resp.status >= 500 || resp.status == 429)
            .details(json!({"status": resp.status, "body": clip(&text, 2000)})));
        }
        let undo = match args.method {
            WriteMethod::Post => undo_for_post(&args.url, &resp),
            WriteMethod::Put => undo_before,
            WriteMethod::Patch | WriteMethod::Delete => None,
        };
        let summary = format!(
            "{} {} → {}",
            args.method.sdk().as_str(),
            args.url,
            resp.status
        );
        let mut out = Output::new(json!({
            "method": args.method,
            "url": args.url,
            "status": resp.status,
            "location": resp.header("location"),
            "content_type": resp.header("content-type"),
            "body": text,
            "undo": undo,
            "dry_run": false,
        }))
        .summary(summary.clone())
        .effect(summary);
        if undo.is_none() {
            out = out.effect("no undo: the API gave no way to reverse this request");
        }
        Ok(out)
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        check_url(&args.url)?;
        let (current, undo) = match args.method {
            WriteMethod::Post => (None, None),
            _ => {
                let resp = Request::get(&args.url)
                    .max_body_bytes(MAX_PREVIOUS_BYTES + 1)
                    .send()?;
                let undo = if args.method == WriteMethod::Put {
                    undo_for_put(&args.url, &resp)
                } else {
                    None
                };
                (Some(resp.status), undo)
            }
        };
        let size = args
            .json
            .as_ref()
            .map(|j| j.to_string().len())
            .or(args.body.as_ref().map(String::len))
            .unwrap_or(0);
        let summary = format!(
            "would send {} {} ({size} bytes of body)",
            args.method.sdk().as_str(),
            args.url
        );
        Ok(Output::new(json!({
            "method": args.method,
            "url": args.url,
            "current_status": current,
            "undo": undo,
            "dry_run": true,
        }))
        .summary(summary))
    }

    fn compensate(_ctx: &CallContext, args: Args, output: &Output) -> Result<(), ToolError> {
        let data: UndoData = output.data_as()?;
        let Some(undo) = data.undo else {
            return Err(ToolError::unrevertible(format!(
                "{} {} cannot be undone: the API gave no way to reverse it",
                args.method.sdk().as_str(),
                args.url
            ))
            .hint("Tell the user what was sent; a human must reverse it if needed."));
        };
        let method = Method::parse(&undo.method)
            .filter(|m| matches!(m, Method::Delete | Method::Put))
            .ok_or_else(|| {
                ToolError::unrevertible(format!("unknown undo method {}", undo.method))
            })?;
        check_url(&undo.url)?;
        let mut req = Request::new(method, undo.url.clone()).max_body_bytes(64 * 1024);
        if let Some(body) = &undo.body {
            if let Some(ct) = &undo.content_type {
                req = req.header("content-type", ct.clone());
            }
            req = req.body(body.clone());
        }
        let resp = req.send()?;
        match resp.status {
            200..=299 => Ok(()),
            404 | 410 if method == Method::Delete => Ok(()),
            s => Err(ToolError::external(format!(
                "undo {} {} answered {s}",
                undo.method, undo.url
            ))
            .retriable(s >= 500)
            .details(json!({"status": s, "body": clip(&resp.text(), 2000)}))),
        }
    }
}

capsaga_sdk::export_tool!(HttpRequest);

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            url: "https://api.example/items".into(),
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn post_undo_needs_201_and_same_origin_location() {
        let u = "https://api.example/items";
        let undo = undo_for_post(u, &resp(201, &[("location", "/items/7")], "")).unwrap();
        assert_eq!(undo.method, "DELETE");
        assert_eq!(undo.url, "https://api.example/items/7");
        assert!(undo_for_post(u, &resp(200, &[("location", "/items/7")], "")).is_none());
        assert!(undo_for_post(u, &resp(201, &[], "")).is_none());
        assert!(
            undo_for_post(
                u,
                &resp(201, &[("location", "https://other.example/items/7")], "")
            )
            .is_none()
        );
        assert!(undo_for_post(u, &resp(201, &[("location", "//other.example/x")], "")).is_none());
        assert!(
            undo_for_post(
                u,
                &resp(201, &[("location", "http://api.example/items/7")], "")
            )
            .is_none()
        );
    }

    #[test]
    fn put_undo_from_previous_state() {
        let u = "https://api.example/items/1";
        let undo = undo_for_put(
            u,
            &resp(200, &[("content-type", "application/json")], "{\"a\":1}"),
        )
        .unwrap();
        assert_eq!(
            (undo.method.as_str(), undo.body.as_deref()),
            ("PUT", Some("{\"a\":1}"))
        );
        assert_eq!(
            undo_for_put(u, &resp(404, &[], "")).unwrap().method,
            "DELETE"
        );
        assert!(undo_for_put(u, &resp(500, &[], "")).is_none());
        let mut big = resp(200, &[], "x");
        big.truncated = true;
        assert!(undo_for_put(u, &big).is_none());
    }

    #[test]
    fn compensate_without_undo_is_unrevertible() {
        let args = Args {
            method: WriteMethod::Patch,
            url: "https://api.example/x".into(),
            headers: BTreeMap::new(),
            json: None,
            body: None,
        };
        let out = Output::new(json!({"undo": null, "dry_run": false}));
        let e = HttpRequest::compensate(&CallContext::default(), args, &out).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unrevertible);
    }

    #[test]
    fn meta_is_valid() {
        assert_eq!(
            capsaga_sdk::describe::<HttpRequest>("0.1.0").check(),
            Ok(())
        );
    }
}
