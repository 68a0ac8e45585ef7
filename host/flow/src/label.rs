//! Labels: where a value came from and whether it is trusted, for a whole
//! source or for fields of a tool's JSON output.
//!
//! A [`Label`] is a [`Source`] and an [`Integrity`]. Serialised as JSON
//! (`{"source":{"kind":"tool","tool":"web_fetch","component":"ab12…",
//! "saga":"s-1","step":3},"integrity":"untrusted"}`) so the write-ahead log
//! can keep it with a step and `capsaga log`/`trace`, the audit export and
//! the console can show it.
//!
//! Which integrity a source gets is the door's to say; the rules it
//! applies (DESIGN §8f):
//!
//! | source | integrity |
//! |---|---|
//! | the user's message of the turn | trusted |
//! | the operator's files (policy, system prompt, core memory files) | trusted |
//! | a tool result | [`capsaga_core::output_trust::output_is_untrusted`] as a whole, refined by field labels ([`OutputLabels`]) |
//! | a neuron's result | untrusted |
//! | a memory episode, an unapproved fact, a fact quoting untrusted data | untrusted |
//! | a fact the operator approved that quotes nothing untrusted | trusted |
//! | a value an operator approved in a call (an endorsement) | trusted |
//!
//! ## Field labels
//!
//! A tool may label fields of its JSON output: `{"/events/*/id":
//! "trusted", "/events/*/description": "untrusted"}`. A field is named by a
//! [`FieldPath`]: a JSON Pointer (RFC 6901: `/a/b`, `~0` for `~`, `~1` for
//! `/`) whose segment `*` stands for any array index or object key; a bare
//! name (`id`) is the top-level field `/id`. At most 16 segments, 256 bytes,
//! 64 paths per tool ([`FieldLabels::parse`] refuses anything else with a
//! [`FieldPathError`]).
//!
//! How a tool's field labels combine with the host's rule that outside data
//! is untrusted whatever the tool says ([`OutputLabels::combine`]):
//!
//! - a field labelled **untrusted** is untrusted, with everything under it,
//!   whatever else is said: narrowing is always allowed;
//! - when the host says the output is **trusted** as a whole (a tool with no
//!   grant reaching outside data that does not declare `returns-untrusted`),
//!   the rest of it is trusted;
//! - when the host says it is **untrusted** as a whole, a field the tool
//!   labels trusted is honoured only when the operator's policy confirms
//!   the same path (`[tools.<name>] trusted_fields`): a tool cannot vouch
//!   for what it fetched, only the operator can say that, e.g., the ids a
//!   calendar API assigns are the system's, not the invitation's author's.
//!   Even then the trust covers a **scalar** at exactly that path (a number,
//!   or a string that is one token: at most 128 characters, no whitespace,
//!   [`is_token`]): an object, an array, prose there stays untrusted; a
//!   trusted string vouches only for itself as a whole, not for identifiers
//!   inside it; and it vouches **weakly**: a value that untrusted data also
//!   mentions elsewhere is untrusted (an injected "delete file 13" picks
//!   among real ids: see `ledger`).
//!
//! Outputs that are not JSON never get here (the door refuses a tool
//! output that is not strict JSON: duplicate keys, depth over 64); a JSON
//! string or a scalar at the root has no field to label and takes the
//! whole's integrity.

pub use capsaga_core::field::{
    FieldLabels, FieldPath, FieldPathError, Integrity, MAX_FIELDS, MAX_PATH_BYTES, MAX_SEGMENTS,
    MAX_TRUSTED_CHARS, Segment, is_token, parse_paths, pointer,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a text of the turn came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// The user's message (an agent turn's prompt).
    User {
        /// Who sent it (a principal, `cli:alice`).
        principal: String,
    },
    /// A file the operator wrote (the policy, the system prompt, a core
    /// memory file).
    Operator {
        /// The file's name.
        file: String,
    },
    /// A tool's result.
    Tool {
        /// The tool's name.
        tool: String,
        /// The component's identity hash (hex), empty for a built-in.
        component: String,
        /// The saga of the step.
        saga: String,
        /// The step's sequence number in the saga.
        step: u64,
    },
    /// An item of the agent's memory.
    Memory {
        /// The item's id (`episode:42`, `fact:7`).
        item: String,
        /// Whether an operator approved it.
        approved: bool,
    },
    /// The arguments the model wrote in an earlier call: neither trusted
    /// nor untrusted data, kept only to tell a value the model copied from
    /// a source from one it wrote first and read back (see
    /// `Ledger::add_call`).
    Model {
        /// The saga of the call.
        saga: String,
        /// The call's step.
        step: u64,
    },
    /// A value an operator approved in a call (an endorsement).
    Approval {
        /// Who approved it.
        by: String,
        /// The saga of the approved step.
        saga: String,
        /// The approved step's sequence number.
        step: u64,
        /// The argument (a JSON Pointer into the call's arguments).
        argument: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::User { principal } => write!(f, "the user's message ({principal})"),
            Source::Operator { file } => write!(f, "the operator's file {file}"),
            Source::Tool { tool, step, .. } => write!(f, "{tool} (step {step})"),
            Source::Memory { item, approved } => write!(
                f,
                "memory {item}{}",
                if *approved { "" } else { " (not approved)" }
            ),
            Source::Model { step, .. } => write!(f, "the model's own call (step {step})"),
            Source::Approval { by, step, .. } => write!(f, "an approval by {by} (step {step})"),
        }
    }
}

/// A source and its integrity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    /// Where it came from.
    pub source: Source,
    /// Whether it is trusted (as a whole).
    pub integrity: Integrity,
    /// The field labels that refined it (a tool's output only; absent
    /// when none applied): `{"trusted": ["/events/*/id"], "untrusted":
    /// [...]}`, as stored with the step and shown by `capsaga trace`.
    #[serde(default, skip_serializing_if = "LabelFields::is_empty")]
    pub fields: LabelFields,
}

/// The fields of an output labelled otherwise than the whole
/// ([`OutputLabels`]), as paths (JSON Pointers with `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelFields {
    /// Trusted fields of an untrusted output (declared by the tool,
    /// confirmed by the operator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<String>,
    /// Untrusted fields (declared by the tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted: Vec<String>,
}

impl LabelFields {
    /// No field labelled.
    pub fn is_empty(&self) -> bool {
        self.trusted.is_empty() && self.untrusted.is_empty()
    }
}

impl Label {
    /// A trusted label.
    pub fn trusted(source: Source) -> Label {
        Label {
            source,
            integrity: Integrity::Trusted,
            fields: LabelFields::default(),
        }
    }

    /// An untrusted label.
    pub fn untrusted(source: Source) -> Label {
        Label {
            source,
            integrity: Integrity::Untrusted,
            fields: LabelFields::default(),
        }
    }
}

/// The labels of one tool output, after the host's rule (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLabels {
    /// The output as a whole.
    pub whole: Integrity,
    /// Fields (and everything under them) that are untrusted.
    pub untrusted: Vec<FieldPath>,
    /// Scalar fields that are trusted in an untrusted output.
    pub trusted: Vec<FieldPath>,
    /// Every path the tool declared, confirmed or not: the object keys
    /// they name literally are the tool's schema, not data (see
    /// `Ledger::add_output`).
    pub declared: Vec<FieldPath>,
}

impl OutputLabels {
    /// The same integrity everywhere.
    pub fn whole(integrity: Integrity) -> OutputLabels {
        OutputLabels {
            whole: integrity,
            untrusted: Vec::new(),
            trusted: Vec::new(),
            declared: Vec::new(),
        }
    }

    /// Combine the host's verdict on the output as a whole
    /// (`host_untrusted`: [`capsaga_core::output_trust::output_is_untrusted`]), the
    /// tool's `declared` field labels and the operator's `confirmed`
    /// trusted fields.
    pub fn combine(
        host_untrusted: bool,
        declared: &FieldLabels,
        confirmed: &[FieldPath],
    ) -> OutputLabels {
        let untrusted = declared
            .fields
            .iter()
            .filter(|(_, i)| *i == Integrity::Untrusted)
            .map(|(p, _)| p.clone())
            .collect();
        let paths = declared.fields.iter().map(|(p, _)| p.clone()).collect();
        if !host_untrusted {
            return OutputLabels {
                whole: Integrity::Trusted,
                untrusted,
                trusted: Vec::new(),
                declared: paths,
            };
        }
        let trusted = declared
            .fields
            .iter()
            .filter(|(p, i)| *i == Integrity::Trusted && confirmed.contains(p))
            .map(|(p, _)| p.clone())
            .collect();
        OutputLabels {
            whole: Integrity::Untrusted,
            untrusted,
            trusted,
            declared: paths,
        }
    }

    /// The fields labelled otherwise than the whole, for the output's
    /// [`Label`].
    pub fn fields(&self) -> LabelFields {
        let shown = |v: &[FieldPath]| v.iter().map(ToString::to_string).collect();
        LabelFields {
            trusted: shown(&self.trusted),
            untrusted: shown(&self.untrusted),
        }
    }

    /// The integrity of the value at `at`: untrusted under an untrusted
    /// field; trusted at a confirmed trusted field when `scalar_ok` (a
    /// number, or a string that [`is_token`]); otherwise the whole's.
    pub fn at(&self, at: &[String], scalar_ok: bool) -> Integrity {
        if self.untrusted.iter().any(|p| p.is_prefix_of(at)) {
            return Integrity::Untrusted;
        }
        if self.whole == Integrity::Untrusted
            && scalar_ok
            && self.trusted.iter().any(|p| p.matches(at))
        {
            return Integrity::Trusted;
        }
        self.whole
    }
}

#[cfg(test)]
mod tests;
