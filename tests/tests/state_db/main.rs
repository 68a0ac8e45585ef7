//! The state database under pressure (issue 13, items 9 and 11), with real
//! SQLite files, real readers and real `capsaga` child processes:
//! - `wal_growth`: the `-wal` file is cut back once a reader that held a
//!   snapshot lets go, is truncated when a command returns, and no snapshot
//!   is held across a tool call;
//! - `many_processes`: many processes on a fresh state directory create the
//!   database once, stamped; under contention a step waits its turn, and a
//!   database only busy is reported busy (exit 11), never damaged (8).

mod many_processes;
mod wal_growth;
