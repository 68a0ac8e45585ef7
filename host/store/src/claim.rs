//! Who may claim an approval, as SQL (the rule is
//! `capsaga_core::approval::may_claim`): one text for both back ends, used
//! where the door looks for a claimable approval
//! (`ApprovalStore::find_approved`) and where the claim is written, in the
//! transaction of the step's BEGIN (`StepStore::begin_step`), so a race
//! across hosts cannot pass a claim the door would refuse.

/// The terminal states, as SQL.
pub(crate) const ENDED_STATES: &str = "('Done', 'FailedRolledBack', 'FailedRollbackPartial')";

/// The condition "the approval row `approval` (a table alias or name of
/// `approvals`) may be claimed by the saga whose id is the parameter
/// `claimant` (`?5`, `$2`...)": requested by that saga, or by a saga that
/// has ended and was recorded with the same principal as the claimant
/// (neither principal missing).
pub(crate) fn may_claim(approval: &str, claimant: &str) -> String {
    format!(
        "({approval}.saga_id = {claimant} OR EXISTS (SELECT 1 FROM saga_state requester JOIN saga_state claimant ON claimant.saga_id = {claimant} \
         WHERE requester.saga_id = {approval}.saga_id AND requester.state IN {ENDED_STATES} \
         AND requester.principal IS NOT NULL AND requester.principal = claimant.principal))"
    )
}
