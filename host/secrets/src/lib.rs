//! # capsaga-secrets
//!
//! Secrets at rest and on the way out, each a mechanism of its own, pure
//! (no I/O: the caller draws random bytes and reads the environment):
//!
//! - [`sealed`]: provider keys sealed with AES-256-GCM under `CAPSAGA_KEK`
//!   (envelope encryption, typed failures that never hold key material).
//! - [`redact`]: streaming redaction of secret values in responses, across
//!   chunk boundaries.
//! - [`scrub`]: text scrubbed of secrets (known values and credential
//!   shapes) before it leaves through a log, a span, a metric, the audit
//!   export or the console.

pub mod redact;
pub mod scrub;
pub mod sealed;
