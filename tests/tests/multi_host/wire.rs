//! A stateless MCP 2026-07-28 client over raw HTTP (each request carries
//! its revision in `_meta`, no session), with the saga handle
//! `_meta["dev.capsaga/saga"]`, for the handle tests across hosts.

use serde_json::{Value, json};

/// The revision.
pub const REV: &str = "2026-07-28";

/// The request `_meta` the revision requires, plus `extra`.
pub fn meta(extra: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": REV,
        "io.modelcontextprotocol/clientInfo": {"name": "multi-host-handles", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
        m.extend(e);
    }
    m
}

/// The JSON-RPC answer in a body that is JSON or an SSE stream.
fn answer(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {body}"))
}

/// `tools/call` of `name` with `args` and the saga handle `handle`, at the
/// MCP endpoint `url` (a loopback host without a token: the caller is
/// `loopback` on every host). Returns the JSON-RPC answer.
pub async fn call(url: &str, name: &str, args: Value, handle: Option<&str>) -> Value {
    let extra = handle.map_or(json!({}), |h| json!({"dev.capsaga/saga": h}));
    call_with(url, name, args, extra, json!({})).await
}

/// [`call`] with `meta_extra` in the request's `_meta` (e.g. the saga
/// handle, the client's capabilities) and `params_extra` beside the name
/// and arguments (e.g. `inputResponses` and `requestState`).
pub async fn call_with(
    url: &str,
    name: &str,
    args: Value,
    meta_extra: Value,
    params_extra: Value,
) -> Value {
    let mut params = json!({"name": name, "arguments": args, "_meta": meta(meta_extra)});
    if let (Some(p), Value::Object(e)) = (params.as_object_mut(), params_extra) {
        p.extend(e);
    }
    let r = capsaga_tests::mcp_rig::http()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", REV)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = r.status().as_u16();
    assert!(
        !r.headers().contains_key("mcp-session-id"),
        "a stateless request gets no session"
    );
    let v = answer(&r.text().await.unwrap());
    assert!(status == 200 || status == 400, "{status}: {v}");
    v
}

/// [`call`] that must succeed (`isError` false); returns the result.
pub async fn call_ok(url: &str, name: &str, args: Value, handle: Option<&str>) -> Value {
    let v = call(url, name, args, handle).await;
    assert_eq!(v["result"]["isError"], false, "{name} at {url}: {v}");
    v
}

/// The saga a result names.
pub fn saga_of(v: &Value) -> String {
    v["result"]["structuredContent"]["saga_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no saga id in {v}"))
        .to_string()
}

/// The handle a result returns.
pub fn handle_of(v: &Value) -> String {
    v["result"]["_meta"]["dev.capsaga/saga"]
        .as_str()
        .unwrap_or_else(|| panic!("no saga handle in {v}"))
        .to_string()
}

/// Whether an answer is the "busy, retry" refusal.
pub fn is_busy(v: &Value) -> bool {
    v["error"]["code"] == -32600
        && v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("busy with another request"))
}
