//! `web_search`: searches the web through a backend speaking SearXNG's JSON
//! API (`GET <endpoint>?q=...&format=json`, see
//! <https://docs.searxng.org/dev/search_api.html>).
//!
//! Arguments: `{"query": "wasmtime pooling allocator", "max_results": 5,
//! "language": "en", "time_range": "year", "page": 1}`.
//!
//! The operator chooses the backend, never the model: its URL is the
//! environment variable `WEB_SEARCH_URL` (an `env:WEB_SEARCH_URL` grant, value
//! in the policy's `[env]`, e.g. `https://search.example.org/search`), and
//! the host must be granted (`net:https:search.example.org`). Every request
//! goes through the host's net guard. Results (title, URL, snippet, engine)
//! come from third parties: the output is untrusted, snippets are cut at 400
//! characters, and at most 20 results are returned.
//!
//! Read-only, idempotent, risk low. Needs `net:https:*` and
//! `env:WEB_SEARCH_URL`.

use capsaga_sdk::http::Request;
use capsaga_sdk::prelude::*;
use capsaga_sdk::serde_json;

/// The environment variable naming the search endpoint.
pub const ENDPOINT_VAR: &str = "WEB_SEARCH_URL";

/// Longest snippet returned, characters.
pub const MAX_SNIPPET_CHARS: usize = 400;

/// Largest response read, bytes.
pub const MAX_RESPONSE_BYTES: u64 = 2 * 1024 * 1024;

fn default_max() -> usize {
    5
}

fn default_page() -> u32 {
    1
}

/// A time range filter.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TimeRange {
    /// The last day.
    Day,
    /// The last week.
    Week,
    /// The last month.
    Month,
    /// The last year.
    Year,
}

/// Arguments of `web_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to search for.
    pub query: String,
    /// Most results returned (default 5).
    #[serde(default = "default_max")]
    #[schemars(range(min = 1, max = 20))]
    pub max_results: usize,
    /// Language code, e.g. `en` or `fr-FR` (default: the backend's).
    #[serde(default)]
    pub language: Option<String>,
    /// Only results from this period.
    #[serde(default)]
    pub time_range: Option<TimeRange>,
    /// Result page, from 1.
    #[serde(default = "default_page")]
    #[schemars(range(min = 1, max = 10))]
    pub page: u32,
}

/// One result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hit {
    /// Title.
    pub title: String,
    /// URL.
    pub url: String,
    /// Snippet (cut at 400 characters).
    pub snippet: String,
    /// Engine(s) that found it, when the backend says.
    pub engine: Option<String>,
}

/// The tool.
pub struct WebSearch;

impl Tool for WebSearch {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "web_search",
            "Searches the web (through the operator's search backend) and returns titles, URLs \
             and snippets of the results. Use web_fetch to read a result.",
        )
        .risk(Risk::Low)
        .idempotent(true)
        .dry_run(true)
        .returns_untrusted(true)
        .capability("net:https:*")
        .capability(format!("env:{ENDPOINT_VAR}"))
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/page")
        .trusted_field("/truncated")
        .untrusted_field("/query")
        .untrusted_field("/results")
        .untrusted_field("/suggestions")
        .untrusted_field("/answers")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(
                ToolError::invalid_args("the query is empty").hint("give words to search for")
            );
        }
        if query.chars().count() > 500 {
            return Err(
                ToolError::invalid_args("the query is longer than 500 characters")
                    .hint("search with fewer, more specific words"),
            );
        }
        let endpoint = std::env::var(ENDPOINT_VAR).map_err(|_| {
            ToolError::unsupported(format!("no search backend: {ENDPOINT_VAR} is not set"))
                .hint("web search is not configured here; answer without it or use web_fetch on a known URL")
        })?;
        let url = request_url(&endpoint, query, &args)?;
        let resp = Request::get(url.clone())
            .header("accept", "application/json")
            .max_body_bytes(MAX_RESPONSE_BYTES)
            .send()?;
        if resp.status >= 400 {
            return Err(ToolError::external(format!(
                "the search backend answered {}",
                resp.status
            ))
            .hint(if resp.status == 429 || resp.status >= 500 {
                "the search backend is busy or failing; try again later"
            } else {
                "the search backend refused the request; rephrase the query"
            })
            .retriable(resp.status == 429 || resp.status >= 500)
            .details(json!({"status": resp.status})));
        }
        let body: serde_json::Value = serde_json::from_slice(&resp.body).map_err(|e| {
            ToolError::external(format!("the search backend did not answer JSON: {e}"))
                .hint("the backend is misconfigured; tell the operator")
        })?;
        let (hits, suggestions, answers) = parse_results(&body, args.max_results.clamp(1, 20));
        let summary = format!("{} results for {query:?}", hits.len());
        Ok(Output::new(json!({
            "query": query,
            "page": args.page,
            "results": hits,
            "suggestions": suggestions,
            "answers": answers,
            "truncated": resp.truncated,
        }))
        .summary(summary))
    }
}

capsaga_sdk::export_tool!(WebSearch);

/// The request URL: the endpoint with the query parameters of SearXNG's API.
///
/// # Errors
/// `unsupported` when the endpoint is not an http(s) URL.
pub fn request_url(endpoint: &str, query: &str, args: &Args) -> Result<String, ToolError> {
    let mut url = url::Url::parse(endpoint).map_err(|e| {
        ToolError::unsupported(format!("{ENDPOINT_VAR} is not a URL: {e}"))
            .hint("web search is misconfigured; tell the operator")
    })?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(
            ToolError::unsupported(format!("{ENDPOINT_VAR} is not an http(s) URL"))
                .hint("web search is misconfigured; tell the operator"),
        );
    }
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("q", query).append_pair("format", "json");
        q.append_pair("pageno", &args.page.clamp(1, 10).to_string());
        if let Some(l) = &args.language {
            q.append_pair("language", l);
        }
        if let Some(t) = args.time_range {
            q.append_pair(
                "time_range",
                match t {
                    TimeRange::Day => "day",
                    TimeRange::Week => "week",
                    TimeRange::Month => "month",
                    TimeRange::Year => "year",
                },
            );
        }
    }
    Ok(url.to_string())
}

fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Results, suggestions and answers of a SearXNG JSON response; entries
/// without a URL are skipped.
pub fn parse_results(body: &serde_json::Value, max: usize) -> (Vec<Hit>, Vec<String>, Vec<String>) {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let hits = body["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let url = text(&r["url"])?;
            Some(Hit {
                title: clip(&text(&r["title"]).unwrap_or_default(), 200),
                url,
                snippet: clip(&text(&r["content"]).unwrap_or_default(), MAX_SNIPPET_CHARS),
                engine: text(&r["engine"]).or_else(|| {
                    r["engines"].as_array().map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                }),
            })
        })
        .take(max)
        .collect();
    let strings = |v: &serde_json::Value, n: usize| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                s.as_str()
                    .map(|s| clip(s, MAX_SNIPPET_CHARS))
                    .or_else(|| text(&s["answer"]))
            })
            .take(n)
            .collect()
    };
    (
        hits,
        strings(&body["suggestions"], 5),
        strings(&body["answers"], 3),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Args {
        Args {
            query: "q".into(),
            max_results: 5,
            language: Some("en".into()),
            time_range: Some(TimeRange::Week),
            page: 2,
        }
    }

    #[test]
    fn url_has_the_searxng_parameters() {
        let u =
            request_url("https://s.example/search?token=1", "a b&c", &args()).unwrap_or_default();
        assert_eq!(
            u,
            "https://s.example/search?token=1&q=a+b%26c&format=json&pageno=2&language=en&time_range=week"
        );
        assert!(request_url("file:///etc/passwd", "q", &args()).is_err());
    }

    #[test]
    fn results_are_parsed_and_bounded() {
        let long = "x".repeat(1000);
        let body = json!({
            "results": [
                {"url": "https://a.example/", "title": "A", "content": long, "engine": "ddg"},
                {"title": "no url"},
                {"url": "https://b.example/", "title": "B", "engines": ["x", "y"]},
                {"url": "https://c.example/"}
            ],
            "suggestions": ["s1"],
            "answers": ["42"]
        });
        let (hits, s, a) = parse_results(&body, 2);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].snippet.chars().count(), MAX_SNIPPET_CHARS + 1);
        assert_eq!(hits[1].engine.as_deref(), Some("x,y"));
        assert_eq!((s, a), (vec!["s1".to_owned()], vec!["42".to_owned()]));
    }

    #[test]
    fn meta_is_valid() {
        let m = capsaga_sdk::describe::<WebSearch>("0.1.0");
        assert_eq!(m.check(), Ok(()));
        assert_eq!(m.capabilities, ["net:https:*", "env:WEB_SEARCH_URL"]);
    }
}
