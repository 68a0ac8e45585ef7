//! The `mem` factor: `mem:<namespace>[:read|:write]` grants give a tool the
//! host's memory of one namespace (DESIGN §8e, seed 004).
//!
//! - **validate** at policy load: a `mem:` grant needs `[memory] enabled =
//!   true` (a grant nothing could serve is refused, never silently empty);
//! - **configure** per tool: the granted namespaces and what each allows
//!   ([`MemBinding`]); a dry run keeps them (the built-ins read the call's
//!   dry-run flag and write nothing, as the net guard limits a dry run to
//!   GET and HEAD itself);
//! - **bind** per call: nothing in the WASI context. Memory is served by the
//!   host's built-in tools (`memory_fetch`, `memory_propose`,
//!   `capsaga_door::memory`), which read their namespaces from these bindings and
//!   refuse anything else. A tool without a `mem:` grant sees no memory.

use capsaga_core::capability::{Capability, Place};
use capsaga_core::policy::Policy;

/// What one tool's `mem:` grants allow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemBinding {
    /// Namespaces the tool may read.
    pub read: Vec<String>,
    /// Namespaces the tool may write (propose facts to).
    pub write: Vec<String>,
}

impl MemBinding {
    /// Whether `namespace` may be read.
    pub fn may_read(&self, namespace: &str) -> bool {
        self.read.iter().any(|n| n == namespace)
    }

    /// Whether `namespace` may be written.
    pub fn may_write(&self, namespace: &str) -> bool {
        self.write.iter().any(|n| n == namespace)
    }
}

/// Phase 1: memory must be on for a `mem:` grant to mean anything.
///
/// # Errors
/// Why the grant is refused.
pub fn validate(policy: &Policy, grant: &Capability) -> Result<(), String> {
    match grant {
        Capability::Mem {
            namespace: Place::Concrete(_),
            ..
        } if policy.memory.enabled => Ok(()),
        Capability::Mem {
            namespace: Place::Concrete(_),
            ..
        } => Err("memory is off: set `[memory] enabled = true` to grant it".into()),
        Capability::Mem { .. } => Err("a grant names a namespace, not `*`".into()),
        _ => Err("not a mem: grant".into()),
    }
}

/// Phase 2: the namespaces of `grants`.
pub fn configure(grants: &[Capability]) -> MemBinding {
    let mut b = MemBinding::default();
    for g in grants {
        if let Capability::Mem {
            namespace: Place::Concrete(n),
            access,
        } = g
        {
            if access.reads() {
                b.read.push(n.clone());
            }
            if access.writes() {
                b.write.push(n.clone());
            }
        }
    }
    for v in [&mut b.read, &mut b.write] {
        v.sort();
        v.dedup();
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_and_write() {
        let g: Vec<Capability> = ["mem:a:read", "mem:b", "mem:c:write"]
            .iter()
            .map(|s| Capability::parse(s).unwrap())
            .collect();
        let b = configure(&g);
        assert_eq!(b.read, vec!["a", "b"]);
        assert_eq!(b.write, vec!["b", "c"]);
        assert!(b.may_read("a") && !b.may_write("a") && !b.may_read("z"));
        assert_eq!(configure(&[]), MemBinding::default());
    }
}
