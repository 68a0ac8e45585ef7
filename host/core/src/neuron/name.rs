//! Neuron names: the tool-name rule, the host's reserved names, plus no
//! shadowing of a tool already offered, by case or by confusable look.
//!
//! A model reads a catalog; two names it may take for one another are one
//! name. A candidate is refused when its *skeleton* equals the skeleton of
//! a name already taken (tools, built-ins, the policy's sections, other
//! neurons). The skeleton: NFKC, lower case, Unicode's confusable
//! skeleton (UTS #39 §4, `unicode_security::skeleton`), then a fold of the
//! look-alikes that survive in lower-case ASCII (digits read as letters:
//! `0`→`o`, `1`→`l`, `2`→`z`, `3`→`e`, `4`→`a`, `5`→`s`, `6`→`b`, `7`→`t`,
//! `8`→`b`, `9`→`g`; `i`→`l`; letter pairs read as one letter: `rn`→`m`,
//! `vv`→`w`, `cl`→`d`) and every separator removed (`fs_read`, `fsread`
//! and `fs__read` are one name).
//!
//! Reserved for the host, whatever the catalog holds: every name whose
//! skeleton starts with the skeleton of one of [`RESERVED_PREFIXES`]
//! (`capsaga_`: the MCP session tools `capsaga_commit`, `capsaga_rollback`
//! and any later one; `memory_`: the memory built-ins `memory_fetch`,
//! `memory_propose` and any later one, so no neuron can pose as the
//! host's memory), and every name reading like a built-in of [`RESERVED`].

use unicode_normalization::UnicodeNormalization;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not `[a-z][a-z0-9_]{0,63}`.
    #[error("neuron name `{0}` must match [a-z][a-z0-9_]{{0,63}} (lower case ASCII)")]
    Rule(String),
    /// Reads like a name already taken.
    #[error("neuron name `{name}` shadows the existing tool `{taken}` (same or confusable name)")]
    Shadows {
        /// The candidate.
        name: String,
        /// The name it collides with.
        taken: String,
    },
    /// A name the host keeps for itself.
    #[error(
        "neuron name `{0}` is reserved: it reads like a host built-in or starts like `capsaga_` or `memory_`"
    )]
    Reserved(String),
}

/// Names only the host may use: its built-in tools, offered or not.
pub const RESERVED: &[&str] = &[
    "neuron_create",
    "code_run",
    "capsaga_commit",
    "capsaga_rollback",
    "memory_fetch",
    "memory_propose",
];

/// The prefix of the host's own tool names (the MCP session tools): no
/// neuron name may read like it.
pub const RESERVED_PREFIX: &str = "capsaga_";

/// The prefix of the memory built-ins (seed 004: `memory_fetch`,
/// `memory_propose`): no neuron name may read like it.
pub const MEMORY_PREFIX: &str = "memory_";

/// Every reserved prefix: [`RESERVED_PREFIX`] and [`MEMORY_PREFIX`].
pub const RESERVED_PREFIXES: &[&str] = &[RESERVED_PREFIX, MEMORY_PREFIX];

/// Whether `name` is the host's: it reads like a name of [`RESERVED`] or
/// starts like one of [`RESERVED_PREFIXES`] (compared by [`skeleton`]).
pub fn is_reserved(name: &str) -> bool {
    let sk = skeleton(name);
    RESERVED_PREFIXES
        .iter()
        .any(|p| sk.starts_with(&skeleton(p)))
        || RESERVED.iter().any(|r| skeleton(r) == sk)
}

/// The skeleton two names are compared by (see the module documentation).
pub fn skeleton(name: &str) -> String {
    let nfkc: String = name.nfkc().collect::<String>().to_lowercase();
    let sk: String = unicode_security::skeleton(&nfkc)
        .collect::<String>()
        .to_lowercase();
    let mut folded: String = sk
        .chars()
        .filter(|c| c.is_alphanumeric())
        .map(|c| match c {
            '0' => 'o',
            '1' | 'i' | '|' => 'l',
            '2' => 'z',
            '3' => 'e',
            '4' => 'a',
            '5' => 's',
            '6' | '8' => 'b',
            '7' => 't',
            '9' => 'g',
            _ => c,
        })
        .collect();
    for (from, to) in [("rn", "m"), ("vv", "w"), ("cl", "d")] {
        folded = folded.replace(from, to);
    }
    folded
}

/// Check `name` for a new neuron against the names already `taken` (the
/// neuron's own name, a new version of it, is not in `taken`).
///
/// # Errors
/// [`NameError`].
pub fn check<'a>(name: &str, taken: impl IntoIterator<Item = &'a str>) -> Result<(), NameError> {
    if !crate::meta::is_valid_tool_name(name) {
        return Err(NameError::Rule(name.chars().take(80).collect()));
    }
    if is_reserved(name) {
        return Err(NameError::Reserved(name.to_string()));
    }
    let sk = skeleton(name);
    for t in taken {
        if t != name && skeleton(t) == sk {
            return Err(NameError::Shadows {
                name: name.to_string(),
                taken: t.chars().take(80).collect(),
            });
        }
        if t == name {
            return Err(NameError::Shadows {
                name: name.to_string(),
                taken: t.to_string(),
            });
        }
    }
    Ok(())
}
