//! The plan's tool scope in an agent turn (issue 47; the rules are
//! `capsaga_core::fsm::scope`): a model answer whose text holds a JSON
//! object `{"plan": {"tools": ["read_file", "send_money"]}}` declares the
//! tools the turn may use. Declared before any untrusted data was read, it
//! fixes the scope; afterwards it can only narrow it (a page the agent read
//! cannot add a tool). A call outside the scope is refused at the door with
//! a hint, and the turn goes on. The trace keeps the scope and a critic
//! step per declaration.

use super::trace::{ExecutionTrace, TraceStep};
use capsaga_door::saga::Saga;
use serde_json::Value;

/// Most bytes of an answer searched for a plan.
const MAX_SEARCHED: usize = 64 * 1024;

/// The tools a plan in `text` declares: the first JSON object in it with
/// a `plan` object holding a `tools` array of strings.
pub(crate) fn declared_tools(text: &str) -> Option<Vec<String>> {
    let mut end = text.len().min(MAX_SEARCHED);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    for (i, _) in text.match_indices('{') {
        let mut it = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        let Some(Ok(v)) = it.next() else {
            continue;
        };
        let Some(tools) = v.get("plan").and_then(|p| p.get("tools")) else {
            continue;
        };
        let tools = tools.as_array()?;
        return tools
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect();
    }
    None
}

/// Declare the scope a model answer's `text` holds, if any, and record it.
pub(crate) fn declare(saga: &mut Saga, tr: &mut ExecutionTrace, text: &str) {
    if !text.contains("\"plan\"") {
        return;
    }
    let Some(tools) = declared_tools(text) else {
        return;
    };
    let (verdict, reason) = match saga.flow_mut().declare(&tools) {
        Ok(()) => {
            tr.scope = saga.flow().scope().declared().map(|s| s.names());
            ("declared", format!("tool scope: {}", tools.join(", ")))
        }
        Err(e) => ("refused", e.to_string()),
    };
    tr.steps.push(TraceStep::Critic {
        purpose: "scope".into(),
        input: tools.join(", "),
        verdict: verdict.into(),
        reason,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_found_in_prose_and_nothing_else_is() {
        assert_eq!(
            declared_tools(
                "I will do it. {\"plan\": {\"tools\": [\"read_file\", \"send_money\"]}} ok"
            ),
            Some(vec!["read_file".into(), "send_money".into()])
        );
        assert_eq!(declared_tools("{\"other\": 1} no plan"), None);
        assert_eq!(declared_tools("{\"plan\": {\"tools\": [1]}}"), None);
        assert_eq!(declared_tools("{\"plan\": {\"tools\": \"x\"}}"), None);
        assert_eq!(
            declared_tools("é{ broken {\"plan\":{\"tools\":[]}}"),
            Some(vec![])
        );
    }
}
