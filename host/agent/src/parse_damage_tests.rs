//! Both wire formats' parsers (`openai`, `anthropic`, each over `wire`)
//! fed damaged bodies: a test of the two providers together, beside them
//! rather than inside `wire`, which they both use.

/// Every prefix of real-looking bodies of both formats, and each with a
/// byte replaced, parses to an answer or an error: never a panic.
#[test]
fn damaged_bodies_never_panic() {
    let bodies = [
        r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"é"}],"tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":"{\"k\":\"\\u00e9\"}"}},{"function":{"name":"u","arguments":{"x":[1,{}]}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
        r#"{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"text","text":"é"},{"type":"tool_use","id":"t1","name":"t","input":{"a":"\"}"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}"#,
    ];
    for body in bodies {
        let bytes = body.as_bytes();
        for cut in 0..=bytes.len() {
            let Ok(prefix) = std::str::from_utf8(&bytes[..cut]) else {
                continue;
            };
            let _ = super::openai::parse_response("p", "m", prefix);
            let _ = super::anthropic::parse_response("p", "m", prefix);
        }
        for i in 0..bytes.len() {
            for b in [b'"', b'{', b']', b'0', b'n', b'\\'] {
                let mut v = bytes.to_vec();
                v[i] = b;
                if let Ok(s) = std::str::from_utf8(&v) {
                    let _ = super::openai::parse_response("p", "m", s);
                    let _ = super::anthropic::parse_response("p", "m", s);
                }
            }
        }
    }
}
