//! Whether the model must call a tool: the `tool_choice` of a model call,
//! one vocabulary for both wire formats. Pure.
//!
//! | [`ToolChoice`] | text (`[agent] tool_choice`, `--tool-choice`) | OpenAI-compatible `tool_choice` | Anthropic `tool_choice` |
//! |---|---|---|---|
//! | `Auto` | `auto` | (omitted: the server's default, `"auto"`) | (omitted: `{"type":"auto"}`) |
//! | `Required` | `required` (`any`) | `"required"` | `{"type":"any"}` |
//! | `None` | `none` | `"none"` | `{"type":"none"}` |
//! | `Tool(name)` | `tool:NAME` | `{"type":"function","function":{"name":NAME}}` | `{"type":"tool","name":NAME}` |
//!
//! Sources: OpenAI Chat Completions API reference, `tool_choice`; Anthropic
//! Messages API, "Controlling Claude's output: forcing tool use". llama.cpp's
//! `llama-server --jinja` honours `"required"` and a named function by
//! constraining the output with a grammar built from the tool's schema, so a
//! forced call is also well-formed JSON of the schema's shape.
//!
//! A forced choice applies until the model has made a tool call in the turn
//! that the dispatch door admitted (an invalid call leaves it forced: the
//! model's next answer is the call corrected, or a second invalid call,
//! which ends the turn `tool_hallucination`); the next model calls are
//! `Auto` (the agent loop's rule: forcing every call would leave the model
//! no way to give its final answer, and the turn would always end at its
//! step limit).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// How the model is told to use the tools it is offered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (the providers' default).
    #[default]
    Auto,
    /// The model must call one of the tools (any of them).
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// A `tool_choice` text that names no choice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool_choice {0:?} is not one of auto, required, none, tool:NAME (NAME: letters, digits, '_' or '-', at most 64)"
)]
pub struct BadToolChoice(pub String);

impl ToolChoice {
    /// Whether the model is forced to call a tool (`Required` or `Tool`).
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Tool(_))
    }

    /// The tool this choice names, if any.
    pub fn tool(&self) -> Option<&str> {
        match self {
            ToolChoice::Tool(n) => Some(n),
            _ => None,
        }
    }
}

impl std::str::FromStr for ToolChoice {
    type Err = BadToolChoice;

    /// `auto`, `required` (or Anthropic's word `any`), `none`, `tool:NAME`.
    /// A name follows the tool-name rule of both wire formats
    /// (`^[a-zA-Z0-9_-]{1,64}$`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(ToolChoice::Auto),
            "required" | "any" => Ok(ToolChoice::Required),
            "none" => Ok(ToolChoice::None),
            _ => {
                let name = s
                    .strip_prefix("tool:")
                    .ok_or_else(|| BadToolChoice(s.chars().take(80).collect()))?;
                let ok = !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if ok {
                    Ok(ToolChoice::Tool(name.to_string()))
                } else {
                    Err(BadToolChoice(s.chars().take(80).collect()))
                }
            }
        }
    }
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolChoice::Auto => f.write_str("auto"),
            ToolChoice::Required => f.write_str("required"),
            ToolChoice::None => f.write_str("none"),
            ToolChoice::Tool(n) => write!(f, "tool:{n}"),
        }
    }
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_round_trips_and_bad_ones_are_refused() {
        for (text, choice) in [
            ("auto", ToolChoice::Auto),
            ("required", ToolChoice::Required),
            ("none", ToolChoice::None),
            ("tool:fs_read", ToolChoice::Tool("fs_read".into())),
        ] {
            assert_eq!(text.parse::<ToolChoice>(), Ok(choice.clone()));
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!("any".parse::<ToolChoice>(), Ok(ToolChoice::Required));
        for bad in [
            "",
            "Required",
            "tool:",
            "tool:a b",
            "tool:../x",
            "tool:é",
            "fs_read",
            &format!("tool:{}", "a".repeat(65)),
        ] {
            assert!(bad.parse::<ToolChoice>().is_err(), "{bad:?}");
        }
        assert!(ToolChoice::Required.forces_a_call());
        assert!(ToolChoice::Tool("x".into()).forces_a_call());
        assert!(!ToolChoice::None.forces_a_call() && !ToolChoice::Auto.forces_a_call());
    }
}
