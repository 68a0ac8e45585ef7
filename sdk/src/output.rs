//! [`Output`]: what a successful `execute` or `dry_run` returns.

use serde::Serialize;
use serde::de::Deserialize as _;
use serde::de::DeserializeOwned;

use crate::ToolError;

/// The result of a successful call (WIT `tool-output`): JSON data for the
/// model and for `compensate`, a list of human-readable effects, a one-line
/// summary and an optional hint for the guardrail.
///
/// ```
/// use capsaga_sdk::Output;
/// let out = Output::new(serde_json::json!({"path": "/w/a.txt", "bytes_written": 5}))
///     .effect("wrote /w/a.txt (5 bytes)")
///     .summary("Wrote 5 bytes to /w/a.txt")
///     .next_hint("validate");
/// let data: serde_json::Value = out.data_as().unwrap_or_default();
/// assert_eq!(data["bytes_written"], 5);
/// assert_eq!(out.data_json(), Some(r#"{"path":"/w/a.txt","bytes_written":5}"#));
/// ```
///
/// In `compensate`, read back what `execute` (or, after a crash, `dry_run`)
/// returned with [`Output::data_as`].
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// The data as JSON text, or why it could not be produced (a
    /// serialisation error in [`Output::new`]).
    data: Result<String, String>,
    /// Human-readable effects, e.g. `wrote /data/a.txt (120 bytes)`. Empty for
    /// a call that changed nothing.
    pub effects: Vec<String>,
    /// A hint for the guardrail: `validate` asks the host to move the saga to
    /// its validation phase.
    pub next_hint: Option<String>,
    /// One line describing what happened (or, for a dry run, what would
    /// happen); shown in approvals and logs. When left empty the SDK fills in
    /// the effects joined with `; `, or `<tool name> completed`.
    pub summary: String,
}

impl Output {
    /// An output carrying `data` serialised to JSON text (once, directly:
    /// struct field order is kept and large data is not copied twice).
    ///
    /// Serialisation of ordinary structs cannot fail; if it does (a map with
    /// non-string keys, a failing `Serialize` impl), the failure is kept and
    /// the call returns a [`ToolError`] of kind `unknown` instead of this
    /// output. Use [`Output::try_new`] to handle it yourself.
    pub fn new(data: impl Serialize) -> Output {
        Output {
            data: serde_json::to_string(&data).map_err(|e| e.to_string()),
            effects: Vec::new(),
            next_hint: None,
            summary: String::new(),
        }
    }

    /// Like [`Output::new`] but reports a serialisation failure at once.
    ///
    /// # Errors
    /// [`ToolError`] of kind `unknown` when `data` cannot be serialised.
    pub fn try_new(data: impl Serialize) -> Result<Output, ToolError> {
        let out = Output::new(data);
        match &out.data {
            Ok(_) => Ok(out),
            Err(e) => Err(serialize_error(e)),
        }
    }

    /// An output whose data is `json`, JSON text that is already encoded (for
    /// example a remote API's answer, or a large document built in place):
    /// checked to be one valid JSON value, then passed on without copying.
    ///
    /// # Errors
    /// [`ToolError`] of kind `unknown` when `json` is not valid JSON.
    pub fn from_json_text(json: impl Into<String>) -> Result<Output, ToolError> {
        let json = json.into();
        let mut de = serde_json::Deserializer::from_str(&json);
        serde::de::IgnoredAny::deserialize(&mut de)
            .and_then(|_| de.end())
            .map_err(|e| {
                ToolError::unknown(format!("the tool produced invalid JSON: {e}"))
                    .hint("this is a bug in the tool; do not retry the same call")
            })?;
        Ok(Output {
            data: Ok(json),
            effects: Vec::new(),
            next_hint: None,
            summary: String::new(),
        })
    }

    /// Appends one human-readable effect, e.g. `wrote /x/a.txt (120 bytes)`.
    #[must_use]
    pub fn effect(mut self, effect: impl Into<String>) -> Output {
        self.effects.push(effect.into());
        self
    }

    /// Sets the one-line summary.
    #[must_use]
    pub fn summary(mut self, summary: impl Into<String>) -> Output {
        self.summary = summary.into();
        self
    }

    /// Sets the hint for the guardrail, e.g. `validate`.
    #[must_use]
    pub fn next_hint(mut self, hint: impl Into<String>) -> Output {
        self.next_hint = Some(hint.into());
        self
    }

    /// The data as JSON text, or `None` when it could not be serialised. (In
    /// `compensate` this is the text the host passed, unchecked.)
    pub fn data_json(&self) -> Option<&str> {
        self.data.as_deref().ok()
    }

    /// Deserialises the data into `T`: the struct `execute` put in, or
    /// `serde_json::Value` to look at it freely.
    ///
    /// # Errors
    /// [`ToolError`] of kind `invalid-args` when the data is missing, is not
    /// JSON, or does not have the shape of `T` (the host handed `compensate`
    /// an output this tool did not produce).
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        let hint = "pass compensate the output that execute or dry-run returned, unchanged";
        let text = self.data.as_deref().map_err(|e| {
            ToolError::invalid_args(format!("the tool output has no data: {e}")).hint(hint)
        })?;
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de)
            .map_err(|e| e.to_string())
            .and_then(|v| de.end().map(|()| v).map_err(|e| e.to_string()))
            .map_err(|e| {
                ToolError::invalid_args(format!(
                    "the tool output does not have the expected shape: {e}"
                ))
                .hint(hint)
            })
    }

    /// The data as JSON text, for the host.
    pub(crate) fn into_data_text(
        self,
    ) -> Result<(String, Vec<String>, Option<String>, String), ToolError> {
        match self.data {
            Ok(text) => Ok((text, self.effects, self.next_hint, self.summary)),
            Err(e) => Err(serialize_error(&e)),
        }
    }

    /// Rebuilds an output from the host's record (for `compensate`).
    pub(crate) fn from_parts(
        data: String,
        effects: Vec<String>,
        next_hint: Option<String>,
        summary: String,
    ) -> Output {
        Output {
            data: Ok(data),
            effects,
            next_hint,
            summary,
        }
    }
}

fn serialize_error(e: &str) -> ToolError {
    ToolError::unknown(format!(
        "the tool's output could not be serialised to JSON: {e}"
    ))
    .hint("this is a bug in the tool; do not retry the same call")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Data {
        path: String,
        n: u64,
    }

    #[test]
    fn builder_and_round_trip() {
        let out = Output::new(Data {
            path: "/w/a".into(),
            n: 3,
        })
        .effect("e1")
        .effect("e2")
        .summary("s")
        .next_hint("validate");
        assert_eq!(out.effects, ["e1", "e2"]);
        assert_eq!(out.summary, "s");
        assert_eq!(out.next_hint.as_deref(), Some("validate"));
        let text = out.data_json().unwrap_or_default().to_owned();
        assert_eq!(text, r#"{"path":"/w/a","n":3}"#, "field order is kept");
        let back = Output::from_parts(text, vec![], None, String::new());
        assert_eq!(
            back.data_as::<Data>().ok(),
            Some(Data {
                path: "/w/a".into(),
                n: 3
            })
        );
    }

    #[test]
    fn from_json_text_checks_and_keeps_text() {
        let out = Output::from_json_text(r#"{"b": [1, 2], "a": null}"#);
        let out = out.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.data_json(), Some(r#"{"b": [1, 2], "a": null}"#));
        for bad in ["", "{", r#"{"a":1} {"b":2}"#, "nope"] {
            let e = Output::from_json_text(bad).err().map(|e| e.kind);
            assert_eq!(e, Some(ErrorKind::Unknown), "{bad}");
        }
    }

    #[test]
    fn data_as_wrong_shape_is_invalid_args() {
        let out = Output::new(serde_json::json!({"path": 1}));
        let e = out.data_as::<Data>().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(ErrorKind::InvalidArgs));
        assert!(e.is_some_and(|e| e.message.contains("path")));
    }

    #[test]
    fn data_as_on_garbage_is_invalid_args() {
        for text in ["not json", r#"{"path":"/a","n":1} trailing"#] {
            let out = Output::from_parts(text.into(), vec![], None, String::new());
            let e = out.data_as::<Data>().err();
            assert_eq!(e.map(|e| e.kind), Some(ErrorKind::InvalidArgs), "{text}");
        }
    }

    #[test]
    fn serialisation_failure_is_reported() {
        let mut bad = BTreeMap::new();
        bad.insert(vec![1u8], 1u8); // non-string keys cannot be JSON object keys
        assert_eq!(
            Output::try_new(&bad).err().map(|e| e.kind),
            Some(ErrorKind::Unknown)
        );
        assert!(Output::new(&bad).data_json().is_none());
        assert!(Output::new(&bad).into_data_text().is_err());
    }
}
