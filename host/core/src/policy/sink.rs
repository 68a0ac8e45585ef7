//! Sink rules: per tool and per argument, what may flow into a call, and
//! what happens when something else does. Part of the operator's
//! `capsaga.toml`:
//!
//! ```toml
//! [flow]
//! strict = false              # true: once untrusted data is in the context,
//!                             # every side effect needs a human
//! scope = "required"          # or "optional" (default): see fsm::scope
//! default_sink = "identifiers"  # every argument of a side-effecting tool
//!                             # with no rules of its own (default)
//! neurons = { sinks = { "*" = "trusted" }, on_untrusted = "approve" }
//!
//! [tools.http_request]
//! sinks = { url = "trusted", "/json" = "identifiers" }
//! on_untrusted = "deny"       # or "approve" (default)
//!
//! [tools.calendar]
//! trusted_fields = ["/events/*/id"]   # confirms the tool's own field label
//!
//! [tools.get_unread_emails]
//! strict = true               # once untrusted data is in the context, every
//!                             # call needs a human (false: never judged)
//! ```
//!
//! A sink's key is a field path of the call's arguments (`label`: a bare
//! name or a JSON Pointer with `*`); it covers every scalar under it. Its
//! level ([`SinkLevel`]), from the loosest:
//!
//! - `any`: not checked;
//! - `verbatim`: a value copied whole from any source (a link on a page), or
//!   what `identifiers` allows; for read-only tools whose argument can carry
//!   data out (`web_fetch`'s URL): copying a link the page gave carries
//!   nothing the attacker did not already have, composing one may;
//! - `identifiers`: every identifier-like token in the value (address, URL,
//!   host, IBAN, long number, path, id, date) comes from a trusted source;
//!   prose around them is free (a body, a script);
//! - `trusted`: the value itself comes from a trusted source: its tokens,
//!   or, when it has none, the value as a phrase or a number in context
//!   (a recipient, a path, an amount);
//! - `endorsed`: as `trusted`, but only a principal's word vouches: the
//!   user's message, the operator's files (and facts the operator
//!   approved), an approval; never a tool's output, even a trusted one or a
//!   field the operator confirmed trusted. For irreversible arguments (the
//!   file or record deleted, a payment's recipient, whom something is
//!   shared with): a trusted field proves an id is real, not that the user
//!   chose it, and an instruction in the data can pick among real ids
//!   without naming one ("delete the five largest files").
//!
//! A value found `nowhere` fails `identifiers` and `trusted` once untrusted
//! data is in the context (see `provenance`): except in an MCP session,
//! whose client (the agent) holds trusted inputs the host never sees; there
//! only values found in untrusted data, or lookalikes, fail.
//!
//! `on_untrusted`: `approve` (default: a human decides, shown the argument,
//! the value and where it came from) or `deny` (a `permission-denied` error
//! whose hint tells the model why).
//!
//! Defaults ([`first_party`]) apply to the first-party tools the operator
//! gave no `sinks` (an explicit `sinks = {}` turns them off, a widening),
//! neurons get `[flow] neurons` (default: every argument `trusted`), and
//! every other side-effecting tool `default_sink` on every argument.
//!
//! **The call itself.** Sinks judge values; a side effect that takes no
//! value (a read that marks the mail it returns read, a "sync now") has
//! nothing to judge, and the host cannot tell whether the user asked for
//! it or a text the model read did. Such a call (no argument, or only
//! booleans and nulls) gets `on_untrusted` once untrusted data is in the
//! context of a turn, as in strict mode; `strict = true` does that for
//! every call of a tool, `strict = false` for none.
//!
//! **Narrowing and widening.** [`widenings`] lists what a new rule set lets
//! through that the old one did not (strict mode off, scope no longer
//! required, a sink lowered or removed, `deny` → `approve`, a trusted field
//! added). Narrowing applies at once; a widening is an operator action the
//! door logs.

use crate::field::{FieldPath, FieldPathError, MAX_FIELDS, Segment, parse_paths};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What may flow into an argument (from the loosest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkLevel {
    /// Not checked.
    Any,
    /// Copied whole from any source, or `identifiers`.
    Verbatim,
    /// Every identifier-like token trusted.
    Identifiers,
    /// The value trusted.
    Trusted,
    /// The value given by a principal (the user, the operator, an
    /// approval), not by a tool's output.
    Endorsed,
}

impl SinkLevel {
    /// The policy's name of the level.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkLevel::Any => "any",
            SinkLevel::Verbatim => "verbatim",
            SinkLevel::Identifiers => "identifiers",
            SinkLevel::Trusted => "trusted",
            SinkLevel::Endorsed => "endorsed",
        }
    }
}

/// What a call whose argument fails its sink gets.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OnUntrusted {
    /// A human approves it, shown where the value came from.
    #[default]
    Approve,
    /// Refused with a `permission-denied` error and a hint.
    Deny,
}

/// Whether a plan must declare its tool scope (see [`crate::fsm::scope`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeRule {
    /// A scope is honoured when declared.
    #[default]
    Optional,
    /// A side-effecting call without a scope declared before any untrusted
    /// data was read is refused.
    Required,
}

/// A sink section as written (`[flow] neurons`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkSection {
    /// Argument path → level.
    pub sinks: Option<BTreeMap<String, SinkLevel>>,
    /// What a failing call gets.
    pub on_untrusted: Option<OnUntrusted>,
}

/// The `[flow]` section as written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFile {
    /// Every side effect needs a human once untrusted data was read.
    #[serde(default)]
    pub strict: bool,
    /// Whether a declared tool scope is required.
    #[serde(default)]
    pub scope: ScopeRule,
    /// The level of every argument of a side-effecting tool without rules
    /// (default `identifiers`).
    pub default_sink: Option<SinkLevel>,
    /// Neurons' rules (default: every argument `trusted`).
    #[serde(default)]
    pub neurons: SinkSection,
}

/// One tool's flow keys as written in its `[tools.<name>]` section.
#[derive(Debug, Clone, Copy)]
pub struct ToolFlowKeys<'a> {
    /// `sinks`.
    pub sinks: Option<&'a BTreeMap<String, SinkLevel>>,
    /// `on_untrusted`.
    pub on_untrusted: Option<OnUntrusted>,
    /// `trusted_fields`.
    pub trusted_fields: &'a [String],
    /// `strict` (see [`ToolSinks::strict`]).
    pub strict: Option<bool>,
}

/// Why a `[flow]` section or a tool's flow keys were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A sink's or a trusted field's path.
    #[error("[{section}]: {error}")]
    Path {
        /// The section (`tools.http_request`, `flow.neurons`).
        section: String,
        /// What is wrong.
        error: FieldPathError,
    },
}

/// One tool's rules, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolSinks {
    /// Argument paths and their levels.
    pub sinks: Vec<(FieldPath, SinkLevel)>,
    /// What a failing call gets.
    pub on_untrusted: OnUntrusted,
    /// Output fields the operator confirms trusted (see `label`).
    pub trusted_fields: Vec<FieldPath>,
    /// `[tools.<name>] strict`: whether the call itself is judged, whatever
    /// its arguments (see `decide`): `Some(true)`, every call once
    /// untrusted data is in the context; `Some(false)`, never; `None` (the
    /// default), only a side-effecting call that carries no value the host
    /// can trace (no argument, or only booleans and nulls).
    pub strict: Option<bool>,
}

impl ToolSinks {
    /// The level of the argument at `at`: the strictest sink whose path is
    /// `at` or an ancestor of it.
    pub fn level_at(&self, at: &[String]) -> SinkLevel {
        self.sinks
            .iter()
            .filter(|(p, _)| p.is_prefix_of(at))
            .map(|(_, l)| *l)
            .max()
            .unwrap_or(SinkLevel::Any)
    }

    /// Whether any argument is checked.
    pub fn checks_anything(&self) -> bool {
        self.sinks.iter().any(|(_, l)| *l > SinkLevel::Any)
    }

    /// The strictest level applying at or around `path` (for comparisons).
    fn level_over(&self, path: &FieldPath) -> SinkLevel {
        self.sinks
            .iter()
            .filter(|(p, _)| covers(p, path))
            .map(|(_, l)| *l)
            .max()
            .unwrap_or(SinkLevel::Any)
    }
}

/// Whether `p` covers every argument `q` names.
fn covers(p: &FieldPath, q: &FieldPath) -> bool {
    p.segments().len() <= q.segments().len()
        && p.segments()
            .iter()
            .zip(q.segments())
            .all(|(a, b)| match (a, b) {
                (Segment::Any, _) => true,
                (Segment::Key(x), Segment::Key(y)) => x == y,
                (Segment::Key(_), Segment::Any) => false,
            })
}

/// The checked flow rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRules {
    /// `[flow] strict`.
    pub strict: bool,
    /// `[flow] scope = "required"`.
    pub scope_required: bool,
    /// `[flow] default_sink`.
    pub default_sink: SinkLevel,
    /// Tools with flow keys in their sections, and whether they set `sinks`.
    pub tools: BTreeMap<String, (ToolSinks, bool)>,
    /// Neurons' rules.
    pub neurons: ToolSinks,
}

impl Default for FlowRules {
    fn default() -> Self {
        FlowRules {
            strict: false,
            scope_required: false,
            default_sink: SinkLevel::Identifiers,
            tools: BTreeMap::new(),
            neurons: neuron_default(OnUntrusted::Approve),
        }
    }
}

fn sinks_of(
    section: &str,
    map: &BTreeMap<String, SinkLevel>,
) -> Result<Vec<(FieldPath, SinkLevel)>, FlowError> {
    let err = |error| FlowError::Path {
        section: section.to_string(),
        error,
    };
    if map.len() > MAX_FIELDS {
        return Err(err(FieldPathError::TooMany));
    }
    let mut out: Vec<(FieldPath, SinkLevel)> = Vec::new();
    for (k, l) in map {
        let p = FieldPath::parse(k).map_err(err)?;
        if out.iter().any(|(q, _)| *q == p) {
            return Err(err(FieldPathError::Duplicate(p.to_string())));
        }
        out.push((p, *l));
    }
    Ok(out)
}

fn neuron_default(on_untrusted: OnUntrusted) -> ToolSinks {
    ToolSinks {
        sinks: vec![(FieldPath::everything(), SinkLevel::Trusted)],
        on_untrusted,
        trusted_fields: Vec::new(),
        strict: None,
    }
}

impl FlowFile {
    /// Check the section and every tool's flow keys.
    ///
    /// # Errors
    /// The first bad path, naming its section.
    pub fn check<'a>(
        &self,
        tools: impl Iterator<Item = (&'a String, ToolFlowKeys<'a>)>,
    ) -> Result<FlowRules, FlowError> {
        let neurons_on = self.neurons.on_untrusted.unwrap_or_default();
        let neurons = match &self.neurons.sinks {
            Some(map) => ToolSinks {
                sinks: sinks_of("flow.neurons", map)?,
                on_untrusted: neurons_on,
                trusted_fields: Vec::new(),
                strict: None,
            },
            None => neuron_default(neurons_on),
        };
        let mut out = BTreeMap::new();
        for (name, keys) in tools {
            if keys.sinks.is_none()
                && keys.on_untrusted.is_none()
                && keys.trusted_fields.is_empty()
                && keys.strict.is_none()
            {
                continue;
            }
            let section = format!("tools.{name}");
            let sinks = match keys.sinks {
                Some(map) => sinks_of(&section, map)?,
                None => Vec::new(),
            };
            let trusted_fields =
                parse_paths(keys.trusted_fields).map_err(|error| FlowError::Path {
                    section: section.clone(),
                    error,
                })?;
            out.insert(
                name.clone(),
                (
                    ToolSinks {
                        sinks,
                        on_untrusted: keys.on_untrusted.unwrap_or_default(),
                        trusted_fields,
                        strict: keys.strict,
                    },
                    keys.sinks.is_some(),
                ),
            );
        }
        Ok(FlowRules {
            strict: self.strict,
            scope_required: self.scope == ScopeRule::Required,
            default_sink: self.default_sink.unwrap_or(SinkLevel::Identifiers),
            tools: out,
            neurons,
        })
    }
}

/// The first-party tools' default sinks (`tools/*` and the host's
/// built-ins), by name: `None` for a tool without defaults.
pub fn first_party(tool: &str) -> Option<Vec<(&'static str, SinkLevel)>> {
    use SinkLevel::*;
    Some(match tool {
        // Where a file is written is the user's to say; what is written is
        // the agent's work.
        "fs_write" | "fs_edit" => vec![("path", Trusted)],
        // The destination, the user's or operator's word (`endorsed`): what
        // a request carries out cannot be called back, and a URL a trusted
        // output lists is real, not chosen by the user; identifiers inside
        // the request (an IBAN in a JSON body, a recipient in a header).
        "http_request" => vec![
            ("url", Endorsed),
            ("headers", Identifiers),
            ("json", Identifiers),
            ("body", Identifiers),
        ],
        // Addresses, hosts and paths inside a script or its input; its
        // directory.
        "shell_run" => vec![
            ("script", Identifiers),
            ("stdin", Identifiers),
            ("cwd", Trusted),
        ],
        "code_run" => vec![
            ("code", Identifiers),
            ("inputs", Trusted),
            ("output_dir", Trusted),
        ],
        // Read-only, but its URL leaves the host: a link copied from a page
        // carries nothing out, a composed one may.
        "web_fetch" => vec![("url", Verbatim)],
        // A new tool's requested capabilities name hosts and directories.
        "neuron_create" => vec![("capabilities", Trusted), ("source", Identifiers)],
        // A fact for the operator to review: an address or IBAN in it
        // should be the user's.
        "memory_propose" => vec![("fact", Identifiers)],
        // The search backend is the operator's; a model call sends nothing
        // out but to the operator's provider.
        "web_search" | "llm" | "fs_read" | "fs_list" | "fs_glob" | "time_now" | "memory_fetch" => {
            vec![]
        }
        _ => return None,
    })
}

/// The names of the tools [`first_party`] knows.
pub const FIRST_PARTY: [&str; 15] = [
    "fs_write",
    "fs_edit",
    "http_request",
    "shell_run",
    "code_run",
    "web_fetch",
    "neuron_create",
    "memory_propose",
    "web_search",
    "llm",
    "fs_read",
    "fs_list",
    "fs_glob",
    "time_now",
    "memory_fetch",
];

fn parse_static(list: Vec<(&'static str, SinkLevel)>) -> Vec<(FieldPath, SinkLevel)> {
    list.into_iter()
        .filter_map(|(p, l)| FieldPath::parse(p).ok().map(|p| (p, l)))
        .collect()
}

impl FlowRules {
    /// The rules a call of `tool` is checked against (see the module
    /// documentation for the order).
    pub fn for_tool(&self, tool: &str, neuron: bool, has_side_effects: bool) -> ToolSinks {
        let own = self.tools.get(tool);
        let on_untrusted = own.map(|(t, _)| t.on_untrusted);
        let trusted_fields = own
            .map(|(t, _)| t.trusted_fields.clone())
            .unwrap_or_default();
        let strict = own.and_then(|(t, _)| t.strict);
        if let Some((t, true)) = own {
            return t.clone();
        }
        if neuron {
            let mut n = self.neurons.clone();
            if let Some(o) = on_untrusted {
                n.on_untrusted = o;
            }
            n.strict = strict;
            return n;
        }
        let sinks = match first_party(tool) {
            Some(list) => parse_static(list),
            None if has_side_effects => vec![(FieldPath::everything(), self.default_sink)],
            None => Vec::new(),
        };
        ToolSinks {
            sinks,
            on_untrusted: on_untrusted.unwrap_or_default(),
            trusted_fields,
            strict,
        }
    }
}

/// One way a new rule set lets through what the old one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Widening {
    /// Where: `flow`, `flow.neurons` or `tools.<name>`.
    pub section: String,
    /// What changed, in words.
    pub what: String,
}

fn compare(section: &str, old: &ToolSinks, new: &ToolSinks, out: &mut Vec<Widening>) {
    let mut w = |what: String| {
        out.push(Widening {
            section: section.to_string(),
            what,
        })
    };
    for (p, l) in &old.sinks {
        let now = new.level_over(p);
        if now < *l {
            w(format!(
                "sink `{p}` lowered from {} to {}",
                l.as_str(),
                now.as_str()
            ));
        }
    }
    if old.checks_anything()
        && old.on_untrusted == OnUntrusted::Deny
        && new.on_untrusted == OnUntrusted::Approve
    {
        w("on_untrusted changed from deny to approve".into());
    }
    for p in &new.trusted_fields {
        if !old.trusted_fields.contains(p) {
            w(format!("output field `{p}` confirmed trusted"));
        }
    }
    // `true` judges every call, the default only untraceable ones, `false`
    // none: each step down lets more through.
    let rank = |s: Option<bool>| match s {
        Some(true) => 2,
        None => 1,
        Some(false) => 0,
    };
    if rank(new.strict) < rank(old.strict) {
        w(format!(
            "strict changed from {} to {}",
            strict_name(old.strict),
            strict_name(new.strict)
        ));
    }
}

fn strict_name(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "true",
        Some(false) => "false",
        None => "the default (calls with nothing to trace)",
    }
}

/// What `new` lets through that `old` did not (see the module
/// documentation); empty when `new` only narrows.
pub fn widenings(old: &FlowRules, new: &FlowRules) -> Vec<Widening> {
    let mut out = Vec::new();
    let mut flow = |what: &str| {
        out.push(Widening {
            section: "flow".into(),
            what: what.into(),
        })
    };
    if old.strict && !new.strict {
        flow("strict mode turned off");
    }
    if old.scope_required && !new.scope_required {
        flow("a declared tool scope is no longer required");
    }
    if new.default_sink < old.default_sink {
        flow(&format!(
            "default_sink lowered from {} to {}",
            old.default_sink.as_str(),
            new.default_sink.as_str()
        ));
    }
    compare("flow.neurons", &old.neurons, &new.neurons, &mut out);
    let names: BTreeSet<&str> = old
        .tools
        .keys()
        .chain(new.tools.keys())
        .map(String::as_str)
        .chain(FIRST_PARTY)
        .collect();
    for name in names {
        // Compared as side-effecting tools: the stricter reading.
        let a = old.for_tool(name, false, true);
        let b = new.for_tool(name, false, true);
        compare(&format!("tools.{name}"), &a, &b, &mut out);
    }
    out
}

#[cfg(test)]
mod tests;
