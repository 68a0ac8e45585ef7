//! One generic capsaga tool for every AgentDojo tool (issue 47's benchmark).
//!
//! The component is built once; `scripts/agentdojo components` then writes
//! each tool's meta (name, description, argument schema, side effects,
//! untrusted output, the AgentDojo function) into a copy of it, in place of
//! the [`STAMP_LEN`]-byte placeholder [`STAMP`] (same length, so the binary
//! stays valid; each copy has its own content hash, as any component).
//! Read with volatile loads, so the compiler cannot fold the placeholder's
//! bytes into the code.
//!
//! `execute` forwards the arguments to the AgentDojo environment service:
//! `POST {AGENTDOJO_URL}/call/{function}` (the URL from the operator's
//! `[env]`, through the `env:AGENTDOJO_URL` grant; the request through a
//! `net:http:127.0.0.1:PORT` grant). The service answers
//! `{ok, text, error, data}`; the output's data is `text` (what AgentDojo's
//! pipeline shows a model) or, with `"output": "json"` stamped, `data`.
//! AgentDojo's own errors (`ValueError: ...`) are a tool error of kind
//! `external-error` for a read-only tool, and for a tool with side effects
//! (`"errors": "result"`, the default for those) the output `text`, as
//! AgentDojo's pipeline shows them to the model, because a failed step of a
//! side-effecting tool ends a capsaga turn and rolls it back, which AgentDojo
//! never does. The component decides nothing: capsaga's door decides whether
//! the call runs.
//!
//! Field labels (issue 47): the stamped `fields` (from the catalog's
//! `output_fields`: `system` fields trusted, `third_party` and `echo` ones
//! untrusted) are declared in the meta; they label the JSON output of a
//! component stamped `--output json` (AgentDojo's text output is one
//! string, labelled whole).

use capsaga_sdk::http::Request;
use capsaga_sdk::prelude::*;
use capsaga_sdk::schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Bytes of the stamp region (marker included).
pub const STAMP_LEN: usize = 32 * 1024;
/// What the stamp region starts with; `scripts/agentdojo components` finds
/// it (exactly once) in the built component.
pub const STAMP_MARKER: &[u8; 32] = b"capsaga-agentdojo-tool-meta:v1:\n";

const fn placeholder() -> [u8; STAMP_LEN] {
    // Spaces, never zeros: no tool squeezes runs of zero bytes out of a data
    // segment, and the JSON written over it may end in spaces.
    let mut a = [b' '; STAMP_LEN];
    let mut i = 0;
    while i < STAMP_MARKER.len() {
        a[i] = STAMP_MARKER[i];
        i += 1;
    }
    a
}

/// The stamp region: the marker, then the tool's meta as JSON padded with
/// spaces (spaces only until stamped).
#[used]
pub static STAMP: [u8; STAMP_LEN] = placeholder();

/// The stamped meta of one tool.
#[derive(Deserialize, Clone, Debug)]
struct Stamped {
    name: String,
    description: String,
    args_schema: Value,
    has_side_effects: bool,
    risk: String,
    returns_untrusted: bool,
    function: String,
    /// `text` (default) or `json`.
    #[serde(default)]
    output: Option<String>,
    /// `tool-error` or `result` (default: `result` for a tool with side
    /// effects, `tool-error` otherwise).
    #[serde(default)]
    errors: Option<String>,
    /// Field labels of the JSON output (`"output": "json"`), from the
    /// catalog's `output_fields`: JSON Pointers with `*`, each `trusted`
    /// (the system's: ids, statuses, sizes) or `untrusted`.
    #[serde(default)]
    fields: Vec<StampedField>,
}

/// One stamped field label.
#[derive(Deserialize, Clone, Debug)]
struct StampedField {
    path: String,
    integrity: String,
}

/// The stamped meta, or why it cannot be read.
fn stamped() -> Result<Stamped, String> {
    let p = STAMP.as_ptr();
    let mut bytes = Vec::with_capacity(STAMP_LEN);
    for i in 0..STAMP_LEN {
        // SAFETY: `i < STAMP_LEN`, inside the static; a volatile read of a
        // byte of a static is always valid.
        bytes.push(unsafe { core::ptr::read_volatile(p.add(i)) });
    }
    let body = bytes
        .strip_prefix(STAMP_MARKER.as_slice())
        .ok_or("the stamp region lost its marker")?;
    if body.iter().all(|b| *b == b' ') {
        return Err("this component was never stamped: run `scripts/agentdojo components`".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("the stamped meta is not valid: {e}"))
}

fn stamped_or_panic() -> Stamped {
    match stamped() {
        Ok(s) => s,
        // A meta that cannot be read is a bug of the build: the SDK traps on
        // an invalid meta and the host refuses the component.
        Err(e) => panic!("{e}"),
    }
}

/// Any JSON object; its schema is the stamped one.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct Args(Map<String, Value>);

impl JsonSchema for Args {
    fn schema_name() -> Cow<'static, str> {
        "Args".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let schema = stamped().map(|s| s.args_schema).unwrap_or(Value::Null);
        Schema::try_from(schema).unwrap_or_else(|_| Schema::default())
    }
}

/// The environment service's answer to `POST /call/<function>`.
#[derive(Deserialize)]
struct Answer {
    ok: bool,
    text: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Value,
}

fn clip(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The generic AgentDojo tool.
pub struct AgentDojoTool;

impl Tool for AgentDojoTool {
    type Args = Args;

    fn meta() -> Meta {
        let s = stamped_or_panic();
        let risk = match s.risk.as_str() {
            "high" => Risk::High,
            "medium" => Risk::Medium,
            _ => Risk::Low,
        };
        let mut meta = Meta::new(s.name, s.description)
            .side_effects(s.has_side_effects)
            .risk(risk)
            .returns_untrusted(s.returns_untrusted)
            .capability("net:http:*")
            .capability("env:AGENTDOJO_URL");
        for f in s.fields {
            meta = match f.integrity.as_str() {
                "trusted" => meta.trusted_field(f.path),
                _ => meta.untrusted_field(f.path),
            };
        }
        meta
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let s = stamped().map_err(ToolError::unknown)?;
        let base = std::env::var("AGENTDOJO_URL").map_err(|_| {
            ToolError::permission_denied("AGENTDOJO_URL is not set")
                .hint("the operator must grant env:AGENTDOJO_URL and set it in [env]")
        })?;
        let url = format!("{}/call/{}", base.trim_end_matches('/'), s.function);
        let resp = Request::post(&url).json(&Value::Object(args.0)).send()?;
        if resp.status != 200 {
            return Err(ToolError::external(format!(
                "the AgentDojo service answered {}: {}",
                resp.status,
                clip(&resp.text(), 300)
            )));
        }
        let answer: Answer = resp.json()?;
        let errors_as_result = match s.errors.as_deref() {
            Some("result") => true,
            Some(_) => false,
            None => s.has_side_effects,
        };
        if !answer.ok && !errors_as_result {
            let message = answer.error.unwrap_or(answer.text);
            return Err(ToolError::external(message).hint(
                "AgentDojo's tool raised this error; change the arguments or use another tool",
            ));
        }
        let summary = clip(&answer.text, 120);
        let data = match s.output.as_deref() {
            Some("json") if answer.ok => answer.data,
            _ => Value::String(answer.text),
        };
        Ok(Output::new(data).summary(summary))
    }
}

capsaga_sdk::export_tool!(AgentDojoTool);
