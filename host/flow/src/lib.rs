//! Information flow (DESIGN §8f, issue 47): the host knows where every
//! argument of a call came from, so an instruction injected into data the
//! agent read cannot steer a tool the operator allowed.
//!
//! Capabilities say what a tool may touch; this says what the agent may do
//! with what it read. A web page says "send the money to IBAN X"; the model
//! obeys and calls an allowed tool with the attacker's IBAN; schema, policy,
//! guardrail and grants all say yes. What closes it: every text entering a
//! turn carries a label ([`label`]: its source and integrity); the door
//! keeps them in a ledger ([`ledger`]); for each argument of a call under a
//! sink rule (the policy's, [`capsaga_core::policy::sink`]) it computes where the value came from
//! ([`provenance`]: a trusted source, only untrusted data, or nowhere) by
//! matching the value against the ledger the way a model reads text
//! ([`text`], [`scan`]); and it decides ([`decide`]): allow, ask a human
//! (who sees the argument, the value and the step it came from) or deny
//! with a hint. The plan's tool scope, fixed before any data is read, is in
//! [`capsaga_core::fsm::scope`].
//!
//! The ideas come from CaMeL (Debenedetti et al. 2025: capabilities on
//! values, a plan fixed before untrusted data is read, policies at the
//! tools) and FIDES (Costa et al. 2025: integrity labels that propagate,
//! field-level labels of tool results, endorsement by a human). Both track
//! values inside the agent's own interpreter; capsaga's host does not see
//! the model's reasoning, only its calls and what entered its context, so
//! provenance here is recovered by matching text, and its limits are
//! those of matching (below).
//!
//! Shapes and costs: a ledger is built once per turn (or MCP session) and
//! grows by one entry per source, indexed on entry (linear in the text);
//! [`decide::decide`] costs one flag when nothing untrusted was read, else
//! a scan of the arguments under sinks and a few hash lookups per token
//! (single-digit microseconds for typical calls: `cargo bench -p
//! capsaga-flow --bench flow`).
//!
//! ## What matching cannot see (known limits)
//!
//! - A value the model **composes** from untrusted parts (halves, letters
//!   spelled out, a translation, ROT13) is found `nowhere`, not
//!   `untrusted`: a sink that needs trusted values refuses it all the same
//!   once untrusted data is in the context (in a turn; in an MCP session a
//!   `nowhere` value passes, since the client's own inputs are unseen).
//! - **Short numbers and plain words** coincide: a number of fewer than
//!   five digits is vouched for only through a context word shared with
//!   its argument's name, a phrase only when a trusted text holds it whole
//!   between word boundaries; a user who says "file 13" also vouches for a
//!   `file_id` 13 an attacker chose.
//! - **Case** is folded everywhere: a value differing from a trusted one by
//!   case alone passes (a URL path or an id that is case-sensitive at its
//!   server can be chosen in another case only among values the user
//!   gave).
//! - The user's message is trusted whole: an e-mail or a page the user
//!   **pastes into it** vouches for every value in it, the attacker's too.
//! - A **link copied verbatim** into a `verbatim` sink passes: an attacker
//!   who plants many links can leak a few bits by which one is fetched.
//! - Phone numbers with and without a country code are different keys;
//!   dates are read in English and numeric forms only.
//! - What no host can stop: an answer that repeats injected advice, a
//!   secret sent to a recipient the user named; the strict mode and the
//!   approval's display of sources are what capsaga offers there.

pub mod decide;
pub mod label;
pub mod ledger;
pub mod provenance;
pub mod scan;
pub mod state;
pub mod text;

#[cfg(test)]
mod test_rules;

pub use decide::{Finding, FlowCall, FlowDecision, Surface, decide, output_integrity};
pub use label::{
    FieldLabels, FieldPath, FieldPathError, Integrity, Label, LabelFields, OutputLabels, Source,
};
pub use ledger::{EntryId, Ledger};
pub use provenance::{
    Origin, Provenance, TokenFinding, Vouch, of_number, of_number_by, of_str, of_str_by,
};
pub use scan::Kind;
pub use state::{FlowNote, FlowState, Judgement};
