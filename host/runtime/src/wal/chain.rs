//! The hash chain over `wal_log`: each row's hash is
//! `SHA-256(prev_hash ‖ canonical JSON of {seq, saga_id, step_seq, record, detail, at})`,
//! so editing, deleting or reordering any row breaks every hash after it.
//! The pure logic lives in [`capsaga_core::wal_row`] (fuzzed there).

pub use capsaga_core::wal_row::{ChainBreak, GENESIS, row_hash, verify};
