//! Who may claim an approval, as SQL (the rule is
//! `capsaga_core::approval::may_claim`): one text for both back ends, used
//! where the door looks for a claimable approval
//! (`ApprovalStore::find_approved`) and where the claim is written, in the
//! transaction of the step's BEGIN (`StepStore::begin_step`), so a race
//! across hosts cannot pass a claim the door would refuse.

use capsaga_core::fsm::State;
use std::sync::LazyLock;

/// The ended (terminal) saga states as an SQL list, `('Done', ...)`: the
/// states the guardrail itself calls terminal ([`State::is_terminal`]), so
/// the store never spells them on its own.
pub(crate) static ENDED_STATES: LazyLock<String> = LazyLock::new(|| {
    let names: Vec<String> = State::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("({})", names.join(", "))
});

/// The condition "the approval row `approval` (a table alias or name of
/// `approvals`) may be claimed by the saga whose id is the parameter
/// `claimant` (`?5`, `$2`...)": requested by that saga, or by a saga that
/// has ended and was recorded with the same principal as the claimant
/// (neither principal missing).
pub(crate) fn may_claim(approval: &str, claimant: &str) -> String {
    let ended = ENDED_STATES.as_str();
    format!(
        "({approval}.saga_id = {claimant} OR EXISTS (SELECT 1 FROM saga_state requester JOIN saga_state claimant ON claimant.saga_id = {claimant} \
         WHERE requester.saga_id = {approval}.saga_id AND requester.state IN {ended} \
         AND requester.principal IS NOT NULL AND requester.principal = claimant.principal))"
    )
}
