//! The operator web console of `capsaga serve`, at `/console` (issue 29):
//! the approvals queue with approve/deny, sagas with filters and their step
//! timeline (resume, roll back, undo), traces, neurons (highlighted
//! source; approve with all or some of the requested grants, reject,
//! retire; fitness charts), memory fact proposals
//! (approve some or all, discard), budget (a spend chart against the
//! caps) and health, with a live pending count by server-sent events.
//!
//! This crate holds what needs none of the runtime's internals: the pages
//! ([`pages`], server-rendered by maud, which escapes every value), the
//! static assets compiled into the binary, the sign-in sessions and their
//! CSRF tokens ([`session`]), and the routes ([`routes`]) with their
//! security headers and same-origin check. The data and every decision
//! come from a [`Backend`] the runtime implements over its store and its
//! one dispatch door, so this crate builds and tests alone.
//!
//! Security model (THREAT_MODEL.md, "operator console"): an operator token
//! is exchanged once for an `HttpOnly; SameSite=Strict` session cookie; a
//! client token is refused; every POST needs the session's CSRF token and a
//! same-origin request; the Content-Security-Policy allows only this
//! origin's script and style (no inline script); every value is escaped.

pub mod backend;
pub mod charts;
pub mod highlight;
pub mod memory;
pub mod pages;
pub mod routes;
pub mod session;

pub use backend::{
    ApprovalView, Backend, BackendError, Decided, EpisodeView, FlowFindingView, HealthView,
    HostView, LogView, NeuronAction, NeuronView, PageReq, Paged, ProposalView, SagaAction,
    SagaDetail, SagaFilter, SagaView, SignIn, StepLabelView, StepView, TraceStepView, TraceView,
};
pub use backend::{FitnessDay, SpendDay};
pub use pages::PAGE_SIZE;
pub use routes::{CSP, router};
