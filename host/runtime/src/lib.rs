//! # capsaga-host
//!
//! The capsaga runtime and the `capsaga` binary. One module per mechanism:
//!
//! - [`config`]: loading `capsaga.toml` (the policy itself is parsed and
//!   checked in `capsaga_core::policy`).
//! - [`sandbox`]: the Wasmtime engine, a fresh instance per call, WASI
//!   contexts built from grants, limits, traps mapped to typed errors.
//! - [`registry`]: loading tool components and their metas.
//! - [`db`]: the SQLite state database.
//! - [`wal`]: the saga write-ahead log and its hash chain.
//! - [`saga`]: the saga engine (guardrail, WAL, execute, compensate).
//! - [`agent`]: the ReAct loop, providers and execution traces.
//! - [`host`]: everything wired together.
//! - [`cli`]: the `capsaga` command line.

pub mod agent;
pub mod cli;
pub mod config;
pub mod db;
pub mod host;
pub mod registry;
pub mod saga;
pub mod sandbox;
pub mod wal;
