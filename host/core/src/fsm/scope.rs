//! The plan's tool scope (issue 47): the tools a turn may use, declared by
//! the plan before any untrusted data is read, and afterwards only
//! narrowed. A page the agent reads cannot add a tool the user's request
//! did not need (CaMeL's plan fixed before untrusted data is seen,
//! Debenedetti et al. 2025, in its simplest form: the set of tools, not the
//! program).
//!
//! Rules ([`Scope`]):
//!
//! - **Declaring.** Before any untrusted data entered the turn, the plan
//!   may declare and re-declare its scope freely (it has seen only the
//!   user's and the operator's text). Once untrusted data was read, a new
//!   declaration must be a subset of the current one ([`ScopeError::Widening`]
//!   otherwise); a first declaration made then is accepted as a narrowing
//!   of "every tool" when the scope is optional, and refused
//!   ([`ScopeError::TooLate`]) when the policy requires it (`[flow] scope =
//!   "required"`): a scope chosen after reading a page may be the page's.
//! - **Calling.** With a scope declared, a call of a tool outside it is
//!   refused ([`ScopeError::OutOfScope`], naming the scope). With none and
//!   the scope required, every call is refused ([`ScopeError::Undeclared`]).
//! - **The transition.** [`super::Guardrail::apply_scoped`] carries the
//!   scope into the Planning → Acting transition: `PlanReady` is denied
//!   when the scope is required and not declared.
//!
//! Pure and serialisable: the door stores it with the saga.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Most tools a scope names.
pub const MAX_SCOPE_TOOLS: usize = 256;

/// Why a scope was refused or a call is out of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A name that cannot be a tool's.
    #[error("the tool scope names `{0}`, which is not a valid tool name")]
    BadToolName(String),
    /// Over [`MAX_SCOPE_TOOLS`].
    #[error("the tool scope names more than {MAX_SCOPE_TOOLS} tools")]
    TooMany,
    /// A new declaration adds tools after untrusted data was read.
    #[error(
        "the tool scope can only narrow once untrusted data was read; it would add: {}",
        .added.join(", ")
    )]
    Widening {
        /// The tools it would add.
        added: Vec<String>,
    },
    /// The first declaration comes after untrusted data was read, and the
    /// policy requires one.
    #[error(
        "the tool scope must be declared before any untrusted data is read (the operator's policy requires it)"
    )]
    TooLate,
    /// The tool is not in the declared scope.
    #[error(
        "`{tool}` is outside the tool scope declared for this turn ({}): a tool can be added only before any untrusted data is read",
        .scope.join(", ")
    )]
    OutOfScope {
        /// The tool called.
        tool: String,
        /// The scope.
        scope: Vec<String>,
    },
    /// No scope declared and the policy requires one.
    #[error(
        "no tool scope declared: the operator's policy requires the plan to name its tools before any call"
    )]
    Undeclared,
}

/// A set of tool names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolScope(BTreeSet<String>);

impl ToolScope {
    /// A scope of these tools.
    ///
    /// # Errors
    /// A name that cannot be a tool's, or too many.
    pub fn new<S: AsRef<str>>(tools: impl IntoIterator<Item = S>) -> Result<ToolScope, ScopeError> {
        let mut set = BTreeSet::new();
        for t in tools {
            let t = t.as_ref();
            if !crate::meta::is_valid_tool_name(t) {
                return Err(ScopeError::BadToolName(t.chars().take(80).collect()));
            }
            set.insert(t.to_string());
            if set.len() > MAX_SCOPE_TOOLS {
                return Err(ScopeError::TooMany);
            }
        }
        Ok(ToolScope(set))
    }

    /// Whether it holds `tool`.
    pub fn contains(&self, tool: &str) -> bool {
        self.0.contains(tool)
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }

    /// Whether every tool of `self` is in `other`.
    pub fn is_subset(&self, other: &ToolScope) -> bool {
        self.0.is_subset(&other.0)
    }
}

/// A turn's scope state (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    declared: Option<ToolScope>,
    untrusted_seen: bool,
    required: bool,
}

impl Scope {
    /// A turn's scope, nothing declared; `required`: the policy's `[flow]
    /// scope = "required"`.
    pub fn new(required: bool) -> Scope {
        Scope {
            declared: None,
            untrusted_seen: false,
            required,
        }
    }

    /// The plan declares (or re-declares) its scope.
    ///
    /// # Errors
    /// [`ScopeError::Widening`] or [`ScopeError::TooLate`] (see the module
    /// documentation); the scope is then unchanged.
    pub fn declare(&mut self, tools: ToolScope) -> Result<(), ScopeError> {
        if self.untrusted_seen {
            match &self.declared {
                None if self.required => return Err(ScopeError::TooLate),
                None => {}
                Some(cur) => {
                    let added: Vec<String> = tools
                        .0
                        .iter()
                        .filter(|t| !cur.contains(t))
                        .cloned()
                        .collect();
                    if !added.is_empty() {
                        return Err(ScopeError::Widening { added });
                    }
                }
            }
        }
        self.declared = Some(tools);
        Ok(())
    }

    /// Untrusted data entered the turn: from now on the scope only narrows.
    pub fn note_untrusted(&mut self) {
        self.untrusted_seen = true;
    }

    /// Whether untrusted data entered the turn.
    pub fn untrusted_seen(&self) -> bool {
        self.untrusted_seen
    }

    /// Whether the policy requires a declared scope.
    pub fn required(&self) -> bool {
        self.required
    }

    /// The declared scope.
    pub fn declared(&self) -> Option<&ToolScope> {
        self.declared.as_ref()
    }

    /// Whether a call of `tool` is in scope.
    ///
    /// # Errors
    /// [`ScopeError::OutOfScope`] or [`ScopeError::Undeclared`].
    pub fn check(&self, tool: &str) -> Result<(), ScopeError> {
        match &self.declared {
            Some(s) if s.contains(tool) => Ok(()),
            Some(s) => Err(ScopeError::OutOfScope {
                tool: tool.chars().take(80).collect(),
                scope: s.names(),
            }),
            None if self.required => Err(ScopeError::Undeclared),
            None => Ok(()),
        }
    }
}

impl super::Guardrail {
    /// [`super::Guardrail::apply`] with the turn's tool scope carried into
    /// the Planning → Acting transition: `PlanReady` is denied (a guard of
    /// the row, never overridden by an extra row) when the policy requires
    /// a scope and none was declared. Every other event is [`apply`]'s.
    ///
    /// [`apply`]: super::Guardrail::apply
    ///
    /// # Errors
    /// [`super::TransitionDenied`].
    pub fn apply_scoped(
        &self,
        state: super::State,
        event: super::Event,
        scope: &Scope,
    ) -> Result<super::State, super::TransitionDenied> {
        if state == super::State::Planning
            && matches!(event, super::Event::PlanReady { .. })
            && scope.required
            && scope.declared.is_none()
        {
            return Err(super::TransitionDenied {
                from: state,
                event: event.name(),
                reason: Some(ScopeError::Undeclared.to_string()),
            });
        }
        self.apply(state, event)
    }

    /// [`super::Guardrail::may_execute`], then the scope's
    /// [`Scope::check`] for `tool`.
    ///
    /// # Errors
    /// [`super::ExecuteDenied`] with the state's or the scope's reason.
    pub fn may_execute_scoped(
        &self,
        state: super::State,
        has_side_effects: bool,
        tool: &str,
        scope: &Scope,
    ) -> Result<(), super::ExecuteDenied> {
        self.may_execute(state, has_side_effects)?;
        scope.check(tool).map_err(|e| super::ExecuteDenied {
            state,
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Event, Guardrail, State};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plan_ready_carries_the_scope() {
        let g = Guardrail::new();
        let mut s = Scope::new(true);
        let e = g
            .apply_scoped(State::Planning, Event::PlanReady { steps: 1 }, &s)
            .unwrap_err();
        assert!(e.to_string().contains("no tool scope declared"), "{e}");
        s.declare(scope(&["send_email"])).unwrap();
        assert_eq!(
            g.apply_scoped(State::Planning, Event::PlanReady { steps: 1 }, &s),
            Ok(State::Acting)
        );
        assert!(
            g.may_execute_scoped(State::Acting, true, "send_email", &s)
                .is_ok()
        );
        let e = g
            .may_execute_scoped(State::Acting, true, "send_money", &s)
            .unwrap_err();
        assert!(e.reason.contains("outside the tool scope"), "{}", e.reason);
        // The state's own rule still comes first.
        assert!(
            g.may_execute_scoped(State::Planning, true, "send_email", &s)
                .is_err()
        );
        // Optional scope, nothing declared: the table alone.
        let o = Scope::new(false);
        assert_eq!(
            g.apply_scoped(State::Planning, Event::PlanReady { steps: 1 }, &o),
            Ok(State::Acting)
        );
    }

    fn scope(t: &[&str]) -> ToolScope {
        ToolScope::new(t.iter().copied()).unwrap()
    }

    #[test]
    fn declared_before_data_then_only_narrows() {
        let mut s = Scope::new(false);
        assert!(
            s.check("anything").is_ok(),
            "optional and undeclared: no limit"
        );
        s.declare(scope(&["web_fetch", "send_email"])).unwrap();
        // Re-planning before any data is read is free.
        s.declare(scope(&["web_fetch", "send_email", "fs_write"]))
            .unwrap();
        s.note_untrusted();
        assert!(s.check("send_email").is_ok());
        // The page asks for a new tool: refused, named.
        let e = s.check("send_money").unwrap_err();
        assert!(matches!(&e, ScopeError::OutOfScope { tool, .. } if tool == "send_money"));
        assert!(
            e.to_string().contains("fs_write, send_email, web_fetch"),
            "{e}"
        );
        // A re-declaration that adds a tool is refused and changes nothing.
        let e = s.declare(scope(&["web_fetch", "send_money"])).unwrap_err();
        assert_eq!(
            e,
            ScopeError::Widening {
                added: vec!["send_money".into()]
            }
        );
        assert!(s.check("fs_write").is_ok());
        // Narrowing applies.
        s.declare(scope(&["web_fetch"])).unwrap();
        assert!(s.check("send_email").is_err());
    }

    #[test]
    fn required_scope() {
        let mut s = Scope::new(true);
        assert_eq!(s.check("web_fetch"), Err(ScopeError::Undeclared));
        s.note_untrusted();
        assert_eq!(s.declare(scope(&["web_fetch"])), Err(ScopeError::TooLate));
        assert_eq!(s.check("web_fetch"), Err(ScopeError::Undeclared));
        // Optional: a late first declaration narrows "every tool".
        let mut o = Scope::new(false);
        o.note_untrusted();
        o.declare(scope(&["web_fetch"])).unwrap();
        assert!(o.check("fs_write").is_err());
    }

    #[test]
    fn names_checked_and_serialisable() {
        assert!(matches!(
            ToolScope::new(["Bad-Name"]),
            Err(ScopeError::BadToolName(_))
        ));
        assert!(ToolScope::new((0..300).map(|i| format!("t{i}"))).is_err());
        let mut s = Scope::new(true);
        s.declare(scope(&["a", "b"])).unwrap();
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(
            j,
            r#"{"declared":["a","b"],"untrusted_seen":false,"required":true}"#
        );
        assert_eq!(serde_json::from_str::<Scope>(&j).unwrap(), s);
    }

    fn name() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "c", "d", "e"]).prop_map(str::to_string)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Declare(Vec<String>),
        Untrusted,
    }

    use super::super::tests::{any_event, any_state};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        /// The scope changes one guard only: `PlanReady` out of Planning is
        /// denied when a scope is required and none was declared; every
        /// other answer is the table's. An allowed execute is in scope.
        #[test]
        fn apply_scoped_is_the_table_plus_the_scope_guard(
            state in any_state(),
            event in any_event(),
            required in any::<bool>(),
            declared in prop::option::of(prop::collection::vec(name(), 0..3)),
            tool in name(),
        ) {
            let g = Guardrail::new();
            let mut s = Scope::new(required);
            if let Some(d) = &declared {
                s.declare(ToolScope::new(d).unwrap()).unwrap();
            }
            let blocked = state == State::Planning
                && matches!(event, Event::PlanReady { .. })
                && required
                && declared.is_none();
            match (g.apply_scoped(state, event, &s), g.apply(state, event)) {
                (Err(e), _) if blocked => prop_assert!(e.reason.is_some()),
                (a, b) => prop_assert_eq!(a, b),
            }
            for side_effects in [false, true] {
                let ok = g.may_execute_scoped(state, side_effects, &tool, &s).is_ok();
                let expected = g.may_execute(state, side_effects).is_ok() && s.check(&tool).is_ok();
                prop_assert_eq!(ok, expected);
                if ok {
                    prop_assert!(declared.as_ref().is_none_or(|d| d.contains(&tool)));
                }
            }
        }

        /// Whatever the sequence of declarations and reads: once untrusted
        /// data was read, the set of tools that pass `check` never grows.
        #[test]
        fn scope_never_widens_after_untrusted(
            required in any::<bool>(),
            ops in prop::collection::vec(prop_oneof![
                prop::collection::vec(name(), 0..5).prop_map(Op::Declare),
                Just(Op::Untrusted),
            ], 0..16),
        ) {
            let mut s = Scope::new(required);
            let allowed = |s: &Scope| -> Vec<bool> {
                ["a", "b", "c", "d", "e", "z"].iter().map(|t| s.check(t).is_ok()).collect()
            };
            let mut before: Option<Vec<bool>> = None;
            for op in ops {
                match op {
                    Op::Declare(ts) => { let _ = s.declare(ToolScope::new(ts).unwrap()); }
                    Op::Untrusted => s.note_untrusted(),
                }
                let now = allowed(&s);
                if let Some(b) = &before {
                    for (x, y) in b.iter().zip(&now) {
                        prop_assert!(*x || !*y, "widened after untrusted data: {:?} -> {:?}", b, now);
                    }
                }
                if s.untrusted_seen() {
                    before = Some(now);
                }
            }
        }
    }
}
