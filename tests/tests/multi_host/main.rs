//! Several real `capsaga serve` processes on one PostgreSQL database (issue
//! 25): a real server started by the harness (`initdb` + `pg_ctl` in a temp
//! dir, a free port), real hosts as child processes, real MCP clients, the
//! real `ledger` component (every execute and compensate leaves a line in
//! its journal, so a step run twice shows), a real local model provider
//! (`capsaga_tests::llm_server`) for the budget across hosts.
//!
//! A network partition between one host and the database is a TCP proxy
//! the test cuts ([`proxy`]).
//!
//! SKIPPED (said loudly) when PostgreSQL is not installed; CI installs it.

mod approvals;
mod budget;
mod chaos;
mod confirm;
mod faults;
mod faults_load;
mod files;
mod handles;
mod handles_busy;
mod once;
mod once_turn;
mod owners;
mod partition;
mod paused;
mod proxy;
mod restart;
mod rig;
mod switch;
mod takeover;
mod tasks;
mod wire;
