//! Several real `capsaga serve` processes on one PostgreSQL database (issue
//! 25): a real server started by the harness (`initdb` + `pg_ctl` in a temp
//! dir, a free port), real hosts as child processes, real MCP clients, the
//! real `ledger` component (every execute and compensate leaves a line in
//! its journal, so a step run twice shows).
//!
//! SKIPPED (said loudly) when PostgreSQL is not installed; CI installs it.

mod approvals;
mod chaos;
mod restart;
mod rig;
mod switch;
mod takeover;
