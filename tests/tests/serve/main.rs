//! capsaga as a server (issue 15): the REST API with a real HTTP client,
//! real MCP clients (the official Python SDK over stdio and Streamable HTTP,
//! rmcp's client for the load), 200 concurrent MCP calls, and SIGKILL of the
//! server under that load. Every server here is a real one on 127.0.0.1
//! over a real workspace (components, SQLite file).

mod approval_owner;
mod cancel2026;
mod cancel_session;
mod clients;
mod crash;
mod fields;
mod flow;
mod interop_2026;
mod keys;
mod load;
mod metrics;
mod param_headers;
mod pause;
mod reload;
mod resources;
mod rest;
mod scope;
mod scoped;
mod sessions;
mod single_headers;
mod stateless;
mod strict;
mod tasks;
mod tasks_restart;
mod trust;
mod wire2026;

pub use capsaga_tests::mcp_rig::{Running, http, http_builder, start};
