//! Whose output is untrusted: the host's decision, not the tool's (issue 24
//! item 7).
//!
//! A tool declares `returns-untrusted` in its meta, but a tool that reads a
//! file, fetches a page or asks a model returns what someone else wrote,
//! whatever it declares. So the host decides from the tool's *effective
//! grants* (what it may actually reach): output is untrusted when any grant
//! reaches data from outside the operator's configuration, and a tool's
//! `false` is honoured only for a tool with no such grant.
//!
//! | grant kind | reaches outside data? |
//! |---|---|
//! | `fs:read`, `fs:write` (a writable directory is readable) | yes |
//! | `net:` | yes |
//! | `llm:` (a model's answer) | yes |
//! | `kv:` (what earlier calls stored) | yes |
//! | `mem:` (episodes quote earlier turns and tool outputs; facts and proposals are text a model wrote) | yes |
//! | `secret:` (used with `net:`; its value is the operator's, the answer is not) | yes |
//! | `env:` (a value from the operator's `[env]`) | no |
//!
//! Deny by default: a kind is trusted only when it is listed as trusted
//! ([`reaches_outside_data`] matches every kind, so a new kind added to
//! [`Capability`] must be placed here before it compiles).

use crate::capability::Capability;

/// Whether a grant lets a tool read data the operator did not write (see
/// the module table).
pub fn reaches_outside_data(grant: &Capability) -> bool {
    match grant {
        Capability::Env { .. } => false,
        Capability::Fs { .. }
        | Capability::Net { .. }
        | Capability::Llm { .. }
        | Capability::Kv { .. }
        | Capability::Mem { .. }
        | Capability::Secret { .. } => true,
    }
}

/// Whether the output of a tool whose meta declares `declared`
/// (`returns-untrusted`) and whose effective grants are `grants` is
/// wrapped in `<untrusted>` markers before a model reads it: always when
/// it declares so, and always when any grant reaches outside data
/// ([`reaches_outside_data`]), whatever it declares.
pub fn output_is_untrusted(declared: bool, grants: &[Capability]) -> bool {
    declared || grants.iter().any(reaches_outside_data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[&str]) -> Vec<Capability> {
        list.iter().map(|c| Capability::parse(c).unwrap()).collect()
    }

    #[test]
    fn a_false_claim_is_honoured_only_without_outside_grants() {
        // Declared untrusted: always wrapped.
        assert!(output_is_untrusted(true, &[]));
        assert!(output_is_untrusted(true, &caps(&["env:LANG"])));
        // No grant, or only operator values: the tool's `false` stands.
        assert!(!output_is_untrusted(false, &[]));
        assert!(!output_is_untrusted(false, &caps(&["env:LANG", "env:TZ"])));
        // Any grant reaching outside data overrides `false`.
        for g in [
            "fs:read:/data/**",
            "fs:write:/data/**",
            "net:https:api.example.com",
            "net:http:10.0.0.1:8080",
            "llm:cheap",
            "llm:normal:256",
            "kv:notes",
            "secret:token@api.example.com",
        ] {
            assert!(
                output_is_untrusted(false, &caps(&["env:LANG", g])),
                "{g} reaches outside data"
            );
        }
    }

    #[test]
    fn memory_is_outside_data_in_every_mode() {
        // Memory holds what earlier turns, their tool outputs and the model
        // wrote: a tool with any `mem:` grant, read or write, is wrapped
        // whatever it declares (issue 27: memory poisoning).
        for g in [
            "mem:default",
            "mem:default:read",
            "mem:notes:write",
            "mem:*",
        ] {
            let c = Capability::parse(g).unwrap();
            assert!(reaches_outside_data(&c), "{g}");
            assert!(output_is_untrusted(false, &caps(&["env:LANG", g])), "{g}");
        }
    }
}
