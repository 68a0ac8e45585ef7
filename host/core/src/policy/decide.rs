//! Policy decisions: allow, deny or ask a human, at an autonomy level
//! (seed 000 §7 `Policy.evaluate`, seed 003 approvals).

use super::ToolPolicy;
use serde::Deserialize;

/// How much the agent may do without a human (seed 003, "nivel de
/// autonomía"). Ordered from least to most autonomous; a request can lower
/// the operator's level, never raise it ([`Autonomy::narrow`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Only tools without side effects are offered and run.
    ReadOnly,
    /// Every call with side effects needs a human.
    Supervised,
    /// Calls run under the per-tool rules; high-risk and irreversible calls
    /// still need a human (the default: the operator's `[tools.*]` sections
    /// are the allowlist).
    #[default]
    Autonomous,
}

impl Autonomy {
    /// The lower of two levels: what a request asking for `requested` gets
    /// under the operator's `self`.
    pub fn narrow(self, requested: Autonomy) -> Autonomy {
        self.min(requested)
    }

    /// The configuration name (`read_only`, `supervised`, `autonomous`).
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::ReadOnly => "read_only",
            Autonomy::Supervised => "supervised",
            Autonomy::Autonomous => "autonomous",
        }
    }
}

impl std::str::FromStr for Autonomy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read_only" | "read-only" => Ok(Autonomy::ReadOnly),
            "supervised" => Ok(Autonomy::Supervised),
            "autonomous" => Ok(Autonomy::Autonomous),
            other => Err(format!(
                "unknown autonomy level `{}` (read_only, supervised, autonomous)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// When a human must approve a call of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRule {
    /// Only when [`decide`]'s built-in rules say so (high risk).
    #[default]
    Auto,
    /// Every call with side effects.
    Always,
}

/// The policy's decision for one call (seed 000 §7, `Policy.evaluate`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it.
    Deny {
        /// Why, for the model and the operator.
        reason: String,
    },
    /// A human must approve it first.
    ApproveRequired {
        /// Why.
        reason: String,
    },
}

/// Decide a call of a tool with `risk` and `has_side_effects` under its
/// policy section (`None`: the tool is not in the operator's allowlist), at
/// the operator's autonomy level (held in the section). Same as
/// [`decide_at`] with [`Autonomy::Autonomous`] requested.
pub fn decide(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
) -> Decision {
    decide_at(risk, has_side_effects, tool, Autonomy::Autonomous)
}

/// Decide a call at the autonomy level `requested`, narrowed by the
/// operator's (seed 000 §7 `Policy.evaluate`, seed 003 approvals).
///
/// Rules, in order:
/// 1. a tool the operator did not list, or listed with `deny = true`, is
///    denied (default deny);
/// 2. at `read_only`, a call with side effects is denied;
/// 3. a high-risk tool, or one the operator marked `irreversible`, always
///    needs a human, whatever the autonomy level or the tool's rule;
/// 4. `approval = "always"` asks a human for every call with side effects;
/// 5. at `supervised`, every call with side effects needs a human;
/// 6. everything else is allowed.
pub fn decide_at(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
    requested: Autonomy,
) -> Decision {
    let Some(tool) = tool else {
        return Decision::Deny {
            reason: "the tool is not in the operator's policy".into(),
        };
    };
    if tool.deny {
        return Decision::Deny {
            reason: "the operator's policy denies this tool".into(),
        };
    }
    let autonomy = tool.autonomy.narrow(requested);
    if autonomy == Autonomy::ReadOnly && has_side_effects {
        return Decision::Deny {
            reason: "the autonomy level is read_only: calls with side effects are not allowed"
                .into(),
        };
    }
    if risk == crate::meta::Risk::High {
        return Decision::ApproveRequired {
            reason: "high-risk calls always need a human".into(),
        };
    }
    if tool.irreversible {
        return Decision::ApproveRequired {
            reason: "the operator marked this tool irreversible: every call needs a human".into(),
        };
    }
    if tool.approval == ApprovalRule::Always && has_side_effects {
        return Decision::ApproveRequired {
            reason: "the operator's policy asks a human for every call of this tool".into(),
        };
    }
    if autonomy == Autonomy::Supervised && has_side_effects {
        return Decision::ApproveRequired {
            reason: "the autonomy level is supervised: calls with side effects need a human".into(),
        };
    }
    Decision::Allow
}

/// Whether a tool belongs in the catalog the model sees at autonomy
/// `requested`: every tool whose calls are not always denied (a call that
/// needs a human is offered; the human decides).
pub fn offered(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
    requested: Autonomy,
) -> bool {
    !matches!(
        decide_at(risk, has_side_effects, tool, requested),
        Decision::Deny { .. }
    )
}
