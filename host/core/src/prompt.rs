//! The system prompt, assembled in the fixed block order of seed 000 §3 so
//! that its prefix stays byte-identical across calls (provider prompt caching
//! keys on the prefix):
//!
//! 1. constitution (fixed text),
//! 2. identity (fixed per operator),
//! 3. tool catalog (sorted by name; changes only when tools change),
//! 4. memory slot (empty until the memory issue),
//! 5. untrusted-content instruction.
//!
//! Block 6, the turn history, is the message list itself. Pure: the runtime's
//! agent loop passes the catalog it built and sends the text.

use capsaga_untrusted::UNTRUSTED_INSTRUCTION;
use std::fmt::Write as _;

/// Block 1: the rules every turn runs under.
pub const CONSTITUTION: &str = "You are an agent running inside capsaga. Every tool call you make is checked against its schema and the operator's policy, runs in a sandbox with only the access the operator granted, and is logged as a step of a saga: if a later step fails, earlier steps are undone. Call tools only with the exact names and argument schemas given. When a tool call is refused or fails, read the error's hint and correct the call instead of repeating it. When the task is done, answer in plain text without calling a tool.";

/// Block 2: who the agent is.
pub const DEFAULT_IDENTITY: &str =
    "You act for the operator of this workspace, on the task they give.";

/// One tool as the catalog block lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its description, for the model.
    pub description: &'a str,
    /// Its effective grants as capability strings (what it can reach).
    pub grants: &'a [String],
}

/// Assemble blocks 1-5: `identity` (block 2), the catalog (block 3, sorted
/// by name whatever the order of `tools`), and `memory` (block 4, `(none)`
/// when empty).
pub fn system_prompt(identity: &str, tools: &[CatalogEntry<'_>], memory: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Constitution\n{CONSTITUTION}\n");
    let _ = writeln!(s, "# Identity\n{identity}\n");
    let _ = writeln!(s, "# Tools");
    let mut sorted: Vec<&CatalogEntry<'_>> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(b.name));
    for t in sorted {
        let _ = write!(s, "- {}: {}", t.name, t.description);
        if !t.grants.is_empty() {
            let _ = write!(s, " (can reach: {})", t.grants.join(", "));
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "\n# Memory\n{}\n",
        if memory.is_empty() { "(none)" } else { memory }
    );
    let _ = writeln!(s, "# Untrusted content\n{UNTRUSTED_INSTRUCTION}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_in_order_and_catalog_sorted() {
        let t = |n: &'static str, d: &'static str| CatalogEntry {
            name: n,
            description: d,
            grants: &[],
        };
        let a = system_prompt(
            DEFAULT_IDENTITY,
            &[t("zeta", "does zeta"), t("alpha", "does alpha")],
            "",
        );
        let b = system_prompt(
            DEFAULT_IDENTITY,
            &[t("alpha", "does alpha"), t("zeta", "does zeta")],
            "",
        );
        assert_eq!(a, b, "prefix must not depend on catalog order");
        let pos = |h: &str| a.find(h).unwrap();
        assert!(pos("# Constitution") < pos("# Identity"));
        assert!(pos("# Identity") < pos("# Tools"));
        assert!(pos("# Tools") < pos("# Memory"));
        assert!(pos("# Memory") < pos("# Untrusted content"));
        assert!(pos("- alpha") < pos("- zeta"));
    }

    #[test]
    fn grants_are_listed() {
        let g = vec!["fs:read:/w/**".to_string()];
        let s = system_prompt(
            "x",
            &[CatalogEntry {
                name: "fs_read",
                description: "Reads.",
                grants: &g,
            }],
            "remember",
        );
        assert!(
            s.contains("- fs_read: Reads. (can reach: fs:read:/w/**)"),
            "{s}"
        );
        assert!(s.contains("# Memory\nremember"), "{s}");
    }
}
