//! A store outage in the middle of a step cannot end in Done (issue 45,
//! item 6): a real `capsaga serve`, the real `ledger` component held
//! between its effect and its outcome (`"after": "wait"`: it appends its
//! line, creates `<ledger>.waiting` and returns once the test creates
//! `<ledger>.go`), and a real outage of the state store meanwhile:
//!
//! - PostgreSQL (the harness's real server) stopped after the step's BEGIN
//!   and its effect, started again after the host tried to write the
//!   outcome;
//! - SQLite kept busy by another process holding its write lock past the
//!   host's `busy_timeout_ms`;
//! - SQLite "full": every file write of the server fails (`RLIMIT_FSIZE`
//!   lowered to 0 on the running process with `prlimit`, the signal it
//!   raises ignored), as on a full filesystem.
//!
//! Through every outage, three clients whose step is in doubt: an MCP
//! session that commits while the store is still out (its saga is let go
//! in doubt), an MCP session that commits once the store is back, and a
//! REST turn (`POST /v1/turns`, scripted model) whose call failed. None may
//! end Done: each saga is rolled back once the store answers (the step
//! compensated from its pre-image: its ledger line removed), and `capsaga
//! audit verify` passes.
//!
//! Root ignores file modes (`chmod` makes nothing unwritable for root, as
//! these tests may run), hence the file size limit for "unwritable".

mod outage;
mod postgres;
mod rig;
mod sqlite;
