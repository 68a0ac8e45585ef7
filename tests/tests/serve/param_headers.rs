//! SEP-2243 (MCP 2026-07-28) custom headers, against a real `serve` over
//! raw HTTP: a tool whose input schema annotates an argument with
//! `x-mcp-header` has it mirrored in `Mcp-Param-<Name>` (plain, or
//! `=?base64?...?=`), and the server compares the header with the body
//! before any handler runs: a missing, extra, different, duplicated or
//! badly encoded header is refused with HTTP 400 and `-32020`
//! (HeaderMismatch), so a proxy routing on the header can never see
//! another value than the one the call uses. The annotated tool is the
//! conformance fixture `test_param_headers` (`capsaga-conformance`); the
//! server finds any listed tool's schema the same way (`get_tool`).

use super::wire2026::{answer, secret};
use capsaga_core::principal::Role;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};

const REV: &str = "2026-07-28";

/// A refused case: what it shows, the arguments, the extra headers.
type Refused<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>);

/// POST a 2026-07-28 `tools/call` of `name` with `args` and the extra
/// headers `extra`; the HTTP status and the JSON-RPC answer.
async fn call(url: &str, name: &str, args: Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut req = super::http()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", REV)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .bearer_auth(secret("alice"));
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": REV,
        "io.modelcontextprotocol/clientInfo": {"name": "param-headers-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let r = req
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta}}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, answer(&r.text().await.unwrap()))
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_param_headers_must_say_what_the_body_says() {
    let ws = TestWorkspace::new(&["time_now"], "[tools.time_now]\n");
    let host = ws.host().await;
    host.store
        .create_token(
            "alice",
            Role::Client,
            &digest(secret("alice").as_bytes()),
            "test",
        )
        .await
        .unwrap();
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.mcp.extension = Some(capsaga_conformance::extension());
    let srv = super::start(host, o).await;
    let url = srv.url("/mcp");
    let region = json!({"region": "eu-west", "query": "q"});

    // The header says what the body says: plain, or Base64-encoded.
    for value in ["eu-west", "=?base64?ZXUtd2VzdA==?="] {
        let (status, v) = call(
            &url,
            "test_param_headers",
            region.clone(),
            &[("Mcp-Param-Region", value)],
        )
        .await;
        assert_eq!(status, 200, "{value}: {v}");
        assert_eq!(
            v["result"]["content"][0]["text"], "region eu-west",
            "{value}: {v}"
        );
    }

    // Refused before the handler: missing, different, duplicated, badly
    // encoded, or present for an absent argument.
    let refused: Vec<Refused> = vec![
        ("missing", region.clone(), vec![]),
        (
            "different",
            region.clone(),
            vec![("Mcp-Param-Region", "us-east")],
        ),
        (
            "different once decoded",
            region.clone(),
            vec![("Mcp-Param-Region", "=?base64?dXMtZWFzdA==?=")],
        ),
        (
            "duplicated",
            region.clone(),
            vec![
                ("Mcp-Param-Region", "eu-west"),
                ("Mcp-Param-Region", "us-east"),
            ],
        ),
        (
            "bad Base64",
            region.clone(),
            vec![("Mcp-Param-Region", "=?base64?ZXUt!!d2VzdA==?=")],
        ),
        (
            "for an absent argument",
            json!({"query": "q"}),
            vec![("Mcp-Param-Region", "eu-west")],
        ),
    ];
    for (what, args, headers) in refused {
        let (status, v) = call(&url, "test_param_headers", args, &headers).await;
        assert_eq!(status, 400, "{what}: {v}");
        assert_eq!(v["error"]["code"], -32020, "{what}: {v}");
    }

    // A tool that annotates nothing needs no Mcp-Param header.
    let (status, v) = call(&url, "time_now", json!({}), &[]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["isError"], false, "{v}");
}
