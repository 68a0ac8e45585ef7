//! Which approvals an MCP client may confirm itself (issue 24 item 1).
//!
//! A call that needs a human is decided by an authenticated **operator**
//! (`capsaga approve`, `POST /v1/approvals/{id}/approve` with an operator
//! token, a terminal). The client program (the agent's side) may confirm a
//! call only when the operator opted the tool in, by name:
//!
//! ```toml
//! [approvals]
//! client_confirm = ["fs_edit"]
//! ```
//!
//! and never for `code_run` ([`NEVER`]: its approval binds agent-written
//! code to its inputs), a tool the policy marks `irreversible`, or a tool
//! whose meta says high risk. The list is checked at policy load
//! ([`check_list`]) and the tools' risk when they are loaded
//! ([`refused_for_risk`]); the door asks [`client_may_confirm`] again at
//! every decision, so a tool that became high risk (a rebuilt component, a
//! neuron) is never client-confirmed. Pure.

use crate::meta::Risk;
use std::collections::BTreeSet;

/// Tools no client ever confirms, whatever the policy says.
pub const NEVER: &[&str] = &["code_run", "neuron_create"];

/// Check `[approvals] client_confirm` against the `[tools.*]` sections
/// (`irreversible(name)`: `None` when the policy has no section for
/// `name`, else whether it marks the tool irreversible): every name a tool
/// section of its own, not in [`NEVER`], not `irreversible`.
///
/// # Errors
/// A message naming the first refused entry and why.
pub fn check_list(
    list: &[String],
    irreversible: impl Fn(&str) -> Option<bool>,
) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    for name in list {
        let shown: String = name.chars().take(64).collect();
        if NEVER.contains(&name.as_str()) {
            return Err(format!(
                "[approvals] client_confirm: `{shown}` can never be confirmed by an MCP client: its approval binds agent-written code and inputs, and only an operator decides it"
            ));
        }
        let Some(irreversible) = irreversible(name) else {
            return Err(format!(
                "[approvals] client_confirm: `{shown}` has no [tools.{shown}] section (list only tools the policy grants)"
            ));
        };
        if irreversible {
            return Err(format!(
                "[approvals] client_confirm: `{shown}` is marked irreversible in [tools.{shown}]: only an operator approves its calls"
            ));
        }
        out.insert(name.clone());
    }
    Ok(out)
}

/// At tool load: why a listed tool may not be client-confirmed given its
/// meta (high risk), or `None`.
pub fn refused_for_risk(listed: &BTreeSet<String>, name: &str, risk: Risk) -> Option<String> {
    (listed.contains(name) && risk == Risk::High).then(|| {
        format!(
            "[approvals] client_confirm: `{}` is high risk (its meta says so): only an operator approves its calls",
            name.chars().take(64).collect::<String>()
        )
    })
}

/// Whether an MCP client may confirm a call of tool `name` (risk `risk`,
/// `irreversible` in its policy section) under the list `listed`.
pub fn client_may_confirm(
    listed: &BTreeSet<String>,
    name: &str,
    risk: Risk,
    irreversible: bool,
) -> bool {
    listed.contains(name) && !NEVER.contains(&name) && risk != Risk::High && !irreversible
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(entries: &[(&str, bool)]) -> impl Fn(&str) -> Option<bool> {
        let m: std::collections::BTreeMap<String, bool> =
            entries.iter().map(|(n, i)| (n.to_string(), *i)).collect();
        move |n: &str| m.get(n).copied()
    }

    #[test]
    fn code_run_irreversible_and_unknown_tools_are_refused_at_load() {
        let t = tools(&[("fs_edit", false), ("mail", true), ("code_run", false)]);
        let ok = check_list(&["fs_edit".into()], &t).unwrap();
        assert!(ok.contains("fs_edit"));
        for (bad, why) in [
            ("code_run", "never"),
            ("neuron_create", "never"),
            ("mail", "irreversible"),
            ("nope", "no [tools.nope]"),
        ] {
            let e = check_list(&[bad.into()], &t).unwrap_err();
            assert!(e.contains(why) && e.contains(bad), "{e}");
        }
        assert!(check_list(&[], &t).unwrap().is_empty());
    }

    #[test]
    fn the_decision_is_checked_again_at_every_call() {
        let listed: BTreeSet<String> = ["fs_edit".to_string()].into();
        assert!(client_may_confirm(&listed, "fs_edit", Risk::Medium, false));
        assert!(!client_may_confirm(&listed, "fs_edit", Risk::High, false));
        assert!(!client_may_confirm(&listed, "fs_edit", Risk::Low, true));
        assert!(!client_may_confirm(&listed, "fs_write", Risk::Low, false));
        let sneaky: BTreeSet<String> = ["code_run".to_string()].into();
        assert!(!client_may_confirm(&sneaky, "code_run", Risk::Low, false));
        assert!(refused_for_risk(&listed, "fs_edit", Risk::High).is_some());
        assert!(refused_for_risk(&listed, "fs_edit", Risk::Low).is_none());
        assert!(refused_for_risk(&listed, "other", Risk::High).is_none());
    }
}
